package dev.vmmkit.interpose;

import java.util.ArrayList;
import java.util.List;

/**
 * How long each step of a one-time job took, for a {@code VMM_LOG=info} line: the steps of opening
 * a device's allocator, which run inside the program's first allocation on that device. Marking a
 * step only reads the clock; the text is made afterwards, so it is timed in no step.
 */
final class StepTimes {
    private final long startedAt = System.nanoTime();
    private final List<String> names = new ArrayList<>();
    private final List<Long> endedAt = new ArrayList<>();

    /** Marks the end of {@code step}, which began where the previous one ended. */
    void done(String step) {
        endedAt.add(System.nanoTime());
        names.add(step);
    }

    /**
     * "X ms (step A ms, ...)" for the steps so far. Built with StringBuilder's appends, not string
     * concatenation or String.format: the first run of either links or loads code for milliseconds,
     * which the line's one use (inside the program's first allocation) would pay.
     */
    String summary() {
        StringBuilder line = new StringBuilder();
        long last = startedAt;
        for (int i = 0; i < names.size(); i++) {
            line.append(i == 0 ? " (" : ", ").append(names.get(i)).append(' ');
            appendMillis(line, endedAt.get(i) - last);
            last = endedAt.get(i);
        }
        StringBuilder whole = new StringBuilder();
        appendMillis(whole, last - startedAt);
        return whole.append(line).append(')').toString();
    }

    /** "12.34 ms". */
    static String millis(long nanos) {
        StringBuilder out = new StringBuilder();
        appendMillis(out, nanos);
        return out.toString();
    }

    private static void appendMillis(StringBuilder out, long nanos) {
        long hundredths = (nanos + 5_000) / 10_000;
        long rest = hundredths % 100;
        out.append(hundredths / 100).append(rest < 10 ? ".0" : ".").append(rest).append(" ms");
    }
}
