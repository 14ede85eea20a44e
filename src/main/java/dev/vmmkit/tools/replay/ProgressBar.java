package dev.vmmkit.tools.replay;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * A progress bar on standard error for long replays, redrawn in place: only when standard error is a
 * terminal (a log file or a pipe gets nothing), and only once a replay has run for
 * {@value #QUIET_MILLIS} ms, so short replays print nothing. It asks to be called 200 times over a
 * replay, between operations, so the loop barely notices it.
 */
public final class ProgressBar implements ReplayListener {
    static final long QUIET_MILLIS = 500;
    private static final int WIDTH = 30;
    private static final int UPDATES = 200;

    private final PrintWriter err;
    private final String label;
    private final int ops;
    private final int step;
    private final LongSupplier nanoClock;
    private final long start;
    private boolean shown;

    ProgressBar(PrintWriter err, String label, int ops) {
        this(err, label, ops, System::nanoTime);
    }

    /** {@code nanoClock} is {@link System#nanoTime} but in tests, which move time themselves. */
    ProgressBar(PrintWriter err, String label, int ops, LongSupplier nanoClock) {
        this.err = err;
        this.label = label;
        this.ops = ops;
        this.step = Math.max(1, ops / UPDATES);
        this.nanoClock = nanoClock;
        this.start = nanoClock.getAsLong();
    }

    /** A bar for a replay of {@code ops} operations, or null when standard error is not a terminal. */
    public static ProgressBar onTerminal(PrintWriter err, String label, int ops) {
        return stderrIsTerminal() ? new ProgressBar(err, label, ops) : null;
    }

    /** True when file descriptor 2 is a terminal (a pty or a console). */
    static boolean stderrIsTerminal() {
        try {
            String target = Files.readSymbolicLink(Path.of("/proc/self/fd/2")).toString();
            return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return false;
        }
    }

    @Override
    public int first() {
        return ops == 0 ? -1 : Math.min(step, ops) - 1;
    }

    @Override
    public int afterOp(int op, ReplayTarget target) {
        boolean last = op >= ops - 1;
        if (last) {
            if (shown) err.print("\r" + " ".repeat(line(ops).length()) + "\r");
            err.flush();
            return -1;
        }
        if (shown || (nanoClock.getAsLong() - start) / 1_000_000 >= QUIET_MILLIS) {
            err.print("\r" + line(op + 1));
            err.flush();
            shown = true;
        }
        return Math.min(op + step, ops - 1);
    }

    /** E.g. {@code bert_infer.csv.gz [##########..........] 45% 13,374/29,722 ops}. */
    String line(int done) {
        int filled = (int) ((long) done * WIDTH / Math.max(1, ops));
        return String.format(Locale.ROOT, "%s [%s%s] %3d%% %,d/%,d ops", label, "#".repeat(filled),
                ".".repeat(WIDTH - filled), (int) ((long) done * 100 / Math.max(1, ops)), done, ops);
    }
}
