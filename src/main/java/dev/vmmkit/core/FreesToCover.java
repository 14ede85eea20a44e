package dev.vmmkit.core;

import java.util.Arrays;

/**
 * Every region's {@link DeviceWideFrees}, as the {@link DeviceWideFence}'s thread sees them: it
 * {@linkplain #read reads} what each region published before a device synchronisation starts, and
 * {@linkplain #cover covers} exactly that once the synchronisation has finished. Regions come and
 * go rarely (the array is copied on change); the thread reads the array at every synchronisation.
 *
 * <p>{@link #register} and {@link #forget} are thread-safe; {@link #read} and {@link #cover} are
 * called by one synchronising thread at a time.
 */
final class FreesToCover {
    private volatile DeviceWideFrees[] regions = new DeviceWideFrees[0];
    /** What {@link #read} read, by position in the array it returned. */
    private long[] published = new long[0];

    /** The frees of one more region. */
    synchronized DeviceWideFrees register() {
        DeviceWideFrees frees = new DeviceWideFrees();
        DeviceWideFrees[] now = Arrays.copyOf(regions, regions.length + 1);
        now[now.length - 1] = frees;
        regions = now;
        return frees;
    }

    /** A closed region's frees: no synchronisation reads or covers them any more. */
    synchronized void forget(DeviceWideFrees frees) {
        regions = Arrays.stream(regions).filter(f -> f != frees).toArray(DeviceWideFrees[]::new);
    }

    /** Every region's frees now (the array is never changed in place). */
    DeviceWideFrees[] regions() {
        return regions;
    }

    /** True when some region published a free that no finished synchronisation covers. */
    boolean anyUncovered() {
        for (DeviceWideFrees f : regions) {
            if (f.published() > f.covered()) return true;
        }
        return false;
    }

    /** Reads every region's published sequence (before a synchronisation starts); returns the regions read. */
    DeviceWideFrees[] read() {
        DeviceWideFrees[] now = regions;
        if (published.length < now.length) published = new long[now.length];
        for (int i = 0; i < now.length; i++) published[i] = now[i].published();
        return now;
    }

    /** After a synchronisation that started after {@link #read} returned {@code read}: what it read is covered. */
    void cover(DeviceWideFrees[] read) {
        for (int i = 0; i < read.length; i++) read[i].cover(published[i]);
    }
}
