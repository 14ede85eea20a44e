package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.trace.RequestLedger;
import dev.vmmkit.core.ZeroCopyStats;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The stats file of {@code vmmkit run --stats}: one JSON object with exactly the keys {@code mode},
 * {@code allocs}, {@code frees}, {@code passthrough_calls}, {@code peak_live_bytes},
 * {@code peak_reserved_bytes}, {@code fragmentation_ratio}, {@code zero_copy}. Written by hand (no JSON
 * library), so the exit path loads nothing new.
 *
 * <p>{@code zero_copy} is {@code {"remaps":N,"bytes":N,"copies_fallen_back":N}}: device-to-device
 * copies (VMM_ZERO_COPY=1) and {@code vmmkit_realloc} moves done by remapping pages, the bytes they
 * did not copy, and copies between two vmmkit allocations that stayed copies. All zero in monitor mode.
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
        long allocs = 0, frees = 0, peakLive = 0, peakReserved = 0, remaps = 0, remappedBytes = 0, fellBack = 0;
        for (AllocatorStats s : devices) {
            allocs += s.allocations();
            frees += s.frees();
            peakLive += s.peakLiveBytes();
            peakReserved += s.peakReservedBytes();
            remaps += s.zeroCopy().remaps();
            remappedBytes += s.zeroCopy().bytes();
            fellBack += s.zeroCopy().copiesFallenBack();
        }
        double ratio = peakLive == 0 ? 0.0 : (double) peakReserved / peakLive;
        return json("vmm", allocs, frees, passthroughCalls, peakLive,
                Long.toString(peakReserved), String.format(Locale.ROOT, "%.6f", ratio),
                new ZeroCopyStats(remaps, remappedBytes, fellBack));
    }

    static String monitorJson(RequestLedger ledger, long passthroughCalls) {
        return json("monitor", ledger.allocations(), ledger.frees(), passthroughCalls, ledger.peakLiveBytes(),
                "null", "null", ZeroCopyStats.NONE);
    }

    private static String json(String mode, long allocs, long frees, long passthrough, long peakLive,
                               String peakReserved, String ratio, ZeroCopyStats zeroCopy) {
        return "{\"mode\":\"" + mode + "\",\"allocs\":" + allocs + ",\"frees\":" + frees
                + ",\"passthrough_calls\":" + passthrough + ",\"peak_live_bytes\":" + peakLive
                + ",\"peak_reserved_bytes\":" + peakReserved + ",\"fragmentation_ratio\":" + ratio
                + ",\"zero_copy\":{\"remaps\":" + zeroCopy.remaps() + ",\"bytes\":" + zeroCopy.bytes()
                + ",\"copies_fallen_back\":" + zeroCopy.copiesFallenBack() + "}}\n";
    }

    static void write(Path file, String json) throws IOException {
        Files.writeString(file, json);
    }
}
