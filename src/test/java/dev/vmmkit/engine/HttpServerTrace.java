package dev.vmmkit.engine;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * What the JDK's HTTP server logs about connections it closes or exchanges it drops (at FINER,
 * which it logs only when asked), kept while a test runs, so that a request that got no answer can
 * be explained in the failure's message. The per-exchange lines of a healthy request are left out.
 */
final class HttpServerTrace extends Handler implements AutoCloseable {
    private static final String LOGGER = "com.sun.net.httpserver";
    private static final int KEPT = 40;
    private final Logger logger = Logger.getLogger(LOGGER); // held: a logger only weakly referenced may be collected with its level
    private final Level levelBefore = logger.getLevel();
    private final ArrayDeque<String> lines = new ArrayDeque<>();

    HttpServerTrace() {
        setLevel(Level.ALL);
        logger.addHandler(this);
        logger.setLevel(Level.FINER);
    }

    @Override
    public void publish(LogRecord record) {
        String message = record.getMessage();
        if (message == null || record.getThrown() == null && isRoutine(message)) return;
        String line = record.getLevel() + " " + message + (record.getThrown() == null ? "" : ": " + record.getThrown());
        synchronized (lines) {
            if (lines.size() == KEPT) lines.removeFirst();
            lines.addLast(line);
        }
    }

    /** The lines every answered request logs. */
    private static boolean isRoutine(String message) {
        return message.startsWith("exchange started") || message.startsWith("Write Finished")
                || message.startsWith("Sent headers") || message.startsWith("Exchange request line")
                || message.startsWith("{0}") || message.contains(" HTTP/1.1 [");
    }

    /** The lines kept, oldest first (at most the last 40). */
    List<String> lines() {
        synchronized (lines) {
            return new ArrayList<>(lines);
        }
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        logger.removeHandler(this);
        logger.setLevel(levelBefore);
    }
}
