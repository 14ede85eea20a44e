package dev.vmmkit.driver;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class CountingDriverTest {

    @Test
    void countsCallsIncludingFailedOnesAndSnapshotsAreImmutableValues() {
        try (CountingDriver driver = new CountingDriver(HostDriver.open())) {
            long g = driver.granularity();
            DriverCallCounts start = driver.counts();
            assertEquals(DriverCallCounts.none(), start);
            long va = driver.reserve(g, 0);
            assertThrows(DriverException.class, () -> driver.create(0));
            long handle = driver.create(g);
            driver.mapWithAccess(va, g, handle);
            DriverCallCounts middle = driver.counts();
            driver.unmap(va, g);
            driver.release(handle);
            driver.addressFree(va, g);

            assertEquals(1, middle.get(DriverCall.MAP));
            assertEquals(1, middle.get(DriverCall.SET_ACCESS));
            assertEquals(2, middle.get(DriverCall.CREATE), "a failed create counts too");
            assertEquals(0, middle.get(DriverCall.UNMAP), "a snapshot does not change later");
            DriverCallCounts end = driver.counts();
            DriverCallCounts delta = end.minus(middle);
            assertEquals(3, delta.total());
            assertEquals(1, delta.get(DriverCall.ADDRESS_FREE));
            assertEquals(8, end.total());
            assertEquals(8, driver.count(DriverCall.RESERVE) + driver.count(DriverCall.CREATE) + driver.count(DriverCall.MAP)
                    + driver.count(DriverCall.SET_ACCESS) + driver.count(DriverCall.UNMAP)
                    + driver.count(DriverCall.RELEASE) + driver.count(DriverCall.ADDRESS_FREE));
        }
    }

    @Test
    void byKeyListsEveryKindBySnakeCaseName() {
        DriverCallCounts counts = new DriverCallCounts(Map.of(DriverCall.SET_ACCESS, 4L));
        Map<String, Long> byKey = counts.byKey();
        assertEquals(DriverCall.values().length, byKey.size());
        assertEquals(4L, byKey.get("set_access"));
        assertEquals(0L, byKey.get("event_query"));
        assertEquals("reserve", byKey.keySet().iterator().next(), "in DriverCall order");
        assertThrows(UnsupportedOperationException.class, () -> counts.byCall().put(DriverCall.MAP, 1L));
    }
}
