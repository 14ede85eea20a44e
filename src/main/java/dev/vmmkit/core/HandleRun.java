package dev.vmmkit.core;

import java.util.Arrays;

/**
 * A list of physical handles with their sizes, in the order they are (or will be) mapped back to
 * back: what {@link PageTable#mapRun} maps and what {@link PageTable#unmapRange} hands back.
 * Reusable: {@link #clear} keeps the arrays.
 */
final class HandleRun {
    private long[] handles = new long[8];
    private long[] bytes = new long[8];
    private int count;
    private long totalBytes;

    void add(long handle, long handleBytes) {
        if (count == handles.length) {
            handles = Arrays.copyOf(handles, count * 2);
            bytes = Arrays.copyOf(bytes, count * 2);
        }
        handles[count] = handle;
        bytes[count] = handleBytes;
        count++;
        totalBytes += handleBytes;
    }

    int count() {
        return count;
    }

    long handle(int i) {
        return handles[i];
    }

    long bytes(int i) {
        return bytes[i];
    }

    long totalBytes() {
        return totalBytes;
    }

    void clear() {
        count = 0;
        totalBytes = 0;
    }
}
