package dev.vmmkit.driver;

import org.agrona.collections.Long2LongHashMap;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Counts the calls of each kind made through it, events included, then forwards them. A call is
 * counted when it is made, whether it then succeeds or fails. Counting a call is one atomic
 * increment; the virtual-memory calls also count the handles they touch ({@link #handleCounts}),
 * which takes a lock: they are slow-path calls.
 */
public final class CountingDriver extends ForwardingDriver {
    private final AtomicLongArray counts = new AtomicLongArray(DriverCall.all().length);
    private final StreamEvents events = new CountingEvents();
    private final HostTransfers transfers = new CountingTransfers();
    // Handle bookkeeping for handleCounts(), guarded by this object's monitor.
    private final long[][] handleCounts = new long[DriverCall.all().length][DriverHandleCounts.BUCKETS];
    private final long[][] handleBytes = new long[DriverCall.all().length][DriverHandleCounts.BUCKETS];
    private final Long2LongHashMap sizeOfHandle = new Long2LongHashMap(0);
    private final TreeMap<Long, Long> mappedSizeByVa = new TreeMap<>();

    public CountingDriver(VmmDriver delegate) {
        super(delegate);
    }

    /** A snapshot of the counts so far. */
    public DriverCallCounts counts() {
        long[] snapshot = new long[counts.length()];
        for (int i = 0; i < snapshot.length; i++) {
            snapshot[i] = counts.get(i);
        }
        return DriverCallCounts.ofOrdinals(snapshot);
    }

    /** The handles touched so far, by call kind and size. */
    public synchronized DriverHandleCounts handleCounts() {
        long[][] counts = new long[handleCounts.length][];
        long[][] bytes = new long[handleBytes.length][];
        for (int i = 0; i < counts.length; i++) {
            counts[i] = handleCounts[i].clone();
            bytes[i] = handleBytes[i].clone();
        }
        return new DriverHandleCounts(counts, bytes);
    }

    private synchronized void touched(DriverCall call, long bytes) {
        int bucket = DriverHandleCounts.bucketOf(bytes);
        handleCounts[call.ordinal()][bucket]++;
        handleBytes[call.ordinal()][bucket] += bytes;
    }

    /** Counts the handles mapped in [va, va + size) for {@code call}; removes them when {@code unmapping}. */
    private synchronized void touchedRange(DriverCall call, long va, long size, boolean unmapping) {
        Map<Long, Long> inRange = mappedSizeByVa.subMap(va, va + size);
        for (long bytes : inRange.values()) touched(call, bytes);
        if (unmapping) inRange.clear();
    }

    /** Calls of one kind so far. */
    public long count(DriverCall call) {
        return counts.get(call.ordinal());
    }

    private void counted(DriverCall call) {
        counts.incrementAndGet(call.ordinal());
    }

    @Override
    public long reserve(long size, long alignment) {
        counted(DriverCall.RESERVE);
        return delegate.reserve(size, alignment);
    }

    @Override
    public void addressFree(long va, long size) {
        counted(DriverCall.ADDRESS_FREE);
        delegate.addressFree(va, size);
    }

    @Override
    public long create(long size, boolean exportable) {
        counted(DriverCall.CREATE);
        long handle = delegate.create(size, exportable);
        synchronized (this) {
            touched(DriverCall.CREATE, size);
            sizeOfHandle.put(handle, size);
        }
        return handle;
    }

    @Override
    public void release(long handle) {
        counted(DriverCall.RELEASE);
        delegate.release(handle);
        synchronized (this) {
            touched(DriverCall.RELEASE, sizeOfHandle.remove(handle));
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        counted(DriverCall.MAP);
        delegate.map(va, size, handle);
        synchronized (this) {
            touched(DriverCall.MAP, size);
            mappedSizeByVa.put(va, size);
        }
    }

    @Override
    public void setAccess(long va, long size) {
        counted(DriverCall.SET_ACCESS);
        delegate.setAccess(va, size);
        touchedRange(DriverCall.SET_ACCESS, va, size, false);
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        counted(DriverCall.SET_ACCESS);
        delegate.setAccess(va, size, grant, revoke);
    }

    @Override
    public int exportHandle(long handle) {
        counted(DriverCall.EXPORT_HANDLE);
        return delegate.exportHandle(handle);
    }

    @Override
    public long importHandle(int fd, long size) {
        counted(DriverCall.IMPORT_HANDLE);
        return delegate.importHandle(fd, size);
    }

    @Override
    public void unmap(long va, long size) {
        counted(DriverCall.UNMAP);
        delegate.unmap(va, size);
        touchedRange(DriverCall.UNMAP, va, size, true);
    }

    @Override
    public MemoryInfo memoryInfo() {
        counted(DriverCall.MEMORY_INFO);
        return delegate.memoryInfo();
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    @Override
    public HostTransfers transfers() {
        return transfers;
    }

    @Override
    public void close() {
        delegate.close();
    }

    /** Counts event calls, then forwards them to the delegate's events. */
    private final class CountingEvents implements StreamEvents {
        @Override
        public void prepareThread() {
            delegate.events().prepareThread(); // no device work: not counted, timed or failed
        }

        @Override
        public long create() {
            counted(DriverCall.EVENT_CREATE);
            return delegate.events().create();
        }

        @Override
        public void record(long event, long stream) {
            counted(DriverCall.EVENT_RECORD);
            delegate.events().record(event, stream);
        }

        @Override
        public boolean isComplete(long event) {
            counted(DriverCall.EVENT_QUERY);
            return delegate.events().isComplete(event);
        }

        @Override
        public void synchronize(long event) {
            counted(DriverCall.EVENT_SYNCHRONIZE);
            delegate.events().synchronize(event);
        }

        @Override
        public void destroy(long event) {
            counted(DriverCall.EVENT_DESTROY);
            delegate.events().destroy(event);
        }

        @Override
        public void synchronizeDevice() {
            counted(DriverCall.DEVICE_SYNCHRONIZE);
            delegate.events().synchronizeDevice();
        }
    }

    /** Counts pinned-memory and host-copy calls, then forwards them to the delegate's transfers. */
    private final class CountingTransfers implements HostTransfers {
        @Override
        public long allocatePinned(long bytes) {
            counted(DriverCall.PINNED_ALLOCATE);
            return delegate.transfers().allocatePinned(bytes);
        }

        @Override
        public void freePinned(long address) {
            counted(DriverCall.PINNED_FREE);
            delegate.transfers().freePinned(address);
        }

        @Override
        public long createStream() {
            counted(DriverCall.STREAM_CREATE);
            return delegate.transfers().createStream();
        }

        @Override
        public void destroyStream(long stream) {
            counted(DriverCall.STREAM_DESTROY);
            delegate.transfers().destroyStream(stream);
        }

        @Override
        public void copyToHost(long host, long va, long bytes, long stream) {
            counted(DriverCall.COPY_TO_HOST);
            delegate.transfers().copyToHost(host, va, bytes, stream);
        }

        @Override
        public void copyToDevice(long va, long host, long bytes, long stream) {
            counted(DriverCall.COPY_TO_DEVICE);
            delegate.transfers().copyToDevice(va, host, bytes, stream);
        }
    }
}
