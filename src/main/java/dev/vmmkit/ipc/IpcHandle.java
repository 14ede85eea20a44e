package dev.vmmkit.ipc;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * What vmmkit puts in the 64 opaque bytes of a {@code cudaIpcMemHandle_t}:
 * <pre>
 *  0  8 bytes  magic "VMMKIPC" + version 1
 *  8  int      exporting process id
 * 12  int      descriptor, in that process, of its export table ({@link ExportTable})
 * 16  long     export id (random, also in the table: a descriptor number reused later does not match)
 * 24  40 bytes zero
 * </pre>
 * Everything else (the pages, the offset, the size) is read from the export table.
 */
record IpcHandle(int pid, int tableFd, long exportId) {
    static final int BYTES = 64;
    /** "VMMKIPC\1" read as a little-endian long. */
    static final long MAGIC = 0x01_43_50_49_4B_4D_4D_56L;

    static {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) throw new ExceptionInInitializerError("little-endian only");
    }

    /** True when the bytes carry vmmkit's magic; anything else belongs to the CUDA runtime. */
    static boolean isVmmkit(MemorySegment bytes) {
        return bytes.get(JAVA_LONG_UNALIGNED, 0) == MAGIC;
    }

    /**
     * Reads a handle that {@link #isVmmkit} accepted.
     *
     * @throws IpcException INVALID_VALUE when its fields cannot come from an export
     */
    static IpcHandle read(MemorySegment bytes) throws IpcException {
        int pid = bytes.get(JAVA_INT_UNALIGNED, 8);
        int fd = bytes.get(JAVA_INT_UNALIGNED, 12);
        long id = bytes.get(JAVA_LONG_UNALIGNED, 16);
        boolean padded = true;
        for (long at = 24; at < BYTES; at += 8) padded &= bytes.get(JAVA_LONG_UNALIGNED, at) == 0;
        if (pid <= 0 || fd < 0 || id == 0 || !padded) {
            throw new IpcException(IpcException.INVALID_VALUE, "malformed vmmkit IPC handle (pid " + pid
                    + ", descriptor " + fd + ", export id " + Long.toHexString(id) + ")");
        }
        return new IpcHandle(pid, fd, id);
    }

    void write(MemorySegment bytes) {
        bytes.asSlice(0, BYTES).fill((byte) 0);
        bytes.set(JAVA_LONG_UNALIGNED, 0, MAGIC);
        bytes.set(JAVA_INT_UNALIGNED, 8, pid);
        bytes.set(JAVA_INT_UNALIGNED, 12, tableFd);
        bytes.set(JAVA_LONG_UNALIGNED, 16, exportId);
    }
}
