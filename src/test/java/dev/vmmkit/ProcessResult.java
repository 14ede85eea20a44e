package dev.vmmkit;

/** What a child process left: its exit code and its whole output, as the end-to-end tests read it. */
public record ProcessResult(int exitCode, String stdout, String stderr) {
    @Override
    public String toString() {
        return "exit " + exitCode + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr;
    }
}
