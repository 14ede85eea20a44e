package dev.vmmkit.lifetime;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.compute.DeviceCompute;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * Where tensors live: device memory from a {@link DeviceMemoryResource} (normally vmmkit's
 * {@code VmmManager} over a driver), kernels from a {@link DeviceCompute} on the same device, and the
 * accounting of live tensor bytes, their peak, and leaks. Makes leaf tensors; ops make the rest.
 *
 * <p>All memory is allocated and freed on the default stream (0), where the kernels run, so memory
 * freed after a kernel is reused only by work queued after it.
 */
public final class TensorDevice implements AutoCloseable {
    private static final long STREAM = 0L;

    private final DeviceMemoryResource memory;
    private final DeviceCompute compute;
    private final LeakDetector leakDetector;
    private final AutoCloseable owned;
    private final AtomicLong liveBytes = new AtomicLong();
    private final AtomicLong peakLiveBytes = new AtomicLong();
    private final AtomicLong liveTensors = new AtomicLong();
    private final AtomicLong allocations = new AtomicLong();

    /** Tensors over {@code memory} computed by {@code compute}, leak detection as the environment says. */
    public TensorDevice(DeviceMemoryResource memory, DeviceCompute compute) {
        this(memory, compute, LeakDetector.Level.fromEnvironment(), null);
    }

    /**
     * @param owned closed by {@link #close()} after the device (the manager and driver it was opened
     *              with), or null when the caller keeps owning them
     */
    public TensorDevice(DeviceMemoryResource memory, DeviceCompute compute, LeakDetector.Level leakLevel,
                        AutoCloseable owned) {
        this(memory, compute, reclaimer -> new LeakDetector(leakLevel, reclaimer), owned);
    }

    /** With a leak detector made by {@code leakDetector} from the way to give a lost tensor's memory back. */
    TensorDevice(DeviceMemoryResource memory, DeviceCompute compute,
                 Function<LeakDetector.Reclaimer, LeakDetector> leakDetector, AutoCloseable owned) {
        this.memory = memory;
        this.compute = compute;
        this.owned = owned;
        this.leakDetector = leakDetector.apply(this::free);
    }

    /** A tensor of zeros. */
    public Tensor zeros(int... shape) {
        return full(0f, shape);
    }

    /** A tensor with every element {@code value}. */
    public Tensor full(float value, int... shape) {
        long elements = elementsOf(shape);
        return Kernels.make(this, shape, (k, out) -> k.fill(out, elements, value));
    }

    /**
     * A tensor holding {@code values} in row-major order.
     *
     * @throws IllegalArgumentException when the shape does not hold exactly {@code values.length} elements
     */
    public Tensor of(float[] values, int... shape) {
        long elements = elementsOf(shape);
        if (elements != values.length) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " holds " + elements
                    + " elements but " + values.length + " values were given");
        }
        return Kernels.make(this, shape, (k, out) -> k.copyFromHost(out, values));
    }

    /** A tensor of independent uniform values in {@code [low, high)}, the same for the same seed on every driver. */
    public Tensor uniform(long seed, float low, float high, int... shape) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] values = new float[Math.toIntExact(elementsOf(shape))];
        for (int i = 0; i < values.length; i++) values[i] = low + (high - low) * (float) random.nextDouble();
        return of(values, shape);
    }

    /** A tensor of independent normal values, the same for the same seed on every driver. */
    public Tensor normal(long seed, float mean, float std, int... shape) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] values = new float[Math.toIntExact(elementsOf(shape))];
        for (int i = 0; i < values.length; i += 2) {
            // Box-Muller: two normals from two uniforms.
            double radius = Math.sqrt(-2 * Math.log(1 - random.nextDouble()));
            double angle = 2 * Math.PI * random.nextDouble();
            values[i] = mean + std * (float) (radius * Math.cos(angle));
            if (i + 1 < values.length) values[i + 1] = mean + std * (float) (radius * Math.sin(angle));
        }
        return of(values, shape);
    }

    /** Bytes of tensors alive now. */
    public long liveBytes() {
        return liveBytes.get();
    }

    /** Most bytes of tensors alive at once since creation or {@link #resetPeak()}. */
    public long peakLiveBytes() {
        return peakLiveBytes.get();
    }

    /** Starts a new peak from the live bytes of now. */
    public void resetPeak() {
        peakLiveBytes.set(liveBytes.get());
    }

    public TensorStats stats() {
        return new TensorStats(liveTensors.get(), liveBytes.get(), peakLiveBytes.get(), allocations.get(),
                leakDetector.leakCount(), leakDetector.leakedBytes());
    }

    public LeakDetector leakDetector() {
        return leakDetector;
    }

    /** Waits for the device to finish the work queued so far. */
    public void synchronize() {
        compute.synchronize();
    }

    DeviceCompute compute() {
        return compute;
    }

    /** Closes what the device was opened with (if it owns it). Tensors still alive are not freed first. */
    @Override
    public void close() {
        if (owned == null) return;
        try {
            owned.close();
        } catch (Exception e) {
            throw new IllegalStateException("closing the tensor device: " + e.getMessage(), e);
        }
    }

    /** A new tensor of {@code shape}, contents undefined; registered in this thread's innermost scope if asked. */
    Tensor allocate(int[] shape, boolean register) {
        long elements = elementsOf(shape);
        long bytes = elements * DType.FLOAT32.bytes();
        long address = 0;
        if (bytes > 0) {
            address = memory.allocate(bytes, STREAM);
            allocations.incrementAndGet();
            liveTensors.incrementAndGet();
            peakLiveBytes.accumulateAndGet(liveBytes.addAndGet(bytes), Math::max);
        }
        try {
            return new Tensor(this, shape.clone(), elements, address, register);
        } catch (RuntimeException e) {
            free(address, bytes);
            throw e;
        }
    }

    /** Gives memory back (a freed tensor, or a leaked one the detector reclaims). */
    void free(long address, long bytes) {
        if (bytes == 0) return;
        memory.deallocate(address, STREAM);
        liveTensors.decrementAndGet();
        liveBytes.addAndGet(-bytes);
    }

    static long elementsOf(int[] shape) {
        long elements = 1;
        for (int size : shape) {
            if (size < 0) throw new IllegalArgumentException("negative dimension in shape " + Arrays.toString(shape));
            elements = Math.multiplyExact(elements, size);
        }
        if (elements > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has more than 2^31-1 elements");
        }
        return elements;
    }
}
