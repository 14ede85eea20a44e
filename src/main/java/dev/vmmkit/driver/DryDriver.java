package dev.vmmkit.driver;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A driver that backs nothing: reserve hands out addresses nobody may touch, create hands out
 * numbers, map, setAccess and unmap succeed at once, events are complete at once. It exists to run
 * the allocator's code without a device, so that the JVM loads, links and compiles that code before
 * a program's first real allocation needs it ({@code AllocatorWarmUp}). Memory is never read or
 * written through it. Thread-safe.
 */
public final class DryDriver implements VmmDriver {
    /** Where the addresses it hands out start: far above any real mapping, never dereferenced. */
    private static final long FIRST_ADDRESS = 0x7e00_0000_0000L;

    private final long granularity;
    private final long totalBytes;
    private final AtomicLong nextAddress = new AtomicLong(FIRST_ADDRESS);
    private final AtomicLong nextHandle = new AtomicLong(1);
    private final StreamEvents events = new DryEvents();

    /** A dry device of {@code totalBytes} that maps in pages of {@code granularity}. */
    public DryDriver(long granularity, long totalBytes) {
        this.granularity = granularity;
        this.totalBytes = totalBytes;
    }

    @Override
    public String name() {
        return "dry";
    }

    @Override
    public int device() {
        return 0;
    }

    @Override
    public long granularity() {
        return granularity;
    }

    @Override
    public long reserve(long size, long alignment) {
        long align = Math.max(granularity, alignment);
        long start = nextAddress.getAndAdd(size + align);
        return (start + align - 1) & -align;
    }

    @Override
    public void addressFree(long va, long size) {
    }

    @Override
    public long create(long size, boolean exportable) {
        return nextHandle.getAndIncrement();
    }

    @Override
    public void release(long handle) {
    }

    @Override
    public void map(long va, long size, long handle) {
    }

    @Override
    public void setAccess(long va, long size) {
    }

    @Override
    public void unmap(long va, long size) {
    }

    @Override
    public MemoryInfo memoryInfo() {
        return new MemoryInfo(totalBytes, totalBytes);
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    @Override
    public void close() {
    }

    private final class DryEvents implements StreamEvents {
        @Override
        public long create() {
            return nextHandle.getAndIncrement();
        }

        @Override
        public void record(long event, long stream) {
        }

        @Override
        public boolean isComplete(long event) {
            return true;
        }

        @Override
        public void synchronize(long event) {
        }

        @Override
        public void destroy(long event) {
        }

        @Override
        public void synchronizeDevice() {
        }
    }
}
