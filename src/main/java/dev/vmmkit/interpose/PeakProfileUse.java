package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.ByteSize;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.function.LongSupplier;

/**
 * One run's use of its program's peak profile: read when vmmkit starts in the program, it supplies
 * each device's allocator with a peak hint (the profile's peak of live bytes on that device), and at
 * a successful exit (status 0) the run's own peaks are saved for the next run.
 *
 * <p>The rules: {@code VMM_PEAK_HINT}, when set, wins on every device (the profile is still saved);
 * a profile peak above the device's memory is not used (a profile of a larger device, or a wrong
 * one), with one warning; a run that ends with another status, or is killed, saves nothing, so a run
 * that failed part-way never replaces a good profile; a device the run did not allocate on keeps its
 * entry. The newest successful run's peaks replace older ones: a program whose needs changed is
 * followed at once (a program's peak is the same from run to run unless its code or data changed).
 */
final class PeakProfileUse {
    /** No profile at all: {@code VMM_PROFILE=off}, monitor mode, or a stand-in allocator's tests. */
    static final PeakProfileUse NONE = new PeakProfileUse(null, null, (PeakProfile) null, false);

    private final PeakProfileStore store;
    private final ProgramIdentity program;
    /** The profile as read (null: none); read on a thread of its own while vmmkit's start goes on. */
    private final FutureTask<PeakProfile> loading;
    private final boolean explicitHint;
    private final long[] hintOf = new long[DeviceManagers.MAX_DEVICES];
    private final boolean[] fromProfile = new boolean[DeviceManagers.MAX_DEVICES];
    /** The figures this run saved (none until a save succeeds), for the stats file. */
    private volatile List<PeakProfile.DeviceFigures> savedFigures = List.of();

    /** A use of {@code loaded}, already read (null: none). */
    PeakProfileUse(PeakProfileStore store, ProgramIdentity program, PeakProfile loaded, boolean explicitHint) {
        this(store, program, () -> loaded, explicitHint);
        loading.run();
    }

    private PeakProfileUse(PeakProfileStore store, ProgramIdentity program, Callable<PeakProfile> reader, boolean explicitHint) {
        this.store = store;
        this.program = program;
        this.loading = new FutureTask<>(reader);
        this.explicitHint = explicitHint;
    }

    /** The profile {@code env} asks for, read; {@link #NONE} when off or when this process cannot be identified (one warning). */
    static PeakProfileUse fromEnvironment(Map<String, String> env) {
        if ("off".equals(env.getOrDefault(PeakProfileStore.KEY, "").trim())) return NONE;
        ProgramIdentity program;
        try {
            program = ProgramIdentity.current(env);
        } catch (Exception e) {
            InterposeLog.warnOnce("profile", "cannot tell which program this is; no peak profile", e);
            return NONE;
        }
        PeakProfileStore store = PeakProfileStore.fromEnvironment(env, program);
        if (store == null) return NONE;
        String hint = env.get("VMM_PEAK_HINT");
        PeakProfileUse use = new PeakProfileUse(store, program, () -> {
            PeakProfile loaded = store.load(program, (message, cause) -> InterposeLog.warnOnce("profile", message, cause));
            InterposeLog.info("peak profile " + store.file() + (loaded == null ? ": none yet" : ": read"));
            return loaded;
        }, hint != null && !hint.isBlank());
        // Reading (and parsing) overlaps the rest of the start: upcall stubs, opening the driver.
        Thread.ofPlatform().daemon().name("vmmkit-profile").start(use.loading);
        return use;
    }

