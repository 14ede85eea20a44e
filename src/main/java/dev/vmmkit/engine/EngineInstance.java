package dev.vmmkit.engine;

import dev.vmmkit.core.DeviceMemoryResource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One running engine: a private copy of a plugin binary, initialised and holding one model.
 * Calls into it are serialised unless its manifest says {@code "concurrent": true}; results are
 * copied out while the call still holds the engine, so the engine's buffers may be reused at once.
 */
final class EngineInstance implements RunningEngine {
    /** More results or logprobs than this from one call is taken for a broken engine. */
    private static final int MAX_RESULTS = 1 << 20;

    private final PluginSnapshot snapshot;
    private final PluginLibrary library;
    private final InstanceMemory memory;
    private final EngineCallbacks callbacks;
    private final ReentrantLock callLock;
    private final InFlightGate gate = new InFlightGate();
    private final System.Logger logger;
    private final String name;
    private boolean closed;

    private EngineInstance(PluginSnapshot snapshot, PluginLibrary library, InstanceMemory memory,
                           EngineCallbacks callbacks, System.Logger logger, String name) {
        this.snapshot = snapshot;
        this.library = library;
        this.memory = memory;
        this.callbacks = callbacks;
        this.callLock = snapshot.manifest().concurrent() ? null : new ReentrantLock();
        this.logger = logger;
        this.name = name;
    }

    /** Signals that a model did not load for lack of device memory (the caller may evict and retry). */
    static final class OutOfMemoryOnLoad extends Exception {
        private final long neededBytes;

        OutOfMemoryOnLoad(String message, long neededBytes) {
            super(message);
            this.neededBytes = neededBytes;
        }

        /** The least device memory the load needs: what it held when a request failed, plus that request. */
        long neededBytes() {
            return neededBytes;
        }
    }

    /**
     * Loads a private copy of the snapshot's binary, calls engine_init and engine_load_model.
     * On failure everything is undone (engine_shutdown, memory freed, library unloaded).
     *
     * @param device device ordinal for the engine, -1 for none
     * @throws OutOfMemoryOnLoad when the load failed and an alloc_device had found no memory
     * @throws RequestFailure    (500) when the engine failed for any other reason
     */
    static EngineInstance start(PluginSnapshot snapshot, Path privateDir, DeviceMemoryResource resource, int device,
                                System.Logger logger, String modelName, Path modelPath) throws OutOfMemoryOnLoad {
        EngineManifest manifest = snapshot.manifest();
        String name = manifest.id() + " " + manifest.version() + " [" + modelName + "]";
        PluginLibrary library;
        try {
            library = PluginLibrary.open(snapshot.staged(), privateDir, manifest);
        } catch (PluginLibrary.RefusedException e) {
            throw RequestFailure.engineFailed("engine " + manifest.id() + " cannot be loaded: " + e.getMessage());
        }
        InstanceMemory memory = new InstanceMemory(resource);
        EngineCallbacks callbacks = new EngineCallbacks(memory, device, manifest.optionsJson(), logger, name);
        EngineInstance instance = new EngineInstance(snapshot, library, memory, callbacks, logger, name);
        String failedCall = EngineAbi.INIT;
        int rc = library.init(callbacks.config());
        if (rc == 0) {
            failedCall = EngineAbi.LOAD_MODEL;
            try (Arena call = Arena.ofConfined()) {
                rc = library.loadModel(call.allocateFrom(modelPath.toString()));
            }
        }
        if (rc != 0) {
            boolean outOfMemory = memory.outOfMemorySeen();
            long needed = memory.neededWhenOutOfMemory();
            instance.close();
            String said = callbacks.lastError();
            String what = name + ": " + failedCall + " returned error " + rc + (said == null ? "" : " (" + said + ")");
            if (outOfMemory) throw new OutOfMemoryOnLoad(what + " after alloc_device found no device memory", needed);
            throw RequestFailure.engineFailed(what);
        }
        return instance;
    }

    @Override
    public List<Token> generate(String prompt) {
        if (library.streaming()) {
            List<Token> tokens = new ArrayList<>();
            stream(prompt, "{}", token -> tokens.add(new Token(token.id(), token.topLogprobs())));
            return tokens;
        }
        if (callLock != null) callLock.lock();
        try (Arena call = Arena.ofConfined()) {
            MemorySegment resultsOut = call.allocate(ValueLayout.ADDRESS);
            int count = library.generate(call.allocateFrom(prompt), resultsOut);
            if (count < 0) throw RequestFailure.engineFailed(name + ": engine_generate returned error " + count);
            return copyResults(resultsOut.get(ValueLayout.ADDRESS, 0), count);
        } finally {
            if (callLock != null) callLock.unlock();
        }
    }

