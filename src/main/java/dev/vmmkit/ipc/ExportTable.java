package dev.vmmkit.ipc;

import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.LibC;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The table of one export, in a memfd that the exporter and every importer map shared:
 * <pre>
 *   0 int   magic "VMKX"          4 int  version 1
 *   8 long  export id            16 int  exporter pid     20 int state (1 open, 2 withdrawn)
 *  24 long  offset of the allocation in its first page    32 long size of the allocation
 *  40 int   device               44 int  page count
 *  48 int[16] importer slots: the pid of each importing process, 0 when free
 * 128 per page: int descriptor in the exporter, int 0, long bytes
 * </pre>
 * An importer takes a slot (compare-and-set 0 to its pid) before it maps the pages and clears it
 * when it closes. The exporter withdraws the export (state 2) when the program frees the memory,
 * then reads the slots: both sides use volatile accesses, so either the exporter sees the slot or
 * the importer sees the withdrawal and backs out. A slot whose process has died counts as free.
 */
final class ExportTable implements AutoCloseable {
    static final String NAME = "vmmkit-export";
    static final int MAX_IMPORTERS = 16;
    private static final int MAGIC = 0x584B4D56;
    private static final int VERSION = 1;
    private static final int OPEN = 1;
    private static final int WITHDRAWN = 2;
    private static final long HEADER = 128;
    private static final long PAGE_ENTRY = 16;
    private static final long SLOTS = 48;
    private static final VarHandle INT = JAVA_INT.varHandle();

    private final int fd;
    private final MemorySegment table;

    private ExportTable(int fd, MemorySegment table) {
        this.fd = fd;
        this.table = table;
    }

    /** A new open table for an export of {@code pageFds} (the exporter's own descriptors). */
    static ExportTable create(long exportId, int pid, int device, long offset, long size, int[] pageFds,
                              long[] pageSizes) throws IpcException {
        long bytes = (HEADER + PAGE_ENTRY * pageFds.length + 4095) & -4096L;
        int fd = LibC.memfdCreate(NAME);
        MemorySegment table = fd >= 0 && LibC.ftruncate(fd, bytes) == 0 ? mapShared(fd, bytes) : null;
        if (table == null) {
            int errno = LibC.errno();
            Descriptors.close(fd);
            throw new IpcException(IpcException.MAP_FAILED, "cannot make an export table (errno " + errno + ")");
        }
        table.set(JAVA_LONG, 8, exportId);
        table.set(JAVA_INT, 16, pid);
        table.set(JAVA_LONG, 24, offset);
        table.set(JAVA_LONG, 32, size);
        table.set(JAVA_INT, 40, device);
        table.set(JAVA_INT, 44, pageFds.length);
        for (int i = 0; i < pageFds.length; i++) {
            table.set(JAVA_INT, HEADER + PAGE_ENTRY * i, pageFds[i]);
            table.set(JAVA_LONG, HEADER + PAGE_ENTRY * i + 8, pageSizes[i]);
        }
        table.set(JAVA_INT, 4, VERSION);
        INT.setVolatile(table, 20L, OPEN);
        INT.setVolatile(table, 0L, MAGIC);
        return new ExportTable(fd, table);
    }

    /**
     * Maps a table this process got from an exporter (it takes over {@code fd}) and checks that it
     * is the export {@code handle} names, still open.
     *
     * @throws IpcException INVALID_RESOURCE_HANDLE when it is not, or no longer
     */
    static ExportTable open(int fd, IpcHandle handle) throws IpcException {
        String target;
        try {
            target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
        } catch (IOException | UnsupportedOperationException e) {
            target = "";
        }
        long bytes = LibC.fileSize(fd);
        MemorySegment table = target.startsWith("/memfd:" + NAME) && bytes >= HEADER ? mapShared(fd, bytes) : null;
        if (table == null) {
            Descriptors.close(fd);
            throw stale(handle, "descriptor " + handle.tableFd() + " of process " + handle.pid() + " is not a vmmkit export");
        }
        ExportTable opened = new ExportTable(fd, table);
        int pages = table.get(JAVA_INT, 44);
        if ((int) INT.getVolatile(table, 0L) != MAGIC || table.get(JAVA_INT, 4) != VERSION
                || table.get(JAVA_LONG, 8) != handle.exportId() || table.get(JAVA_INT, 16) != handle.pid()
                || pages <= 0 || HEADER + PAGE_ENTRY * pages > bytes) {
            opened.close();
            throw stale(handle, "the export it named is gone (its descriptor now holds another export)");
        }
        if (!opened.isOpen()) {
            opened.close();
            throw stale(handle, "the exporter freed that memory");
        }
        return opened;
    }

    static IpcException stale(IpcHandle handle, String why) {
        return new IpcException(IpcException.INVALID_RESOURCE_HANDLE,
                "stale vmmkit IPC handle (export " + Long.toHexString(handle.exportId()) + "): " + why);
    }

    int fd() {
        return fd;
    }

    boolean isOpen() {
        return (int) INT.getVolatile(table, 20L) == OPEN;
    }

    long offset() {
        return table.get(JAVA_LONG, 24);
    }

    long size() {
        return table.get(JAVA_LONG, 32);
    }

    int pageCount() {
        return table.get(JAVA_INT, 44);
    }

    int pageFd(int i) {
        return table.get(JAVA_INT, HEADER + PAGE_ENTRY * i);
    }

    long pageSize(int i) {
        return table.get(JAVA_LONG, HEADER + PAGE_ENTRY * i + 8);
    }

    /** Takes a free importer slot for {@code pid}; returns it, or -1 when all are taken. */
    int claimSlot(int pid) {
        for (int i = 0; i < MAX_IMPORTERS; i++) {
            long at = SLOTS + 4L * i;
            int holder = (int) INT.getVolatile(table, at);
            if ((holder == 0 || !isAlive(holder)) && INT.compareAndSet(table, at, holder, pid)) return i;
        }
        return -1;
    }

    void releaseSlot(int slot, int pid) {
        boolean ignored = INT.compareAndSet(table, SLOTS + 4L * slot, pid, 0);
    }

    /** Marks the export withdrawn: no importer may open it from now on. */
    void withdraw() {
        INT.setVolatile(table, 20L, WITHDRAWN);
    }

    /** True while a slot names a living process. */
    boolean hasImporters() {
        for (int i = 0; i < MAX_IMPORTERS; i++) {
            int holder = (int) INT.getVolatile(table, SLOTS + 4L * i);
            if (holder != 0 && isAlive(holder)) return true;
        }
        return false;
    }

    /** Unmaps the table and closes its descriptor. */
    @Override
    public void close() {
        LibC.munmap(table.address(), table.byteSize());
        Descriptors.close(fd);
    }

    /** {@code size} bytes of {@code fd} mapped shared and writable; null on failure. */
    private static MemorySegment mapShared(int fd, long size) {
        long address = LibC.mmap(0L, size, LibC.PROT_READ | LibC.PROT_WRITE, LibC.MAP_SHARED, fd, 0L);
        return address == LibC.MAP_FAILED ? null : MemorySegment.ofAddress(address).reinterpret(size);
    }

    /** True while process {@code pid} exists (it may belong to another user). */
    private static boolean isAlive(int pid) {
        return LibC.kill(pid, 0) == 0 || LibC.errno() == LibC.EPERM;
    }
}
