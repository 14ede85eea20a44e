package dev.vmmkit.driver;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Faulting in fresh anonymous memory: every page backed (resident) and zero, whatever the size and split. */
class HostPagesTest {
    private static final long MIB = 1L << 20;

    @Test
    @SuppressWarnings("restricted")
    void everyPageOfEverySizeIsBackedAndZero() throws IOException {
        long[] sizes = {4096, 2 * MIB + 4096, 64 * MIB, 200 * MIB + 12288};
        for (long bytes : sizes) {
            long address = LibC.mmap(0, bytes, LibC.PROT_READ | LibC.PROT_WRITE, LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS, -1, 0);
            assertNotEquals(LibC.MAP_FAILED, address, "mmap of " + bytes);
            try {
                long residentBefore = residentBytes();
                HostPages.faultIn(address, bytes);
                long grown = residentBytes() - residentBefore;
                // Written pages are backed now (reading alone would map the shared zero page); the
                // rest of the process may move the figure by a few MiB either way meanwhile.
                if (bytes >= 64 * MIB) assertTrue(grown >= bytes - 16 * MIB, "resident grew by " + grown + " for " + bytes);
                MemorySegment memory = MemorySegment.ofAddress(address).reinterpret(bytes);
                for (long offset = 0; offset < bytes; offset += 4096) {
                    assertEquals(0, memory.get(JAVA_BYTE, offset), "byte " + offset + " of " + bytes);
                }
                assertEquals(0, memory.get(JAVA_BYTE, bytes - 1));
            } finally {
                LibC.munmap(address, bytes);
            }
        }
    }

    /** The process's resident memory (/proc/self/statm's second field, in pages of 4 KiB). */
    private static long residentBytes() throws IOException {
        String[] fields = Files.readString(Path.of("/proc/self/statm")).trim().split(" ");
        return Long.parseLong(fields[1]) * 4096;
    }
}
