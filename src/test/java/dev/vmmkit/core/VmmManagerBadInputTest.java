package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the allocator does with wrong or extreme arguments: a clear exception, and no damage. */
class VmmManagerBadInputTest {
    private static final long CAPACITY = 8 * MIB;

    private final HostDriver host = hostDriver(CAPACITY);
    private final VmmManager m = new VmmManager(host, smallConfig(16 * MIB));

    @AfterEach
    void closeAndCheckNothingLeaks() {
        m.close();
        assertTrue(host.usage().isEmpty(), "after close the driver holds nothing: " + host.usage());
        host.close();
    }

    private void assertCounts(long allocations, long frees, long liveBytes) {
        AllocatorStats s = m.stats();
        assertEquals(allocations, s.allocations(), "allocations");
        assertEquals(frees, s.frees(), "frees");
        assertEquals(liveBytes, s.liveBytes(), "live bytes");
    }

    @Test
    void aDoubleFreeIsRejectedAndChangesNothing() {
        long a = m.allocate(1000, 0);
        long b = m.allocate(2000, 0);
        fill(host, b, 2000, 1);
        m.deallocate(a, 0);
        InvalidAddressException e = assertThrows(InvalidAddressException.class, () -> m.deallocate(a, 0));
        assertEquals(a, e.address());
        assertTrue(e.getMessage().contains("double free"), e.getMessage());
        assertCounts(2, 1, 2000);

        assertEquals(a, m.allocate(1000, 0), "the freed block is still reusable exactly once");
        long c = m.allocate(1000, 0);
        assertNotEquals(a, c, "the double free did not put the block in the cache twice");
        assertFullyIntact(host, b, 2000, 1, "an unrelated live allocation");
        m.deallocate(a, 0);
        m.deallocate(b, 0);
        m.deallocate(c, 0);
        assertCounts(4, 4, 0);
    }

    @Test
    void freeingAnAddressVmmkitDidNotReturnIsRejected() {
        long a = m.allocate(4096, 0);
        assertTrue(m.owns(a));
        long[] inside = {a + 512, a + 8, a + 2 * PAGE};
        for (long wrong : inside) {
            assertTrue(m.owns(wrong), "inside vmmkit's ranges");
            InvalidAddressException e = assertThrows(InvalidAddressException.class, () -> m.deallocate(wrong, 0));
            assertEquals(wrong, e.address());
        }
        long[] outside = {0x1000, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, a + 1000 * MIB};
        for (long wrong : outside) {
            assertFalse(m.owns(wrong), "outside vmmkit's ranges");
            InvalidAddressException e = assertThrows(InvalidAddressException.class, () -> m.deallocate(wrong, 0));
            assertTrue(e.getMessage().contains("not an address vmmkit returned"), e.getMessage());
        }
        assertEquals(4096, m.sizeOf(a), "the live allocation is untouched");
        assertCounts(1, 0, 4096);
        m.deallocate(a, 0);
    }

    @Test
    void freeingNullIsANoOpAndAllocatingZeroBytesReturnsNull() {
        assertDoesNotThrow(() -> m.deallocate(0, 0));
        assertEquals(0, m.allocate(0, 0));
        assertEquals(0, m.allocate(0, 5));
        assertCounts(0, 0, 0);
    }

