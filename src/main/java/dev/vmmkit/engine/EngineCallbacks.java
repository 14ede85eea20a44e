package dev.vmmkit.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * The EngineConfig one instance receives, with its three callbacks as FFM upcalls: alloc_device
 * and free_device go to the instance's {@link InstanceMemory}, log to the host's logger. An upcall
 * must never throw into native code (the JVM would abort), so each catches everything.
 */
final class EngineCallbacks implements AutoCloseable {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle ALLOC;
    private static final MethodHandle FREE;
    private static final MethodHandle LOG;

    static {
        try {
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            ALLOC = lookup.findVirtual(EngineCallbacks.class, "allocDevice",
                    MethodType.methodType(MemorySegment.class, MemorySegment.class, long.class));
            FREE = lookup.findVirtual(EngineCallbacks.class, "freeDevice",
                    MethodType.methodType(void.class, MemorySegment.class, MemorySegment.class));
            LOG = lookup.findVirtual(EngineCallbacks.class, "log",
                    MethodType.methodType(void.class, MemorySegment.class, int.class, MemorySegment.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Arena arena = Arena.ofShared();
    private final InstanceMemory memory;
    private final System.Logger logger;
    private final String source;
    private final MemorySegment config;
    /** The last error line the engine logged, which a failed call's answer repeats; null when none. */
    private volatile String lastError;

    /**
     * @param device      device ordinal for the engine, -1 for none
     * @param optionsJson the manifest's options, or null
     * @param source      who is logging, e.g. {@code fixture 1.0.0 [model]}
     */
    EngineCallbacks(InstanceMemory memory, int device, String optionsJson, System.Logger logger, String source) {
        this.memory = memory;
        this.logger = logger;
        this.source = source;
        this.config = arena.allocate(EngineAbi.ENGINE_CONFIG);
        EngineAbi.CONFIG_CTX.set(config, 0L, MemorySegment.NULL);
        EngineAbi.CONFIG_DEVICE.set(config, 0L, device);
        EngineAbi.CONFIG_OPTIONS.set(config, 0L, optionsJson == null ? MemorySegment.NULL : arena.allocateFrom(optionsJson));
        EngineAbi.CONFIG_ALLOC.set(config, 0L, LINKER.upcallStub(ALLOC.bindTo(this), EngineAbi.ALLOC_DEVICE_FN, arena));
        EngineAbi.CONFIG_FREE.set(config, 0L, LINKER.upcallStub(FREE.bindTo(this), EngineAbi.FREE_DEVICE_FN, arena));
        EngineAbi.CONFIG_LOG.set(config, 0L, LINKER.upcallStub(LOG.bindTo(this), EngineAbi.LOG_FN, arena));
    }

    /** The EngineConfig to pass to engine_init; valid until {@link #close}. */
    MemorySegment config() {
        return config;
    }

    /** Frees the config and the upcall stubs: only after engine_shutdown returned. */
    @Override
    public void close() {
        arena.close();
    }

    /** The last error line the engine logged (level 3), or null. */
    String lastError() {
        return lastError;
    }

    private MemorySegment allocDevice(MemorySegment ctx, long size) {
        try {
            return MemorySegment.ofAddress(memory.allocate(size));
        } catch (Throwable t) {
            logger.log(System.Logger.Level.ERROR, source + ": alloc_device(" + size + ") failed: " + t);
            return MemorySegment.NULL;
        }
    }

    private void freeDevice(MemorySegment ctx, MemorySegment pointer) {
        try {
            if (!pointer.equals(MemorySegment.NULL) && !memory.free(pointer.address())) {
                logger.log(System.Logger.Level.WARNING, source + ": free_device(0x" + Long.toHexString(pointer.address())
                        + ") of memory it does not hold; ignored");
            }
        } catch (Throwable t) {
            logger.log(System.Logger.Level.ERROR, source + ": free_device failed: " + t);
        }
    }

    private void log(MemorySegment ctx, int level, MemorySegment message) {
        try {
            String text = message.equals(MemorySegment.NULL) ? "" : message.reinterpret(65536).getString(0);
            logger.log(levelOf(level), source + ": " + text);
            if (level >= 3) lastError = text;
        } catch (Throwable t) {
            // a log line is never worth crashing for
        }
    }

    private static System.Logger.Level levelOf(int level) {
        return switch (level) {
            case 0 -> System.Logger.Level.DEBUG;
            case 1 -> System.Logger.Level.INFO;
            case 2 -> System.Logger.Level.WARNING;
            default -> System.Logger.Level.ERROR;
        };
    }
}
