package dev.vmmkit.driver;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class FaultInjectingDriverTest {
    private final HostDriver host = HostDriver.open();
    private final CountingDriver reached = new CountingDriver(host);
    private final FaultPlan plan = new FaultPlan(1);
    private final FaultInjectingDriver driver = new FaultInjectingDriver(reached, plan);
    private final long g = host.granularity();

    @AfterEach
    void close() {
        driver.close();
    }

    @Test
    void theNthCallFailsOnceAndNothingReachesTheDelegate() {
        plan.failNth(DriverCall.CREATE, 3, CudaResult.OUT_OF_MEMORY);
        long first = driver.create(g);
        long second = driver.create(g);
        DriverException third = assertThrows(DriverException.class, () -> driver.create(g));
        assertTrue(third.isOutOfMemory());
        assertTrue(third.getMessage().contains("cuMemCreate(size=0x200000"), third.getMessage());
        assertTrue(third.getMessage().contains("injected"), third.getMessage());
        assertEquals(2, reached.count(DriverCall.CREATE), "the failing call never reached the driver");
        long fourth = driver.create(g); // the rule is spent
        assertEquals(1, plan.injected(DriverCall.CREATE));
        for (long handle : new long[] {first, second, fourth}) {
            driver.release(handle);
        }
    }

    @Test
    void otherKindsAreNotAffected() {
        plan.failNth(DriverCall.SET_ACCESS, 1, CudaResult.UNKNOWN);
        long va = driver.reserve(g, 0);
        long handle = driver.create(g);
        DriverException e = assertThrows(DriverException.class, () -> driver.mapWithAccess(va, g, handle));
        assertEquals(CudaResult.UNKNOWN, e.result());
        assertEquals(1, reached.count(DriverCall.UNMAP), "mapWithAccess rolled the map back");
        driver.mapWithAccess(va, g, handle);
        driver.unmap(va, g);
        driver.release(handle);
        driver.addressFree(va, g);
        assertTrue(host.usage().isEmpty());
    }

    @Test
    void probabilisticFaultsAreSeededAndRoughlyAsLikelyAsAsked() {
        int failures = countFailures(new FaultPlan(42), 0.25, 4000);
        assertEquals(failures, countFailures(new FaultPlan(42), 0.25, 4000), "same seed, same faults");
        assertTrue(failures > 850 && failures < 1150, "about a quarter of 4000, got " + failures);
        assertEquals(0, countFailures(new FaultPlan(42), 0.0, 1000));
        assertEquals(1000, countFailures(new FaultPlan(42), 1.0, 1000));
    }

    @Test
    void plansChangeWhileRunning() {
        plan.failAlways(DriverCall.MEMORY_INFO, CudaResult.NOT_PERMITTED);
        assertThrows(DriverException.class, driver::memoryInfo);
        assertThrows(DriverException.class, driver::memoryInfo);
        plan.clear();
        driver.memoryInfo();
        plan.failAlways(DriverCall.EVENT_RECORD, CudaResult.INVALID_HANDLE);
        long event = driver.events().create();
        DriverException e = assertThrows(DriverException.class, () -> driver.events().record(event, 0));
        assertTrue(e.getMessage().contains("cuEventRecord"), e.getMessage());
        assertEquals(0, reached.count(DriverCall.EVENT_RECORD));
        plan.clear(DriverCall.EVENT_RECORD);
        driver.events().record(event, 0);
        driver.events().destroy(event);
        assertEquals(1, reached.count(DriverCall.MEMORY_INFO), "only the call let through");
    }

    @Test
    void refusesNonsensicalPlans() {
        assertThrows(IllegalArgumentException.class, () -> plan.failNth(DriverCall.MAP, 0, CudaResult.UNKNOWN));
        assertThrows(IllegalArgumentException.class, () -> plan.failWithProbability(DriverCall.MAP, 1.5, CudaResult.UNKNOWN));
        assertThrows(IllegalArgumentException.class, () -> plan.failWithProbability(DriverCall.MAP, Double.NaN, CudaResult.UNKNOWN));
        assertThrows(IllegalArgumentException.class, () -> plan.failAlways(DriverCall.MAP, CudaResult.SUCCESS));
    }

    private static int countFailures(FaultPlan plan, double p, int calls) {
        plan.failWithProbability(DriverCall.MEMORY_INFO, p, CudaResult.UNKNOWN);
        int failures = 0;
        for (int i = 0; i < calls; i++) {
            if (plan.faultFor(DriverCall.MEMORY_INFO) != CudaResult.SUCCESS) {
                failures++;
            }
        }
        assertEquals(failures, plan.injected(DriverCall.MEMORY_INFO));
        return failures;
    }
}
