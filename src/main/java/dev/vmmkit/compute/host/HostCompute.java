package dev.vmmkit.compute.host;

import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.host.HostDeviceBytes;
import dev.vmmkit.driver.host.HostDriver;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * {@link DeviceCompute} of the host emulation: plain Java loops over the mapped bytes, read and
 * written in place through the address. Every range is first checked against the driver's
 * mappings (and those other host drivers granted its device), so a bad address is a {@link DriverException} (CUDA_ERROR_ILLEGAL_ADDRESS, as a faulting
 * kernel reports), never a crash of the JVM. Work is synchronous, so {@link #synchronize} has
 * nothing to wait for.
 */
@SuppressWarnings("restricted") // computing on raw device addresses is this class's whole job
public final class HostCompute implements DeviceCompute {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

    private final int device;
    private final HostDeviceBytes.AccessCheck accessCheck;

    /** Kernels on {@code driver}'s device. */
    public HostCompute(HostDriver driver) {
        this.device = driver.device();
        this.accessCheck = driver.accessCheck();
    }

    @Override
    public void copyFromHost(long dst, float[] src) {
        MemorySegment.copy(src, 0, floats("copyFromHost", dst, src.length), F32, 0, src.length);
    }

    @Override
    public void copyToHost(float[] dst, long src) {
        MemorySegment.copy(floats("copyToHost", src, dst.length), F32, 0, dst, 0, dst.length);
    }

    @Override
    public void copy(long out, long src, long count) {
        if (count == 0) return;
        floats("copy", out, count).copyFrom(floats("copy", src, count));
    }

    @Override
    public void fill(long out, long count, float value) {
        if (count == 0) return;
        MemorySegment o = floats("fill", out, count);
        for (long i = 0; i < count; i++) o.setAtIndex(F32, i, value);
    }

    @Override
    public void add(long out, long a, long b, long count, long bCount) {
        if (count == 0) return;
        MemorySegment o = floats("add", out, count), x = floats("add", a, count), y = floats("add", b, bCount);
        for (long i = 0; i < count; i++) o.setAtIndex(F32, i, x.getAtIndex(F32, i) + y.getAtIndex(F32, i % bCount));
    }

    @Override
    public void mul(long out, long a, long b, long count, long bCount) {
        if (count == 0) return;
        MemorySegment o = floats("mul", out, count), x = floats("mul", a, count), y = floats("mul", b, bCount);
        for (long i = 0; i < count; i++) o.setAtIndex(F32, i, x.getAtIndex(F32, i) * y.getAtIndex(F32, i % bCount));
    }

    @Override
    public void axpy(long y, long x, long count, float alpha) {
        if (count == 0) return;
        MemorySegment ys = floats("axpy", y, count), xs = floats("axpy", x, count);
        for (long i = 0; i < count; i++) ys.setAtIndex(F32, i, ys.getAtIndex(F32, i) + alpha * xs.getAtIndex(F32, i));
    }

    @Override
    public void broadcast(long out, long src, long count, long srcCount, float alpha) {
        if (count == 0) return;
        MemorySegment o = floats("broadcast", out, count), s = floats("broadcast", src, srcCount);
        for (long i = 0; i < count; i++) o.setAtIndex(F32, i, alpha * s.getAtIndex(F32, i % srcCount));
    }

    @Override
    public void relu(long out, long in, long count) {
        if (count == 0) return;
        MemorySegment o = floats("relu", out, count), x = floats("relu", in, count);
        for (long i = 0; i < count; i++) o.setAtIndex(F32, i, Math.max(x.getAtIndex(F32, i), 0f));
    }

    @Override
    public void reluBackward(long gradIn, long gradOut, long in, long count) {
        if (count == 0) return;
        MemorySegment gi = floats("reluBackward", gradIn, count), go = floats("reluBackward", gradOut, count),
                x = floats("reluBackward", in, count);
        for (long i = 0; i < count; i++) gi.setAtIndex(F32, i, x.getAtIndex(F32, i) > 0f ? go.getAtIndex(F32, i) : 0f);
    }

    @Override
    public void sumRows(long out, long in, long rows, long cols) {
        if (cols == 0) return;
        MemorySegment o = floats("sumRows", out, cols);
        float[] sums = new float[Math.toIntExact(cols)];
        if (rows > 0) {
            MemorySegment x = floats("sumRows", in, rows * cols);
            for (long r = 0; r < rows; r++) {
                for (int c = 0; c < sums.length; c++) sums[c] += x.getAtIndex(F32, r * cols + c);
            }
        }
        MemorySegment.copy(sums, 0, o, F32, 0, sums.length);
    }

    @Override
    public void matmul(long c, long a, long b, int m, int n, int k,
                       long aRowStride, long aColStride, long bRowStride, long bColStride) {
        if ((long) m * n == 0) return;
        float[] out = new float[Math.multiplyExact(m, n)];
        if (k > 0) {
            float[] as = read("matmul", a, (m - 1) * aRowStride + (k - 1) * aColStride + 1);
            float[] bs = read("matmul", b, (k - 1) * bRowStride + (n - 1) * bColStride + 1);
            for (int i = 0; i < m; i++) {
                for (int p = 0; p < k; p++) {
                    float av = as[(int) (i * aRowStride + p * aColStride)];
                    int bBase = (int) (p * bRowStride);
                    for (int j = 0; j < n; j++) out[i * n + j] += av * bs[(int) (bBase + j * bColStride)];
                }
            }
        }
        copyFromHost(c, out);
    }

    @Override
    public void softmaxCrossEntropy(long loss, long logits, long labels, int rows, int cols) {
        MemorySegment l = floats("softmaxCrossEntropy", loss, 1);
        float[] x = read("softmaxCrossEntropy", logits, (long) rows * cols);
        float[] y = read("softmaxCrossEntropy", labels, rows);
        float total = 0f;
        for (int r = 0; r < rows; r++) {
            int label = label(y[r], cols);
            if (label < 0) {
                total = Float.NaN;
                continue;
            }
            float max = rowMax(x, r, cols);
            float sum = 0f;
            for (int j = 0; j < cols; j++) sum += (float) Math.exp(x[r * cols + j] - max);
            total += ((float) Math.log(sum) + max - x[r * cols + label]) / rows;
        }
        l.setAtIndex(F32, 0, total);
    }

    @Override
    public void softmaxCrossEntropyBackward(long gradLogits, long gradLoss, long logits, long labels, int rows, int cols) {
        float[] x = read("softmaxCrossEntropyBackward", logits, (long) rows * cols);
        float[] y = read("softmaxCrossEntropyBackward", labels, rows);
        float scale = floats("softmaxCrossEntropyBackward", gradLoss, 1).getAtIndex(F32, 0) / rows;
        float[] g = new float[x.length];
        for (int r = 0; r < rows; r++) {
            int label = label(y[r], cols);
            float max = rowMax(x, r, cols);
            float sum = 0f;
            for (int j = 0; j < cols; j++) sum += (float) Math.exp(x[r * cols + j] - max);
            for (int j = 0; j < cols; j++) {
                float p = (float) Math.exp(x[r * cols + j] - max) / sum;
                g[r * cols + j] = label < 0 ? Float.NaN : scale * (p - (j == label ? 1f : 0f));
            }
        }
        copyFromHost(gradLogits, g);
    }

    @Override
    public void synchronize() {
        // Host work is done when its call returns.
    }

    /** The class index a label holds, or -1 when it is not a whole number in [0, cols). */
    private static int label(float value, int cols) {
        return value >= 0 && value < cols && value == Math.rint(value) ? (int) value : -1;
    }

    private static float rowMax(float[] x, int row, int cols) {
        float max = Float.NEGATIVE_INFINITY;
        for (int j = 0; j < cols; j++) max = Math.max(max, x[row * cols + j]);
        return max;
    }

    private float[] read(String kernel, long address, long count) {
        float[] values = new float[Math.toIntExact(count)];
        MemorySegment.copy(floats(kernel, address, count), F32, 0, values, 0, values.length);
        return values;
    }

    /** A segment over {@code count} floats at {@code address}, after checking the range is mapped with access. */
    private MemorySegment floats(String kernel, long address, long count) {
        long bytes = count * Float.BYTES;
        if (count < 0 || count > Integer.MAX_VALUE) {
            throw new DriverException(CudaResult.INVALID_VALUE, "element count " + count + " out of range",
                    kernel + "(address=0x" + Long.toHexString(address) + ", count=" + count + ")");
        }
        // The kernel runs on this driver's device: memory of another device counts if it was granted.
        if (count > 0 && !accessCheck.isAccessible(address, bytes)) {
            throw new DriverException(CudaResult.ILLEGAL_ADDRESS,
                    "range is not mapped with access for device " + device + "; the kernel would fault",
                    kernel + "(address=0x" + Long.toHexString(address) + ", count=" + count + ")");
        }
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }
}
