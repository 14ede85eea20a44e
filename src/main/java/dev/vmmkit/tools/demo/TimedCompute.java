package dev.vmmkit.tools.demo;

import dev.vmmkit.compute.DeviceCompute;

/**
 * A {@link DeviceCompute} that forwards every call and adds up the wall time spent in each kind of
 * call, to say where a training step's time goes: launching kernels (the host side of each launch),
 * copies to the host (which wait for the device to finish the queued work), and everything else.
 * Not thread-safe: one training thread.
 */
final class TimedCompute implements DeviceCompute {
    private final DeviceCompute delegate;
    private long launchNanos;
    private long launches;
    private long waitNanos;
    private long uploadNanos;

    TimedCompute(DeviceCompute delegate) {
        this.delegate = delegate;
    }

    /** A snapshot of the totals so far. */
    record Totals(long launches, long launchNanos, long waitNanos, long uploadNanos) {
        Totals minus(Totals earlier) {
            return new Totals(launches - earlier.launches, launchNanos - earlier.launchNanos,
                    waitNanos - earlier.waitNanos, uploadNanos - earlier.uploadNanos);
        }
    }

    Totals totals() {
        return new Totals(launches, launchNanos, waitNanos, uploadNanos);
    }

    private void launched(long start) {
        launchNanos += System.nanoTime() - start;
        launches++;
    }

    @Override
    public void copyFromHost(long dst, float[] src) {
        long start = System.nanoTime();
        delegate.copyFromHost(dst, src);
        uploadNanos += System.nanoTime() - start;
    }

    @Override
    public void copyToHost(float[] dst, long src) {
        long start = System.nanoTime();
        delegate.copyToHost(dst, src);
        waitNanos += System.nanoTime() - start;
    }

    @Override
    public void synchronize() {
        long start = System.nanoTime();
        delegate.synchronize();
        waitNanos += System.nanoTime() - start;
    }

    @Override
    public void close() {
        delegate.close();
    }

    @Override
    public void copy(long out, long src, long count) {
        long start = System.nanoTime();
        delegate.copy(out, src, count);
        launched(start);
    }

    @Override
    public void fill(long out, long count, float value) {
        long start = System.nanoTime();
        delegate.fill(out, count, value);
        launched(start);
    }

    @Override
    public void add(long out, long a, long b, long count, long bCount) {
        long start = System.nanoTime();
        delegate.add(out, a, b, count, bCount);
        launched(start);
    }

    @Override
    public void mul(long out, long a, long b, long count, long bCount) {
        long start = System.nanoTime();
        delegate.mul(out, a, b, count, bCount);
        launched(start);
    }

    @Override
    public void axpy(long y, long x, long count, float alpha) {
        long start = System.nanoTime();
        delegate.axpy(y, x, count, alpha);
        launched(start);
    }

    @Override
    public void broadcast(long out, long src, long count, long srcCount, float alpha) {
        long start = System.nanoTime();
        delegate.broadcast(out, src, count, srcCount, alpha);
        launched(start);
    }

    @Override
    public void relu(long out, long in, long count) {
        long start = System.nanoTime();
        delegate.relu(out, in, count);
        launched(start);
    }

    @Override
    public void reluBackward(long gradIn, long gradOut, long in, long count) {
        long start = System.nanoTime();
        delegate.reluBackward(gradIn, gradOut, in, count);
        launched(start);
    }

    @Override
    public void sumRows(long out, long in, long rows, long cols) {
        long start = System.nanoTime();
        delegate.sumRows(out, in, rows, cols);
        launched(start);
    }

    @Override
    public void matmul(long c, long a, long b, int m, int n, int k,
                       long aRowStride, long aColStride, long bRowStride, long bColStride) {
        long start = System.nanoTime();
        delegate.matmul(c, a, b, m, n, k, aRowStride, aColStride, bRowStride, bColStride);
        launched(start);
    }

    @Override
    public void softmaxCrossEntropy(long loss, long logits, long labels, int rows, int cols) {
        long start = System.nanoTime();
        delegate.softmaxCrossEntropy(loss, logits, labels, rows, cols);
        launched(start);
    }

    @Override
    public void softmaxCrossEntropyBackward(long gradLogits, long gradLoss, long logits, long labels, int rows, int cols) {
        long start = System.nanoTime();
        delegate.softmaxCrossEntropyBackward(gradLogits, gradLoss, logits, labels, rows, cols);
        launched(start);
    }
}
