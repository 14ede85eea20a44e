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

    /** "X ms (step A ms, ...)" for the steps so far. */
    String summary() {
        StringBuilder steps = new StringBuilder();
        long last = startedAt;
        for (int i = 0; i < names.size(); i++) {
            steps.append(i == 0 ? "" : ", ").append(names.get(i)).append(' ').append(millis(endedAt.get(i) - last));
            last = endedAt.get(i);
        }
        return millis(last - startedAt) + " (" + steps + ")";
    }

    /** "12.34 ms", without String.format: its first use loads classes for tens of milliseconds. */
    static String millis(long nanos) {
        long hundredths = (nanos + 5_000) / 10_000;
        long rest = hundredths % 100;
        return hundredths / 100 + (rest < 10 ? ".0" : ".") + rest + " ms";
    }
}
