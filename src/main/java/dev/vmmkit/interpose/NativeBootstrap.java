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
            JAVA_INT.withName("reserved"),
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
            ADDRESS.withName("capture_changed"));

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
            InterposedCalls.install(InterposeSession.fromEnvironment(monitorMode, System.getenv()));
            if (!ownsJvm) {
                // In a host JVM the shim registers no exit handler: finish when the JVM shuts down (whose
                // exit status Java does not tell; counted as a run that completed).
                Runtime.getRuntime().addShutdownHook(new Thread(() -> InterposedCalls.atExit(0, 0), "vmmkit-exit"));
            }
            set(table, "allocate", "allocate", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
            set(table, "release", "release", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
            set(table, "record_alloc", "recordAlloc", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_LONG));
            set(table, "record_free", "recordFree", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG));
            set(table, "at_exit", "atExit", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT));
            set(table, "peer_access", "peerAccess", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
            set(table, "ipc_get_handle", "ipcGetHandle", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
            set(table, "ipc_open", "ipcOpen", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT));
            set(table, "ipc_close", "ipcClose", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
            set(table, "reallocate", "reallocate", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
            set(table, "remap_copy", "remapCopy",
                    FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
            set(table, "address_range", "addressRange", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
            setTo(TagCalls.class, table, "region_begin", "regionBegin", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT));
            setTo(TagCalls.class, table, "region_end", "regionEnd", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
            setTo(TagCalls.class, table, "pause", "pause", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT));
            setTo(TagCalls.class, table, "resume", "resume", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT));
            setTo(TagCalls.class, table, "host_memory", "hostMemory", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
            setTo(CaptureCalls.class, table, "capture_changed", "captureChanged", FunctionDescriptor.ofVoid(JAVA_INT));
            // A process that lends its own allocators (an engine worker) runs vmmkit's code already.
            if (!monitorMode && !dev.vmmkit.core.ProcessAllocators.claimed()) StartUpWarmUp.startAndWait(System.getenv(), table);
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

    /** Stores in {@code field} an upcall stub (alive for the whole process) to {@code InterposedCalls.method}. */
    private static void set(MemorySegment table, String field, String method, FunctionDescriptor descriptor)
            throws ReflectiveOperationException {
        setTo(InterposedCalls.class, table, field, method, descriptor);
    }

    /** As {@link #set}, for a static method of {@code owner}. */
    private static void setTo(Class<?> owner, MemorySegment table, String field, String method, FunctionDescriptor descriptor)
            throws ReflectiveOperationException {
        MethodType type = descriptor.toMethodType();
        var target = MethodHandles.lookup().findStatic(owner, method, type);
        MemorySegment stub = Linker.nativeLinker().upcallStub(target, descriptor, Arena.global());
        table.set(ValueLayout.ADDRESS, offset(field), stub);
    }
}
