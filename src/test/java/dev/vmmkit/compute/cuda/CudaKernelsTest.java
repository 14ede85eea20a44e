package dev.vmmkit.compute.cuda;

import dev.vmmkit.compute.cuda.CudaKernels.Kernel;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Without a GPU: the PTX resource ships with every entry the Java side names, and every launch
 * {@link CudaCompute} makes passes exactly the arguments its PTX entry declares, in count and type.
 */
class CudaKernelsTest {

    /** Records launches instead of making them. */
    private static final class RecordingKernels extends CudaKernels {
        final List<Object[]> launches = new ArrayList<>();
        final List<Kernel> kernels = new ArrayList<>();

        RecordingKernels() {
            super(null);
        }

        @Override
        void launch(Kernel kernel, int gridX, int gridY, int blockX, int blockY, Object... arguments) {
            kernels.add(kernel);
            launches.add(arguments);
        }
    }

    @Test
    void everyKernelHasAnEntryInThePtx() {
        String ptx = CudaKernels.ptxSource();
        assertTrue(ptx.contains(".target sm_80"), "conservative target");
        Map<Kernel, List<String>> signatures = CudaKernels.parseSignatures(ptx);
        assertEquals(EnumSet.allOf(Kernel.class), signatures.keySet());
        assertEquals(List.of("u64", "u64", "u64", "u32", "u32", "u32", "u64", "u64", "u64", "u64"), signatures.get(Kernel.MATMUL));
    }

    @Test
    void everyLaunchMatchesItsPtxSignature() {
        Map<Kernel, List<String>> signatures = CudaKernels.parseSignatures(CudaKernels.ptxSource());
        RecordingKernels recording = new RecordingKernels();
        CudaCompute compute = new CudaCompute(null, recording);
        compute.copy(1, 2, 10);
        compute.fill(1, 10, 1f);
        compute.add(1, 2, 3, 10, 5);
        compute.mul(1, 2, 3, 10, 5);
        compute.axpy(1, 2, 10, 0.5f);
        compute.broadcast(1, 2, 10, 1, 0.5f);
        compute.relu(1, 2, 10);
        compute.reluBackward(1, 2, 3, 10);
        compute.sumRows(1, 2, 4, 5);
        compute.softmaxCrossEntropy(1, 2, 3, 4, 5);
        compute.softmaxCrossEntropyBackward(1, 2, 3, 4, 5, 6);
        compute.matmul(1, 2, 3, 4, 5, 6, 6, 1, 5, 1); // no driver here, so no cuBLAS: the PTX kernel
        assertEquals(EnumSet.allOf(Kernel.class), EnumSet.copyOf(recording.kernels), "every kernel launched");
        for (int i = 0; i < recording.launches.size(); i++) {
            Kernel k = recording.kernels.get(i);
            CudaKernels.checkArguments(k, signatures.get(k), recording.launches.get(i));
        }
    }

    @Test
    void argumentsThatDoNotMatchAreRefusedWithBothSignatures() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CudaKernels.checkArguments(Kernel.FILL, List.of("u64", "u64", "f32"), 1L, 2, 3f));
        assertEquals("vmm_fill_f32 takes [u64, u64, f32] but was given [Long, Integer, Float]", e.getMessage());
    }
}
