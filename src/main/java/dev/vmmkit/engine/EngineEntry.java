package dev.vmmkit.engine;

import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One installed plugin, {@code engines/{id}/{backend}/}: the snapshot new instances are made from,
 * or why it was refused. Loads and reloads of its models hold {@link #lifecycle()}, so a model
 * never loads an old version after a reload has switched.
 */
final class EngineEntry {
    private final String id;
    private final String backend;
    private final Path dir;
    private final ReentrantLock lifecycle = new ReentrantLock();
    private volatile PluginSnapshot snapshot;
    private volatile String rejection;
    private volatile String lastReloadError;
    private volatile boolean reloading;

    EngineEntry(String id, String backend, Path dir) {
        this.id = id;
        this.backend = backend;
        this.dir = dir;
    }

    String id() {
        return id;
    }

    String backend() {
        return backend;
    }

    Path dir() {
        return dir;
    }

    ReentrantLock lifecycle() {
        return lifecycle;
    }

    /** True while a shadow reload runs: its models are in use then and are not evicted. */
    boolean reloading() {
        return reloading;
    }

    void reloading(boolean running) {
        reloading = running;
    }

    /** The version instances are made from, or null when the plugin is refused. */
    PluginSnapshot snapshot() {
        return snapshot;
    }

    /** Why the plugin is refused (null when it is usable). */
    String rejection() {
        return rejection;
    }

    /** Why the last reload failed, while the version before it keeps serving (null after a success). */
    String lastReloadError() {
        return lastReloadError;
    }

    /** Makes {@code next} the version new instances come from; the previous snapshot is discarded. */
    void accept(PluginSnapshot next) {
        PluginSnapshot previous = snapshot;
        snapshot = next;
        rejection = null;
        lastReloadError = null;
        if (previous != null && previous != next) previous.discard();
    }

    /** Records a refusal: without a usable version the plugin is rejected; with one, it keeps serving. */
    void refuse(String reason) {
        if (snapshot == null) rejection = reason;
        else lastReloadError = reason;
    }

    /** Drops the snapshot (host shutdown). */
    void discard() {
        PluginSnapshot previous = snapshot;
        snapshot = null;
        if (previous != null) previous.discard();
    }
}
