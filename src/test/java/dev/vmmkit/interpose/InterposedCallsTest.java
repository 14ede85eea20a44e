package dev.vmmkit.interpose;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.trace.AllocationRecorder;
import dev.vmmkit.trace.TraceFileRecorder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Java entry points on their own, in this JVM: result codes, ownership, stats, trace. */
class InterposedCallsTest {
    @TempDir
    Path dir;

    @AfterEach
    void uninstall() {
        InterposedCalls.install(null);
    }

    private InterposeSession vmmSession(ResourceFactory factory, AllocationRecorder recorder, Path stats) {
        InterposeSession session = new InterposeSession(false, factory, recorder, stats);
        InterposedCalls.install(session);
        return session;
    }

    private static ResourceFactory bump(String capacity) {
        return new BumpResourceFactory(Map.of("VMM_DEVICE_MEMORY", capacity));
    }

    @Test
    void allocateReturnsAddressesOrNegatedCudaErrors() {
        vmmSession(bump("8M"), AllocationRecorder.NONE, null);
        long address = InterposedCalls.allocate(1000, 0, 0);
        assertTrue(address > 0);
        assertEquals(0, InterposedCalls.allocate(0, 0, 0));
        assertEquals(-1, InterposedCalls.allocate(-5, 0, 0));
        assertEquals(-2, InterposedCalls.allocate(1L << 30, 0, 0));
        assertEquals(InterposedCalls.PASS_THROUGH, InterposedCalls.allocate(16, DeviceManagers.MAX_DEVICES, 0));
        assertEquals(InterposedCalls.FREED, InterposedCalls.release(address, 0, DeviceMemoryResource.DEVICE_WIDE_STREAM));
        assertEquals(InterposedCalls.NOT_OURS, InterposedCalls.release(address, 0, 0)); // double free
        assertEquals(InterposedCalls.NOT_OURS, InterposedCalls.release(0x1234_5000L, 0, 0));
    }

    @Test
    void aPointerIsFoundOnItsOwnDeviceWhateverTheCurrentOne() {
        vmmSession(bump("8M"), AllocationRecorder.NONE, null);
        long onOne = InterposedCalls.allocate(4096, 1, 0);
        InterposedCalls.allocate(4096, 0, 0);
        assertEquals(InterposedCalls.FREED, InterposedCalls.release(onOne, 0, 0));
    }

    @Test
    void aFreeThatNamesNoDeviceFindsThePointersOwnDevice() {
        vmmSession(bump("8M"), AllocationRecorder.NONE, null);
        long onZero = InterposedCalls.allocate(4096, 0, 0);
        long onTwo = InterposedCalls.allocate(4096, 2, 0);
        assertEquals(InterposedCalls.FREED, InterposedCalls.release(onTwo, -1, DeviceMemoryResource.DEVICE_WIDE_STREAM));
        assertEquals(InterposedCalls.FREED, InterposedCalls.release(onZero, -1, 0));
        assertEquals(InterposedCalls.NOT_OURS, InterposedCalls.release(onTwo, -1, 0)); // double free
        assertEquals(InterposedCalls.NOT_OURS, InterposedCalls.release(0x1234_5000L, -1, 0));
    }

    @Test
    void aDeviceWhoseAllocatorCannotBeMadePassesThrough() {
        vmmSession(device -> {
            throw new UnsupportedOperationException("no allocator");
        }, AllocationRecorder.NONE, null);
        assertEquals(InterposedCalls.PASS_THROUGH, InterposedCalls.allocate(4096, 0, 0));
        assertEquals(InterposedCalls.PASS_THROUGH, InterposedCalls.allocate(4096, 0, 0));
        assertEquals(InterposedCalls.NOT_OURS, InterposedCalls.release(0x1000, 0, 0));
    }

