package dev.vmmkit.driver;

/**
 * How a driver call and its arguments read in messages and logs, e.g.
 * {@code cuMemMap(va=0x7f0000000000, size=0x200000, offset=0x0, handle=0x3)}. Every driver and
 * adaptor uses these, so a failure reads the same on the GPU and in the host emulation.
 * Addresses, sizes and handles are hex. Only called on failure or logging paths.
 */
public final class CallText {
    private CallText() {
    }

    public static String reserve(long size, long alignment) {
        return "cuMemAddressReserve(size=" + hex(size) + ", alignment=" + hex(alignment) + ")";
    }

    public static String addressFree(long va, long size) {
        return "cuMemAddressFree(va=" + hex(va) + ", size=" + hex(size) + ")";
    }

    public static String create(long size, int device) {
        return create(size, device, true);
    }

    public static String create(long size, int device, boolean exportable) {
        return "cuMemCreate(size=" + hex(size) + ", device=" + device + (exportable ? ")" : ", not exportable)");
    }

    public static String release(long handle) {
        return "cuMemRelease(handle=" + hex(handle) + ")";
    }

    public static String map(long va, long size, long handle) {
        return "cuMemMap(va=" + hex(va) + ", size=" + hex(size) + ", offset=0x0, handle=" + hex(handle) + ")";
    }

    public static String setAccess(long va, long size, int device) {
        return "cuMemSetAccess(va=" + hex(va) + ", size=" + hex(size) + ", device=" + device + ", READWRITE)";
    }

    public static String setAccess(long va, long size, long grant, long revoke) {
        return "cuMemSetAccess(va=" + hex(va) + ", size=" + hex(size) + ", READWRITE for " + DeviceSet.toString(grant)
                + ", NONE for " + DeviceSet.toString(revoke) + ")";
    }

    public static String exportHandle(long handle) {
        return "cuMemExportToShareableHandle(handle=" + hex(handle) + ", POSIX_FILE_DESCRIPTOR)";
    }

    public static String importHandle(int fd, long size) {
        return "cuMemImportFromShareableHandle(fd=" + fd + ", size=" + hex(size) + ", POSIX_FILE_DESCRIPTOR)";
    }

    public static String unmap(long va, long size) {
        return "cuMemUnmap(va=" + hex(va) + ", size=" + hex(size) + ")";
    }

    public static String memoryInfo() {
        return "cuMemGetInfo_v2()";
    }

    public static String eventCreate() {
        return "cuEventCreate(flags=CU_EVENT_DISABLE_TIMING)";
    }

    public static String eventRecord(long event, long stream) {
        return "cuEventRecord(event=" + hex(event) + ", stream=" + hex(stream) + ")";
    }

    public static String eventQuery(long event) {
        return "cuEventQuery(event=" + hex(event) + ")";
    }

    public static String eventSynchronize(long event) {
        return "cuEventSynchronize(event=" + hex(event) + ")";
    }

    public static String eventDestroy(long event) {
        return "cuEventDestroy_v2(event=" + hex(event) + ")";
    }

    public static String deviceSynchronize() {
        return "cuCtxSynchronize()";
    }

    public static String pinnedAllocate(long bytes) {
        return "cuMemHostAlloc(bytes=" + hex(bytes) + ")";
    }

    public static String pinnedFree(long address) {
        return "cuMemFreeHost(ptr=" + hex(address) + ")";
    }

    public static String streamCreate() {
        return "cuStreamCreate(flags=CU_STREAM_NON_BLOCKING)";
    }

    public static String streamDestroy(long stream) {
        return "cuStreamDestroy(stream=" + hex(stream) + ")";
    }

    public static String copyToHostAsync(long host, long va, long bytes, long stream) {
        return "cuMemcpyDtoHAsync(dst=" + hex(host) + ", src=" + hex(va) + ", bytes=" + hex(bytes) + ", stream=" + hex(stream) + ")";
    }

    public static String copyToDeviceAsync(long va, long host, long bytes, long stream) {
        return "cuMemcpyHtoDAsync(dst=" + hex(va) + ", src=" + hex(host) + ", bytes=" + hex(bytes) + ", stream=" + hex(stream) + ")";
    }

    public static String init() {
        return "cuInit(flags=0)";
    }

    public static String deviceGetCount() {
        return "cuDeviceGetCount()";
    }

    public static String deviceGet(int ordinal) {
        return "cuDeviceGet(ordinal=" + ordinal + ")";
    }

    public static String granularity(int device) {
        return "cuMemGetAllocationGranularity(device=" + device + ", RECOMMENDED)";
    }

    public static String primaryContextRetain(int cuDevice) {
        return "cuDevicePrimaryCtxRetain(device=" + cuDevice + ")";
    }

    public static String primaryContextRelease(int cuDevice) {
        return "cuDevicePrimaryCtxRelease_v2(device=" + cuDevice + ")";
    }

    public static String currentContext() {
        return "cuCtxGetCurrent()";
    }

    public static String setCurrentContext(long context) {
        return "cuCtxSetCurrent(ctx=" + hex(context) + ")";
    }

    public static String exchangeCaptureMode(int mode) {
        return "cuThreadExchangeStreamCaptureMode(mode=" + mode + ")";
    }

    public static String copyToDevice(long dst, long bytes) {
        return "cuMemcpyHtoD_v2(dst=" + hex(dst) + ", bytes=" + hex(bytes) + ")";
    }

    public static String copyToHost(long src, long bytes) {
        return "cuMemcpyDtoH_v2(src=" + hex(src) + ", bytes=" + hex(bytes) + ")";
    }

    /** {@code 0x}-prefixed lower-case hex, as the messages print every address, size and handle. */
    public static String hex(long value) {
        return "0x" + Long.toHexString(value);
    }
}