    @Override
    public Generation.Outcome stream(String prompt, String requestJson, Generation.Sink sink) {
        if (!library.streaming()) return blockingAsStream(prompt, sink);
        if (callLock != null) callLock.lock();
        TokenUpcall upcall = new TokenUpcall(sink);
        MemorySegment user = TokenCallbacks.register(upcall);
        try (Arena call = Arena.ofConfined()) {
            MemorySegment result = call.allocate(EngineAbi.GENERATE_RESULT);
            EngineAbi.RESULT_FINISH.set(result, 0L, EngineAbi.FINISH_ERROR);
            EngineAbi.RESULT_PROMPT_TOKENS.set(result, 0L, -1);
            int rc = library.generateStream(call.allocateFrom(prompt),
                    call.allocateFrom(requestJson == null ? "{}" : requestJson), TokenCallbacks.STUB, user, result);
            if (upcall.failure != null) throw upcall.failure;
            if (rc < 0) throw RequestFailure.engineFailed(name + ": engine_generate_stream returned error " + rc);
            Generation.Finish finish = Generation.Finish.of((int) EngineAbi.RESULT_FINISH.get(result, 0L));
            if (upcall.stopped && finish != Generation.Finish.CANCELLED) finish = Generation.Finish.CANCELLED;
            return new Generation.Outcome(finish, (int) EngineAbi.RESULT_PROMPT_TOKENS.get(result, 0L));
        } finally {
            TokenCallbacks.unregister(user);
            if (callLock != null) callLock.unlock();
        }
    }

    @Override
    public Optional<String> chatTemplate(List<ChatMessage> messages) {
        if (!library.hasChatTemplate()) return Optional.empty();
        if (callLock != null) callLock.lock();
        try {
            return ChatTemplateCall.apply(library, messages, name);
        } finally {
            if (callLock != null) callLock.unlock();
        }
    }

    /** A version 1 engine: every token at once, handed on until the sink says stop. */
    private Generation.Outcome blockingAsStream(String prompt, Generation.Sink sink) {
        for (Token token : generate(prompt)) {
            float[] top = token.logprobs();
            Generation.Token piece = new Generation.Token(token.id(), new byte[0], top.length > 0 ? top[0] : Float.NaN,
                    new long[0], top);
            if (!sink.accept(piece)) return new Generation.Outcome(Generation.Finish.CANCELLED, -1);
        }
        return new Generation.Outcome(Generation.Finish.LENGTH, -1);
    }

    /**
     * The host's on_token for one call: copies the engine's token out and hands it to the sink.
     * Nothing may escape an upcall (the JVM would end), so a broken token or sink stops the engine
     * and the failure is thrown once the engine returned.
     */
    private final class TokenUpcall implements TokenCallbacks.Receiver {
        private final Generation.Sink sink;
        boolean stopped;
        RequestFailure failure;

        TokenUpcall(Generation.Sink sink) {
            this.sink = sink;
        }

        @Override
        public int onToken(MemorySegment raw) {
            if (stopped) return 1; // the engine broke the contract by calling again; keep saying stop
            try {
                if (!sink.accept(copyToken(raw))) stopped = true;
            } catch (RequestFailure e) {
                failure = e;
                stopped = true;
            } catch (Throwable t) {
                failure = RequestFailure.engineFailed(name + ": on_token failed: " + t);
                stopped = true;
            }
            return stopped ? 1 : 0;
        }
    }

