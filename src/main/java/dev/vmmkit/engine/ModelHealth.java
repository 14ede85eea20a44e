package dev.vmmkit.engine;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * Crashes of each model's engine workers, and the models marked failed: {@link #CRASH_LIMIT}
 * crashes within {@link #WINDOW_MILLIS} mark a model failed, and its requests get 503 until its
 * engine is reloaded. A crash is counted by model name, so it survives the model leaving the
 * registry (which it does at once, to be loaded again on its next request).
 */
final class ModelHealth {
    static final int CRASH_LIMIT = 3;
    static final long WINDOW_MILLIS = 60_000;

    /** A model marked failed, the engine it failed on, and why. */
    record Failure(EngineEntry entry, String reason) {
    }

    private final Map<String, Deque<Long>> crashes = new HashMap<>();
    private final Map<String, EngineEntry> crashedOn = new HashMap<>();
    private final Map<String, Failure> failed = new TreeMap<>();

    /**
     * Records a crash of {@code model}'s worker.
     *
     * @return the failure when this crash marked the model failed, else null
     */
    synchronized Failure crashed(String model, EngineEntry entry, String cause) {
        long now = System.currentTimeMillis();
        Deque<Long> times = crashes.computeIfAbsent(model, m -> new ArrayDeque<>());
        times.addLast(now);
        crashedOn.put(model, entry);
        while (!times.isEmpty() && times.peekFirst() < now - WINDOW_MILLIS) times.removeFirst();
        if (times.size() < CRASH_LIMIT) return null;
        Failure failure = new Failure(entry, "its engine worker crashed " + times.size() + " times within "
                + WINDOW_MILLIS / 1000 + " s; the last time: " + cause + ". Reload the engine to try again.");
        failed.put(model, failure);
        return failure;
    }

    /** True when {@code model} crashed before: its next load is a restart. */
    synchronized boolean crashedBefore(String model) {
        Deque<Long> times = crashes.get(model);
        return times != null && !times.isEmpty();
    }

    /** Why {@code model} is marked failed, or null. */
    synchronized String failure(String model) {
        Failure failure = failed.get(model);
        return failure == null ? null : failure.reason();
    }

    /** The models marked failed (a copy, by name). */
    synchronized Map<String, Failure> failed() {
        return new TreeMap<>(failed);
    }

    /** A reload of {@code entry} gives its models a fresh start. */
    synchronized void forgive(EngineEntry entry) {
        failed.values().removeIf(f -> f.entry() == entry);
        crashedOn.entrySet().removeIf(e -> {
            if (e.getValue() != entry) return false;
            crashes.remove(e.getKey());
            return true;
        });
    }
}
