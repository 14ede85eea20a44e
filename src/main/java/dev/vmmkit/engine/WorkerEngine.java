package dev.vmmkit.engine;

import java.io.DataInputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An engine instance that runs in a worker process of its own ({@link EngineWorkerMain}). A crash,
 * an exit or a hang there ends that worker only: the call in flight fails with what happened
 * (502, or 504 when the host ended a call that ran past the request timeout), and
 * {@link Deaths#died} tells the host, which starts a new worker on the model's next request.
 * The worker's device memory comes from vmmkit's allocator inside the worker and goes with it.
 */
final class WorkerEngine implements RunningEngine {
    /** Told when a worker ends other than by a clean shutdown. */
    interface Deaths {
        void died(WorkerEngine engine, WorkerProcess.Death death);
    }

    private final PluginSnapshot snapshot;
    private final DeviceMemory device;
    private final Duration timeout;
    private final String name;
    private final InFlightGate gate = new InFlightGate();
    /** {@link #turn()}: the worker serialises the calls themselves. */
    private final ReentrantLock turn;
    private final WorkerProcess worker;
    private final InstancePause pause = new InstancePause(new InstancePause.Calls() {
        @Override
        public InstancePause.Paused pause() throws InstancePause.Failed {
            return pauseCall();
        }

        @Override
        public long resume() throws InstancePause.Failed {
            return resumeCall();
        }
    });
    private volatile long deviceBytes;
    private volatile boolean shutDown;
    private boolean closed;
    /** Where deaths go once the model loaded; before, a death is the load's failure. */
    private Deaths deaths;
    private WorkerProcess.Death unreported;

    private WorkerEngine(PluginSnapshot snapshot, DeviceMemory device, Duration timeout, String name,
                         Path privateDir) throws IOException, WorkerProcess.WorkerDied {
        this.snapshot = snapshot;
        this.turn = snapshot.manifest().concurrent() ? null : new ReentrantLock();
        this.device = device;
        this.timeout = timeout;
        this.name = name;
        this.worker = WorkerProcess.start(name, privateDir, device.driverKind(), WorkerProcess.START_TIMEOUT, this::ended);
    }

    /**
     * Starts a worker and loads the model in it.
     *
     * @throws EngineInstance.OutOfMemoryOnLoad when the load found no device memory (the caller may evict and retry)
     * @throws RequestFailure 500 for an engine error, 502 when the worker died, 504 when the load ran past the timeout
     */
    static WorkerEngine start(PluginSnapshot snapshot, Path privateDir, DeviceMemory device, Duration timeout,
                              String modelName, Path modelPath, Deaths deaths) throws EngineInstance.OutOfMemoryOnLoad {
        EngineManifest manifest = snapshot.manifest();
        String name = manifest.id() + " " + manifest.version() + " [" + modelName + "]";
        WorkerEngine engine;
        try {
            engine = new WorkerEngine(snapshot, device, timeout, name, privateDir);
        } catch (IOException e) {
            throw RequestFailure.engineFailed(name + ": cannot start an engine worker: " + e.getMessage());
        } catch (WorkerProcess.WorkerDied e) {
            throw died(name + ": starting the engine worker", e.death);
        }
        WorkerProcess.Answer answer;
        try {
            answer = engine.worker.call(WorkerChannel.LOAD, "engine_init/engine_load_model", out -> {
                WorkerChannel.writeString(out, device.driverKind());
                out.writeInt(device.driverDevice());
                out.writeLong(device.capacityForWorker());
                out.writeInt(device.engineDevice());
                WorkerChannel.writeString(out, snapshot.staged().toString());
                WorkerChannel.writeString(out, privateDir.toString());
                WorkerChannel.writeString(out, manifest.id());
                WorkerChannel.writeString(out, manifest.version());
                out.writeInt(manifest.abiVersion());
                WorkerChannel.writeString(out, manifest.gpuBackend());
                WorkerChannel.writeString(out, manifest.optionsJson());
                out.writeBoolean(manifest.concurrent());
                WorkerChannel.writeString(out, modelName);
                WorkerChannel.writeString(out, modelPath.toString());
            }, timeout);
        } catch (WorkerProcess.WorkerDied e) {
            engine.close();
            throw died(name + ": loading the model", e.death);
        }
        try {
            if (answer.type() == WorkerChannel.FAILED) {
                boolean outOfMemory = answer.payload().readBoolean();
                engine.figures(answer.payload());
                String message = WorkerChannel.readString(answer.payload());
                long neededBytes = answer.payload().readLong();
                engine.close();
                if (outOfMemory) throw new EngineInstance.OutOfMemoryOnLoad(message, neededBytes);
                throw RequestFailure.engineFailed(message);
            }
            engine.figures(answer.payload());
        } catch (IOException e) {
            engine.worker.kill("its answer to the load could not be read: " + e.getMessage());
            throw RequestFailure.workerCrashed(name + ": the worker's answer to the load could not be read: " + e.getMessage());
        }
        engine.deathsGoTo(deaths);
        return engine;
    }

    private synchronized void deathsGoTo(Deaths listener) {
        deaths = listener;
        if (unreported != null && !shutDown) listener.died(this, unreported);
        unreported = null;
    }

    private void ended(WorkerProcess.Death death) {
        device.workerGone(this);
        Deaths listener;
        synchronized (this) {
            if (deaths == null) {
                unreported = death;
                return;
            }
            listener = deaths;
        }
        if (!shutDown) listener.died(this, death);
    }

    @Override
    public List<Token> generate(String prompt) {
        WorkerProcess.Answer answer;
        try {
            answer = worker.call(WorkerChannel.GENERATE, "engine_generate", out -> WorkerChannel.writeString(out, prompt), timeout);
        } catch (WorkerProcess.WorkerDied e) {
            throw died(name + ": engine_generate", e.death);
        }
        try {
            DataInputStream in = succeeded(answer);
            int count = in.readInt();
            List<Token> tokens = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                long id = in.readLong();
                float[] logprobs = new float[in.readInt()];
                for (int j = 0; j < logprobs.length; j++) logprobs[j] = in.readFloat();
                tokens.add(new Token(id, logprobs));
            }
            return tokens;
        } catch (IOException | NegativeArraySizeException e) {
            throw unreadable("engine_generate", e);
        }
    }

    @Override
    public Generation.Outcome stream(String prompt, String requestJson, Generation.Sink sink) {
        WorkerProcess.Answer answer;
        long sent = System.nanoTime();
        try {
            answer = worker.call(WorkerChannel.GENERATE_STREAM, "engine_generate_stream", out -> {
                WorkerChannel.writeString(out, prompt);
                WorkerChannel.writeString(out, requestJson);
                out.writeBoolean(sink.live());
            }, timeout, sink);
        } catch (WorkerProcess.WorkerDied e) {
            throw died(name + ": engine_generate_stream", e.death);
        }
        try {
            DataInputStream in = succeeded(answer);
            Generation.Finish finish = Generation.Finish.of(in.readInt());
            int promptTokens = in.readInt();
            long firstTokenAfter = in.readLong();
            // held tokens: the worker's clock from the call's arrival, counted here from its sending
            return new Generation.Outcome(finish, promptTokens, firstTokenAfter < 0 ? -1 : sent + firstTokenAfter);
        } catch (IOException e) {
            throw unreadable("engine_generate_stream", e);
        }
    }

    @Override
    public Optional<String> chatTemplate(List<ChatMessage> messages) {
        WorkerProcess.Answer answer;
        try {
            answer = worker.call(WorkerChannel.CHAT_TEMPLATE, EngineAbi.APPLY_CHAT_TEMPLATE,
                    out -> WorkerChannel.writeMessages(out, messages), timeout);
        } catch (WorkerProcess.WorkerDied e) {
            throw died(name + ": " + EngineAbi.APPLY_CHAT_TEMPLATE, e.death);
        }
        try {
            DataInputStream in = succeeded(answer);
            boolean rendered = in.readBoolean();
            String text = WorkerChannel.readString(in);
            if (rendered && text == null) throw new WorkerChannel.GarbageException("a rendered chat without its text");
            return rendered ? Optional.of(text) : Optional.empty();
        } catch (IOException e) {
            throw unreadable(EngineAbi.APPLY_CHAT_TEMPLATE, e);
        }
    }

    /** PAUSE: the worker gives the model's device memory back, its contents kept in host memory. */
    private InstancePause.Paused pauseCall() throws InstancePause.Failed {
        DataInputStream in = residencyCall(WorkerChannel.PAUSE, "pause");
        try {
            return new InstancePause.Paused(in.readLong(), in.readLong(), in.readLong(), in.readLong());
        } catch (IOException e) {
            throw unreadable("pause", e);
        }
    }

    /** RESUME: the worker brings the model's memory and contents back; returns the time in ns. */
    private long resumeCall() throws InstancePause.Failed {
        DataInputStream in = residencyCall(WorkerChannel.RESUME, "resume");
        try {
            return in.readLong();
        } catch (IOException e) {
            throw unreadable("resume", e);
        }
    }

    /** A PAUSE or RESUME call: its DONE payload past the figures, or its failure. */
    private DataInputStream residencyCall(int type, String what) throws InstancePause.Failed {
        WorkerProcess.Answer answer;
        try {
            answer = worker.call(type, what, null, timeout);
        } catch (WorkerProcess.WorkerDied e) {
            throw died(name + ": " + what, e.death);
        }
        try {
            DataInputStream in = answer.payload();
            if (answer.type() == WorkerChannel.FAILED) {
                boolean outOfMemory = in.readBoolean();
                figures(in);
                throw new InstancePause.Failed(WorkerChannel.readString(in), outOfMemory);
            }
            figures(in);
            return in;
        } catch (IOException e) {
            throw unreadable(what, e);
        }
    }

    @Override
    public InstancePause pausing() {
        return pause;
    }

    /** A call's answer past its memory figures; a FAILED answer is the engine's error (500). */
    private DataInputStream succeeded(WorkerProcess.Answer answer) throws IOException {
        DataInputStream in = answer.payload();
        if (answer.type() == WorkerChannel.FAILED) {
            in.readBoolean();
            figures(in);
            throw RequestFailure.engineFailed(WorkerChannel.readString(in));
        }
        figures(in);
        return in;
    }

    /** An answer that does not parse: the worker is broken, so it is ended like a crash. */
    private RequestFailure unreadable(String call, Exception e) {
        worker.kill("its answer to " + call + " could not be read: " + e);
        return RequestFailure.workerCrashed(name + ": the worker's answer to " + call + " could not be read: " + e);
    }

    private void figures(DataInputStream in) throws IOException {
        deviceBytes = in.readLong();
        device.workerUses(this, in.readLong());
    }

    private static RequestFailure died(String what, WorkerProcess.Death death) {
        String message = what + " failed: " + death.cause();
        return death.timedOut() ? RequestFailure.timedOut(message) : RequestFailure.workerCrashed(message);
    }

    @Override
    public Lock turn() {
        return turn;
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
        InstancePause.Paused now = pause.paused();
        return now == null ? deviceBytes : now.stillHeldBytes();
    }

    @Override
    public boolean alive() {
        return worker.alive();
    }

    @Override
    public long workerPid() {
        return worker.pid();
    }

    /** Ends the worker after it ran engine_shutdown (or at once, when it is gone already). */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) return;
            closed = true;
        }
        if (worker.alive()) {
            try {
                worker.call(WorkerChannel.SHUTDOWN, "engine_shutdown", null, timeout);
                shutDown = true;
            } catch (WorkerProcess.WorkerDied e) {
                EngineHost.LOGGER.log(System.Logger.Level.WARNING, name + ": engine_shutdown failed: " + e.getMessage());
            }
        } else {
            shutDown = true; // its death was reported already
        }
        worker.close();
        device.workerGone(this);
    }
}
