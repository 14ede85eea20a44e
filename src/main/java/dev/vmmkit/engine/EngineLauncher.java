package dev.vmmkit.engine;

import java.nio.file.Path;
import java.time.Duration;

/**
 * Starts engine instances where the host's {@link Isolation} says: a worker process each, or in
 * process; and probes plugins the same way.
 */
final class EngineLauncher {
    private final Isolation isolation;
    private final Duration requestTimeout;
    private final Path privateDir;
    private final DeviceMemory device;

    EngineLauncher(Isolation isolation, Duration requestTimeout, Path privateDir, DeviceMemory device) {
        this.isolation = isolation;
        this.requestTimeout = requestTimeout;
        this.privateDir = privateDir;
        this.device = device;
    }

    /**
     * Starts an instance of {@code snapshot} holding {@code file}.
     *
     * @param deaths told when the instance's worker dies after the load (worker isolation only)
     * @throws EngineInstance.OutOfMemoryOnLoad when the load found no device memory
     * @throws RequestFailure 500 for an engine error; with workers, 502 when the worker died, 504 past the timeout
     */
    /** A probe for one discovery pass or reload: in a worker of its own, or in process, as instances run. */
    PluginProbe probe() {
        return switch (isolation) {
            case WORKER -> new WorkerProbe(privateDir, device.driverKind(), requestTimeout);
            case IN_PROCESS -> PluginProbe.IN_PROCESS;
        };
    }

    RunningEngine start(PluginSnapshot snapshot, ModelDirectory.ModelFile file, WorkerEngine.Deaths deaths)
            throws EngineInstance.OutOfMemoryOnLoad {
        return switch (isolation) {
            case WORKER -> WorkerEngine.start(snapshot, privateDir, device, requestTimeout, file.name(), file.path(), deaths);
            case IN_PROCESS -> EngineInstance.start(snapshot, privateDir, device.resource(), device.engineDevice(),
                    EngineHost.LOGGER, file.name(), file.path());
        };
    }
}
