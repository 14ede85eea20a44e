package dev.vmmkit.compute;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

/**
 * The few float32 kernels a small neural network needs, run on the device of a {@link VmmDriver}
 * over memory it maps. Its own layer beside the driver: the allocator never calls them. Opened by
 * {@link Computes#open}; closing it releases what it holds on the device (a CUDA module, a cuBLAS
 * handle), which the driver's close does too if nobody did.
 *
 * <p>Every pointer is a device address of float32 elements ({@code count} of them, not bytes).
 * Work runs in order on the device's default stream; the copies to the host wait for it. Counts
 * must be at most {@link Integer#MAX_VALUE}. Broadcast operands repeat cyclically: {@code b[i %
 * bCount]}, which covers same-shape operands ({@code bCount == count}), a bias row repeated over the
 * rows of a matrix ({@code bCount == columns}) and a scalar ({@code bCount == 1}). Output may alias
 * an input in the elementwise calls. Failures are {@link DriverException}s naming the kernel.
 */
public interface DeviceCompute extends AutoCloseable {

    /** Copies {@code src} (all of it) to {@code dst}. */
    void copyFromHost(long dst, float[] src);

    /** Copies {@code dst.length} floats from {@code src} into {@code dst}; waits for earlier work. */
    void copyToHost(float[] dst, long src);

    /** {@code out[i] = src[i]}. */
    void copy(long out, long src, long count);

    /** {@code out[i] = value}. */
    void fill(long out, long count, float value);

    /** {@code out[i] = a[i] + b[i % bCount]}. */
    void add(long out, long a, long b, long count, long bCount);

    /** {@code out[i] = a[i] * b[i % bCount]}. */
    void mul(long out, long a, long b, long count, long bCount);

    /** {@code y[i] += alpha * x[i]}: gradient accumulation and the SGD step. */
    void axpy(long y, long x, long count, float alpha);

    /** {@code out[i] = alpha * src[i % srcCount]}: the backward pass of sums and means. */
    void broadcast(long out, long src, long count, long srcCount, float alpha);

    /** {@code out[i] = max(in[i], 0)}. */
    void relu(long out, long in, long count);

    /** {@code gradIn[i] = in[i] > 0 ? gradOut[i] : 0}. */
    void reluBackward(long gradIn, long gradOut, long in, long count);

    /** {@code out[c] = sum over r of in[r * cols + c]} for a row-major {@code rows x cols} matrix. */
    void sumRows(long out, long in, long rows, long cols);

    /**
     * {@code c[i, j] = sum over p of a(i, p) * b(p, j)}, {@code c} row-major {@code m x n}. The
     * operands are read through strides, so a transposed operand costs nothing:
     * {@code a(i, p) = a[i * aRowStride + p * aColStride]}, {@code b(p, j) = b[p * bRowStride + j * bColStride]}.
     */
    void matmul(long c, long a, long b, int m, int n, int k,
                long aRowStride, long aColStride, long bRowStride, long bColStride);

    /**
     * Mean over {@code rows} of the cross-entropy of softmax({@code logits} row) against the class
     * index in {@code labels} (float32 holding a whole number in {@code [0, cols)}), written to the
     * scalar {@code loss}. A label out of range makes the loss NaN.
     */
    void softmaxCrossEntropy(long loss, long logits, long labels, int rows, int cols);

    /**
     * {@code gradLogits = gradLoss[0] / rows * (softmax(logits) - onehot(labels))}, where
     * {@code gradLoss} is the device scalar holding the gradient of the loss.
     */
    void softmaxCrossEntropyBackward(long gradLogits, long gradLoss, long logits, long labels, int rows, int cols);

    /** Waits until all work queued so far has finished (errors of earlier kernels surface here). */
    void synchronize();

    /** Releases what the kernels hold on the device; idempotent. The memory they worked on is not touched. */
    @Override
    default void close() {
    }
}
