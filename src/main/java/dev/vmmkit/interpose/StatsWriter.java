package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.trace.RequestLedger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The stats file of {@code vmmkit run --stats}: one JSON object with exactly the keys {@code mode},
 * {@code allocs}, {@code frees}, {@code passthrough_calls}, {@code peak_live_bytes},
 * {@code peak_reserved_bytes}, {@code fragmentation_ratio}. Written by hand (no JSON library), so the
 * exit path loads nothing new.
 *
 * <p>In vmm mode the figures are the allocators' (summed over devices: the peaks are then an upper
 * bound). In monitor mode the memory belongs to the real runtime, whose reservations vmmkit cannot
 * see: {@code peak_reserved_bytes} and {@code fragmentation_ratio} are {@code null}.
 * {@code passthrough_calls} counts allocation and free calls served by the real runtime.
 */
final class StatsWriter {

    private StatsWriter() {
    }

    static String vmmJson(List<AllocatorStats> devices, long passthroughCalls) {
        long allocs = 0, frees = 0, peakLive = 0, peakReserved = 0;
        for (AllocatorStats s : devices) {
            allocs += s.allocations();
            frees += s.frees();
            peakLive += s.peakLiveBytes();
            peakReserved += s.peakReservedBytes();
        }
        double ratio = peakLive == 0 ? 0.0 : (double) peakReserved / peakLive;
        return json("vmm", allocs, frees, passthroughCalls, peakLive,
                Long.toString(peakReserved), String.format(Locale.ROOT, "%.6f", ratio));
    }

    static String monitorJson(RequestLedger ledger, long passthroughCalls) {
        return json("monitor", ledger.allocations(), ledger.frees(), passthroughCalls, ledger.peakLiveBytes(),
                "null", "null");
    }

    private static String json(String mode, long allocs, long frees, long passthrough, long peakLive,
                               String peakReserved, String ratio) {
        return "{\"mode\":\"" + mode + "\",\"allocs\":" + allocs + ",\"frees\":" + frees
                + ",\"passthrough_calls\":" + passthrough + ",\"peak_live_bytes\":" + peakLive
                + ",\"peak_reserved_bytes\":" + peakReserved + ",\"fragmentation_ratio\":" + ratio + "}\n";
    }

    static void write(Path file, String json) throws IOException {
        Files.writeString(file, json);
    }
}
