package dev.vmmkit.ipc;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * IPC of vmmkit memory on the host emulation: memfds passed between processes with pidfd_getfd.
 * One process exports, another (a separate JVM) imports and reads; freed memory is not reused while
 * the importer holds it; bad handles get the CUDA error they should.
 */
class IpcTest {
    private static final long MIB = 1L << 20;
    private final HostDriver driver = HostDriver.builder().capacity(256 * MIB).deviceCount(2).device(0).build();
    private final VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS);
    private final DeviceBytes bytes = driver.deviceBytes();
    private final Arena arena = Arena.ofConfined();
    private final IpcExports exports = new IpcExports();

    @BeforeAll
    static void descriptorsCanBeTaken() {
        String why = IpcImports.whyDescriptorsCannotBeTaken();
        assumeTrue(why == null, "IPC needs pidfd_getfd, which this machine refuses: " + why);
    }

    @AfterEach
    void close() {
        manager.close();
        driver.close();
        arena.close();
    }

    private MemorySegment handleOf(long address) throws IpcException {
        MemorySegment handle = arena.allocate(IpcHandle.BYTES);
        exports.handleFor(address, manager.sharedPages(), handle);
        return handle;
    }

    @Test
    void anotherProcessReadsTheBytesAndTheOwnerDoesNotReuseThemUntilItCloses() throws Exception {
        long size = 3 * MIB + 4096;
        long address = manager.allocate(size, 0);
        bytes.fill(address, size, 1234);
        assertFalse(exports.mayHold(address));
        MemorySegment handle = handleOf(address);
        assertTrue(IpcImports.isVmmkitHandle(handle));
        assertTrue(exports.mayHold(address), "exported: its free must ask");
        assertEquals(HexFormat.of().formatHex(handle.toArray(JAVA_BYTE)),
                HexFormat.of().formatHex(handleOf(address).toArray(JAVA_BYTE)), "one export per allocation");

        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                IpcChildProcess.class.getName(), HexFormat.of().formatHex(handle.toArray(JAVA_BYTE)), "1234",
                Long.toString(size)).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream()));
             PrintWriter in = new PrintWriter(child.getOutputStream(), true)) {
            assertEquals("opened -1", out.readLine(), "the importer reads the exporter's bytes");

            // The owner frees: the free waits for the importer, the pages stay out of reuse.
            long liveBefore = manager.stats().liveBytes();
            assertEquals(IpcExports.DEFERRED, exports.deferFree(address, 0, manager));
            assertEquals(1, exports.deferredFrees());
            assertEquals(IpcExports.ALREADY_FREED, exports.deferFree(address, 0, manager), "a double free is refused");
            assertEquals(liveBefore, manager.stats().liveBytes(), "still held for the importer");
            List<Long> others = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                long other = manager.allocate(size, 0);
                assertNotEquals(address, other);
                bytes.fill(other, size & -8, 99 + i);
                others.add(other);
            }
            assertEquals(0, exports.completeClosedFrees(true), "the importer still holds it");
            in.println("check");
            assertEquals("checked -1", out.readLine(), "the importer's bytes are untouched");

            in.println("close");
            assertEquals("closed true 0", out.readLine());
            assertTrue(child.waitFor(30, TimeUnit.SECONDS));
            assertEquals(1, exports.completeClosedFrees(true), "closed: the free completes");
            assertFalse(exports.mayHold(address) || exports.hasDeferredFrees());
            assertEquals(-1, manager.sizeOf(address), "and the allocation is gone");
            for (long other : others) manager.deallocate(other, 0);
        } finally {
            child.destroyForcibly();
        }
        assertFalse(exports.isActive());
    }

    @Test
    void anImporterThatDiesReleasesTheMemory() throws Exception {
        long address = manager.allocate(MIB, 0);
        bytes.fill(address, MIB, 5);
        MemorySegment handle = handleOf(address);
        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                IpcChildProcess.class.getName(), HexFormat.of().formatHex(handle.toArray(JAVA_BYTE)), "5",
                Long.toString(MIB)).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream()));
        assertEquals("opened -1", out.readLine());
        assertEquals(IpcExports.DEFERRED, exports.deferFree(address, 0, manager));
        child.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        assertEquals(1, exports.completeClosedFrees(true), "a dead importer holds nothing");
    }

    @Test
    void openingInTheSameProcessCountsReferences() throws Exception {
        long address = manager.allocate(MIB + 100, 0);
        bytes.fill(address, MIB, 8);
        MemorySegment handle = handleOf(address);
        IpcImports imports = new IpcImports();
        try (HostDriver other = HostDriver.builder().capacity(64 * MIB).deviceCount(2).device(1).build();
             VmmManager importer = new VmmManager(other, VmmConfig.DEFAULTS)) {
            long pointer = imports.open(handle, importer.sharedPages());
            assertEquals(pointer, imports.open(handle, importer.sharedPages()), "same export, same pointer");
            assertEquals(-1, other.deviceBytes().firstMismatch(pointer, MIB, 8));
            assertTrue(imports.close(pointer));
            assertEquals(1, imports.openCount(), "one reference left");
            assertTrue(imports.close(pointer));
            assertFalse(imports.close(pointer), "closed: no longer vmmkit's to close");
            assertEquals(IpcExports.FREE_NOW, exports.deferFree(address, 0, manager), "nobody holds it: free at once");
            manager.deallocate(address, 0);
        }
    }

    @Test
    void badHandlesGetClearErrors() throws Exception {
        IpcImports imports = new IpcImports();
        MemorySegment garbage = arena.allocate(64);
        for (int i = 0; i < 64; i++) garbage.set(JAVA_BYTE, i, (byte) (i * 37 + 11));
        assertFalse(IpcImports.isVmmkitHandle(garbage), "not vmmkit's: the CUDA runtime answers it");

        MemorySegment malformed = arena.allocate(64);
        malformed.set(JAVA_LONG_UNALIGNED, 0, IpcHandle.MAGIC);
        assertEquals(IpcException.INVALID_VALUE, code(() -> imports.open(malformed, manager.sharedPages())));

        long address = manager.allocate(MIB, 0);
        MemorySegment handle = handleOf(address);
        // A process that has ended.
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        MemorySegment ofDeadProcess = arena.allocate(64);
        MemorySegment.copy(handle, 0, ofDeadProcess, 0, 64);
        ofDeadProcess.set(JAVA_INT_UNALIGNED, 8, (int) gone.pid());
        assertEquals(IpcException.INVALID_RESOURCE_HANDLE, code(() -> imports.open(ofDeadProcess, manager.sharedPages())));
        // Another export id on a real table: stale.
        MemorySegment wrongId = arena.allocate(64);
        MemorySegment.copy(handle, 0, wrongId, 0, 64);
        wrongId.set(JAVA_LONG_UNALIGNED, 16, handle.get(JAVA_LONG_UNALIGNED, 16) ^ 2);
        assertEquals(IpcException.INVALID_RESOURCE_HANDLE, code(() -> imports.open(wrongId, manager.sharedPages())));
        // A descriptor that is not an export table.
        MemorySegment notATable = arena.allocate(64);
        MemorySegment.copy(handle, 0, notATable, 0, 64);
        notATable.set(JAVA_INT_UNALIGNED, 12, 0);
        assertEquals(IpcException.INVALID_RESOURCE_HANDLE, code(() -> imports.open(notATable, manager.sharedPages())));
        // Freed by the owner: withdrawn, then closed.
        assertEquals(IpcExports.FREE_NOW, exports.deferFree(address, 0, manager));
        manager.deallocate(address, 0);
        assertEquals(IpcException.INVALID_RESOURCE_HANDLE, code(() -> imports.open(handle, manager.sharedPages())));
        // Exporting something that is not the start of a live allocation.
        assertEquals(IpcException.INVALID_VALUE, code(() -> handleOf(address)));
        assertEquals(IpcException.INVALID_VALUE, code(() -> handleOf(12345)));
        assertEquals(0, imports.openCount());
    }

    private interface IpcCall {
        void run() throws IpcException;
    }

    private static int code(IpcCall call) {
        return assertThrows(IpcException.class, call::run).cudaError();
    }
}
