package dev.vmmkit.driver;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Counts the calls of each kind made through it, events included, then forwards them. A call is
 * counted when it is made, whether it then succeeds or fails. Counting is one atomic increment.
 */
public final class CountingDriver extends ForwardingDriver {
    private final AtomicLongArray counts = new AtomicLongArray(DriverCall.all().length);
    private final StreamEvents events = new CountingEvents();

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
    public long create(long size) {
        counted(DriverCall.CREATE);
        return delegate.create(size);
    }

    @Override
    public void release(long handle) {
        counted(DriverCall.RELEASE);
        delegate.release(handle);
    }

    @Override
    public void map(long va, long size, long handle) {
        counted(DriverCall.MAP);
        delegate.map(va, size, handle);
    }

    @Override
    public void setAccess(long va, long size) {
        counted(DriverCall.SET_ACCESS);
        delegate.setAccess(va, size);
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
    public void close() {
        delegate.close();
    }

    /** Counts event calls, then forwards them to the delegate's events. */
    private final class CountingEvents implements StreamEvents {
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
}
