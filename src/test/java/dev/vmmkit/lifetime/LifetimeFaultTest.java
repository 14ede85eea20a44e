package dev.vmmkit.lifetime;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Training steps while kernels fail now and then and the driver's memory calls fail now and then
 * (out of memory, invalid value): every failure reaches the caller as an exception, and afterwards
 * the live bytes are exactly the parameters', nothing leaks, and the parameters still work.
 */
class LifetimeFaultTest {
    private HostDriver host;
    private FaultPlan plan;
    private VmmManager manager;
    private TensorDevice device;
    private final AtomicLong kernelCalls = new AtomicLong();
    private volatile double kernelFailureRate;
    private SplittableRandom random;

    @RegisterExtension
    final NoLeaks noLeaks = new NoLeaks(() -> device);

    @BeforeEach
    void open() {
        host = HostDriver.builder().granularity(64 << 10).capacity(64L << 20).build();
        plan = new FaultPlan(42);
        manager = new VmmManager(new FaultInjectingDriver(host, plan), VmmConfig.DEFAULTS.withAddressSpaceBytes(1L << 30));
        device = new TensorDevice(manager, failingSometimes(Computes.open(host)), LeakDetector.Level.PARANOID, null);
    }

    @AfterEach
    void close() {
        while (Scope.current() != null) Scope.current().close();
        NoLeaks.collectLeaks(device); // while the memory can still be given back
        manager.close();
        host.close();
    }

    /** The host's kernels, each call failing with probability {@link #kernelFailureRate}. */
    private DeviceCompute failingSometimes(DeviceCompute real) {
        return (DeviceCompute) Proxy.newProxyInstance(DeviceCompute.class.getClassLoader(), new Class<?>[] {DeviceCompute.class},
                (proxy, method, args) -> {
                    kernelCalls.incrementAndGet();
                    if (random != null && random.nextDouble() < kernelFailureRate) {
                        throw new DriverException(CudaResult.ILLEGAL_ADDRESS, "injected", method.getName());
                    }
                    try {
                        return method.invoke(real, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 4})
    void failuresLeaveCountsAndMemoryExact(long seed) {
        random = new SplittableRandom(seed);
        Tensor w1 = device.normal(1, 0, 0.3f, 8, 16).requiresGrad(true);
        Tensor b1 = device.zeros(16).requiresGrad(true);
        Tensor w2 = device.normal(2, 0, 0.3f, 16, 3).requiresGrad(true);
        Tensor x = device.normal(3, 0, 1, 32, 8);
        Tensor labels = device.of(labels(32, 3), 32);
        long baseline = device.liveBytes();
        int failures = 0;
        int completed = 0;
        kernelFailureRate = 0.03;
        plan.failWithProbability(DriverCall.CREATE, 0.2, CudaResult.OUT_OF_MEMORY);
        plan.failWithProbability(DriverCall.MAP, 0.1, CudaResult.INVALID_VALUE);
        for (int step = 0; step < 60; step++) {
            try (Scope s = Scope.open()) {
                Tensor h = Ops.relu(Ops.add(Ops.matmul(x, w1), b1));
                Tensor loss = Ops.softmaxCrossEntropy(Ops.matmul(h, w2), labels);
                loss.backward();
                for (Tensor p : new Tensor[] {w1, b1, w2}) Ops.sgdStep(p, 0.05f);
                completed++;
            } catch (DriverException | dev.vmmkit.core.OutOfDeviceMemoryException e) {
                failures++;
            } finally {
                for (Tensor p : new Tensor[] {w1, b1, w2}) p.zeroGrad();
            }
            assertEquals(baseline, device.liveBytes(), "step " + step + ": back to the parameters and data");
        }
        kernelFailureRate = 0;
        plan.clear();
        assertTrue(failures > 0 && completed > 0, failures + " failed steps, " + completed + " completed");
        try (Scope s = Scope.open()) {
            assertTrue(Float.isFinite(Ops.softmaxCrossEntropy(Ops.matmul(Ops.relu(Ops.add(Ops.matmul(x, w1), b1)), w2), labels).item()));
        }
        for (Tensor t : new Tensor[] {w1, b1, w2, x, labels}) {
            assertEquals(1, t.refCnt());
            t.release();
        }
        assertEquals(0, device.liveBytes());
    }

    private static float[] labels(int n, int classes) {
        float[] l = new float[n];
        for (int i = 0; i < n; i++) l[i] = i % classes;
        return l;
    }
}
