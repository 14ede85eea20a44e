package dev.vmmkit.driver;

/**
 * Device memory that other processes hold on one device, as far as the driver can tell: what a
 * device-wide figure of memory in use (cuMemGetInfo) counts beyond this process's own when jobs
 * share a GPU.
 *
 * @param bytes        what the other processes that could be told from this one hold
 * @param unattributed how many other processes use the device whose memory could not be told from
 *                     this process's (the management library lists processes by a PID this process
 *                     cannot match, as in a container with a PID namespace of its own, or gives no
 *                     figure of their own, as under MIG)
 */
public record OtherProcesses(long bytes, int unattributed) {
    /** No other process known: none uses the device, or the driver cannot list them. */
    public static final OtherProcesses NONE = new OtherProcesses(0, 0);

    /** A process's device memory figure that the management library does not give (NVML's NVML_VALUE_NOT_AVAILABLE). */
    public static final long NOT_AVAILABLE = -1L;

    public OtherProcesses {
        if (bytes < 0 || unattributed < 0) throw new IllegalArgumentException("bytes " + bytes + ", unattributed " + unattributed);
    }

    /**
     * Attributes the processes the management library lists on a device ({@code pids[i]} holds
     * {@code usedBytes[i]}, or {@link #NOT_AVAILABLE}, for the first {@code count}) to this process
     * ({@code selfPid}) or others. When this process is not among them, it sees them under another
     * PID namespace: a single entry is then this process, and of several, one is this process and
     * the others cannot be told apart.
     */
    public static OtherProcesses attribute(long selfPid, int count, int[] pids, long[] usedBytes) {
        boolean selfListed = false;
        for (int i = 0; i < count; i++) {
            if (Integer.toUnsignedLong(pids[i]) == selfPid) selfListed = true;
        }
        if (!selfListed) return count <= 1 ? NONE : new OtherProcesses(0, count - 1);
        long bytes = 0;
        int unattributed = 0;
        for (int i = 0; i < count; i++) {
            if (Integer.toUnsignedLong(pids[i]) == selfPid) continue;
            if (usedBytes[i] == NOT_AVAILABLE) {
                unattributed++;
            } else {
                bytes += usedBytes[i];
            }
        }
        return new OtherProcesses(bytes, unattributed);
    }
}
