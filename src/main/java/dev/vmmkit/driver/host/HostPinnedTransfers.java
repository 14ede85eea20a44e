package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.HostTransfers;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The emulation's pinned memory and host copies: plain native memory, and copies made at once (the
 * emulation runs no work behind the caller's back, so every stream's order holds). A copy is
 * refused unless its device range is mapped with this driver's access and its host range lies in
 * one pinned buffer, as CUDA would refuse or fault.
 */
final class HostPinnedTransfers implements HostTransfers {
    private final HostDriver driver;
    private final ConcurrentHashMap<Long, Arena> buffers = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Long> sizes = new ConcurrentHashMap<>();
    private final AtomicLong nextStream = new AtomicLong(0x5000);

    HostPinnedTransfers(HostDriver driver) {
        this.driver = driver;
    }

    @Override
    public long allocatePinned(long bytes) {
        String call = CallText.pinnedAllocate(bytes);
        driver.requireOpen(call);
        if (bytes <= 0) throw HostErrors.invalid("size must be positive", call);
        Arena arena = Arena.ofShared();
        long address = arena.allocate(bytes, 4096).address();
        buffers.put(address, arena);
        sizes.put(address, bytes);
        return address;
    }

    @Override
    public void freePinned(long address) {
        String call = CallText.pinnedFree(address);
        driver.requireOpen(call);
        Arena arena = buffers.remove(address);
        if (arena == null) throw HostErrors.invalid("not pinned memory of this driver", call);
        sizes.remove(address);
        arena.close();
    }

    @Override
    public long createStream() {
        driver.requireOpen(CallText.streamCreate());
        return nextStream.getAndIncrement();
    }

    @Override
    public void destroyStream(long stream) {
        driver.requireOpen(CallText.streamDestroy(stream));
    }

    @Override
    public void copyToHost(long host, long va, long bytes, long stream) {
        String call = CallText.copyToHostAsync(host, va, bytes, stream);
        check(host, va, bytes, call);
        MemorySegment.copy(segment(va, bytes), 0, segment(host, bytes), 0, bytes);
    }

    @Override
    public void copyToDevice(long va, long host, long bytes, long stream) {
        String call = CallText.copyToDeviceAsync(va, host, bytes, stream);
        check(host, va, bytes, call);
        MemorySegment.copy(segment(host, bytes), 0, segment(va, bytes), 0, bytes);
    }

    /** Frees every buffer (the driver closes). */
    void closeAll() {
        for (Long address : buffers.keySet()) {
            Arena arena = buffers.remove(address);
            if (arena != null) arena.close();
        }
        sizes.clear();
    }

    private void check(long host, long va, long bytes, String call) {
        driver.requireOpen(call);
        if (bytes <= 0) throw HostErrors.invalid("size must be positive", call);
        if (!driver.isAccessible(va, bytes)) throw HostErrors.invalid("the device range must be mapped with access", call);
        if (!inOneBuffer(host, bytes)) throw HostErrors.invalid("the host range must lie in one pinned buffer", call);
    }

    private boolean inOneBuffer(long host, long bytes) {
        for (var e : sizes.entrySet()) {
            long start = e.getKey();
            if (host - start >= 0 && host - start + bytes <= e.getValue()) return true;
        }
        return false;
    }

    @SuppressWarnings("restricted") // the emulation's memory is this process's own
    private static MemorySegment segment(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }
}
