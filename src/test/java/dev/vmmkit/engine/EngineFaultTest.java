package dev.vmmkit.engine;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Driver calls failing under the engines: every request still gets an answer, and the host recovers. */
class EngineFaultTest {

    @Test
    void failingDriverCallsNeverTakeTheServerDown(@TempDir Path root) throws Exception {
        FaultPlan plan = new FaultPlan(42);
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            for (String name : new String[]{"a", "b", "c"}) bed.model(name + ".fx", 3 << 20);
            bed.wrapDriver(driver -> new FaultInjectingDriver(driver, plan)).start(32L << 20, 0.9, 20, false, null);
            for (DriverCall call : DriverCall.values()) {
                if (call != DriverCall.MEMORY_INFO) plan.failWithProbability(call, 0.15, CudaResult.UNKNOWN);
            }
            int answered = 0;
            for (int i = 0; i < 60; i++) {
                String model = String.valueOf((char) ('a' + i % 3));
                boolean unload = i % 7 == 6;
                EngineTestBed.Answer answer = unload ? bed.delete("/api/models/" + model) : bed.generate(model, "x" + i);
                Set<Integer> expected = unload ? Set.of(200, 404) : Set.of(200, 500, 503);
                assertTrue(expected.contains(answer.status()), answer.status() + " " + answer.text());
                answered++;
            }
            assertEquals(60, answered);
            plan.clear();
            for (String name : new String[]{"a", "b", "c"}) {
                EngineTestBed.Answer answer = bed.generate(name, "after");
                assertEquals(200, answer.status(), answer.text());
            }
            assertTrue(plan.injected(DriverCall.CREATE) + plan.injected(DriverCall.MAP) + plan.injected(DriverCall.SET_ACCESS) > 0,
                    "faults were injected");
        }
    }
}
