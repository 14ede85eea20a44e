package dev.vmmkit.engine;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.Lock;

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

    /**
     * Generates for one request, handing each token to {@code sink} as the engine produces it
     * (version 2), or all of them when the call returns (version 1, which ignores
     * {@code requestJson}); a sink that returns false stops the engine at its next token.
     *
     * @param requestJson the request's options as the ABI's request_json
     * @throws RequestFailure as {@link #generate}
     */
    Generation.Outcome stream(String prompt, String requestJson, Generation.Sink sink);

    /**
     * The chat as the model's own template renders it (engine_apply_chat_template), ending where the
     * assistant's reply begins; empty where the engine has no such call or the model no template it
     * can apply. The caller has entered the {@link #gate()}.
     *
     * @throws RequestFailure as {@link #generate}
     */
    Optional<String> chatTemplate(List<ChatMessage> messages);

    InFlightGate gate();

    /**
     * Held by a request from its prompt's rendering to the end of its accounting, for an engine
     * whose calls are serialised (its manifest is not {@code "concurrent"}); null for one that is.
     * The engine itself serialises its calls; holding this too keeps the next request from
     * starting before the previous one's figures are counted, so it sees them.
     */
    Lock turn();

    PluginSnapshot snapshot();

    default EngineManifest manifest() {
        return snapshot().manifest();
    }

    /** Device memory the engine holds now. */
    long deviceBytes();

    /**
     * Pausing this instance: giving its device memory back with the contents kept, so that the next
     * request wakes it without loading the model again; null where it cannot (in the host's process).
     */
    default InstancePause pausing() {
        return null;
    }

    /** False once the engine can no longer answer (its worker died); the host then starts a new one. */
    boolean alive();

    /** The worker's process id, or -1 when the engine runs in the host's process. */
    long workerPid();

    /** Shuts the engine down and frees its memory; the caller has drained the {@link #gate()} first. */
    @Override
    void close();
}
