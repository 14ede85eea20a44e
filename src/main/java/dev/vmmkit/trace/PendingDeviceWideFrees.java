package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceWideFreeClock;

import java.util.Arrays;

/**
 * A recorder's cudaFree frees whose memory has not become reusable yet, oldest first, in arrays
 * used as a ring: each waits for its {@linkplain DeviceWideFreeClock#markAfterFree mark},
 * read once its free returned, and then for the clock to cover the mark. A device synchronisation
 * covers every free published before it started, so they complete oldest first: the queue is
 * drained from its head (a free of another region covered first waits for the older ones, at most
 * until the synchronisation's other regions are read; a free on another device waits for the older
 * frees of this one). Not thread-safe: the recorder's lock guards it.
 */
final class PendingDeviceWideFrees {
    /** The mark of a free that has not returned yet: never covered. */
    private static final long NOT_RETURNED = Long.MAX_VALUE;

    private long[] addresses = new long[256];
    private long[] sizes = new long[256];
    private long[] marks = new long[256];
    private DeviceWideFreeClock[] clocks = new DeviceWideFreeClock[256];
    private int head;
    private int count;

    /** Takes a cudaFree the program asked for, before it is made. */
    void requested(long address, long size) {
        if (count == addresses.length) grow();
        int slot = (head + count++) & (addresses.length - 1);
        addresses[slot] = address;
        sizes[slot] = size;
        marks[slot] = NOT_RETURNED;
    }

    /** The newest free of {@code address} has returned and read {@code mark} from {@code clock}; false when none waits for it. */
    boolean returned(long address, DeviceWideFreeClock clock, long mark) {
        for (int i = count - 1; i >= 0; i--) {
            int slot = (head + i) & (addresses.length - 1);
            if (addresses[slot] == address && marks[slot] == NOT_RETURNED) {
                marks[slot] = mark;
                clocks[slot] = clock;
                return true;
            }
        }
        return false;
    }

    /** True when the oldest free has returned and its clock says its memory is reusable. */
    boolean oldestCovered() {
        return count > 0 && marks[head] != NOT_RETURNED && clocks[head].covered(addresses[head], marks[head]);
    }

    long oldestAddress() {
        return addresses[head];
    }

    long oldestSize() {
        return sizes[head];
    }

    void removeOldest() {
        clocks[head] = null;
        head = (head + 1) & (addresses.length - 1);
        count--;
    }

    int size() {
        return count;
    }

    private void grow() {
        int n = addresses.length;
        long[][] columns = {addresses, sizes, marks};
        for (int c = 0; c < columns.length; c++) {
            long[] bigger = Arrays.copyOf(columns[c], 2 * n);
            // The ring's wrapped part [0, head) moves past the old end, so the items stay in order.
            System.arraycopy(columns[c], 0, bigger, n, head);
            columns[c] = bigger;
        }
        addresses = columns[0];
        sizes = columns[1];
        marks = columns[2];
        DeviceWideFreeClock[] biggerClocks = Arrays.copyOf(clocks, 2 * n);
        System.arraycopy(clocks, 0, biggerClocks, n, head);
        clocks = biggerClocks;
        // Items were at [head, n) then [0, head); now at [head, n + head).
    }
}
