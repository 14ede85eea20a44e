package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.InvalidAddressException;
import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.ByteSize;
import dev.vmmkit.driver.LibC;
import org.agrona.collections.Long2LongHashMap;
import org.agrona.collections.Long2ObjectHashMap;
import org.agrona.collections.LongArrayList;

import java.util.Map;

/**
 * TEST ONLY: a stand-in allocator for tests of the plumbing alone (the Java entry points, the
 * shim's choice of resource and its error paths), apart from vmmkit's allocator. Selected with {@code -Dvmmkit.interpose.resource=dev.vmmkit.interpose.BumpResourceFactory}
 * (through {@code VMMKIT_JVM_OPTS}). Memory is host memory, mmap'd lazily, of {@code VMM_DEVICE_MEMORY}
 * bytes per device (default 1 GiB); freed blocks are kept per size and reused (a cache hit).
 */
public final class BumpResourceFactory implements ResourceFactory {

    private final Map<String, String> env;

    public BumpResourceFactory() {
        this(System.getenv());
    }

    BumpResourceFactory(Map<String, String> env) {
        this.env = env;
    }

    @Override
    public ManagedMemoryResource open(int device) {
        String capacity = env.get("VMM_DEVICE_MEMORY");
        long bytes = capacity == null || capacity.isBlank() ? 1L << 30 : ByteSize.parse(capacity);
        return new Bump(map(bytes), bytes);
    }

    private static long map(long bytes) {
        long base = LibC.mmap(0L, bytes, LibC.PROT_READ | LibC.PROT_WRITE,
                LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS | LibC.MAP_NORESERVE, -1, 0L);
        if (base == LibC.MAP_FAILED) throw new IllegalStateException("mmap of " + bytes + " bytes failed");
        return base;
    }

    /** Bump allocation over [base, base + capacity), with exact-size free lists. Not for production. */
    static final class Bump implements ManagedMemoryResource {
        private static final long ALIGN = 512;
        private final long base;
        private final long capacity;
        private long top;
        private final Long2LongHashMap sizeByAddress = new Long2LongHashMap(-1);
        private final Long2ObjectHashMap<LongArrayList> freeBySize = new Long2ObjectHashMap<>();
        private long allocations, frees, live, peakLive, reserved, peakReserved, hits, misses;

        Bump(long base, long capacity) {
            this.base = base;
            this.capacity = capacity;
        }

        @Override
        public synchronized long allocate(long size, long stream) {
            if (size < 0) throw new IllegalArgumentException("negative size " + size);
            if (size == 0) return 0;
            if (size > capacity) throw new OutOfDeviceMemoryException(size, live, reserved, capacity - top, null);
            long rounded = (size + ALIGN - 1) & -ALIGN;
            LongArrayList cached = freeBySize.get(rounded);
            long address;
            if (cached != null && !cached.isEmpty()) {
                address = cached.removeAt(cached.size() - 1);
                hits++;
            } else if (top + rounded <= capacity) {
                address = base + top;
                top += rounded;
                reserved = top;
                peakReserved = Math.max(peakReserved, reserved);
                misses++;
            } else {
                throw new OutOfDeviceMemoryException(size, live, reserved, capacity - top, null);
            }
            sizeByAddress.put(address, size);
            allocations++;
            live += size;
            peakLive = Math.max(peakLive, live);
            return address;
        }

        @Override
        public synchronized void deallocate(long address, long stream) {
            if (address == 0) return;
            long size = sizeByAddress.remove(address);
            if (size < 0) throw new InvalidAddressException(address, "not live");
            long rounded = (size + ALIGN - 1) & -ALIGN;
            freeBySize.computeIfAbsent(rounded, k -> new LongArrayList()).addLong(address);
            frees++;
            live -= size;
        }

        @Override
        public synchronized boolean owns(long address) {
            return sizeByAddress.containsKey(address);
        }

        @Override
        public synchronized long sizeOf(long address) {
            return sizeByAddress.get(address);
        }

        @Override
        public synchronized AllocatorStats stats() {
            return new AllocatorStats(allocations, frees, live, peakLive, reserved, peakReserved,
                    reserved - live, hits, misses, 0, Map.of());
        }

        @Override
        public void close() {
        }
    }
}
