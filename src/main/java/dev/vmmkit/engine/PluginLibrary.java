package dev.vmmkit.engine;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One loaded copy of a plugin binary and its functions (five, and the optional chat template). {@link #open} copies the binary to a
 * private file first and loads that, so global state is per copy and overwriting the installed
 * file never touches a running copy; the private file is deleted as soon as it is loaded (the
 * mapping keeps it alive). Closing unloads the library (dlclose).
 */
final class PluginLibrary implements AutoCloseable {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final AtomicLong COPIES = new AtomicLong();

    /** What engine_get_info() reported. */
    record Info(int abiVersion, String engineId, String version) {
    }

    /** A plugin the host will not run; the message says why. */
    static final class RefusedException extends Exception {
        RefusedException(String message) {
            super(message);
        }
    }

    private final Arena arena;
    private final Info info;
    private final MethodHandle init;
    private final MethodHandle loadModel;
    private final MethodHandle generate;
    private final MethodHandle generateStream;
    /** engine_apply_chat_template, or null where the plugin has none (optional in version 2). */
    private final MethodHandle applyChatTemplate;
    private final MethodHandle shutdown;

    private PluginLibrary(Arena arena, Info info, SymbolLookup symbols) throws RefusedException {
        this.arena = arena;
        this.info = info;
        this.init = function(symbols, EngineAbi.INIT, EngineAbi.INIT_FN);
        this.loadModel = function(symbols, EngineAbi.LOAD_MODEL, EngineAbi.LOAD_MODEL_FN);
        boolean streaming = info.abiVersion() == EngineAbi.VERSION;
        this.generate = streaming ? null : function(symbols, EngineAbi.GENERATE, EngineAbi.GENERATE_FN);
        this.generateStream = streaming ? function(symbols, EngineAbi.GENERATE_STREAM, EngineAbi.GENERATE_STREAM_FN) : null;
        this.applyChatTemplate = streaming ? symbols.find(EngineAbi.APPLY_CHAT_TEMPLATE)
                .map(address -> LINKER.downcallHandle(address, EngineAbi.APPLY_CHAT_TEMPLATE_FN)).orElse(null) : null;
        this.shutdown = function(symbols, EngineAbi.SHUTDOWN, EngineAbi.SHUTDOWN_FN);
    }

    /**
     * Loads a private copy of {@code binary} (made in {@code privateDir}), reads engine_get_info()
     * before anything else, and checks the ABI version, the info against {@code manifest}, and that
     * every required function is there.
     *
     * @throws RefusedException naming what was wrong (both versions, for a version mismatch)
     */
    static PluginLibrary open(Path binary, Path privateDir, EngineManifest manifest) throws RefusedException {
        // The pid too: workers share the host's private directory, and each counts from 1.
        Path copy = privateDir.resolve(ProcessHandle.current().pid() + "-" + COPIES.incrementAndGet() + "-" + binary.getFileName());
        try {
            Files.copy(binary, copy);
        } catch (IOException e) {
            throw new RefusedException("cannot copy " + binary + ": " + e);
        }
        Arena arena = Arena.ofShared();
        try {
            SymbolLookup symbols;
            try {
                symbols = SymbolLookup.libraryLookup(copy, arena);
            } catch (IllegalArgumentException | IllegalCallerException e) {
                throw new RefusedException("cannot load " + binary + ": " + e.getMessage());
            }
            Info info = readInfo(symbols, binary);
            checkAgainst(manifest, info);
            return new PluginLibrary(arena, info, symbols);
        } catch (RefusedException | RuntimeException e) {
            arena.close();
            throw e;
        } finally {
            try {
                Files.deleteIfExists(copy);
            } catch (IOException ignored) {
                // a stray file in the private directory; it goes with the directory
            }
        }
    }

    Info info() {
        return info;
    }

    int init(MemorySegment config) {
        try {
            return (int) init.invokeExact(config);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    int loadModel(MemorySegment path) {
        try {
            return (int) loadModel.invokeExact(path);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    int generate(MemorySegment prompt, MemorySegment resultsOut) {
        try {
            return (int) generate.invokeExact(prompt, resultsOut);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /** True for a version 2 plugin (engine_generate_stream), false for version 1 (engine_generate). */
    boolean streaming() {
        return generateStream != null;
    }

    int generateStream(MemorySegment prompt, MemorySegment requestJson, MemorySegment onToken, MemorySegment user,
                       MemorySegment result) {
        try {
            return (int) generateStream.invokeExact(prompt, requestJson, onToken, user, result);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /** True where the plugin exports engine_apply_chat_template. */
    boolean hasChatTemplate() {
        return applyChatTemplate != null;
    }

    long applyChatTemplate(MemorySegment messages, long count, boolean addAssistant, MemorySegment out, long outSize) {
        try {
            return (long) applyChatTemplate.invokeExact(messages, count, addAssistant ? 1 : 0, out, outSize);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    void shutdown() {
        try {
            shutdown.invokeExact();
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /** Unloads the library; no function of it may be called after. */
    @Override
    public void close() {
        arena.close();
    }

    private static Info readInfo(SymbolLookup symbols, Path binary) throws RefusedException {
        MethodHandle getInfo = function(symbols, EngineAbi.GET_INFO, EngineAbi.GET_INFO_FN);
        MemorySegment raw;
        try {
            raw = (MemorySegment) getInfo.invokeExact();
        } catch (Throwable t) {
            throw rethrown(t);
        }
        if (raw.equals(MemorySegment.NULL)) throw new RefusedException(EngineAbi.GET_INFO + "() returned NULL in " + binary);
        MemorySegment info = raw.reinterpret(EngineAbi.ENGINE_INFO.byteSize());
        return new Info((int) EngineAbi.INFO_ABI.get(info, 0L),
                string((MemorySegment) EngineAbi.INFO_ID.get(info, 0L)),
                string((MemorySegment) EngineAbi.INFO_VERSION.get(info, 0L)));
    }

    /** The ABI version first (nothing else is meaningful across ABIs), then the manifest's claims. */
    private static void checkAgainst(EngineManifest manifest, Info info) throws RefusedException {
        if (!EngineAbi.supported(info.abiVersion())) {
            throw new RefusedException("binary reports abi_version " + info.abiVersion() + ", the host implements abi_version "
                    + EngineAbi.VERSION_BLOCKING + " and " + EngineAbi.VERSION + " (manifest says " + manifest.abiVersion() + ")");
        }
        if (manifest.abiVersion() != info.abiVersion()) {
            throw new RefusedException("manifest says abi_version " + manifest.abiVersion() + ", binary reports "
                    + info.abiVersion());
        }
        if (!manifest.id().equals(info.engineId())) {
            throw new RefusedException("manifest says id '" + manifest.id() + "', binary reports '" + info.engineId() + "'");
        }
        if (!manifest.version().equals(info.version())) {
            throw new RefusedException("manifest says version " + manifest.version() + ", binary reports version "
                    + info.version());
        }
    }

    private static MethodHandle function(SymbolLookup symbols, String name, java.lang.foreign.FunctionDescriptor fn)
            throws RefusedException {
        MemorySegment address = symbols.find(name)
                .orElseThrow(() -> new RefusedException("required symbol " + name + " is missing"));
        return LINKER.downcallHandle(address, fn);
    }

    private static String string(MemorySegment pointer) {
        if (pointer.equals(MemorySegment.NULL)) return "";
        return pointer.reinterpret(4096).getString(0);
    }

    private static RuntimeException rethrown(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException(t);
    }
}
