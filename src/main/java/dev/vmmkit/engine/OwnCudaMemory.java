package dev.vmmkit.engine;

import dev.vmmkit.core.ForwardingResource;
import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.OutOfDeviceMemoryException;

import java.util.concurrent.atomic.AtomicLong;

/**
 * What an engine in a worker allocates through its own CUDA calls ({@code cudaMalloc},
 * {@code cuMemAlloc}...), which vmmkit's preloaded shim serves from the worker's allocator: an
 * adaptor over that allocator, lent to the shim, that counts the bytes live and remembers a
 * request that found no memory, so those bytes count for the model and such a load can evict and
 * retry like one whose {@code alloc_device} failed. Lock-free: the engine calls from any thread.
 */
final class OwnCudaMemory extends ForwardingResource {
    private final AtomicLong bytes = new AtomicLong();
    /** Bytes held plus the request that first found no memory; 0 before then. */
    private final AtomicLong neededWhenOutOfMemory = new AtomicLong();

    OwnCudaMemory(ManagedMemoryResource allocator) {
        super(allocator);
    }

    /** The bytes the engine's own CUDA allocations hold now. */
    long bytes() {
        return bytes.get();
    }

    /** The bytes held when a request first found no memory, plus that request; 0 when none did. */
    long neededWhenOutOfMemory() {
        return neededWhenOutOfMemory.get();
    }

    @Override
    public long allocate(long size, long stream) {
        long address;
        try {
            address = resource.allocate(size, stream);
        } catch (OutOfDeviceMemoryException e) {
            neededWhenOutOfMemory.compareAndSet(0, bytes.get() + size);
            throw e;
        }
        if (address != 0) bytes.addAndGet(size);
        return address;
    }

    @Override
    public void deallocate(long address, long stream) {
        long size = resource.sizeOf(address);
        resource.deallocate(address, stream);
        if (size > 0) bytes.addAndGet(-size);
    }

    @Override
    public long reallocate(long address, long newSize, long stream) {
        long oldSize = resource.sizeOf(address);
        long moved = resource.reallocate(address, newSize, stream);
        if (oldSize >= 0) bytes.addAndGet(newSize - oldSize);
        return moved;
    }

    /** The allocator belongs to the worker, which closes it; lent to the shim, this is never closed. */
    @Override
    public void close() {
    }
}
