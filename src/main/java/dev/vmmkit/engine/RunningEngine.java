package dev.vmmkit.engine;

import java.util.List;

/**
 * One running engine holding one model, wherever it runs: in the host's process
 * ({@link EngineInstance}) or in a worker process of its own ({@link WorkerEngine}). Requests
 * enter its {@link #gate()} before they call it.
 */
interface RunningEngine extends AutoCloseable {

    /** One generated token, copied out of the engine. */
    record Token(long id, float[] logprobs) {
    }

    /**
     * Runs engine_generate; the caller has entered the {@link #gate()}.
     *
     * @throws RequestFailure 500 for an engine error, 502 when the engine's worker died, 504 when it ran too long
     */
    List<Token> generate(String prompt);

    InFlightGate gate();

    PluginSnapshot snapshot();

    default EngineManifest manifest() {
        return snapshot().manifest();
    }

    /** Device memory the engine holds now. */
    long deviceBytes();

    /** False once the engine can no longer answer (its worker died); the host then starts a new one. */
    boolean alive();

    /** The worker's process id, or -1 when the engine runs in the host's process. */
    long workerPid();

    /** Shuts the engine down and frees its memory; the caller has drained the {@link #gate()} first. */
    @Override
    void close();
}
