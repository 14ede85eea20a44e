package dev.vmmkit.interpose;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The one method the native shim calls through JNI, once: {@link #entryPoints(long)} fills the
 * shim's table of function pointers with FFM upcall stubs to {@link InterposedCalls}. From then on the
 * shim calls them as plain C functions.
 */
public final class NativeBootstrap {

    /** Mirror of {@code struct entry_table} in src/main/c/shim.h; keep both in the same order. */
    static final StructLayout TABLE = MemoryLayout.structLayout(
            JAVA_INT.withName("table_size"),
            JAVA_INT.withName("monitor_mode"),
            JAVA_INT.withName("owns_jvm"),
            JAVA_INT.withName("started_early"),
            ADDRESS.withName("allocate"),
            ADDRESS.withName("release"),
            ADDRESS.withName("record_alloc"),
            ADDRESS.withName("record_free"),
            ADDRESS.withName("at_exit"),
            ADDRESS.withName("peer_access"),
            ADDRESS.withName("ipc_get_handle"),
            ADDRESS.withName("ipc_open"),
            ADDRESS.withName("ipc_close"),
            ADDRESS.withName("reallocate"),
            ADDRESS.withName("remap_copy"),
            ADDRESS.withName("address_range"),
            ADDRESS.withName("region_begin"),
            ADDRESS.withName("region_end"),
            ADDRESS.withName("pause"),
            ADDRESS.withName("resume"),
            ADDRESS.withName("host_memory"),
            ADDRESS.withName("capture_changed"),
            ADDRESS.withName("default_tag"),
            ADDRESS.withName("release_cached"));

    private NativeBootstrap() {
    }

    /**
     * Makes the session from the environment and fills the table at {@code tableAddress}.
     * Returns 0 on success; otherwise the shim passes every call through (a positive value: the
     * reason was printed here, e.g. a bad VMM_* setting).
     */
    public static int entryPoints(long tableAddress) {
        try {
            MemorySegment table = MemorySegment.ofAddress(tableAddress).reinterpret(TABLE.byteSize());
            int size = table.get(JAVA_INT, offset("table_size"));
            if (size != TABLE.byteSize()) {
                System.err.printf("vmmkit: the native shim's table has %d bytes, this jar expects %d: "
                        + "shim and jar are from different builds%n", size, TABLE.byteSize());
                return 2;
            }
            List<String> badSettings = InterposeSettings.problems(System.getenv());
            if (!badSettings.isEmpty()) {
                // vmmkit run checks before the program starts; a bare LD_PRELOAD learns it here.
                badSettings.forEach(problem -> System.err.println("vmmkit: " + problem));
                return 3;
            }
            boolean monitorMode = table.get(JAVA_INT, offset("monitor_mode")) != 0;
            boolean ownsJvm = table.get(JAVA_INT, offset("owns_jvm")) != 0;
            boolean startedEarly = table.get(JAVA_INT, offset("started_early")) != 0;
            InterposedCalls.install(InterposeSession.fromEnvironment(monitorMode, System.getenv()));
            if (!ownsJvm) {
                // In a host JVM the shim registers no exit handler: finish when the JVM shuts down (whose
                // exit status Java does not tell; counted as a run that completed).
                Runtime.getRuntime().addShutdownHook(new Thread(() -> InterposedCalls.atExit(0, 0), "vmmkit-exit"));
            }
            makeStubs(table);
            // A process that lends its own allocators (an engine worker) runs vmmkit's code already.
            if (!monitorMode && !dev.vmmkit.core.ProcessAllocators.claimed()) {
                // Started early, the start runs beside the program, which may allocate at any moment:
                // it waits for nothing (the program would wait with it).
                StartUpWarmUp.startAndWait(System.getenv(), table, startedEarly ? 0 : StartUpWarmUp.WAIT_MILLIS);
            }
            return 0;
        } catch (Throwable e) {
            System.err.println("vmmkit: cannot start: " + e);
            e.printStackTrace();
            return 1;
        }
    }

    /** The byte offset of {@code field} in {@link #TABLE}. */
    static long offset(String field) {
        return TABLE.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }

    /** The C signature of the table's entry {@code field}: what a downcall to its stub takes ({@link TagCallWarmUp}). */
    static FunctionDescriptor descriptor(String field) {
        return ENTRIES.stream().filter(e -> e.field().equals(field)).findFirst().orElseThrow().descriptor();
    }

    /** One entry of the table: {@code field} gets an upcall stub to {@code owner.method}. */
    private record Entry(Class<?> owner, String field, String method, FunctionDescriptor descriptor) {
        Entry(String field, String method, FunctionDescriptor descriptor) {
            this(InterposedCalls.class, field, method, descriptor);
        }
    }

    private static final List<Entry> ENTRIES = List.of(
            new Entry("allocate", "allocate", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry("release", "release", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry("record_alloc", "recordAlloc", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_LONG)),
            new Entry("record_free", "recordFree", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG)),
            new Entry("at_exit", "atExit", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT)),
            new Entry("peer_access", "peerAccess", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT)),
            new Entry("ipc_get_handle", "ipcGetHandle", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry("ipc_open", "ipcOpen", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT)),
            new Entry("ipc_close", "ipcClose", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
            new Entry("reallocate", "reallocate", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry("remap_copy", "remapCopy", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry("address_range", "addressRange", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG)),
            new Entry(TagCalls.class, "region_begin", "regionBegin", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT)),
            new Entry(TagCalls.class, "region_end", "regionEnd", FunctionDescriptor.of(JAVA_INT, JAVA_INT)),
            new Entry(TagCalls.class, "pause", "pause", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT)),
            new Entry(TagCalls.class, "resume", "resume", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT)),
            new Entry(TagCalls.class, "host_memory", "hostMemory", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
            new Entry(CaptureCalls.class, "capture_changed", "captureChanged", FunctionDescriptor.ofVoid(JAVA_INT)),
            new Entry(TagCalls.class, "default_tag", "defaultTag", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT)),
            new Entry(TagCalls.class, "release_cached", "releaseCached", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)));

    /** Threads that make the stubs: each stub costs milliseconds, and the shim waits for all of them. */
    static final int STUB_THREADS = Math.max(1, Math.min(4, Integer.getInteger("vmmkit.stubThreads",
            Runtime.getRuntime().availableProcessors())));

    /**
     * Fills every entry of the table with an upcall stub (alive for the whole process), on
     * {@link #STUB_THREADS} threads: making the 18 stubs one after another took 112-168 ms of the
     * shim's 204-289 ms start on a 2-core host (docs/cold-path.md).
     */
    private static void makeStubs(MemorySegment table) throws Throwable {
        Throwable[] failure = new Throwable[1];
        Thread[] threads = new Thread[STUB_THREADS];
        for (int t = 0; t < threads.length; t++) {
            int first = t;
            threads[t] = Thread.ofPlatform().name("vmmkit-stubs-" + t).start(() -> {
                try {
                    for (int i = first; i < ENTRIES.size(); i += threads.length) stub(table, ENTRIES.get(i));
                } catch (Throwable e) {
                    synchronized (failure) {
                        if (failure[0] == null) failure[0] = e;
                    }
                }
            });
        }
        for (Thread thread : threads) thread.join();
        if (failure[0] != null) throw failure[0];
    }

    private static void stub(MemorySegment table, Entry entry) throws ReflectiveOperationException {
        MethodType type = entry.descriptor().toMethodType();
        var target = MethodHandles.lookup().findStatic(entry.owner(), entry.method(), type);
        MemorySegment stub = Linker.nativeLinker().upcallStub(target, entry.descriptor(), Arena.global());
        table.set(ValueLayout.ADDRESS, offset(entry.field()), stub);
    }
}
