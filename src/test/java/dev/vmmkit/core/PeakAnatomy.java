package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TraceReader;
import org.agrona.collections.Long2LongHashMap;

import java.nio.file.Path;
import java.util.Map;

/**
 * Where the physical memory stands at the moment of its peak, for a trace replayed on the host
 * driver with the settings of the environment: per region, live bytes, free bytes in pages that
 * also hold live bytes, free bytes in whole free pages, and the pool.
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.core.PeakAnatomy TRACE}.
 */
public final class PeakAnatomy {
    public static void main(String[] args) throws Exception {
        AllocationTrace trace = TraceReader.read(Path.of(args[0]));
        VmmConfig config = VmmConfig.from(System.getenv());
        int peakOp = -1;
        long peak = 0;
        try (HostDriver driver = HostDriver.open()) {
            VmmManager m = new VmmManager(driver, config);
            Long2LongHashMap addr = new Long2LongHashMap(-1);
            for (int i = 0; i < trace.ops(); i++) {
                step(m, trace, i, addr);
                long p = m.stats().peakReservedBytes();
                if (p > peak) { peak = p; peakOp = i; }
            }
            m.close();
        }
        System.out.printf("peak physical %.1f MiB at op %d of %d; peak live %.1f MiB%n", peak / 1048576.0, peakOp, trace.ops(), trace.peakLiveBytes() / 1048576.0);
        try (HostDriver driver = HostDriver.open()) {
            VmmManager m = new VmmManager(driver, config);
            Long2LongHashMap addr = new Long2LongHashMap(-1);
            for (int i = 0; i <= peakOp; i++) step(m, trace, i, addr);
            long page = 2L << 20;
            for (BlockMap.Region r : m.blockMap().regions()) {
                long live = 0, freeShared = 0, freeWholePages = 0, liveN = 0, freeN = 0;
                Map<Long, long[]> pages = new java.util.HashMap<>(); // page -> {live, free}
                if (Boolean.getBoolean("verbose")) for (BlockMap.Block b : r.blocks()) {
                    System.out.printf("  %s %x %.3f MiB%n", b.kind(), b.address(), b.size() / 1048576.0);
                }
                for (BlockMap.Block b : r.blocks()) {
                    if (b.kind() == BlockMap.Kind.UNMAPPED) continue;
                    boolean isLive = b.kind() == BlockMap.Kind.LIVE;
                    if (isLive) { live += b.size(); liveN++; } else freeN++;
                    for (long a = b.address(); a < b.address() + b.size(); ) {
                        long p = a & -page;
                        long e = Math.min(p + page, b.address() + b.size());
                        pages.computeIfAbsent(p, k -> new long[2])[isLive ? 0 : 1] += e - a;
                        a = e;
                    }
                }
                for (long[] v : pages.values()) {
                    if (v[0] == 0) freeWholePages += v[1]; else freeShared += v[1];
                }
                System.out.printf("%s: mapped %.1f MiB = live %.1f MiB (%d blocks) + free in pages with live %.1f MiB + free whole pages %.1f MiB (%d free blocks)%n",
                        r.name(), pages.size() * page / 1048576.0, live / 1048576.0, liveN, freeShared / 1048576.0, freeWholePages / 1048576.0, freeN);
            }
            RegionHeap[] heaps = m.regionsForTest();
            java.util.List<BlockMap.Region> regions = m.blockMap().regions();
            for (int k = 0; k < heaps.length; k++) {
                RegionHeap h = heaps[k];
                java.util.TreeMap<Long, long[]> handles = new java.util.TreeMap<>(); // start -> {bytes, live}
                for (BlockMap.Block b : regions.get(k).blocks()) {
                    if (b.kind() == BlockMap.Kind.UNMAPPED) continue;
                    for (long a = b.address(); a < b.address() + b.size(); ) {
                        long hs = h.pages.handleStart(a), he = h.pages.handleEnd(a);
                        long e = Math.min(he, b.address() + b.size());
                        long[] v = handles.computeIfAbsent(hs, x -> new long[]{he - hs, 0});
                        if (b.kind() == BlockMap.Kind.LIVE) v[1] += e - a;
                        a = e;
                    }
                }
                long wholeFree = 0, partFree = 0; int n = 0, nf = 0;
                java.util.TreeMap<Long, Integer> sizes = new java.util.TreeMap<>();
                for (long[] v : handles.values()) {
                    n++; sizes.merge(v[0] >> 20, 1, Integer::sum);
                    if (v[1] == 0) { wholeFree += v[0]; nf++; } else partFree += v[0] - v[1];
                }
                System.out.printf("  %s handles %d (MiB->count %s): whole free handles %d = %.1f MiB, free in partly live handles %.1f MiB%n",
                        regions.get(k).name(), n, sizes, nf, wholeFree / 1048576.0, partFree / 1048576.0);
            }
            AllocatorStats s = m.stats();
            System.out.printf("live %.1f MiB, physical %.1f MiB, cached (free mapped + pool) %.1f MiB%n", s.liveBytes() / 1048576.0, s.reservedBytes() / 1048576.0, s.cachedBytes() / 1048576.0);
            m.close();
        }
    }

    private static void step(VmmManager m, AllocationTrace t, int i, Long2LongHashMap addr) {
        if (t.kind(i) == AllocationTrace.ALLOC) addr.put(t.key(i), m.allocate(t.size(i), 0));
        else m.deallocate(addr.remove(t.key(i)), 0);
    }
}
