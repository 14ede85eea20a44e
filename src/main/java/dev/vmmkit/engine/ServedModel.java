package dev.vmmkit.engine;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * A model the host serves: its file, its engine, and the instance requests go to now. The
 * instance changes on reload ({@link #swap}) and goes away on unload or eviction; a request holds
 * the instance it {@link #enter entered} until it is done, so neither ever cuts a request short.
 */
final class ServedModel {
    private final ModelDirectory.ModelFile file;
    private final EngineEntry entry;
    private final CompletableFuture<Void> loaded = new CompletableFuture<>();
    private volatile RunningEngine instance;
    private volatile long lastUsedMillis = System.currentTimeMillis();
    /** The same moment on the monotonic clock, which orders uses finer than milliseconds. */
    private volatile long lastUsedNanos = System.nanoTime();

    ServedModel(ModelDirectory.ModelFile file, EngineEntry entry) {
        this.file = file;
        this.entry = entry;
    }

    String name() {
        return file.name();
    }

    ModelDirectory.ModelFile file() {
        return file;
    }

    EngineEntry entry() {
        return entry;
    }

    /** The instance serving now, or null while loading and after unload. */
    RunningEngine instance() {
        return instance;
    }

    long lastUsedMillis() {
        return lastUsedMillis;
    }

    /** For least-recently-used order. */
    long lastUsedNanos() {
        return lastUsedNanos;
    }

    /** Marks the model used now: when a request finishes (so a busy model's age is its last finished request). */
    void touch() {
        lastUsedNanos = System.nanoTime();
        lastUsedMillis = System.currentTimeMillis();
    }

    /** The first load finished: requests may enter. */
    void loaded(RunningEngine first) {
        instance = first;
        touch();
        loaded.complete(null);
    }

    /** The first load failed: everyone waiting gets the failure. */
    void failed(RuntimeException failure) {
        loaded.completeExceptionally(failure);
    }

    /** Waits for the first load; rethrows its failure. */
    void awaitLoaded() {
        try {
            loaded.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof RuntimeException failure) throw failure;
            throw e;
        }
    }

    /**
     * Counts a request in on the current instance and returns it, or null when the model was
     * unloaded (the caller looks the model up again). A reload may switch instances in between;
     * then the request enters the new one.
     */
    RunningEngine enter() {
        for (;;) {
            RunningEngine current = instance;
            if (current == null) return null;
            if (current.gate().tryEnter()) return current;
            Thread.onSpinWait(); // closed by a reload that already switched, or an unload about to clear it
        }
    }

    /** Takes the instance away if nothing is in flight on it; returns it for the caller to close, or null. */
    synchronized RunningEngine evictIfIdle() {
        RunningEngine current = instance;
        if (current == null || !current.gate().closeIfIdle()) return null;
        instance = null;
        return current;
    }

    /** Takes {@code dead} away if it is still the current instance; true when it was. */
    synchronized boolean retire(RunningEngine dead) {
        if (instance != dead) return false;
        instance = null;
        return true;
    }

    /** Takes the instance away for unloading; the caller drains its gate and closes it. Null if none. */
    synchronized RunningEngine detach() {
        RunningEngine current = instance;
        instance = null;
        return current;
    }

    /**
     * Switches requests to {@code next} at once; returns the old instance for the caller to drain
     * and close, or null when the model was unloaded meanwhile (then the caller closes {@code next}).
     */
    synchronized RunningEngine swap(RunningEngine next) {
        RunningEngine old = instance;
        if (old == null) return null;
        instance = next;
        return old;
    }
}
