package dev.vmmkit.compute.cuda;

import java.lang.foreign.MemorySegment;

import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.compute.cuda.CudaKernels.Kernel;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.cuda.CudaModuleCalls;

/**
 * {@link DeviceCompute} on CUDA: each call checks its sizes, picks a grid and launches one kernel of
 * {@link CudaKernels} on the default stream; matmul goes to cuBLAS where the machine has it
 * ({@link Cublas}); copies go through cuMemcpy, which the default stream orders after the kernels.
 * Its module and cuBLAS handle live in the driver's context: {@link #close} releases them, and the
 * driver's close does it first if nobody did.
 */
public final class CudaCompute implements DeviceCompute {
    private static final int BLOCK = 256;
    private static final int TILE = 16;
    private static final int MAX_GRID_Y = 65535;

    private final CudaKernels kernels;
    private final CudaModuleCalls cuda;
    private Cublas cublas;
    private boolean cublasTried;

    CudaCompute(CudaModuleCalls cuda, CudaKernels kernels) {
        this.cuda = cuda;
        this.kernels = kernels;
    }

    /** Kernels on the device of the CUDA driver {@code cuda} stands for; closed with it at the latest. */
    public static CudaCompute open(CudaModuleCalls cuda) {
        CudaCompute compute = new CudaCompute(cuda, new CudaKernels(cuda));
        cuda.closeBeforeContext(compute);
        return compute;
    }

    @Override
    public void copyFromHost(long dst, float[] src) {
        if (src.length == 0) return;
        cuda.copyToDevice(dst, MemorySegment.ofArray(src), (long) src.length * Float.BYTES);
    }

    @Override
    public void copyToHost(float[] dst, long src) {
        if (dst.length == 0) return;
        cuda.copyToHost(MemorySegment.ofArray(dst), src, (long) dst.length * Float.BYTES);
    }

    @Override
    public void copy(long out, long src, long count) {
        if (count == 0) return;
        kernels.launch(Kernel.COPY, blocks(Kernel.COPY, count), 1, BLOCK, 1, out, src, count);
    }

    @Override
    public void fill(long out, long count, float value) {
        if (count == 0) return;
        kernels.launch(Kernel.FILL, blocks(Kernel.FILL, count), 1, BLOCK, 1, out, count, value);
    }

    @Override
    public void add(long out, long a, long b, long count, long bCount) {
        if (count == 0) return;
        kernels.launch(Kernel.ADD, blocks(Kernel.ADD, count), 1, BLOCK, 1, out, a, b, count, positive(Kernel.ADD, bCount));
    }

    @Override
    public void mul(long out, long a, long b, long count, long bCount) {
        if (count == 0) return;
        kernels.launch(Kernel.MUL, blocks(Kernel.MUL, count), 1, BLOCK, 1, out, a, b, count, positive(Kernel.MUL, bCount));
    }

    @Override
    public void axpy(long y, long x, long count, float alpha) {
        if (count == 0) return;
        kernels.launch(Kernel.AXPY, blocks(Kernel.AXPY, count), 1, BLOCK, 1, y, x, count, alpha);
    }

    @Override
    public void broadcast(long out, long src, long count, long srcCount, float alpha) {
        if (count == 0) return;
        kernels.launch(Kernel.BROADCAST, blocks(Kernel.BROADCAST, count), 1, BLOCK, 1, out, src, count,
                positive(Kernel.BROADCAST, srcCount), alpha);
    }

    @Override
    public void relu(long out, long in, long count) {
        if (count == 0) return;
        kernels.launch(Kernel.RELU, blocks(Kernel.RELU, count), 1, BLOCK, 1, out, in, count);
    }

    @Override
    public void reluBackward(long gradIn, long gradOut, long in, long count) {
        if (count == 0) return;
        kernels.launch(Kernel.RELU_BACKWARD, blocks(Kernel.RELU_BACKWARD, count), 1, BLOCK, 1, gradIn, gradOut, in, count);
    }

