package dev.vmmkit.driver.conformance;

/**
 * The outcome of one conformance check.
 *
 * @param name    the check's name
 * @param status  passed, failed or skipped
 * @param message why it failed or was skipped; empty when it passed
 * @param failure what was thrown, for a failed check; else null
 */
public record CheckResult(String name, Status status, String message, Throwable failure) {

    public enum Status { PASS, FAIL, SKIP }

    /** The report line: {@code PASS name}, {@code FAIL name: message} or {@code SKIP name: why}. */
    public String line() {
        return status == Status.PASS ? "PASS " + name : status + " " + name + ": " + message;
    }
}
