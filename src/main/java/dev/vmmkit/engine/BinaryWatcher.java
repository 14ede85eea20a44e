package dev.vmmkit.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Reloads a plugin on its own when its directory changes ({@code vmmkit serve --watch}). Each poll
 * compares every plugin directory's files (name, inode, modification time, size) with the last poll; a
 * change is acted on once it has stayed the same for one more poll, so a binary still being
 * copied in is not loaded half-written. New plugin directories are discovered on the same poll.
 */
final class BinaryWatcher {
    private final EngineCatalog catalog;
    private final EngineReloader reloader;
    private final System.Logger logger;
    /** Per plugin directory: the stamp acted on, and a changed stamp waiting to settle. */
    private final Map<EngineEntry, String> handled = new HashMap<>();
    private final Map<EngineEntry, String> settling = new HashMap<>();

    BinaryWatcher(EngineCatalog catalog, EngineReloader reloader, System.Logger logger) {
        this.catalog = catalog;
        this.reloader = reloader;
        this.logger = logger;
        for (EngineEntry entry : catalog.entries()) handled.put(entry, stamp(entry.dir()));
    }

    /** One poll; reload failures are logged by the reloader and leave the old version serving. */
    synchronized void pollOnce() {
        for (EngineEntry added : catalog.discover()) handled.put(added, stamp(added.dir()));
        for (EngineEntry entry : catalog.entries()) {
            String now = stamp(entry.dir());
            if (now.equals(handled.get(entry))) {
                settling.remove(entry);
                continue;
            }
            if (!now.equals(settling.put(entry, now))) continue; // still changing: wait a poll
            settling.remove(entry);
            handled.put(entry, now);
            logger.log(System.Logger.Level.INFO, "engine " + entry.id() + "/" + entry.backend() + " changed on disk: reloading");
            try {
                reloader.reload(entry);
            } catch (RequestFailure e) {
                // already logged with the reason; the old version keeps serving
            }
        }
    }

    private static String stamp(Path dir) {
        StringBuilder stamp = new StringBuilder();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.sorted().toList()) {
                BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
                stamp.append(file.getFileName()).append(':').append(attributes.fileKey()).append(':')
                        .append(attributes.lastModifiedTime().to(TimeUnit.NANOSECONDS)).append(':')
                        .append(attributes.size()).append(';');
            }
        } catch (IOException e) {
            return "unreadable";
        }
        return stamp.toString();
    }
}
