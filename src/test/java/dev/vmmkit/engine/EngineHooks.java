package dev.vmmkit.engine;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The test side of the fixture engine's hooks (option {@code hook_dir}): a call with the prompt
 * {@code hold:NAME} signals through {@code NAME.entered} once it is inside engine_generate and
 * waits for a byte on {@code NAME.release}. Both are FIFOs, so awaiting and releasing are latches
 * across processes: no sleeping, no time limits.
 */
final class EngineHooks implements AutoCloseable {
    private final RandomAccessFile entered;
    private final RandomAccessFile release;

    private EngineHooks(RandomAccessFile entered, RandomAccessFile release) {
        this.entered = entered;
        this.release = release;
    }

    /** Makes the FIFOs for {@code name} in {@code dir} and opens both ends (read-write: opening never blocks). */
    static EngineHooks open(Path dir, String name) throws IOException, InterruptedException {
        Files.createDirectories(dir);
        for (String suffix : new String[]{"entered", "release"}) {
            Process mkfifo = new ProcessBuilder("mkfifo", dir.resolve(name + "." + suffix).toString()).inheritIO().start();
            if (mkfifo.waitFor() != 0) throw new IOException("mkfifo failed for " + name + "." + suffix);
        }
        return new EngineHooks(new RandomAccessFile(dir.resolve(name + ".entered").toFile(), "rw"),
                new RandomAccessFile(dir.resolve(name + ".release").toFile(), "rw"));
    }

    /** Waits until one more held call is inside engine_generate. */
    void awaitEntered() throws IOException {
        if (entered.read() < 0) throw new IOException("the entered FIFO closed");
    }

    /** Lets one held call return. */
    void release() throws IOException {
        release.write(1);
    }

    @Override
    public void close() throws IOException {
        entered.close();
        release.close();
    }
}
