package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;
import org.agrona.collections.Long2ObjectHashMap;

import static dev.vmmkit.driver.host.HostErrors.invalid;
import static dev.vmmkit.driver.host.HostErrors.osFailure;
import static dev.vmmkit.driver.host.HostErrors.requirePositiveMultiple;

/**
 * The emulated device's physical memory handles and its capacity: each handle is a {@code memfd}
 * under a small increasing id, never reused; export is a {@code dup} of it, import a {@code dup} of
 * a descriptor whose file size must match. A released handle lives on until its last mapping goes.
 * Not thread-safe: the {@link HostDriver} calls it under its lock.
 */
final class HostHandles {
    private final int device;
    private final long granularity;
    private final long capacity;
    private final Long2ObjectHashMap<PhysicalMemory> byId = new Long2ObjectHashMap<>();
    private long nextHandle = 1;
    /** Bytes of physical handles alive: not yet released, or released but still mapped. */
    private long aliveBytes;

    HostHandles(int device, long granularity, long capacity) {
        this.device = device;
        this.granularity = granularity;
        this.capacity = capacity;
    }

    long create(long size, boolean exportable) {
        String call = CallText.create(size, device, exportable);
        requirePositiveMultiple(size, granularity, call);
        if (size > capacity - aliveBytes) {
            throw new DriverException(CudaResult.OUT_OF_MEMORY,
                    CudaResult.describe(CudaResult.OUT_OF_MEMORY) + ": capacity " + CallText.hex(capacity)
                            + ", in use " + CallText.hex(aliveBytes), call);
        }
        int fd = LibC.memfdCreate();
        if (fd < 0) {
            throw osFailure("memfd_create", call);
        }
        if (LibC.ftruncate(fd, size) != 0) {
            DriverException failure = osFailure("ftruncate", call);
            LibC.close(fd);
            throw failure;
        }
        long handle = nextHandle++;
        byId.put(handle, new PhysicalMemory(fd, size, false, exportable));
        aliveBytes += size;
        return handle;
    }

    void release(long handle) {
        PhysicalMemory memory = live(handle, CallText.release(handle));
        memory.released = true;
        if (memory.mappingCount == 0) {
            destroy(handle, memory);
        }
    }

    int exportHandle(long handle) {
        String call = CallText.exportHandle(handle);
        PhysicalMemory memory = live(handle, call);
        if (!memory.exportable) {
            // As CUDA refuses a handle made without a shareable handle type.
            throw invalid("the handle was made not exportable", call);
        }
        int fd = LibC.dup(memory.fd);
        if (fd < 0) {
            throw osFailure("dup of the memfd", call);
        }
        return fd;
    }

    long importHandle(int fd, long size) {
        String call = CallText.importHandle(fd, size);
        requirePositiveMultiple(size, granularity, call);
        long fileSize = fd < 0 ? -1 : LibC.fileSize(fd);
        if (fileSize != size) {
            throw invalid(fileSize < 0 ? "not an open descriptor of exported memory"
                    : "the memory behind the descriptor has " + CallText.hex(fileSize) + " bytes", call);
        }
        int own = LibC.dup(fd);
        if (own < 0) {
            throw osFailure("dup of the descriptor", call);
        }
        long handle = nextHandle++;
        // Imported memory belongs to the exporter's device: it does not count against this one.
        byId.put(handle, new PhysicalMemory(own, size, true, true));
        return handle;
    }

    /** The handle, neither unknown nor released, or INVALID_VALUE. */
    PhysicalMemory live(long handle, String call) {
        PhysicalMemory memory = byId.get(handle);
        if (memory == null || memory.released) {
            throw invalid(memory == null ? "unknown handle" : "the handle was released", call);
        }
        return memory;
    }

    /** One mapping of {@code handle} went; a released handle dies with its last mapping. */
    void unmapped(long handle) {
        PhysicalMemory memory = byId.get(handle);
        memory.mappingCount--;
        if (memory.released && memory.mappingCount == 0) {
            destroy(handle, memory);
        }
    }

    long capacity() {
        return capacity;
    }

    long aliveBytes() {
        return aliveBytes;
    }

    int count() {
        return byId.size();
    }

    /** Closes every memfd; for close. */
    void releaseAll() {
        byId.forEach((handle, memory) -> LibC.close(memory.fd));
        byId.clear();
        aliveBytes = 0;
    }

    private void destroy(long handle, PhysicalMemory memory) {
        LibC.close(memory.fd);
        byId.remove(handle);
        if (!memory.imported) {
            aliveBytes -= memory.size;
        }
    }

    /** One handle's memfd and how many mappings still use it. */
    static final class PhysicalMemory {
        final int fd;
        final long size;
        /** Made by importHandle: another device's (or process's) memory, not counted in aliveBytes. */
        final boolean imported;
        /** False for a handle created plain: exportHandle refuses it. */
        final boolean exportable;
        int mappingCount;
        boolean released;

        PhysicalMemory(int fd, long size, boolean imported, boolean exportable) {
            this.fd = fd;
            this.size = size;
            this.imported = imported;
            this.exportable = exportable;
        }
    }
}
