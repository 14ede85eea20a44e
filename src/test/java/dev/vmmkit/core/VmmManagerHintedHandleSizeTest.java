package dev.vmmkit.core;

import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Under a peak hint, handles are sized from the peak of live bytes reached, and at least from half
 * the hint: the cap is 1/64 of it, a power of two of pages. With a hint of 1,024 pages a growing
 * program's handles are at most 8 pages (1/64 of 512) until it passes 512 pages live, and up to 16
 * once it reaches 1,024. Sized from the whole hint from the start, they would reach 16 pages at
 * once, and the free pages inside them would strand while the program grows; sized from the peak
 * reached alone, at most 4 pages at 400 live.
 */
class VmmManagerHintedHandleSizeTest {
    /** Remembers the largest handle created since the last {@link #reset}. */
    private static final class LargestCreate extends ForwardingDriver {
        long largest;

        LargestCreate(HostDriver host) {
            super(host);
        }

        @Override
        public long create(long size, boolean exportable) {
            largest = Math.max(largest, size);
            return delegate.create(size, exportable);
        }

        void reset() {
            largest = 0;
        }
    }

    @Test
    void aGrowingProgramsHandlesFollowThePeakReachedNotTheWholeHint() {
        HostDriver host = hostDriver(256 * MIB);
        LargestCreate driver = new LargestCreate(host);
        Map<String, String> settings = Map.of("VMM_VA_SIZE", "1G", "VMM_SMALL_LIMIT", "0",
                "VMM_PEAK_HINT", String.valueOf(1024 * PAGE));
        try (VmmManager m = new VmmManager(driver, VmmConfig.from(settings))) {
            long live = grow(m, 0, 400 * PAGE);
            // Larger than the 4 pages the peak reached alone would give, at most the 8 of half the hint.
            assertTrue(driver.largest > 4 * PAGE && driver.largest <= 8 * PAGE,
                    "below half the hint: " + driver.largest / PAGE + " pages");
            driver.reset();
            grow(m, live, 1100 * PAGE);
            assertTrue(driver.largest > 8 * PAGE && driver.largest <= 16 * PAGE,
                    "past the hint: " + driver.largest / PAGE + " pages");
            assertTrue(m.stats().reservedBytes() >= m.stats().liveBytes());
        } finally {
            host.close();
        }
    }

    /** Requests of 3 pages, none freed, until {@code toBytes} are live; returns the live bytes. */
    private static long grow(VmmManager m, long fromBytes, long toBytes) {
        long live = fromBytes;
        while (live < toBytes) {
            m.allocate(3 * PAGE, 0);
            live += 3 * PAGE;
        }
        return live;
    }
}
