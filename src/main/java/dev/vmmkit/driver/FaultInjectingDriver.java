package dev.vmmkit.driver;

/**
 * Makes chosen driver calls fail as its {@link FaultPlan} says. A failing call throws the planned
 * {@link DriverException} instead of being made: nothing reaches the delegate. Calls the plan lets
 * through are forwarded unchanged.
 */
public final class FaultInjectingDriver extends ForwardingDriver {
    private final FaultPlan plan;
    private final StreamEvents events = new FaultInjectingEvents();
    private final HostTransfers transfers = new FaultInjectingTransfers();

    public FaultInjectingDriver(VmmDriver delegate, FaultPlan plan) {
        super(delegate);
        this.plan = plan;
    }

    /** The plan in force; change it at any time. */
    public FaultPlan plan() {
        return plan;
    }

    @Override
    public long reserve(long size, long alignment) {
        int fault = plan.faultFor(DriverCall.RESERVE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.reserve(size, alignment));
        }
        return delegate.reserve(size, alignment);
    }

    @Override
    public void addressFree(long va, long size) {
        int fault = plan.faultFor(DriverCall.ADDRESS_FREE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.addressFree(va, size));
        }
        delegate.addressFree(va, size);
    }

    @Override
    public long create(long size, boolean exportable) {
        int fault = plan.faultFor(DriverCall.CREATE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.create(size, delegate.device(), exportable));
        }
        return delegate.create(size, exportable);
    }

    @Override
    public void release(long handle) {
        int fault = plan.faultFor(DriverCall.RELEASE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.release(handle));
        }
        delegate.release(handle);
    }

    @Override
    public void map(long va, long size, long handle) {
        int fault = plan.faultFor(DriverCall.MAP);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.map(va, size, handle));
        }
        delegate.map(va, size, handle);
    }

    @Override
    public void setAccess(long va, long size) {
        int fault = plan.faultFor(DriverCall.SET_ACCESS);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.setAccess(va, size, delegate.device()));
        }
        delegate.setAccess(va, size);
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        int fault = plan.faultFor(DriverCall.SET_ACCESS);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.setAccess(va, size, grant, revoke));
        }
        delegate.setAccess(va, size, grant, revoke);
    }

    @Override
    public int exportHandle(long handle) {
        int fault = plan.faultFor(DriverCall.EXPORT_HANDLE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.exportHandle(handle));
        }
        return delegate.exportHandle(handle);
    }

    @Override
    public long importHandle(int fd, long size) {
        int fault = plan.faultFor(DriverCall.IMPORT_HANDLE);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.importHandle(fd, size));
        }
        return delegate.importHandle(fd, size);
    }

    @Override
    public void unmap(long va, long size) {
        int fault = plan.faultFor(DriverCall.UNMAP);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.unmap(va, size));
        }
        delegate.unmap(va, size);
    }

    @Override
    public MemoryInfo memoryInfo() {
        int fault = plan.faultFor(DriverCall.MEMORY_INFO);
        if (fault != CudaResult.SUCCESS) {
            throw injected(fault, CallText.memoryInfo());
        }
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

    private void check(DriverCall call, String text) {
        int fault = plan.faultFor(call);
        if (fault != CudaResult.SUCCESS) throw injected(fault, text);
    }

    private static DriverException injected(int result, String call) {
        return new DriverException(result, CudaResult.describe(result) + " (injected by FaultPlan)", call);
    }

    /** Event calls under the same plan. */
    private final class FaultInjectingEvents implements StreamEvents {
        @Override
        public void prepareThread() {
            delegate.events().prepareThread(); // no device work: not counted, timed or failed
        }

        @Override
        public long create() {
            int fault = plan.faultFor(DriverCall.EVENT_CREATE);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.eventCreate());
            }
            return delegate.events().create();
        }

        @Override
        public void record(long event, long stream) {
            int fault = plan.faultFor(DriverCall.EVENT_RECORD);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.eventRecord(event, stream));
            }
            delegate.events().record(event, stream);
        }

        @Override
        public boolean isComplete(long event) {
            int fault = plan.faultFor(DriverCall.EVENT_QUERY);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.eventQuery(event));
            }
            return delegate.events().isComplete(event);
        }

        @Override
        public void synchronize(long event) {
            int fault = plan.faultFor(DriverCall.EVENT_SYNCHRONIZE);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.eventSynchronize(event));
            }
            delegate.events().synchronize(event);
        }

        @Override
        public void destroy(long event) {
            int fault = plan.faultFor(DriverCall.EVENT_DESTROY);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.eventDestroy(event));
            }
            delegate.events().destroy(event);
        }

        @Override
        public void synchronizeDevice() {
            int fault = plan.faultFor(DriverCall.DEVICE_SYNCHRONIZE);
            if (fault != CudaResult.SUCCESS) {
                throw injected(fault, CallText.deviceSynchronize());
            }
            delegate.events().synchronizeDevice();
        }
    }

    /** Pinned memory and host copies under the same plan. */
    private final class FaultInjectingTransfers implements HostTransfers {
        @Override
        public long allocatePinned(long bytes) {
            check(DriverCall.PINNED_ALLOCATE, CallText.pinnedAllocate(bytes));
            return delegate.transfers().allocatePinned(bytes);
        }

        @Override
        public void freePinned(long address) {
            check(DriverCall.PINNED_FREE, CallText.pinnedFree(address));
            delegate.transfers().freePinned(address);
        }

        @Override
        public long createStream() {
            check(DriverCall.STREAM_CREATE, CallText.streamCreate());
            return delegate.transfers().createStream();
        }

        @Override
        public void destroyStream(long stream) {
            check(DriverCall.STREAM_DESTROY, CallText.streamDestroy(stream));
            delegate.transfers().destroyStream(stream);
        }

        @Override
        public void copyToHost(long host, long va, long bytes, long stream) {
            check(DriverCall.COPY_TO_HOST, CallText.copyToHostAsync(host, va, bytes, stream));
            delegate.transfers().copyToHost(host, va, bytes, stream);
        }

        @Override
        public void copyToDevice(long va, long host, long bytes, long stream) {
            check(DriverCall.COPY_TO_DEVICE, CallText.copyToDeviceAsync(va, host, bytes, stream));
            delegate.transfers().copyToDevice(va, host, bytes, stream);
        }
    }
}