    @Override
    public void sumRows(long out, long in, long rows, long cols) {
        if (cols == 0) return;
        checkCount(Kernel.SUM_ROWS, rows * cols);
        kernels.launch(Kernel.SUM_ROWS, blocks(Kernel.SUM_ROWS, cols), 1, BLOCK, 1, out, in, rows, cols);
    }

    @Override
    public void matmul(long c, long a, long b, int m, int n, int k,
                       long aRowStride, long aColStride, long bRowStride, long bColStride) {
        if ((long) m * n == 0) return;
        int gridX = (n + TILE - 1) / TILE;
        int gridY = (m + TILE - 1) / TILE;
        if (gridY > MAX_GRID_Y) {
            throw new DriverException(CudaResult.INVALID_VALUE, m + " rows need more than " + MAX_GRID_Y + " blocks in y",
                    CudaKernels.describe(Kernel.MATMUL, gridX, gridY, TILE, TILE));
        }
        Cublas blas = cublas();
        if (blas != null && blas.matmul(cuda, c, a, b, m, n, k, aRowStride, aColStride, bRowStride, bColStride)) {
            return;
        }
        kernels.launch(Kernel.MATMUL, gridX, gridY, TILE, TILE, c, a, b, m, n, k,
                aRowStride, aColStride, bRowStride, bColStride);
    }

    /** cuBLAS, looked for on the first matmul; null means the PTX kernel. */
    private synchronized Cublas cublas() {
        if (!cublasTried) {
            cublasTried = true;
            cublas = Cublas.open(cuda);
            System.getLogger(CudaCompute.class.getName()).log(System.Logger.Level.INFO, cublas == null
                    ? "vmmkit matmul: PTX kernel (no cuBLAS found, or VMMKIT_MATMUL=ptx)"
                    : "vmmkit matmul: cuBLAS from " + cublas.library());
        }
        return cublas;
    }

    /** Destroys the cuBLAS handle and unloads the module, those that were made; idempotent. */
    @Override
    public synchronized void close() {
        if (cuda != null) cuda.forget(this);
        try {
            if (cublas != null) {
                Cublas open = cublas;
                cublas = null;
                open.close();
            }
        } finally {
            kernels.unload();
        }
    }

    @Override
    public void softmaxCrossEntropy(long loss, long logits, long labels, int rows, int cols) {
        fill(loss, 1, 0f); // the kernel adds each row's share
        if (rows == 0) return;
        kernels.launch(Kernel.SOFTMAX_XENT, blocks(Kernel.SOFTMAX_XENT, rows), 1, BLOCK, 1, loss, logits, labels, rows, cols);
    }

    @Override
    public void softmaxCrossEntropyBackward(long gradLogits, long gradLoss, long logits, long labels, int rows, int cols) {
        if (rows == 0) return;
        kernels.launch(Kernel.SOFTMAX_XENT_BACKWARD, blocks(Kernel.SOFTMAX_XENT_BACKWARD, rows), 1, BLOCK, 1,
                gradLogits, gradLoss, logits, labels, rows, cols);
    }

    @Override
    public void synchronize() {
        cuda.synchronizeDevice();
    }

    /** Blocks of {@link #BLOCK} threads covering {@code count} elements. */
    private static int blocks(Kernel kernel, long count) {
        checkCount(kernel, count);
        return (int) ((count + BLOCK - 1) / BLOCK);
    }

    private static void checkCount(Kernel kernel, long count) {
        if (count < 0 || count > Integer.MAX_VALUE) {
            throw new DriverException(CudaResult.INVALID_VALUE, "element count " + count + " out of range [0, 2^31)",
                    kernel.entry + "(count=" + count + ")");
        }
    }

    private static long positive(Kernel kernel, long count) {
        if (count <= 0) {
            throw new DriverException(CudaResult.INVALID_VALUE, "broadcast operand has " + count + " elements",
                    kernel.entry + "(bCount=" + count + ")");
        }
        return count;
    }
}
