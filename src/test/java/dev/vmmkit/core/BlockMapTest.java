package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BlockMapTest {

    @Test
    void blocksTileEveryRegionAndAgreeWithTheAllocatorsFigures() {
        try (HostDriver driver = HostDriver.builder().capacity(1L << 30).build();
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            Random random = new Random(7);
            List<Long> live = new ArrayList<>();
            for (int i = 0; i < 2_000; i++) {
                if (!live.isEmpty() && random.nextInt(2) == 0) {
                    manager.deallocate(live.remove(random.nextInt(live.size())), 0);
                } else {
                    live.add(manager.allocate(1 + random.nextInt(random.nextBoolean() ? 4096 : 2 << 20), 0));
                }
            }
            manager.drain();

            BlockMap map = manager.blockMap();
            AllocatorStats stats = manager.stats();
            long liveRequested = 0;
            long liveBlocks = 0;
            long mapped = 0;
            for (BlockMap.Region region : map.regions()) {
                long at = region.base();
                for (BlockMap.Block block : region.blocks()) {
                    assertEquals(at, block.address(), region.name() + ": blocks leave no gap and do not overlap");
                    at += block.size();
                    if (block.kind() == BlockMap.Kind.LIVE) {
                        liveBlocks++;
                        liveRequested += block.requestedBytes();
                        assertTrue(block.requestedBytes() <= block.size());
                    }
                    if (block.kind() != BlockMap.Kind.UNMAPPED) mapped += block.size();
                }
                assertEquals(region.base() + region.span(), at, region.name() + " is covered to its end");
            }
            assertEquals(live.size(), liveBlocks);
            assertEquals(stats.liveBytes(), liveRequested);
            assertTrue(mapped <= stats.reservedBytes(), "mapped blocks lie on physical memory the allocator holds");
        }
    }
}
