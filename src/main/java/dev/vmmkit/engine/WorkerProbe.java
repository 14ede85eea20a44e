package dev.vmmkit.engine;

import java.io.DataInputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Probes plugins in a worker process: one worker for the plugins of one discovery pass (or one
 * reload), started on the first probe. A plugin that crashes, exits or hangs while it is loaded
 * or in engine_get_info ends that worker only: it is refused with what happened, and the next
 * plugin gets a fresh worker.
 */
final class WorkerProbe implements PluginProbe {
    private final Path privateDir;
    private final String driverKind;
    private final Duration timeout;
    private WorkerProcess worker;

    WorkerProbe(Path privateDir, String driverKind, Duration timeout) {
        this.privateDir = privateDir;
        this.driverKind = driverKind;
        this.timeout = timeout;
    }

    @Override
    public PluginLibrary.Info probe(Path staged, Path libraryDir, EngineManifest manifest) throws PluginLibrary.RefusedException {
        String name = manifest.id() + " " + manifest.version() + " (probe)";
        WorkerProcess.Answer answer;
        try {
            if (worker == null) worker = WorkerProcess.start(name, privateDir, driverKind, WorkerProcess.START_TIMEOUT, death -> { });
        } catch (IOException | WorkerProcess.WorkerDied e) {
            throw new PluginLibrary.RefusedException("cannot start a worker to probe it: " + e.getMessage());
        }
        try {
            answer = worker.call(WorkerChannel.PROBE, EngineAbi.GET_INFO, out -> {
                WorkerChannel.writeString(out, staged.toString());
                WorkerChannel.writeString(out, libraryDir.toString());
                WorkerChannel.writeString(out, manifest.id());
                WorkerChannel.writeString(out, manifest.version());
                out.writeInt(manifest.abiVersion());
            }, timeout);
        } catch (WorkerProcess.WorkerDied e) {
            worker = null;
            throw new PluginLibrary.RefusedException("loading it and calling " + EngineAbi.GET_INFO + "() ended its worker: "
                    + e.getMessage());
        }
        try {
            DataInputStream in = answer.payload();
            if (answer.type() == WorkerChannel.FAILED) {
                in.readBoolean();
                in.readLong();
                in.readLong();
                throw new PluginLibrary.RefusedException(WorkerChannel.readString(in));
            }
            in.readLong();
            in.readLong();
            return new PluginLibrary.Info(in.readInt(), WorkerChannel.readString(in), WorkerChannel.readString(in));
        } catch (IOException e) {
            worker.kill("its answer to the probe could not be read: " + e.getMessage());
            worker = null;
            throw new PluginLibrary.RefusedException("the probing worker's answer could not be read: " + e.getMessage());
        }
    }

    @Override
    public void close() {
        if (worker != null) worker.close();
        worker = null;
    }
}
