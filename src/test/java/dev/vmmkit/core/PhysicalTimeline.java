package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TraceReader;
import org.agrona.collections.Long2LongHashMap;

import java.nio.file.Path;

/**
 * Prints every operation of a trace window at which physical memory changed (host driver, settings
 * from the environment): the request, live and physical bytes, the budget's peak.
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.core.PhysicalTimeline TRACE FROM TO}.
 */
public final class PhysicalTimeline {
    private static final double MIB = 1 << 20;

    public static void main(String[] args) throws Exception {
        AllocationTrace trace = TraceReader.read(Path.of(args[0]));
        int from = Integer.parseInt(args[1]);
        int to = Integer.parseInt(args[2]);
        try (HostDriver driver = HostDriver.open()) {
            VmmManager m = new VmmManager(driver, VmmConfig.from(System.getenv()));
            Long2LongHashMap addresses = new Long2LongHashMap(-1);
            long physical = 0;
            for (int i = 0; i < Math.min(to, trace.ops()); i++) {
                boolean alloc = trace.kind(i) == AllocationTrace.ALLOC;
                if (alloc) addresses.put(trace.key(i), m.allocate(trace.size(i), trace.stream(i)));
                else m.deallocate(addresses.remove(trace.key(i)), trace.stream(i));
                AllocatorStats s = m.stats();
                if (i >= from && s.reservedBytes() != physical) {
                    System.out.printf("op %d %s %.3f MiB: live %.1f physical %.1f (peak live %.1f)%n", i,
                            alloc ? "alloc" : "free", trace.size(i) / MIB, s.liveBytes() / MIB, s.reservedBytes() / MIB,
                            s.peakLiveBytes() / MIB);
                }
                physical = s.reservedBytes();
            }
            m.close();
        }
    }
}