    /** The profile read, waiting for the read to end; null when there is none. */
    private PeakProfile loaded() {
        try {
            return loading.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (ExecutionException e) {
            InterposeLog.warnOnce("profile", "cannot read the peak profile " + store.file(), e.getCause());
            return null;
        }
    }

    /**
     * The peak hint of {@code device}'s allocator: {@code configuredHint} (VMM_PEAK_HINT) when set,
     * else the profile's peak there, unless that exceeds the device's memory ({@code deviceBytes}, asked
     * only then); 0 for none. Remembered for the stats file.
     */
    synchronized long hintFor(int device, long configuredHint, LongSupplier deviceMemory) {
        long hint = configuredHint;
        PeakProfile loaded = explicitHint ? null : loaded();
        PeakProfile.DeviceFigures figures = loaded == null ? null : loaded.device(device);
        if (configuredHint == 0 && figures != null && figures.peakLiveBytes() > 0) {
            long deviceBytes;
            try {
                deviceBytes = deviceMemory.getAsLong();
            } catch (RuntimeException unknown) {
                deviceBytes = 0; // the check is a guard against a wrong profile; it must not cost the allocator
            }
            if (deviceBytes > 0 && figures.peakLiveBytes() > deviceBytes) {
                InterposeLog.warnOnce("profile-" + device, "the peak profile " + store.file() + " says device " + device
                        + " peaked at " + ByteSize.format(figures.peakLiveBytes()) + ", above its memory ("
                        + ByteSize.format(deviceBytes) + "); not used", null);
            } else {
                hint = figures.peakLiveBytes();
                fromProfile[device] = true;
            }
        }
        hintOf[device] = hint;
        return hint;
    }

    /** The peak hint device {@code device}'s allocator got (0: none). */
    synchronized long hintOf(int device) {
        return device >= 0 && device < hintOf.length ? hintOf[device] : 0;
    }

    /** Whether any device's hint came from the profile. */
    synchronized boolean used() {
        for (boolean b : fromProfile) if (b) return true;
        return false;
    }

    /**
     * Saves the run's peaks when it ended with status 0 and allocated something; a failure is one
     * warning. Returns whether the profile was written.
     */
    boolean save(List<StatsWriter.DeviceFigures> devices, int exitStatus) {
        if (store == null || exitStatus != 0) return false;
        List<PeakProfile.DeviceFigures> figures = new ArrayList<>();
        for (StatsWriter.DeviceFigures d : devices) {
            AllocatorStats s = d.stats();
            long peak = backedPeak(s);
            if (peak > 0) {
                figures.add(new PeakProfile.DeviceFigures(d.device(), peak, s.peakReservedBytes(), s.allocations()));
            }
        }
        if (figures.isEmpty()) return false;
        try {
            store.save(new PeakProfile(Instant.now().truncatedTo(ChronoUnit.SECONDS).toString(), program, figures));
            savedFigures = List.copyOf(figures);
            return true;
        } catch (Exception e) {
            InterposeLog.warnOnce("profile-save", "cannot save the peak profile " + store.file()
                    + " (VMM_PROFILE=off turns profiles off)", e);
            return false;
        }
    }

    /**
     * The peak of live bytes that memory backed: the peak of live bytes, but never above the peak of
     * physical memory. Every live byte of a running allocator lies in a mapped page, so the two differ
     * only where memory tags were paused: their blocks stay live with no memory under them (a
     * paused KV cache and the phase that used its memory meanwhile counted 194 GiB live on a
     * 141 GiB device, a profile the next run would refuse).
     */
    private static long backedPeak(AllocatorStats s) {
        return s.peakReservedBytes() > 0 ? Math.min(s.peakLiveBytes(), s.peakReservedBytes()) : s.peakLiveBytes();
    }

    /**
     * The stats file's {@code profile} value: {@code null} without a profile, else file, read, used,
     * saved and the peaks saved ({@code saved_peaks}, one {@code {"device":N,"bytes":N}} each).
     */
    String statsJson() {
        if (store == null) return "null";
        List<PeakProfile.DeviceFigures> saved = savedFigures;
        StringBuilder peaks = new StringBuilder();
        for (PeakProfile.DeviceFigures f : saved) {
            if (!peaks.isEmpty()) peaks.append(',');
            peaks.append("{\"device\":").append(f.device()).append(",\"bytes\":").append(f.peakLiveBytes()).append('}');
        }
        return "{\"file\":\"" + StatsWriter.escape(store.file().toString()) + "\",\"read\":" + (loaded() != null)
                + ",\"used\":" + used() + ",\"saved\":" + !saved.isEmpty() + ",\"saved_peaks\":[" + peaks + "]}";
    }
}