    @ParameterizedTest
    @ValueSource(longs = {-1, -4096, Long.MIN_VALUE})
    void aNegativeSizeIsAnIllegalArgument(long size) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> m.allocate(size, 0));
        assertTrue(e.getMessage().contains(Long.toString(size)), e.getMessage());
        assertCounts(0, 0, 0);
    }

    @ParameterizedTest
    @ValueSource(longs = {CAPACITY + 1, 2 * CAPACITY, Long.MAX_VALUE, Long.MAX_VALUE - 100, Long.MAX_VALUE / 2 + 1})
    void aRequestLargerThanTheDeviceFailsClearlyAndLeaksNothing(long size) {
        long live = m.allocate(PAGE, 0);
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> m.allocate(size, 0));
        assertEquals(size, e.requestedBytes());
        assertTrue(e.getMessage().contains("requested " + size + " bytes"), e.getMessage());
        assertTrue(e.getCause() != null && e.getCause().getMessage().contains("larger than the device"),
                "the cause says why: " + e.getCause());
        assertCounts(1, 0, PAGE);
        HostDriver.Usage usage = host.usage();
        assertEquals(1, usage.handles(), "no handle was created for the impossible request: " + usage);
        m.deallocate(live, 0);
        assertEquals(live, m.allocate(PAGE, 0), "the allocator still works");
        m.deallocate(live, 0);
    }

    @Test
    void aRequestOfTheWholeDeviceSucceedsOnAnEmptyAllocator() {
        long a = m.allocate(CAPACITY, 0);
        fill(host, a, CAPACITY, 3);
        assertThrows(OutOfDeviceMemoryException.class, () -> m.allocate(1, 0));
        m.deallocate(a, 0);
        long small = m.allocate(1, 0);
        m.deallocate(small, 0);
    }

    @Test
    void aRequestLargerThanARegionsAddressSpaceGetsARegionOfItsOwn() {
        HostDriver h = hostDriver(CAPACITY);
        try (VmmManager tiny = new VmmManager(h, smallConfig(4 * PAGE))) {
            long a = tiny.allocate(3 * MIB, 0);
            fill(h, a, 3 * MIB, 9);
            assertEquals(3 * MIB, tiny.sizeOf(a));
            tiny.deallocate(a, 0);
        } finally {
            assertTrue(h.usage().isEmpty(), "nothing leaks: " + h.usage());
            h.close();
        }
    }

    @Test
    void freeingOnAnotherStreamIsAllowedAndTagsTheMemoryWithTheFreeingStream() {
        host.hostEvents().holdCompletion(true);
        long a = m.allocate(PAGE, 1);
        m.deallocate(a, 2); // documented: the block now waits for stream 2's work
        assertCounts(1, 1, 0);
        assertNotEquals(a, m.allocate(PAGE, 1), "stream 1 no longer owns the block: stream 2's work may use it");
        assertEquals(a, m.allocate(PAGE, 2), "stream 2 reuses it at once");
    }

    @Test
    void freeingWithTheReservedStreamValueIsRejectedAndChangesNothing() {
        host.hostEvents().holdCompletion(true);
        long a = m.allocate(PAGE, 1);
        assertThrows(IllegalArgumentException.class, () -> m.allocate(PAGE, StreamWaitList.NO_PENDING_WORK));
        assertThrows(IllegalArgumentException.class, () -> m.deallocate(a, StreamWaitList.NO_PENDING_WORK),
                "the reserved value would mark the block as free of pending work, so any stream could reuse it at once");
        assertEquals(PAGE, m.sizeOf(a), "still live");
        assertCounts(1, 0, PAGE);
        m.deallocate(a, 1);
        assertNotEquals(a, m.allocate(PAGE, 2), "stream 1's pending free is not handed to stream 2");
    }

    @ParameterizedTest
    @ValueSource(longs = {Long.MIN_VALUE + 1, Long.MAX_VALUE, -2, 0x7fff_dead_beefL})
    void anyOtherStreamValueWorks(long stream) {
        long a = m.allocate(3000, stream);
        fill(host, a, 3000, 11);
        m.deallocate(a, stream);
        assertEquals(a, m.allocate(3000, stream), "same-stream reuse");
        m.deallocate(a, stream);
        assertCounts(2, 2, 0);
    }

    @Test
    void allocatingAfterCloseIsAnIllegalState() {
        long a = m.allocate(100, 0);
        m.close();
        assertThrows(IllegalStateException.class, () -> m.allocate(100, 0));
        assertThrows(InvalidAddressException.class, () -> m.deallocate(a, 0), "its ranges are gone");
        assertDoesNotThrow(m::close, "closing twice is harmless");
    }

    @ParameterizedTest(name = "{0}={1}")
    @CsvSource({
            "VMM_CHUNK_SIZE, lots",
            "VMM_VA_SIZE, 12X",
            "VMM_VA_SIZE, 99999999999T",
            "VMM_SMALL_LIMIT, 1.5M",
            "VMM_MAX_CACHED, M",
            "VMM_ALIGNMENT, 2 K B",
            "VMM_RESERVE_SLACK, abc",
            "VMM_FRAG_RATIO, 1/2",
    })
    void aMalformedConfigValueNamesItsKey(String key, String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> VmmConfig.from(Map.of(key, value)));
        assertTrue(e.getMessage().contains(key), "the message names " + key + ": " + e.getMessage());
        assertTrue(e.getMessage().contains(value), "and the value: " + e.getMessage());
    }

    @ParameterizedTest(name = "{0}={1}")
    @CsvSource({
            "VMM_CHUNK_SIZE, -1",
            "VMM_ALIGNMENT, 100",
            "VMM_RESERVE_SLACK, 0.5",
            "VMM_RESERVE_SLACK, NaN",
            "VMM_FRAG_RATIO, 2",
            "VMM_MAX_CACHED, -5M",
    })
    void anOutOfRangeConfigValueNamesItsKey(String key, String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> VmmConfig.from(Map.of(key, value)));
        assertTrue(e.getMessage().contains(key), "the message names " + key + ": " + e.getMessage());
    }

    @Test
    void wellFormedConfigValuesAreRead() {
        VmmConfig c = VmmConfig.from(Map.of("VMM_CHUNK_SIZE", "4M", "VMM_RESERVE_SLACK", " 1.5 ",
                "VMM_VA_SIZE", "1g", "VMM_SMALL_LIMIT", "", "VMM_ALIGNMENT", "1KiB"));
        assertEquals(4 * MIB, c.chunkBytes());
        assertEquals(1.5, c.reserveSlack());
        assertEquals(1L << 30, c.addressSpaceBytes());
        assertEquals(VmmConfig.DEFAULTS.smallLimitBytes(), c.smallLimitBytes(), "blank means default");
        assertEquals(1024, c.alignmentBytes());
    }
}
