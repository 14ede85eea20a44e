package dev.vmmkit.tools.replay;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.cuda.CudaRuntimePool;
import dev.vmmkit.trace.StatisticsResource;

import java.util.Optional;

/**
 * Replays through the CUDA runtime's stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on
 * stream 0), counted by a {@link StatisticsResource}: the anchor vmmkit is measured against, with
 * the same figures from the same run. Peak reserved bytes are the pool's reserved high watermark.
 * Needs libcudart and a GPU.
 */
public final class CudaMallocAsyncBackend implements ReplayBackend {
    private final CudaRuntimePool pool;

    public CudaMallocAsyncBackend(int device) {
        this.pool = CudaRuntimePool.open(device);
    }

    @Override
    public String driverName() {
        return "cuda-malloc-async";
    }

    @Override
    public ReplayTarget newTarget() {
        pool.reset();
        DeviceMemoryResource async = new DeviceMemoryResource() {
            @Override
            public long allocate(long size, long stream) {
                return size == 0 ? 0 : pool.allocate(size);
            }

            @Override
            public void deallocate(long address, long stream) {
                if (address != 0) pool.free(address);
            }
        };
        StatisticsResource counted = new StatisticsResource(async, pool::reservedBytes, pool::peakReservedBytes, pool::reset);
        return ReplayTarget.of(counted);
    }

    /** The runtime's memory is not host memory: no --verify. */
    @Override
    public Optional<DeviceBytes> deviceBytes() {
        return Optional.empty();
    }

    @Override
    public void close() {
        pool.close();
    }
}
