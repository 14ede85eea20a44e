package dev.vmmkit.ipc;

import dev.vmmkit.core.SharedPages;
import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * The importing side of IPC: {@code cudaIpcOpenMemHandle} and {@code cudaIpcCloseMemHandle} of
 * vmmkit handles.
 *
 * <p>Opening takes the exporter's table with pidfd_open and pidfd_getfd, takes an importer slot in
 * it, takes each page's descriptor the same way, and maps the pages through the current device's
 * manager ({@link SharedPages#mapImported}); the pointer returned is the allocation's, inside them.
 * Opening the same export again in this process returns the same pointer and counts a reference,
 * as the CUDA runtime does; the last close unmaps the pages and frees the slot.
 *
 * <p>Errors: a malformed vmmkit handle is cudaErrorInvalidValue; an export that is gone (its
 * process ended, its memory was freed, its descriptor now holds something else) is
 * cudaErrorInvalidResourceHandle; an export that exists but cannot be mapped here (the kernel
 * refused pidfd_getfd, no importer slot left, the driver failed) is cudaErrorMapBufferObjectFailed.
 */
public final class IpcImports {
    private final int pid = (int) ProcessHandle.current().pid();
    private boolean limitRaised;
    private final Map<Long, Opened> byPointer = new HashMap<>();
    private final Map<String, Opened> byExport = new HashMap<>();

    private static final class Opened {
        final String key;
        final long mappedAt;
        final long pointer;
        final ExportTable table;
        final int slot;
        final SharedPages pages;
        int references = 1;

        Opened(String key, long mappedAt, long pointer, ExportTable table, int slot, SharedPages pages) {
            this.key = key;
            this.mappedAt = mappedAt;
            this.pointer = pointer;
            this.table = table;
            this.slot = slot;
            this.pages = pages;
        }
    }

    /**
     * Null when this machine lets a process take another's descriptors (pidfd_open and pidfd_getfd,
     * tried on this process); else why not (an old kernel, or a seccomp filter refusing them).
     */
    public static String whyDescriptorsCannotBeTaken() {
        int self = LibC.pidfdOpen((int) ProcessHandle.current().pid());
        if (self < 0) return "pidfd_open failed, errno " + LibC.errno() + " (Linux 5.6 or later is needed)";
        try {
            int copy = LibC.pidfdGetfd(self, self);
            if (copy < 0) return "pidfd_getfd failed, errno " + LibC.errno() + " (refused by the kernel or a seccomp filter)";
            Descriptors.close(copy);
            return null;
        } finally {
            Descriptors.close(self);
        }
    }

    /** True when {@code handle} (64 bytes) is a vmmkit handle; others go to the CUDA runtime. */
    public static boolean isVmmkitHandle(MemorySegment handle) {
        return IpcHandle.isVmmkit(handle);
    }

    /**
     * Maps the export that {@code handle} names through {@code pages} (the current device's manager)
     * and returns the pointer to the allocation.
     */
    public synchronized long open(MemorySegment handle, SharedPages pages) throws IpcException {
        IpcHandle h = IpcHandle.read(handle);
        String key = h.pid() + "/" + Long.toHexString(h.exportId());
        Opened already = byExport.get(key);
        if (already != null) {
            already.references++;
            return already.pointer;
        }
        if (!limitRaised) {
            LibC.raiseDescriptorLimit(); // the pages' descriptors are held while they are mapped
            limitRaised = true;
        }
        int process = LibC.pidfdOpen(h.pid());
        if (process < 0) {
            int errno = LibC.errno();
            if (errno == LibC.ESRCH) throw ExportTable.stale(h, "process " + h.pid() + " has ended");
            throw new IpcException(IpcException.MAP_FAILED, "pidfd_open(" + h.pid() + ") failed, errno " + errno
                    + " (Linux 5.6 or later is needed)");
        }
        try {
            ExportTable table = ExportTable.open(take(process, h.tableFd(), h), h);
            int slot = table.claimSlot(pid);
            if (slot < 0) {
                table.close();
                throw new IpcException(IpcException.MAP_FAILED, "the export is open in "
                        + ExportTable.MAX_IMPORTERS + " processes already");
            }
            try {
                if (!table.isOpen()) throw ExportTable.stale(h, "the exporter freed that memory");
                long mappedAt = map(process, table, h, pages);
                Opened opened = new Opened(key, mappedAt, mappedAt + table.offset(), table, slot, pages);
                byExport.put(key, opened);
                byPointer.put(opened.pointer, opened);
                return opened.pointer;
            } catch (IpcException | RuntimeException e) {
                table.releaseSlot(slot, pid);
                table.close();
                throw e;
            }
        } finally {
            Descriptors.close(process);
        }
    }

    /** Drops one reference to a pointer {@link #open} returned; false when it is not one (pass it on). */
    public synchronized boolean close(long pointer) throws IpcException {
        Opened opened = byPointer.get(pointer);
        if (opened == null) return false;
        if (--opened.references > 0) return true;
        byPointer.remove(pointer);
        byExport.remove(opened.key);
        try {
            opened.pages.unmapImported(opened.mappedAt);
        } catch (DriverException e) {
            throw new IpcException(IpcException.INVALID_VALUE, "unmapping the imported memory failed: " + e.getMessage());
        } finally {
            opened.table.releaseSlot(opened.slot, pid);
            opened.table.close();
        }
        return true;
    }

    /** Imported ranges open now. */
    public synchronized int openCount() {
        return byPointer.size();
    }

    private long map(int process, ExportTable table, IpcHandle h, SharedPages pages) throws IpcException {
        int count = table.pageCount();
        int[] fds = new int[count];
        long[] sizes = new long[count];
        java.util.Arrays.fill(fds, -1);
        try {
            for (int i = 0; i < count; i++) {
                fds[i] = take(process, table.pageFd(i), h);
                sizes[i] = table.pageSize(i);
            }
            return pages.mapImported(fds, sizes);
        } catch (DriverException e) {
            throw new IpcException(IpcException.MAP_FAILED, "mapping the exported pages failed: " + e.getMessage());
        } finally {
            for (int fd : fds) Descriptors.close(fd);
        }
    }

    /** Descriptor {@code fd} of the exporter, copied into this process. */
    private static int take(int process, int fd, IpcHandle h) throws IpcException {
        int mine = LibC.pidfdGetfd(process, fd);
        if (mine >= 0) return mine;
        int errno = LibC.errno();
        if (errno == LibC.EBADF) throw ExportTable.stale(h, "descriptor " + fd + " is closed in process " + h.pid());
        throw new IpcException(IpcException.MAP_FAILED, "pidfd_getfd of descriptor " + fd + " in process " + h.pid()
                + " failed, errno " + errno + (errno == LibC.EPERM ? " (not permitted: same user and ptrace rights needed)" : ""));
    }
}
