package dev.vmmkit.ipc;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.SharedPages;
import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The exporting side of IPC: {@code cudaIpcGetMemHandle} of a vmmkit allocation, and what a free of
 * exported memory does.
 *
 * <p>An export keeps one descriptor per page of the allocation open in this process, lists them in
 * an {@link ExportTable} and puts the table's descriptor in the handle. Asking twice for a handle of
 * the same allocation gives the same handle.
 *
 * <p>Freeing exported memory: the export is withdrawn at once (no new importer can open it). If
 * no other process has it open, the free proceeds as usual. Otherwise the free is deferred: the
 * allocation stays live inside vmmkit, so its pages are not handed to any other allocation, until
 * every importer has closed it (or exited); vmmkit looks for that on later frees and handle requests, at
 * most once a millisecond, and then completes the free on the stream it was asked for.
 */
public final class IpcExports {
    private static final long POLL_INTERVAL_NANOS = 1_000_000;
    /** {@link #deferFree}: not exported (or no importer has it): free it now. */
    public static final int FREE_NOW = 0;
    /** {@link #deferFree}: another process has it open; the free completes when it closes. */
    public static final int DEFERRED = 1;
    /** {@link #deferFree}: its free is already waiting for importers: a double free. */
    public static final int ALREADY_FREED = 2;

    private final int pid = (int) ProcessHandle.current().pid();
    private final Map<Long, Export> byAddress = new HashMap<>();
    private final List<DeferredFree> deferred = new ArrayList<>();
    /**
     * Sorted addresses that are exported or wait for importers, copied on every change (rare), so a
     * free asks {@link #mayHold} without a lock and without allocating.
     */
    private volatile long[] held = new long[0];
    private volatile int active;
    private volatile int deferredCount;
    private volatile long lastPoll;
    private boolean takersAllowed;

    private record Export(long address, ExportTable table, int[] pageFds, IpcHandle handle) {
        void dispose() {
            table.close();
            for (int fd : pageFds) Descriptors.close(fd);
        }
    }

    private record DeferredFree(Export export, long stream, DeviceMemoryResource owner) {
    }

    /** True when some export or deferred free exists. */
    public boolean isActive() {
        return active != 0;
    }

    /** True when {@code address} is exported or its free waits for importers: its free must ask {@link #deferFree}. */
    public boolean mayHold(long address) {
        long[] addresses = held;
        return addresses.length != 0 && Arrays.binarySearch(addresses, address) >= 0;
    }

    /** True while some free waits for importers (then {@link #completeClosedFrees} has work). */
    public boolean hasDeferredFrees() {
        return deferredCount != 0;
    }

    /** Frees deferred for importers, not yet completed. */
    public synchronized int deferredFrees() {
        return deferred.size();
    }

    /**
     * Writes into {@code handleOut} (64 bytes) the handle of the live allocation that starts at
     * {@code address}, exporting its pages through {@code pages} the first time.
     *
     * @throws IpcException INVALID_VALUE when no live allocation starts there, MAP_FAILED when
     *         the driver cannot export (CUDA: the device has no POSIX descriptor support)
     */
    public synchronized void handleFor(long address, SharedPages pages, MemorySegment handleOut) throws IpcException {
        Export export = byAddress.get(address);
        if (export == null) {
            export = export(address, pages);
            byAddress.put(address, export);
            active++;
            refreshHeld();
        }
        export.handle().write(handleOut);
    }

    /** Called under this object's lock after every change of the exports or the deferred frees. */
    private void refreshHeld() {
        long[] addresses = new long[byAddress.size() + deferred.size()];
        int n = 0;
        for (long address : byAddress.keySet()) addresses[n++] = address;
        for (DeferredFree free : deferred) addresses[n++] = free.export().address();
        Arrays.sort(addresses);
        held = addresses;
    }

    private Export export(long address, SharedPages pages) throws IpcException {
        if (!pages.canExport()) {
            throw new IpcException(IpcException.MAP_FAILED, "the driver cannot export memory (no POSIX descriptor support)");
        }
        SharedPages.ExportedPages exported;
        try {
            exported = pages.export(address);
        } catch (IllegalArgumentException e) { // no live allocation there, or a tag's
            throw new IpcException(IpcException.INVALID_VALUE, e.getMessage());
        } catch (DriverException e) {
            throw new IpcException(IpcException.MAP_FAILED, "export failed: " + e.getMessage());
        }
        if (!takersAllowed) {
            LibC.allowDescriptorTakers();
            LibC.raiseDescriptorLimit();
            takersAllowed = true;
        }
        long id = ThreadLocalRandom.current().nextLong() | 1;
        try {
            ExportTable table = ExportTable.create(id, pid, exported.device(), exported.offset(), exported.size(),
                    exported.fds(), exported.pageSizes());
            return new Export(address, table, exported.fds(), new IpcHandle(pid, table.fd(), id));
        } catch (IpcException e) {
            for (int fd : exported.fds()) Descriptors.close(fd);
            throw e;
        }
    }

    /**
     * Called before {@code owner} frees {@code address}: withdraws its export if it has one.
     * Returns {@link #FREE_NOW}, {@link #DEFERRED} (this class completes the free later) or
     * {@link #ALREADY_FREED}.
     */
    public synchronized int deferFree(long address, long stream, DeviceMemoryResource owner) {
        Export export = byAddress.remove(address);
        if (export == null) {
            for (DeferredFree free : deferred) {
                if (free.export().address() == address && free.owner() == owner) return ALREADY_FREED;
            }
            return FREE_NOW;
        }
        export.table().withdraw();
        if (export.table().hasImporters()) {
            deferred.add(new DeferredFree(export, stream, owner));
            deferredCount = deferred.size();
            return DEFERRED;
        }
        export.dispose();
        active--;
        refreshHeld();
        return FREE_NOW;
    }

    /**
     * Completes the deferred frees whose importers have all closed; at most once a millisecond
     * unless {@code now} is true. Returns how many it completed.
     */
    public int completeClosedFrees(boolean now) {
        if (deferredCount == 0) return 0;
        long time = System.nanoTime();
        if (!now && time - lastPoll < POLL_INTERVAL_NANOS) return 0;
        synchronized (this) {
            if (!now && time - lastPoll < POLL_INTERVAL_NANOS) return 0;
            lastPoll = time;
            int completed = 0;
            for (Iterator<DeferredFree> it = deferred.iterator(); it.hasNext(); ) {
                DeferredFree free = it.next();
                if (free.export().table().hasImporters()) continue;
                it.remove();
                active--;
                free.export().dispose();
                free.owner().deallocate(free.export().address(), free.stream());
                completed++;
            }
            deferredCount = deferred.size();
            if (completed > 0) refreshHeld();
            return completed;
        }
    }
}
