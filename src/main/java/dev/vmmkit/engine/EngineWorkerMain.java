package dev.vmmkit.engine;

import dev.vmmkit.core.ProcessAllocators;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.LibC;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.VmmLog;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * An engine worker: the process that runs one engine instance for the host ({@link WorkerProcess}
 * starts it with this class as its main class). It loads the plugin with the same code the host
 * uses in process ({@link EngineInstance}), over its own vmmkit allocator, and answers frames on
 * its channel ({@link WorkerChannel}). A crash here ends this process only.
 *
 * <p>The channel to the host is a private copy of the standard output the host gave it; standard
 * output itself then goes to standard error, so a plugin that prints cannot corrupt the channel.
 */
public final class EngineWorkerMain {
    private static final System.Logger LOGGER = System.getLogger("dev.vmmkit.engine.worker");

    private final WorkerChannel channel;
    private VmmDriver driver;
    private DeviceMemory device;
    private EngineInstance instance;
    /** What the engine allocates through its own CUDA calls (the shim serves them from {@link #device}). */
    private OwnCudaMemory ownCuda;
    /** The memory tag every engine allocation carries, so the model can be paused with its contents kept. */
    private WorkerModelTag modelTag;
    private ExecutorService concurrentCalls;
    private long heldAtLastReading = -1;
    /** Set by a pause or resume (on the main loop), cleared by the next reading. */
    private volatile boolean residencyChanged;
    private long lastDriverUsed = -1;
    /**
     * Threads that take over reading the channel when the reading thread runs a streamed call
     * itself ({@link #readFrames}), so CANCEL frames are still read while one generates.
     */
    private final ExecutorService readers = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("engine-reader-", 0).factory());
    /** The exit status, settled by the reader that meets SHUTDOWN, the channel's end or a frame it does not know. */
    private final CompletableFuture<Integer> exit = new CompletableFuture<>();
    /**
     * After each frame the reader spins this long for the next one before it blocks: a blocked
     * reader is woken by the kernel, tens of microseconds on a virtual machine, which is most of
     * what a worker costs a short call. Only where there are cores to spare (the rule the host's
     * answer spin follows); a worker left idle blocks after the spin.
     */
    static final long NEXT_CALL_SPIN_NANOS = WorkerProcess.ANSWER_SPIN_NANOS > 0 ? 1_000_000 : 0;
    /** Held tokens (an answer given whole) go out once they pass this many bytes, and the rest with the answer. */
    private static final int HELD_TOKEN_BYTES = 64 << 10;
    /** Calls asked to stop, until they end. */
    private final java.util.Set<Integer> cancelled = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private EngineWorkerMain(WorkerChannel channel) {
        this.channel = channel;
    }

    public static void main(String[] args) throws Exception {
        VmmLog.oneLinePerRecord();
        int channelFd = LibC.dup(1);
        if (channelFd < 0 || LibC.dup2(2, 1) < 0) {
            System.err.println("engine worker: cannot set up its channel: " + LibC.describeErrno(LibC.errno()));
            System.exit(70);
        }
        FileOutputStream out = new FileOutputStream("/proc/self/fd/" + channelFd);
        LibC.close(channelFd);
        watchParent();
        // The shim (preloaded by the host) serves only the allocator this worker lends it, once it has one.
        ProcessAllocators.claim();
        EngineWorkerMain worker = new EngineWorkerMain(new WorkerChannel(new FileInputStream(java.io.FileDescriptor.in), out));
        worker.channel.write(WorkerChannel.READY, 0, data -> data.writeLong(ProcessHandle.current().pid()));
        worker.readFrames();
        int status;
        try {
            status = worker.exit.join();
        } catch (CompletionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
        System.exit(status);
    }

    /**
     * Reads and answers frames until SHUTDOWN, the end of the channel or a frame it does not know,
     * which settle {@link #exit}. A streamed generation or a chat template runs on the thread that
     * read its frame: another thread takes over the reading first, so the call starts at once
     * (no thread to wake before the engine runs) and CANCEL frames are still read while it runs.
     * One thread reads at a time; this one returns once it handed the reading on.
     */
    private void readFrames() {
        try {
            for (;;) {
                if (NEXT_CALL_SPIN_NANOS > 0) channel.spinUntilReadable(NEXT_CALL_SPIN_NANOS);
                WorkerChannel.Frame frame;
                try {
                    frame = channel.read();
                } catch (EOFException e) {
                    shutdown(); // the host closed the channel: it is gone or gave up on us
                    exit.complete(0);
                    return;
                }
                switch (frame.type()) {
                    case WorkerChannel.LOAD -> load(frame.call(), frame.payload());
                    case WorkerChannel.PROBE -> probe(frame.call(), frame.payload());
                    case WorkerChannel.GENERATE -> {
                        String prompt = WorkerChannel.readString(frame.payload());
                        if (concurrentCalls != null) concurrentCalls.execute(() -> generate(frame.call(), prompt));
                        else generate(frame.call(), prompt);
                    }
                    case WorkerChannel.GENERATE_STREAM -> {
                        String prompt = WorkerChannel.readString(frame.payload());
                        String request = WorkerChannel.readString(frame.payload());
                        boolean live = frame.payload().readBoolean();
                        long arrived = System.nanoTime();
                        readers.execute(this::readFrames);
                        stream(frame.call(), prompt, request, live, arrived);
                        return;
                    }
                    case WorkerChannel.CHAT_TEMPLATE -> {
                        List<ChatMessage> messages = WorkerChannel.readMessages(frame.payload());
                        readers.execute(this::readFrames);
                        chatTemplate(frame.call(), messages);
                        return;
                    }
                    case WorkerChannel.CANCEL -> cancelled.add(frame.call());
                    case WorkerChannel.PAUSE -> pause(frame.call());
                    case WorkerChannel.RESUME -> resume(frame.call());
                    case WorkerChannel.SHUTDOWN -> {
                        shutdown();
                        reply(WorkerChannel.DONE, frame.call(), null);
                        exit.complete(0);
                        return;
                    }
                    default -> {
                        LOGGER.log(System.Logger.Level.ERROR, "engine worker: unknown frame type " + frame.type() + " from the host");
                        exit.complete(71);
                        return;
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            exit.completeExceptionally(e);
        }
    }

    private void load(int call, DataInputStream in) throws IOException {
        String driverKind = WorkerChannel.readString(in);
        int driverDevice = in.readInt();
        long hostCapacity = in.readLong();
        int engineDevice = in.readInt();
        Path staged = Path.of(WorkerChannel.readString(in));
        Path privateDir = Path.of(WorkerChannel.readString(in));
        String id = WorkerChannel.readString(in);
        String version = WorkerChannel.readString(in);
        int abi = in.readInt();
        String backend = WorkerChannel.readString(in);
        String options = WorkerChannel.readString(in);
        boolean concurrent = in.readBoolean();
        String modelName = WorkerChannel.readString(in);
        Path modelPath = Path.of(WorkerChannel.readString(in));
        EngineManifest manifest = new EngineManifest(id, version, abi, backend, List.of(), List.of(), staged, options, concurrent);
        PluginSnapshot snapshot = new PluginSnapshot(manifest, staged, new PluginLibrary.Info(abi, id, version));
        try {
            driver = WorkerModelTag.driverFor(Drivers.open(DriverKind.parse(driverKind), driverDevice, hostCapacity));
            device = new DeviceMemory(driver);
            modelTag = WorkerModelTag.over(device.resource(), driver);
            ownCuda = new OwnCudaMemory(device.resource());
            ProcessAllocators.lend(driverDevice, ownCuda);
            modelTag.enter();
            try {
                instance = EngineInstance.start(snapshot, privateDir, device.resource(), engineDevice, LOGGER, modelName, modelPath);
            } finally {
                modelTag.leave();
            }
            if (concurrent) concurrentCalls = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("engine-call-", 0).factory());
            reply(WorkerChannel.DONE, call, null);
        } catch (EngineInstance.OutOfMemoryOnLoad e) {
            failed(call, true, e.neededBytes() + ownCudaBytes(), e.getMessage());
        } catch (RuntimeException e) {
            // An engine whose own cudaMalloc found no memory fails its load with its own error: out of memory all the same.
            long needed = ownCuda == null ? 0 : ownCuda.neededWhenOutOfMemory();
            failed(call, needed > 0, needed, e.getMessage() == null ? e.toString() : e.getMessage());
        }
    }

    /** Loads a staged binary, reads and checks its engine_get_info(), unloads it; answers with the info. */
    private void probe(int call, DataInputStream in) throws IOException {
        Path staged = Path.of(WorkerChannel.readString(in));
        Path libraryDir = Path.of(WorkerChannel.readString(in));
        String id = WorkerChannel.readString(in);
        String version = WorkerChannel.readString(in);
        int abi = in.readInt();
        EngineManifest manifest = new EngineManifest(id, version, abi, "", List.of(), List.of(), staged, "{}", false);
        try (PluginLibrary library = PluginLibrary.open(staged, libraryDir, manifest)) {
            PluginLibrary.Info info = library.info();
            reply(WorkerChannel.DONE, call, out -> {
                out.writeInt(info.abiVersion());
                WorkerChannel.writeString(out, info.engineId());
                WorkerChannel.writeString(out, info.version());
            });
        } catch (PluginLibrary.RefusedException | RuntimeException e) {
            failed(call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        }
    }

    private void generate(int call, String prompt) {
        modelTag.enter();
        try {
            List<RunningEngine.Token> tokens = instance.generate(prompt);
            reply(WorkerChannel.DONE, call, out -> {
                out.writeInt(tokens.size());
                for (RunningEngine.Token token : tokens) {
                    out.writeLong(token.id());
                    out.writeInt(token.logprobs().length);
                    for (float p : token.logprobs()) out.writeFloat(p);
                }
            });
        } catch (RuntimeException e) {
            failed(call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        } finally {
            modelTag.leave();
        }
    }

    /**
     * engine_generate_stream: a TOKEN frame per token as the engine makes it, then DONE. When the
     * host does not look at tokens before the end ({@code live} false), they are held and go with
     * the DONE in one write, and DONE says when the first was made (nanoseconds after the call's
     * {@code arrived}, -1: none or not held).
     */
    private void stream(int call, String prompt, String request, boolean live, long arrived) {
        WorkerChannel.Frames held = live ? null : new WorkerChannel.Frames(1024);
        long[] firstToken = {-1};
        modelTag.enter();
        try {
            Generation.Outcome outcome = instance.stream(prompt, request, token -> {
                if (cancelled.contains(call)) return false;
                try {
                    if (held == null) {
                        channel.write(WorkerChannel.TOKEN, call, out -> WorkerChannel.writeToken(out, token));
                    } else {
                        if (firstToken[0] < 0) firstToken[0] = System.nanoTime() - arrived;
                        held.add(WorkerChannel.TOKEN, call, out -> WorkerChannel.writeToken(out, token));
                        if (held.size() >= HELD_TOKEN_BYTES) {
                            channel.send(held);
                            held.reset();
                        }
                    }
                } catch (IOException e) {
                    Runtime.getRuntime().halt(72); // the host is gone
                }
                return !cancelled.contains(call);
            });
            reply(held, WorkerChannel.DONE, call, out -> {
                out.writeInt(outcome.finish().ordinal());
                out.writeInt(outcome.promptTokens());
                out.writeLong(firstToken[0]);
            });
        } catch (RuntimeException e) {
            failed(held, call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        } finally {
            cancelled.remove(call);
            modelTag.leave();
        }
    }

    private void chatTemplate(int call, List<ChatMessage> messages) {
        modelTag.enter();
        try {
            Optional<String> text = instance.chatTemplate(messages);
            reply(WorkerChannel.DONE, call, out -> {
                out.writeBoolean(text.isPresent());
                WorkerChannel.writeString(out, text.orElse(null));
            });
        } catch (RuntimeException e) {
            failed(call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        } finally {
            modelTag.leave();
        }
    }

    /**
     * Gives the model's device memory back with its contents kept (the host sends this only while
     * no call is in flight). DONE: the figures, then the bytes given back, the bytes kept in host
     * memory, the device bytes the model still holds (allocations outside the tag), the time in ns.
     */
    private void pause(int call) {
        try {
            WorkerModelTag.Paused paused;
            try {
                paused = modelTag.pause();
            } finally {
                residencyChanged = true; // a pause that failed partway gave some back too
            }
            long stillHeld = Math.max(0, heldBytes() - modelTag.taggedBytes());
            reply(WorkerChannel.DONE, call, out -> {
                out.writeLong(paused.pausedBytes());
                out.writeLong(paused.keptBytes());
                out.writeLong(stillHeld);
                out.writeLong(paused.nanos());
            });
        } catch (RuntimeException e) {
            failed(call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        }
    }

    /**
     * Brings the model's memory and contents back. DONE: the figures, then the time in ns; FAILED
     * says out of memory when the device had none (the tag stays paused, consistent, and a RESUME
     * may be sent again). The pinned host copy is freed after the answer, off the call's path.
     */
    private void resume(int call) {
        try {
            long nanos;
            try {
                nanos = modelTag.resume();
            } finally {
                residencyChanged = true;
            }
            reply(WorkerChannel.DONE, call, out -> out.writeLong(nanos));
            // After the answer, off the reading thread: giving back gigabytes of pinned memory takes a while.
            Thread.ofPlatform().daemon().name("engine-host-copy-free").start(modelTag::freeHostCopy);
        } catch (dev.vmmkit.core.TagTransitionException e) {
            failed(call, e.isOutOfMemory(), 0, e.getMessage());
        } catch (RuntimeException e) {
            failed(call, false, 0, e.getMessage() == null ? e.toString() : e.getMessage());
        }
    }

    private void shutdown() {
        readers.shutdown();
        if (concurrentCalls != null) concurrentCalls.shutdown();
        if (instance != null) instance.close();
        instance = null;
        if (device != null) device.close();
        device = null;
        if (driver != null) driver.close();
        driver = null;
    }

    /** DONE or FAILED always lead with the memory figures: the instance's bytes and the driver's use. */
    private void reply(int type, int call, WorkerChannel.Payload rest) {
        reply(null, type, call, rest);
    }

    /** The answer, after the frames held in {@code before} (none when null), in one write. */
    private void reply(WorkerChannel.Frames before, int type, int call, WorkerChannel.Payload rest) {
        long instanceBytes = heldBytes();
        long driverUsed = driverUsedBytes();
        send(before, type, call, out -> {
            out.writeLong(instanceBytes);
            out.writeLong(driverUsed);
            if (rest != null) rest.write(out);
        });
    }

    private void failed(int call, boolean outOfMemory, long neededBytes, String message) {
        failed(null, call, outOfMemory, neededBytes, message);
    }

    /** FAILED: out of memory or not, the memory figures, the message, and the least bytes the load needs (0: unknown). */
    private void failed(WorkerChannel.Frames before, int call, boolean outOfMemory, long neededBytes, String message) {
        long instanceBytes = heldBytes();
        long driverUsed = driverUsedBytes();
        send(before, WorkerChannel.FAILED, call, out -> {
            out.writeBoolean(outOfMemory);
            out.writeLong(instanceBytes);
            out.writeLong(driverUsed);
            WorkerChannel.writeString(out, message);
            out.writeLong(neededBytes);
        });
    }

    private void send(WorkerChannel.Frames before, int type, int call, WorkerChannel.Payload payload) {
        try {
            WorkerChannel.Frames frames = before == null ? new WorkerChannel.Frames(64) : before;
            frames.add(type, call, payload);
            channel.send(frames);
        } catch (IOException e) {
            Runtime.getRuntime().halt(72); // the host is gone
        }
    }

    /** The model's device memory: what the engine took through alloc_device and through its own CUDA calls. */
    private long heldBytes() {
        return (instance == null ? 0 : instance.deviceBytes()) + ownCudaBytes();
    }

    private long ownCudaBytes() {
        return ownCuda == null ? 0 : ownCuda.bytes();
    }

    /**
     * The driver's use, read again only when what the worker holds changed since the last answer:
     * a generation that allocates nothing (the common call) then makes no driver call (a memory
     * query goes to the kernel driver) on its way back to the host.
     */
    private synchronized long driverUsedBytes() {
        if (driver == null) return 0;
        long held = heldBytes();
        // a pause or resume changes the driver's use, not what the engine holds: ask again then
        if (held == heldAtLastReading && lastDriverUsed >= 0 && !residencyChanged) return lastDriverUsed;
        residencyChanged = false;
        try {
            VmmDriver.MemoryInfo info = driver.memoryInfo();
            heldAtLastReading = held;
            lastDriverUsed = info.totalBytes() - info.freeBytes();
            return lastDriverUsed;
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /**
     * Ends this worker when the host is gone. The end of the channel says so too, but not while a
     * call hangs inside the plugin; then only this check notices.
     */
    private static void watchParent() {
        long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
        Thread.ofPlatform().daemon().name("engine-worker-parent-watch").start(() -> {
            for (;;) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                long now = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
                if (now != parent) Runtime.getRuntime().halt(73);
            }
        });
    }
}