    @Test
    void statsAndTraceAreWrittenAtExit() throws Exception {
        Path stats = dir.resolve("stats.json"), trace = dir.resolve("trace.csv");
        vmmSession(bump("8M"), new TraceFileRecorder(trace, "vmm"), stats);
        long a = InterposedCalls.allocate(1000, 0, 7);
        InterposedCalls.release(a, 0, DeviceMemoryResource.DEVICE_WIDE_STREAM);
        InterposedCalls.atExit(5, 0);
        InterposedCalls.atExit(6, 0); // once only
        assertEquals("{\"mode\":\"vmm\",\"complete\":true,\"allocs\":1,\"frees\":1,\"passthrough_calls\":5,\"peak_live_bytes\":1000,"
                + "\"peak_reserved_bytes\":1024,\"fragmentation_ratio\":1.024000,"
                + "\"zero_copy\":{\"remaps\":0,\"bytes\":0,\"copies_fallen_back\":0},\"profile\":null,\"devices\":[{\"device\":0,\"allocs\":1,"
                + "\"frees\":1,\"live_bytes\":0,\"peak_live_bytes\":1000,\"peak_reserved_bytes\":1024,\"peers\":[],\"peak_hint_bytes\":0,"
                + "\"cache_hits\":0,\"cache_misses\":1,\"free_waits_given_up\":0,\"driver_calls\":{},\"not_served_bytes\":null,\"paused_bytes\":0,\"host_bytes_pinned\":0,\"host_bytes_kept\":0,\"host_bytes_pinned_ahead\":0,\"tags\":[]}]}\n",
                Files.readString(stats));
        assertEquals(List.of("# action,addr,size,stream  (vmmkit trace, vmmkit run, mode=vmm)", "alloc," + a + ",1000,7",
                "free_requested," + a + ",1000,0", "free_completed," + a + ",1000,0"), Files.readAllLines(trace));
    }

    @Test
    void monitorModeRecordsTheRuntimesAllocations() throws Exception {
        Path stats = dir.resolve("stats.json");
        InterposedCalls.install(new InterposeSession(true, device -> null, AllocationRecorder.NONE, stats));
        InterposedCalls.recordAlloc(0x1000, 300, 0);
        InterposedCalls.recordAlloc(0x2000, 200, 0);
        InterposedCalls.recordFree(0x1000, 0);
        InterposedCalls.recordFree(0x9000, 0); // never seen: not counted
        InterposedCalls.atExit(4, 0);
        assertEquals("{\"mode\":\"monitor\",\"complete\":true,\"allocs\":2,\"frees\":1,\"passthrough_calls\":4,\"peak_live_bytes\":500,"
                + "\"peak_reserved_bytes\":null,\"fragmentation_ratio\":null,"
                + "\"zero_copy\":{\"remaps\":0,\"bytes\":0,\"copies_fallen_back\":0},\"profile\":null,\"devices\":[]}\n", Files.readString(stats));
    }

    /** What the shim does, with the table in Java memory and the stubs called through downcalls. */
    @Test
    void bootstrapFillsTheTableWithCallableStubs() throws Throwable {
        System.setProperty(ResourceFactory.PROPERTY, BumpResourceFactory.class.getName());
        try {
            MemorySegment table = Arena.ofAuto().allocate(NativeBootstrap.TABLE);
            table.set(JAVA_INT, 0, (int) NativeBootstrap.TABLE.byteSize());
            table.set(JAVA_INT, 8, 1);
            assertEquals(0, NativeBootstrap.entryPoints(table.address()));
            MethodHandle allocate = Linker.nativeLinker().downcallHandle(table.get(ADDRESS, 16),
                    FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
            MethodHandle release = Linker.nativeLinker().downcallHandle(table.get(ADDRESS, 24),
                    FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
            long address = (long) allocate.invokeExact(4096L, 0, 0L);
            assertTrue(address > 0);
            assertEquals(InterposedCalls.FREED, (int) release.invokeExact(address, 0, -1L));
            assertNotEquals(MemorySegment.NULL, table.get(ADDRESS, 48));
        } finally {
            System.clearProperty(ResourceFactory.PROPERTY);
        }
    }

    @Test
    void aTableOfAnotherSizeIsRefused() {
        MemorySegment table = Arena.ofAuto().allocate(NativeBootstrap.TABLE);
        table.set(JAVA_INT, 0, 40);
        assertEquals(2, NativeBootstrap.entryPoints(table.address()));
    }
}
