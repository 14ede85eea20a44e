package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import org.agrona.collections.LongArrayList;

import java.util.Map;
import java.util.TreeMap;

/**
 * Physical handles that are mapped nowhere, cached for reuse by size (seed: VmmPhysicalPool).
 * Only the slow path touches it, so a plain TreeMap under the pool's own lock is enough.
 */
final class PhysicalPool {
    static final long NO_HANDLE = 0;

    private final TreeMap<Long, LongArrayList> handlesBySize = new TreeMap<>();
    private final long maxCachedBytes;
    private long cachedBytes;

    PhysicalPool(long maxCachedBytes) {
        this.maxCachedBytes = maxCachedBytes;
    }

    /** Caches a handle; returns false (and keeps nothing) when that would pass the cache limit. */
    synchronized boolean push(long bytes, long handle) {
        if (cachedBytes + bytes > maxCachedBytes) return false;
        handlesBySize.computeIfAbsent(bytes, k -> new LongArrayList()).addLong(handle);
        cachedBytes += bytes;
        return true;
    }

    /** Caches a handle even past the cache limit: one the driver refused to release, kept for a later drain. */
    synchronized void keep(long bytes, long handle) {
        handlesBySize.computeIfAbsent(bytes, k -> new LongArrayList()).addLong(handle);
        cachedBytes += bytes;
    }

    /** A handle of exactly {@code bytes}, or {@link #NO_HANDLE}. */
    synchronized long popExact(long bytes) {
        LongArrayList list = handlesBySize.get(bytes);
        if (list == null || list.isEmpty()) return NO_HANDLE;
        return take(bytes, list);
    }

    /**
     * The largest cached handle of at most {@code maxBytes}, or {@link #NO_HANDLE}; its size goes
     * to {@code bytesOut[0]}.
     */
    synchronized long popAtMost(long maxBytes, long[] bytesOut) {
        for (Map.Entry<Long, LongArrayList> e = handlesBySize.floorEntry(maxBytes); e != null;
             e = handlesBySize.lowerEntry(e.getKey())) {
            if (e.getValue().isEmpty()) continue;
            bytesOut[0] = e.getKey();
            return take(e.getKey(), e.getValue());
        }
        return NO_HANDLE;
    }

    synchronized long cachedBytes() {
        return cachedBytes;
    }

    /**
     * Releases every cached handle through {@code driver}; returns the bytes released. Handles the
     * driver refuses to release stay cached (and counted), so nothing is lost; the first refusal is
     * thrown after the others were tried.
     */
    synchronized long drain(VmmDriver driver, MemoryAccounting accounting) {
        long released = 0;
        DriverException first = null;
        for (Map.Entry<Long, LongArrayList> e : handlesBySize.entrySet()) {
            LongArrayList list = e.getValue();
            int kept = 0;
            for (int i = 0; i < list.size(); i++) {
                long handle = list.getLong(i);
                try {
                    driver.release(handle);
                    released += e.getKey();
                    accounting.physicalReleased(e.getKey());
                } catch (DriverException ex) {
                    if (first == null) first = ex;
                    list.setLong(kept++, handle);
                }
            }
            while (list.size() > kept) list.removeAt(list.size() - 1);
        }
        cachedBytes -= released;
        if (first != null) throw first;
        return released;
    }

    private long take(long bytes, LongArrayList list) {
        long h = list.removeAt(list.size() - 1);
        cachedBytes -= bytes;
        return h;
    }
}
