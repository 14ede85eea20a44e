package dev.vmmkit.driver.conformance;

/** Thrown by a check that cannot run on this driver or device; the check is reported as skipped. */
public final class CheckSkipped extends RuntimeException {
    public CheckSkipped(String why) {
        super(why, null, false, false);
    }
}
