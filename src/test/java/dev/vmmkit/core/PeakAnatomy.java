package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TraceReader;
import org.agrona.collections.Long2LongHashMap;

import java.nio.file.Path;
import java.util.List;
import java.util.TreeMap;

/**
 * Where physical memory stands at the moment of its peak, for a trace replayed on the host driver
 * with the settings of the environment ({@code VMM_*}): per region, live bytes, free bytes in pages
 * and in handles that also hold live bytes, and whole free pages and handles (the only free memory
 * that can move). The trace is replayed twice: once to find the operation at the peak, once to stop
 * there, or at operation {@code --at OP} instead (to watch a layout form on the way to the peak).
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.core.PeakAnatomy TRACE [--blocks] [--at OP]};
 * {@code --blocks} lists every block too.
 */
public final class PeakAnatomy {
    private static final double MIB = 1 << 20;

    public static void main(String[] args) throws Exception {
        AllocationTrace trace = TraceReader.read(Path.of(args[0]));
        List<String> options = List.of(args);
        boolean listBlocks = options.contains("--blocks");
        int atIndex = options.indexOf("--at");
        int stopAt = atIndex > 0 && atIndex + 1 < args.length ? Integer.parseInt(args[atIndex + 1]) : -1;
        VmmConfig config = VmmConfig.from(System.getenv());
        int peakOp = -1;
        long peak = 0;
        try (HostDriver driver = HostDriver.open()) {
            VmmManager m = new VmmManager(driver, config);
            Long2LongHashMap addresses = new Long2LongHashMap(-1);
            for (int i = 0; i < trace.ops(); i++) {
                step(m, trace, i, addresses);
                long p = m.stats().peakReservedBytes();
                if (p > peak) {
                    peak = p;
                    peakOp = i;
                }
            }
            m.close();
        }
        System.out.printf("peak physical %.1f MiB at op %d of %d; peak live %.1f MiB%n",
                peak / MIB, peakOp, trace.ops(), trace.peakLiveBytes() / MIB);
        int stopOp = stopAt >= 0 ? Math.min(stopAt, trace.ops() - 1) : peakOp;
        try (HostDriver driver = HostDriver.open()) {
            VmmManager m = new VmmManager(driver, config);
            Long2LongHashMap addresses = new Long2LongHashMap(-1);
            Long2LongHashMap allocatedAt = new Long2LongHashMap(-1); // address -> op that allocated it
            for (int i = 0; i <= stopOp; i++) {
                step(m, trace, i, addresses);
                if (trace.kind(i) == AllocationTrace.ALLOC) allocatedAt.put(addresses.get(trace.key(i)), i);
            }
            Long2LongHashMap freedAt = freeOps(trace, stopOp, addresses, allocatedAt);
            RegionHeap[] heaps = m.regionsForTest();
            List<BlockMap.Region> regions = m.blockMap().regions();
            for (int k = 0; k < heaps.length; k++) {
                if (listBlocks) {
                    for (BlockMap.Block b : regions.get(k).blocks()) {
                        long at = allocatedAt.get(b.address());
                        String when = b.kind() == BlockMap.Kind.LIVE && at >= 0
                                ? String.format(" allocated at op %d, freed at op %d", at, freedAt.get(b.address())) : "";
                        System.out.printf("  %s %x %.3f MiB%s%n", b.kind(), b.address(), b.size() / MIB, when);
                    }
                }
                describe(heaps[k], regions.get(k));
            }
            AllocatorStats s = m.stats();
            System.out.printf("live %.1f MiB, physical %.1f MiB, cached (free mapped + pool) %.1f MiB%n",
                    s.liveBytes() / MIB, s.reservedBytes() / MIB, s.cachedBytes() / MIB);
            m.close();
        }
    }

    /** Live and free bytes of one region by the page and by the handle they lie in. */
    private static void describe(RegionHeap heap, BlockMap.Region region) {
        TreeMap<Long, long[]> pages = new TreeMap<>(); // page -> {live bytes, free bytes}
        TreeMap<Long, long[]> handles = new TreeMap<>(); // first address -> {bytes, live bytes}
        long live = 0;
        int liveBlocks = 0;
        int freeBlocks = 0;
        for (BlockMap.Block b : region.blocks()) {
            if (b.kind() == BlockMap.Kind.UNMAPPED) continue;
            boolean isLive = b.kind() == BlockMap.Kind.LIVE;
            if (isLive) {
                live += b.size();
                liveBlocks++;
            } else {
                freeBlocks++;
            }
            long end = b.address() + b.size();
            for (long a = b.address(); a < end; ) {
                long page = a & -heap.pageBytes;
                long handleStart = heap.pages.handleStart(a);
                long handleEnd = heap.pages.handleEnd(a);
                long to = Math.min(Math.min(page + heap.pageBytes, handleEnd), end);
                pages.computeIfAbsent(page, x -> new long[2])[isLive ? 0 : 1] += to - a;
                long[] h = handles.computeIfAbsent(handleStart, x -> new long[]{handleEnd - handleStart, 0});
                if (isLive) h[1] += to - a;
                a = to;
            }
        }
        long freeInLivePages = 0;
        long wholeFreePages = 0;
        for (long[] p : pages.values()) {
            if (p[0] == 0) wholeFreePages += p[1];
            else freeInLivePages += p[1];
        }
        long freeInLiveHandles = 0;
        long wholeFreeHandles = 0;
        TreeMap<Long, Integer> handleSizes = new TreeMap<>();
        for (long[] h : handles.values()) {
            handleSizes.merge(h[0] >> 20, 1, Integer::sum);
            if (h[1] == 0) wholeFreeHandles += h[0];
            else freeInLiveHandles += h[0] - h[1];
        }
        System.out.printf("%s: mapped %.1f MiB = live %.1f MiB (%d blocks) + free in pages with live %.1f MiB"
                        + " + whole free pages %.1f MiB (%d free blocks)%n",
                region.name(), pages.size() * heap.pageBytes / MIB, live / MIB, liveBlocks, freeInLivePages / MIB,
                wholeFreePages / MIB, freeBlocks);
        System.out.printf("  %d handles (MiB -> count %s): whole free handles %.1f MiB, free in handles with live %.1f MiB%n",
                handles.size(), handleSizes, wholeFreeHandles / MIB, freeInLiveHandles / MIB);
    }

    /** For each allocation live after {@code stopOp}: the op that frees it (-1: never), by address. */
    private static Long2LongHashMap freeOps(AllocationTrace t, int stopOp, Long2LongHashMap addresses,
                                            Long2LongHashMap allocatedAt) {
        Long2LongHashMap freed = new Long2LongHashMap(-1);
        for (int i = stopOp + 1; i < t.ops(); i++) {
            if (t.kind(i) == AllocationTrace.ALLOC) continue;
            long address = addresses.get(t.key(i));
            if (address != -1 && allocatedAt.get(address) != -1 && freed.get(address) == -1) freed.put(address, i);
        }
        return freed;
    }

    private static void step(VmmManager m, AllocationTrace t, int i, Long2LongHashMap addresses) {
        if (t.kind(i) == AllocationTrace.ALLOC) addresses.put(t.key(i), m.allocate(t.size(i), t.stream(i)));
        else m.deallocate(addresses.remove(t.key(i)), t.stream(i));
    }
}
