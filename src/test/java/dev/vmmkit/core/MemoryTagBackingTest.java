package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tag's memory is backed with one handle per request from its first allocation, whatever the
 * other regions cache and wherever the budget stands, so that its first pause unmaps and releases
 * as few handles as its second; a kept tag's handles are at most
 * {@link HandleSupply#KEPT_TAG_HANDLE_BYTES}, so that its pause can release each as its copies land.
 */
class MemoryTagBackingTest {

    private static long calls(VmmManager m, DriverCall call) {
        return m.stats().driverCalls().getOrDefault(call, 0L);
    }

    @Test
    void aTagsFirstBackingIsOneHandlePerRequestEvenWhenOtherRegionsCacheMemory() {
        HostDriver host = hostDriver(512 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(1024 * MIB))) {
            // Memory freed untagged stays cached (pending a device-wide wait): the budget has no room for the tag.
            long untagged = m.allocate(64 * MIB, 0);
            m.deallocate(untagged, VmmManager.DEVICE_WIDE_STREAM);

            long[] sizes = {128 * MIB, 3 * PAGE, 20 * MIB, PAGE, 40 * MIB};
            List<Long> addresses = new ArrayList<>();
            long createsBefore = calls(m, DriverCall.CREATE);
            m.beginTagRegion("weights", true);
            for (int i = 0; i < sizes.length; i++) {
                long a = m.allocate(sizes[i], 0);
                fill(host, a, sizes[i], 40 + i);
                addresses.add(a);
            }
            m.endTagRegion();
            assertEquals(sizes.length, calls(m, DriverCall.CREATE) - createsBefore,
                    "one new handle per request of whole pages, none taken from the untagged cache");
            RegionHeap region = m.regionOf(addresses.get(0));
            long from = addresses.get(0);
            long to = addresses.get(sizes.length - 1) + sizes[sizes.length - 1];
            assertEquals(sizes.length, region.pages.handlesIn(from, to), "the tag's range holds one handle per request");

            long releasesBefore = calls(m, DriverCall.RELEASE);
            long unmapsBefore = calls(m, DriverCall.UNMAP);
            m.pause("weights");
            assertEquals(sizes.length, calls(m, DriverCall.RELEASE) - releasesBefore, "the first pause releases each handle once");
            long runs = calls(m, DriverCall.UNMAP) - unmapsBefore; // one unmap per run of mapped pages
            m.resume("weights");
            for (int i = 0; i < sizes.length; i++) assertFullyIntact(host, addresses.get(i), sizes[i], 40 + i, "block " + i);
            assertEquals(runs, region.pages.handlesIn(from, to), "a resume backs each run with one handle");
        }
    }

    private static void exportAndClose(VmmManager m, long address) {
        SharedPages.ExportedPages pages = m.sharedPages().export(address);
        for (int fd : pages.fds()) Descriptors.close(fd);
    }

    @Test
    void aTagsMemoryIsNeverExportedWhileUntaggedMemoryIs() {
        HostDriver host = hostDriver(256 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(256 * MIB))) {
            m.beginTagRegion("kv_cache", false);
            long tagged = m.allocate(8 * MIB, 0);
            m.endTagRegion();
            long untagged = m.allocate(8 * MIB, 0);
            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                    () -> m.sharedPages().export(tagged));
            assertTrue(refused.getMessage().contains("memory tag"), refused.getMessage());
            exportAndClose(m, untagged);

            // The driver itself refuses the tag's handles: they were made not exportable.
            RegionHeap region = m.regionOf(tagged);
            long[] handle = new long[1];
            region.views.withPagesOf(tagged, (first, handles, sizes, size) -> handle[0] = handles[0]);
            DriverException e = assertThrows(DriverException.class, () -> host.exportHandle(handle[0]));
            assertEquals(CudaResult.INVALID_VALUE, e.result());

            // Paused and resumed, the tag's pages are still its own, still not exportable.
            m.pause("kv_cache");
            m.resume("kv_cache");
            assertThrows(IllegalArgumentException.class, () -> m.sharedPages().export(tagged));
        }
    }

    @Test
    void aTagsHandleGivenBackAfterAFailedMapNeverBacksUntaggedMemory() {
        HostDriver host = hostDriver(256 * MIB);
        FaultPlan plan = new FaultPlan();
        try (VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), smallConfig(256 * MIB))) {
            m.allocate(PAGE, 0); // the regions exist before the fault is planned
            long heldBefore = m.stats().reservedBytes();
            plan.failNth(DriverCall.MAP, 1, CudaResult.UNKNOWN);
            m.beginTagRegion("weights", true);
            assertThrows(DriverException.class, () -> m.allocate(4 * MIB, 0));
            m.endTagRegion();
            plan.clear();
            assertEquals(heldBefore, m.stats().reservedBytes(), "the tag's new handle was released, not pooled");
            exportAndClose(m, m.allocate(4 * MIB, 0));
        }
    }

    @Test
    void aKeptTagsHandlesAreAtMostTheKeptCapAndADiscardedTagsAreNot() {
        long cap = HandleSupply.KEPT_TAG_HANDLE_BYTES;
        long request = 2 * cap + cap / 2;
        HostDriver host = hostDriver(8 * cap); // memory files are sparse: nothing is written
        try (VmmManager m = new VmmManager(host, smallConfig(16 * cap))) {
            long before = calls(m, DriverCall.CREATE);
            m.beginTagRegion("weights", true);
            long weights = m.allocate(request, 0);
            m.endTagRegion();
            assertEquals(3, calls(m, DriverCall.CREATE) - before, "a kept tag's request of 2.5 caps: three handles");
            assertEquals(3, m.regionOf(weights).pages.handlesIn(weights, weights + request));

            before = calls(m, DriverCall.CREATE);
            m.beginTagRegion("kv_cache", false);
            long cache = m.allocate(request, 0);
            m.endTagRegion();
            assertEquals(1, calls(m, DriverCall.CREATE) - before, "a discarded tag's request: one handle");
            m.deallocate(weights, 0);
            m.deallocate(cache, 0);
        }
    }

    @Test
    void aResumeCutsAKeptRunIntoHandlesOfAtMostTheKeptCap() {
        long cap = HandleSupply.KEPT_TAG_HANDLE_BYTES;
        HostDriver host = hostDriver(8 * cap);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * cap))) {
            // Made while the tag did not keep its contents: one handle of two caps, cached once freed.
            m.beginTagRegion("weights", false);
            long large = m.allocate(2 * cap, 0);
            m.deallocate(large, 0);
            long small = m.allocate(PAGE, 0);
            m.endTagRegion();
            fill(host, small, PAGE, 9);
            m.beginTagRegion("weights", true); // the tag keeps its contents from now on
            m.endTagRegion();
            assertEquals(1, m.regionOf(small).pages.handlesIn(small, small + 2 * cap), "one handle before the pause");

            m.pause("weights");
            long before = calls(m, DriverCall.CREATE);
            m.resume("weights");
            assertEquals(2, calls(m, DriverCall.CREATE) - before, "the resume backs the run with two handles of one cap");
            assertEquals(2, m.regionOf(small).pages.handlesIn(small, small + 2 * cap));
            assertFullyIntact(host, small, PAGE, 9, "the kept page");
            m.deallocate(small, 0);
        }
    }
}