    private Generation.Token copyToken(MemorySegment raw) {
        if (raw.equals(MemorySegment.NULL)) throw RequestFailure.engineFailed(name + ": on_token got a NULL token");
        MemorySegment event = raw.reinterpret(EngineAbi.ENGINE_TOKEN.byteSize());
        long id = Integer.toUnsignedLong((int) EngineAbi.EVENT_ID.get(event, 0L));
        long textLength = (long) EngineAbi.EVENT_TEXT_LEN.get(event, 0L);
        MemorySegment text = (MemorySegment) EngineAbi.EVENT_TEXT.get(event, 0L);
        long topLength = (long) EngineAbi.EVENT_TOP_LEN.get(event, 0L);
        MemorySegment topIds = (MemorySegment) EngineAbi.EVENT_TOP_IDS.get(event, 0L);
        MemorySegment topLogprobs = (MemorySegment) EngineAbi.EVENT_TOP_LOGPROBS.get(event, 0L);
        if (textLength < 0 || textLength > MAX_RESULTS || (textLength > 0 && text.equals(MemorySegment.NULL))) {
            throw RequestFailure.engineFailed(name + ": a token with text_len " + textLength);
        }
        if (topLength < 0 || topLength > MAX_RESULTS
                || (topLength > 0 && topLogprobs.equals(MemorySegment.NULL))) {
            throw RequestFailure.engineFailed(name + ": a token with top_len " + topLength + " and a NULL top_logprobs");
        }
        byte[] bytes = textLength == 0 ? new byte[0] : text.reinterpret(textLength).toArray(ValueLayout.JAVA_BYTE);
        // top_ids NULL: top_logprobs is the whole distribution, indexed by token id
        long[] ids = new long[topLength > 0 && !topIds.equals(MemorySegment.NULL) ? (int) topLength : 0];
        float[] logprobs = new float[0];
        if (topLength > 0) {
            if (ids.length > 0) {
                int[] raws = topIds.reinterpret(topLength * Integer.BYTES).toArray(ValueLayout.JAVA_INT);
                for (int i = 0; i < ids.length; i++) ids[i] = Integer.toUnsignedLong(raws[i]);
            }
            logprobs = topLogprobs.reinterpret(topLength * Float.BYTES).toArray(ValueLayout.JAVA_FLOAT);
        }
        return new Generation.Token(id, bytes, (float) EngineAbi.EVENT_LOGPROB.get(event, 0L), ids, logprobs);
    }

    private List<Token> copyResults(MemorySegment array, int count) {
        if (count == 0) return List.of();
        if (count > MAX_RESULTS || array.equals(MemorySegment.NULL)) {
            throw RequestFailure.engineFailed(name + ": engine_generate returned " + count + " results at "
                    + (array.equals(MemorySegment.NULL) ? "NULL" : "too many"));
        }
        long stride = EngineAbi.TOKEN_RESULT.byteSize();
        MemorySegment results = array.reinterpret(stride * count);
        List<Token> tokens = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            MemorySegment result = results.asSlice(i * stride, stride);
            long id = Integer.toUnsignedLong((int) EngineAbi.TOKEN_ID.get(result, 0L));
            long length = (long) EngineAbi.TOKEN_LOGPROBS_LEN.get(result, 0L);
            MemorySegment logprobs = (MemorySegment) EngineAbi.TOKEN_LOGPROBS.get(result, 0L);
            if (length < 0 || length > MAX_RESULTS || (length > 0 && logprobs.equals(MemorySegment.NULL))) {
                throw RequestFailure.engineFailed(name + ": result " + i + " has logprobs_len " + length
                        + (logprobs.equals(MemorySegment.NULL) ? " and a NULL logprobs" : ""));
            }
            float[] values = length == 0 ? new float[0]
                    : logprobs.reinterpret(length * Float.BYTES).toArray(ValueLayout.JAVA_FLOAT);
            tokens.add(new Token(id, values));
        }
        return tokens;
    }

    @Override
    public Lock turn() {
        return callLock; // the lock its calls take: reentrant, so a request holding it calls in
    }

    @Override
    public InFlightGate gate() {
        return gate;
    }

    @Override
    public PluginSnapshot snapshot() {
        return snapshot;
    }

    @Override
    public long deviceBytes() {
        return memory.bytes();
    }

    @Override
    public boolean alive() {
        return true;
    }

    @Override
    public long workerPid() {
        return -1;
    }

    /**
     * Calls engine_shutdown, frees the device memory the engine did not give back, and unloads the
     * private copy. The caller has drained the {@link #gate()} first.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) return;
            closed = true;
        }
        if (callLock != null) callLock.lock();
        try {
            library.shutdown();
        } catch (RuntimeException e) {
            logger.log(System.Logger.Level.ERROR, name + ": engine_shutdown failed: " + e);
        } finally {
            if (callLock != null) callLock.unlock();
        }
        long leftover = memory.bytes();
        if (leftover > 0) {
            memory.freeAll();
            logger.log(System.Logger.Level.INFO, name + ": freed " + leftover
                    + " bytes of device memory the engine did not give back");
        }
        library.close();
        callbacks.close();
    }
}
