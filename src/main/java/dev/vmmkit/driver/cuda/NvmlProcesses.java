package dev.vmmkit.driver.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.vmmkit.driver.OtherProcesses;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The compute processes on one CUDA device and the device memory each holds, from NVML
 * ({@code libnvidia-ml.so.1}, which comes with the NVIDIA driver), attributed to this process or
 * others ({@link OtherProcesses#attribute}). CUDA's own figure of memory in use is device-wide, so
 * this is how a program's share is told from a co-located job's.
 *
 * <p>NVML is loaded and initialised once, on first use; a machine without it, or a device NVML
 * does not know, gives no instance ({@link #forDevice}) and the caller knows nothing of other
 * processes, as before. Thread-safe: each instance serialises its reads on its own buffers.
 */
final class NvmlProcesses {
    static final String LIBRARY = "libnvidia-ml.so.1";
    private static final int SUCCESS = 0;
    private static final int INSUFFICIENT_SIZE = 7;
    /** Room for more processes than a device takes in practice; a longer list grows the buffers. */
    private static final int INITIAL_CAPACITY = 64;
    /** A PCI bus id, "0000:3b:00.0" with room to spare, as cuDeviceGetPCIBusId and NVML write it. */
    private static final int BUS_ID_BYTES = 32;
    /** nvmlProcessInfo_t (v2 and v3): pid, usedGpuMemory, gpuInstanceId, computeInstanceId. */
    private static final MemoryLayout PROCESS_INFO = MemoryLayout.structLayout(
            JAVA_INT.withName("pid"), MemoryLayout.paddingLayout(4), JAVA_LONG.withName("usedGpuMemory"),
            JAVA_INT.withName("gpuInstanceId"), JAVA_INT.withName("computeInstanceId"));
    private static final long PID_OFFSET = 0;
    private static final long USED_OFFSET = 8;
    private static final long GPU_INSTANCE_OFFSET = 16;
    /** nvmlProcessInfo_t's gpuInstanceId where MIG is off. */
    private static final int NO_GPU_INSTANCE = 0xFFFFFFFF;

    private final MemorySegment device;
    private final long selfPid = ProcessHandle.current().pid();
    private final Arena arena = Arena.ofAuto();
    private final MemorySegment count = arena.allocate(JAVA_INT);
    private MemorySegment infos;
    private int[] pids;
    private long[] used;

    private NvmlProcesses(MemorySegment device) {
        this.device = device;
        grow(INITIAL_CAPACITY);
    }

    /**
     * One device's processes, with NVML opened at the first read rather than at the driver's open:
     * a program alone on its GPU never asks ({@code interpose.NotServedWatch} asks only when the
     * figure beyond vmmkit's is worth a line), so it never loads NVML.
     */
    static final class OnFirstRead {
        private final int cuDevice;
        private volatile NvmlProcesses opened;
        private volatile boolean unavailable;

        OnFirstRead(int cuDevice) {
            this.cuDevice = cuDevice;
        }

        /** The other processes on the device now; {@link OtherProcesses#NONE} without NVML. */
        OtherProcesses read() {
            NvmlProcesses processes = opened;
            if (processes == null && !unavailable) {
                synchronized (this) {
                    if (opened == null && !unavailable) {
                        opened = forDevice(cuDevice);
                        unavailable = opened == null;
                    }
                    processes = opened;
                }
            }
            return processes == null ? OtherProcesses.NONE : processes.read();
        }
    }

    /**
     * The processes of CUDA device {@code cuDevice} (its context need not be current), or null when
     * NVML is not available or does not know the device.
     */
    static NvmlProcesses forDevice(int cuDevice) {
        if (Nvml.FAILURE != null) return null;
        try (Arena call = Arena.ofConfined()) {
            MemorySegment busId = call.allocate(BUS_ID_BYTES);
            if (CudaApi.cuDeviceGetPCIBusId(busId, BUS_ID_BYTES, cuDevice) != SUCCESS) return null;
            MemorySegment handle = call.allocate(ADDRESS);
            if ((int) Nvml.GET_HANDLE_BY_PCI_BUS_ID.invokeExact(busId, handle) != SUCCESS) return null;
            return new NvmlProcesses(handle.get(ADDRESS, 0));
        } catch (Throwable unexpected) {
            return null;
        }
    }

    /** The other processes on the device now; {@link OtherProcesses#NONE} when NVML does not answer. */
    synchronized OtherProcesses read() {
        try {
            int listed;
            while (true) {
                count.set(JAVA_INT, 0, pids.length);
                int result = (int) Nvml.GET_COMPUTE_RUNNING_PROCESSES.invokeExact(device, count, infos);
                listed = count.get(JAVA_INT, 0);
                if (result == SUCCESS) break;
                if (result != INSUFFICIENT_SIZE || listed <= pids.length) return OtherProcesses.NONE;
                grow(listed + INITIAL_CAPACITY); // processes started meanwhile: ask again with room for them
            }
            for (int i = 0; i < listed; i++) {
                long offset = i * PROCESS_INFO.byteSize();
                pids[i] = infos.get(JAVA_INT, offset + PID_OFFSET);
                // Under MIG a process may hold another instance's memory, which this device's figure
                // (the instance's) does not count: its share is unknown, not subtracted.
                boolean mig = infos.get(JAVA_INT, offset + GPU_INSTANCE_OFFSET) != NO_GPU_INSTANCE;
                used[i] = mig ? OtherProcesses.NOT_AVAILABLE : infos.get(JAVA_LONG, offset + USED_OFFSET);
            }
            return OtherProcesses.attribute(selfPid, listed, pids, used);
        } catch (Throwable unexpected) {
            return OtherProcesses.NONE;
        }
    }

    private void grow(int capacity) {
        infos = arena.allocate(PROCESS_INFO, capacity);
        pids = new int[capacity];
        used = new long[capacity];
    }

    /** NVML, loaded and initialised once; {@link #FAILURE} says why not when it could not be. */
    @SuppressWarnings("restricted") // native access is the point of this class
    private static final class Nvml {
        static final String FAILURE;
        static final MethodHandle GET_HANDLE_BY_PCI_BUS_ID;
        static final MethodHandle GET_COMPUTE_RUNNING_PROCESSES;

        static {
            String failure = null;
            MethodHandle byBusId = null;
            MethodHandle processes = null;
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup nvml = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
                MethodHandle init = linker.downcallHandle(nvml.find("nvmlInit_v2").orElseThrow(), FunctionDescriptor.of(JAVA_INT));
                byBusId = linker.downcallHandle(nvml.find("nvmlDeviceGetHandleByPciBusId_v2").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
                processes = linker.downcallHandle(nvml.find("nvmlDeviceGetComputeRunningProcesses_v3").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
                int result = (int) init.invokeExact();
                if (result != SUCCESS) failure = "nvmlInit_v2 returned " + result;
            } catch (Throwable e) {
                failure = LIBRARY + ": " + e.getMessage();
            }
            FAILURE = failure;
            GET_HANDLE_BY_PCI_BUS_ID = byBusId;
            GET_COMPUTE_RUNNING_PROCESSES = processes;
        }
    }
}
