package dev.vmmkit.lifetime;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

/** The README's example, as written there, on the host emulation. */
class ReadmeExampleTest {

    @Test
    void theReadmeExampleRunsAndGivesEverythingBack() {
        try (VmmDriver driver = Drivers.open("host", 0);
             VmmManager manager = new VmmManager(driver, VmmConfig.fromEnvironment());
             DeviceCompute compute = Computes.open(driver);
             TensorDevice device = new TensorDevice(manager, compute)) {
            Tensor w = device.normal(1, 0f, 0.1f, 4, 3).requiresGrad(true);
            try (Scope step = Scope.open()) {
                Tensor x = device.of(new float[] {1, 2, 3, 4, 5, 6, 7, 8}, 2, 4);
                Tensor loss = Ops.mean(Ops.relu(Ops.matmul(x, w)));
                loss.backward();
                assertNotNull(w.grad());
            }
            Ops.sgdStep(w, 0.1f);
            w.zeroGrad();
            try (Scope caller = Scope.open()) {
                Tensor x = device.full(2f, 4, 3);
                Tensor result = scaled(x);
                assertEquals(1, result.refCnt());
                assertEquals(1, x.refCnt(), "borrowed");
                assertEquals(w.byteSize() * 3, device.liveBytes(), "w, x and the result; `twice` is gone");
            }
            w.release();
            assertEquals(0, device.liveBytes());
        }
    }

    private static Tensor scaled(Tensor x) {
        try (Scope scope = Scope.open()) {
            Tensor twice = Ops.add(x, x);
            return Scope.promote(Ops.mul(twice, twice));
        }
    }
}
