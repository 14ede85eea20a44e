package dev.vmmkit.core;

import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import org.agrona.collections.Long2ObjectHashMap;

import java.util.function.LongFunction;

/**
 * One manager's side of sharing memory between processes. Export: the physical pages under a live
 * allocation become POSIX descriptors another process can import. Import: descriptors from another
 * process are mapped into address space reserved for them, with access for this manager's device
 * and its peers, until {@link #unmapImported} takes them away.
 *
 * <p>Imported ranges are apart from the regions: they are never allocated from, and the pages
 * belong to the exporting process, which keeps them out of reuse while they are open elsewhere.
 */
public final class SharedPages {
    private final VmmDriver driver;
    private final PeerAccess access;
    private final LongFunction<RegionHeap> regionOf;
    private final Long2ObjectHashMap<ImportedRange> imports = new Long2ObjectHashMap<>();

    SharedPages(VmmDriver driver, PeerAccess access, LongFunction<RegionHeap> regionOf) {
        this.driver = driver;
        this.access = access;
        this.regionOf = regionOf;
    }

    /** What an export hands out: one descriptor per page (the caller closes them) and where the allocation lies. */
    public record ExportedPages(int device, long offset, long size, int[] fds, long[] pageSizes) {
    }

    /** True when the driver can export at all (CUDA: the device supports POSIX descriptors). */
    public boolean canExport() {
        return driver.canExport();
    }

    /**
     * Exports the pages under the live allocation starting at {@code address}. The allocation's
     * bytes begin {@code offset} bytes into the first page.
     *
     * @throws InvalidAddressException when no live allocation starts at {@code address}
     * @throws IllegalArgumentException when the allocation belongs to a memory tag, whose handles
     *         are not exportable ({@link HandleSupply#exportable()})
     * @throws DriverException when an export fails; descriptors made so far are closed
     */
    public ExportedPages export(long address) {
        RegionHeap region = regionOf.apply(address);
        if (region != null && !region.handles.exportable()) {
            throw new IllegalArgumentException(String.format("0x%x: memory of a memory tag is not shared with other"
                    + " processes: a pause gives its pages back to the device", address));
        }
        ExportedPages pages = region == null ? null : region.views.withPagesOf(address, (first, handles, handleSizes, size) -> {
            int[] fds = new int[handles.length];
            long[] sizes = new long[handles.length];
            int made = 0;
            try {
                for (; made < handles.length; made++) {
                    fds[made] = driver.exportHandle(handles[made]);
                    sizes[made] = handleSizes[made];
                }
            } catch (RuntimeException e) {
                for (int i = 0; i < made; i++) Descriptors.close(fds[i]);
                throw e;
            }
            return new ExportedPages(driver.device(), address - first, size, fds, sizes);
        });
        if (pages == null) throw new InvalidAddressException(address, "not the start of a live allocation");
        return pages;
    }

    /**
     * Maps the memory behind {@code fds} (page sizes in {@code pageSizes}), in order, into newly
     * reserved address space; returns its start. The descriptors stay the caller's.
     *
     * @throws DriverException when a step fails; everything done so far is undone
     */
    public long mapImported(int[] fds, long[] pageSizes) {
        long total = 0;
        for (long size : pageSizes) total += size;
        long va = driver.reserve(total, 0);
        long[] handles = new long[fds.length];
        int imported = 0, mapped = 0;
        try {
            long at = va;
            for (; imported < fds.length; imported++) handles[imported] = driver.importHandle(fds[imported], pageSizes[imported]);
            for (; mapped < fds.length; at += pageSizes[mapped], mapped++) driver.map(at, pageSizes[mapped], handles[mapped]);
            access.openNewRun(va, total);
        } catch (RuntimeException failure) {
            undo(failure, va, total, handles, imported, mapped, pageSizes);
            throw failure;
        }
        synchronized (imports) {
            imports.put(va, new ImportedRange(total, handles, pageSizes));
        }
        return va;
    }

    /** Unmaps a range {@link #mapImported} returned; false when {@code va} is not one. */
    public boolean unmapImported(long va) {
        ImportedRange range;
        synchronized (imports) {
            range = imports.remove(va);
        }
        if (range == null) return false;
        undo(null, va, range.bytes, range.handles, range.handles.length, range.handles.length, range.pageSizes);
        return true;
    }

    /** Unmaps every imported range (the manager is closing). */
    void close() {
        long[] starts;
        synchronized (imports) {
            starts = imports.keySet().stream().mapToLong(Long::longValue).toArray();
        }
        for (long va : starts) {
            try {
                unmapImported(va);
            } catch (DriverException ignored) {
                // closing anyway
            }
        }
    }

    /** Unmaps the first {@code mapped} pages, releases the first {@code imported} handles, frees the space. */
    private void undo(RuntimeException failure, long va, long total, long[] handles, int imported, int mapped, long[] sizes) {
        DriverException first = null;
        long at = va;
        for (int i = 0; i < mapped; at += sizes[i], i++) {
            try {
                driver.unmap(at, sizes[i]);
            } catch (DriverException e) {
                first = keep(first, failure, e);
            }
        }
        for (int i = 0; i < imported; i++) {
            try {
                driver.release(handles[i]);
            } catch (DriverException e) {
                first = keep(first, failure, e);
            }
        }
        try {
            driver.addressFree(va, total);
        } catch (DriverException e) {
            first = keep(first, failure, e);
        }
        if (failure == null && first != null) throw first;
    }

    private static DriverException keep(DriverException first, RuntimeException failure, DriverException e) {
        if (failure != null) {
            failure.addSuppressed(e);
            return first;
        }
        return first == null ? e : first;
    }

    private record ImportedRange(long bytes, long[] handles, long[] pageSizes) {
    }
}
