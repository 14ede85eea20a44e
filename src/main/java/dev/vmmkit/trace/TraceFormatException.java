package dev.vmmkit.trace;

import java.io.IOException;

/**
 * A trace line that cannot be replayed. The message names the file, the 1-based line number and the
 * problem, e.g. {@code bert.csv.gz:12: free of key 140617430597632, which is not live}.
 * It is an {@link IOException} because it is a fault of the input, like a {@code ZipException}.
 */
public final class TraceFormatException extends IOException {
    private final String source;
    private final long lineNumber;
    private final String problem;

    public TraceFormatException(String source, long lineNumber, String problem) {
        super(source + ":" + lineNumber + ": " + problem);
        this.source = source;
        this.lineNumber = lineNumber;
        this.problem = problem;
    }

    /** The trace's name as given to the reader (normally its file name). */
    public String source() {
        return source;
    }

    /** 1-based line number of the offending line. */
    public long lineNumber() {
        return lineNumber;
    }

    /** What is wrong with the line, without file and line number. */
    public String problem() {
        return problem;
    }
}
