package dev.vmmkit.driver;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;

/**
 * Logs each call with its arguments and its result (or failure) at DEBUG level on the
 * {@code System.Logger} named {@value #LOGGER_NAME}, then returns or rethrows exactly what the
 * delegate did. {@link Drivers} installs it only when debug logging is asked for, so a run without
 * logging pays nothing.
 */
public final class LoggingDriver extends ForwardingDriver {
    public static final String LOGGER_NAME = "dev.vmmkit.driver";
    private static final Logger LOG = System.getLogger(LOGGER_NAME);

    private final StreamEvents events = new LoggingEvents();

    public LoggingDriver(VmmDriver delegate) {
        super(delegate);
    }

    @Override
    public long reserve(long size, long alignment) {
        try {
            long va = delegate.reserve(size, alignment);
            succeeded(CallText.reserve(size, alignment), CallText.hex(va));
            return va;
        } catch (RuntimeException e) {
            throw failed(CallText.reserve(size, alignment), e);
        }
    }

    @Override
    public void addressFree(long va, long size) {
        try {
            delegate.addressFree(va, size);
            succeeded(CallText.addressFree(va, size), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.addressFree(va, size), e);
        }
    }

    @Override
    public long create(long size, boolean exportable) {
        try {
            long handle = delegate.create(size, exportable);
            succeeded(CallText.create(size, delegate.device(), exportable), "handle " + CallText.hex(handle));
            return handle;
        } catch (RuntimeException e) {
            throw failed(CallText.create(size, delegate.device(), exportable), e);
        }
    }

    @Override
    public void release(long handle) {
        try {
            delegate.release(handle);
            succeeded(CallText.release(handle), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.release(handle), e);
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        try {
            delegate.map(va, size, handle);
            succeeded(CallText.map(va, size, handle), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.map(va, size, handle), e);
        }
    }

    @Override
    public void setAccess(long va, long size) {
        try {
            delegate.setAccess(va, size);
            succeeded(CallText.setAccess(va, size, delegate.device()), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.setAccess(va, size, delegate.device()), e);
        }
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        try {
            delegate.setAccess(va, size, grant, revoke);
            succeeded(CallText.setAccess(va, size, grant, revoke), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.setAccess(va, size, grant, revoke), e);
        }
    }

    @Override
    public int exportHandle(long handle) {
        try {
            int fd = delegate.exportHandle(handle);
            succeeded(CallText.exportHandle(handle), "fd " + fd);
            return fd;
        } catch (RuntimeException e) {
            throw failed(CallText.exportHandle(handle), e);
        }
    }

    @Override
    public long importHandle(int fd, long size) {
        try {
            long handle = delegate.importHandle(fd, size);
            succeeded(CallText.importHandle(fd, size), CallText.hex(handle));
            return handle;
        } catch (RuntimeException e) {
            throw failed(CallText.importHandle(fd, size), e);
        }
    }

    @Override
    public void unmap(long va, long size) {
        try {
            delegate.unmap(va, size);
            succeeded(CallText.unmap(va, size), "ok");
        } catch (RuntimeException e) {
            throw failed(CallText.unmap(va, size), e);
        }
    }

    @Override
    public MemoryInfo memoryInfo() {
        try {
            MemoryInfo info = delegate.memoryInfo();
            succeeded(CallText.memoryInfo(), "free " + CallText.hex(info.freeBytes())
                    + ", total " + CallText.hex(info.totalBytes()));
            return info;
        } catch (RuntimeException e) {
            throw failed(CallText.memoryInfo(), e);
        }
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    @Override
    public void close() {
        delegate.close();
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, delegate.name() + " driver closed");
        }
    }

    private static void succeeded(String call, String result) {
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, call + " -> " + result);
        }
    }

    private static RuntimeException failed(String call, RuntimeException failure) {
        if (LOG.isLoggable(Level.DEBUG)) {
            String what = failure instanceof DriverException e
                    ? e.resultName() + " (" + e.result() + "): " + e.driverMessage()
                    : failure.toString();
            LOG.log(Level.DEBUG, call + " -> " + what);
        }
        return failure;
    }

    /** Event calls, logged the same way. */
    private final class LoggingEvents implements StreamEvents {
        @Override
        public void prepareThread() {
            delegate.events().prepareThread(); // no device work: not counted, timed or failed
        }

        @Override
        public long create() {
            try {
                long event = delegate.events().create();
                succeeded(CallText.eventCreate(), "event " + CallText.hex(event));
                return event;
            } catch (RuntimeException e) {
                throw failed(CallText.eventCreate(), e);
            }
        }

        @Override
        public void record(long event, long stream) {
            try {
                delegate.events().record(event, stream);
                succeeded(CallText.eventRecord(event, stream), "ok");
            } catch (RuntimeException e) {
                throw failed(CallText.eventRecord(event, stream), e);
            }
        }

        @Override
        public boolean isComplete(long event) {
            try {
                boolean complete = delegate.events().isComplete(event);
                succeeded(CallText.eventQuery(event), complete ? "complete" : "not ready");
                return complete;
            } catch (RuntimeException e) {
                throw failed(CallText.eventQuery(event), e);
            }
        }

        @Override
        public void synchronize(long event) {
            try {
                delegate.events().synchronize(event);
                succeeded(CallText.eventSynchronize(event), "ok");
            } catch (RuntimeException e) {
                throw failed(CallText.eventSynchronize(event), e);
            }
        }

        @Override
        public void destroy(long event) {
            try {
                delegate.events().destroy(event);
                succeeded(CallText.eventDestroy(event), "ok");
            } catch (RuntimeException e) {
                throw failed(CallText.eventDestroy(event), e);
            }
        }

        @Override
        public void synchronizeDevice() {
            try {
                delegate.events().synchronizeDevice();
                succeeded(CallText.deviceSynchronize(), "ok");
            } catch (RuntimeException e) {
                throw failed(CallText.deviceSynchronize(), e);
            }
        }
    }
}
