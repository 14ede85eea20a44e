package dev.vmmkit.trace;

import net.razorvine.pickle.PickleException;
import org.agrona.collections.Long2LongHashMap;
import org.agrona.collections.LongArrayList;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

/**
 * Reads a PyTorch memory snapshot, the pickle that {@code torch.cuda.memory._dump_snapshot} writes
 * (a dict with {@code segments} and {@code device_traces}), into one {@link AllocationTrace} per
 * device, each with the {@link RecordedMemory} PyTorch's own allocator held.
 *
 * <ul>
 *   <li>Requests: a device trace's {@code alloc} and {@code free_completed} entries in order, with
 *       their streams (memory is reusable once the free completed, not when it was requested).</li>
 *   <li>PyTorch's reserved bytes: its {@code segment_alloc}/{@code segment_map} and
 *       {@code segment_free}/{@code segment_unmap} entries, anchored at the end to the
 *       snapshot's segments (their {@code total_size} is what was mapped when it was taken).</li>
 *   <li>A truncated trace (PyTorch keeps the last {@code max_entries}): a free of a block allocated
 *       before the first entry, and a block still allocated in the segments that the trace never
 *       allocated, are allocations made before it; they are allocated first, in that order, so the
 *       replay starts from the state the trace began in.</li>
 * </ul>
 */
public final class SnapshotReader {
    private static final int PICKLE_PROTO = 0x80;

    private SnapshotReader() {
    }

    /** True when {@code in} (mark supported, decompressed) starts as a pickle of protocol 2 or later does. */
    static boolean looksLikePickle(InputStream in) throws IOException {
        in.mark(2);
        int first = in.read();
        int protocol = in.read();
        in.reset();
        return first == PICKLE_PROTO && protocol >= 2 && protocol <= 5;
    }

    /**
     * Reads the snapshot from {@code in} (decompressed), naming it {@code source} in messages; every
     * device that has entries or segments, or only {@code device} when given.
     */
    static List<AllocationTrace> read(InputStream in, String source, OptionalInt device) throws IOException {
        SnapshotUnpickler unpickler = new SnapshotUnpickler();
        Object root;
        try {
            root = unpickler.load(in);
        } catch (java.io.EOFException | java.util.zip.ZipException e) {
            throw e;   // the gzip layer's: TraceFiles names it
        } catch (IOException | RuntimeException | StackOverflowError | OutOfMemoryError e) {
            // A damaged pickle reaches the library's code as whatever that code meets: a stack that
            // runs empty, a negative or absurd length (one array too large to make, nothing else
            // lost), objects nested past the thread's stack. Each is the file's fault, said as such.
            throw unreadable(source, e);
        }
        try {
            return traces(unpickler, root, source, device);
        } catch (RuntimeException | StackOverflowError e) {
            throw unreadable(source, e); // objects of the wrong kind where a snapshot has its fields
        }
    }

    private static IOException unreadable(String source, Throwable e) {
        String why = e instanceof PickleException || e instanceof IOException ? e.getMessage() // "premature end of file", say
                : e instanceof StackOverflowError ? "objects nested too deeply"
                : e instanceof OutOfMemoryError ? "it declares an object too large to read"
                : "damaged: " + e;
        return new IOException(source + ": not a readable PyTorch memory snapshot (" + why + ")", e);
    }

    private static List<AllocationTrace> traces(SnapshotUnpickler unpickler, Object root, String source, OptionalInt device)
            throws IOException {
        if (!(root instanceof Map<?, ?> snapshot) || !(snapshot.get("device_traces") instanceof List<?> deviceTraces)) {
            throw new IOException(source + ": a pickle, but not a PyTorch memory snapshot (no 'device_traces'; "
                    + "write one with torch.cuda.memory._dump_snapshot)");
        }
        List<?> segments = snapshot.get("segments") instanceof List<?> list ? list : List.of();
        if (device.isPresent() && (device.getAsInt() < 0 || device.getAsInt() >= deviceTraces.size())) {
            throw new IOException(source + ": no device " + device.getAsInt() + " in the snapshot (it has "
                    + deviceTraces.size() + (deviceTraces.size() == 1 ? " device, 0)" : " devices, 0 to " + (deviceTraces.size() - 1) + ")"));
        }
        List<AllocationTrace> traces = new ArrayList<>();
        for (int d = 0; d < deviceTraces.size(); d++) {
            if (device.isPresent() && device.getAsInt() != d) continue;
            SnapshotEntries entries = unpickler.entriesOf(deviceTraces.get(d));
            List<Map<?, ?>> deviceSegments = segmentsOf(segments, d);
            if (device.isEmpty() && entries.count() == 0 && deviceSegments.isEmpty()) continue;
            String name = deviceTraces.size() == 1 ? source : source + " device " + d;
            traces.add(new DeviceTrace(name, entries, deviceSegments).build());
        }
        return traces;
    }

    private static List<Map<?, ?>> segmentsOf(List<?> segments, int device) {
        List<Map<?, ?>> result = new ArrayList<>();
        for (Object segment : segments) {
            if (segment instanceof Map<?, ?> map && number(map, "device", 0) == device) result.add(map);
        }
        return result;
    }

    private static long number(Map<?, ?> map, String field, long absent) {
        return map.get(field) instanceof Number n ? n.longValue() : absent;
    }

    /** One device's trace and segments, made into an {@link AllocationTrace}. */
    private record DeviceTrace(String name, SnapshotEntries entries, List<Map<?, ?>> segments) {

        AllocationTrace build() throws TraceFormatException {
            LongArrayList before = new LongArrayList();   // (addr, size, stream) of each allocation made before the trace
            Long2LongHashMap liveAtEnd = allocationsBeforeTrace(before);
            addStillAllocatedBlocks(liveAtEnd, before);

            TraceBuilder builder = new TraceBuilder();
            int seeds = before.size() / 3;
            long[] reservedAtOp = new long[seeds + entries.count()];
            for (int i = 0; i < before.size(); i += 3) {
                if (!builder.allocBeforeTrace(before.getLong(i), before.getLong(i + 1), before.getLong(i + 2))) {
                    throw new TraceFormatException(name, 0, "block " + Long.toUnsignedString(before.getLong(i))
                            + " was freed twice without an alloc between");
                }
            }
            long reserved = 0;   // relative to the start, which only the end can tell
            long peak = 0;
            for (int i = 0; i < entries.count(); i++) {
                switch (entries.action(i)) {
                    case SnapshotEntries.ALLOC -> {
                        reservedAtOp[builder.ops()] = reserved;
                        builder.alloc(entries.addr(i), entries.size(i), entries.stream(i), entries.place(i));
                    }
                    case SnapshotEntries.FREE_COMPLETED -> {
                        reservedAtOp[builder.ops()] = reserved;
                        builder.free(entries.addr(i), entries.stream(i), entries.place(i));
                    }
                    case SnapshotEntries.SEGMENT_GROW -> peak = Math.max(peak, reserved += entries.size(i));
                    case SnapshotEntries.SEGMENT_SHRINK -> reserved -= entries.size(i);
                    default -> throw new IllegalStateException("unexpected snapshot action " + entries.action(i));
                }
            }
            long reservedAtEnd = 0;
            for (Map<?, ?> segment : segments) reservedAtEnd += number(segment, "total_size", 0);
            // What was reserved before the first entry; never below 0 (a segment list that disagrees with the trace).
            long start = Math.max(0, reservedAtEnd - reserved);
            long[] reservedOverOps = Arrays.copyOf(reservedAtOp, builder.ops());
            for (int op = 0; op < reservedOverOps.length; op++) reservedOverOps[op] += start;
            RecordedMemory recorded = new RecordedMemory(start + peak, builder.peakLiveBytes(), reservedOverOps);
            return builder.build(name, recorded);
        }

        /** Pairs allocs with frees; a free of a block the trace never allocated was allocated before it. Returns the blocks live at the end. */
        private Long2LongHashMap allocationsBeforeTrace(LongArrayList before) throws TraceFormatException {
            Long2LongHashMap live = new Long2LongHashMap(TraceBuilder.NOT_LIVE);
            for (int i = 0; i < entries.count(); i++) {
                long addr = entries.addr(i);
                if (entries.action(i) == SnapshotEntries.ALLOC) {
                    if (live.get(addr) != TraceBuilder.NOT_LIVE) {
                        throw new TraceFormatException(name, entries.place(i), "alloc of block "
                                + Long.toUnsignedString(addr) + ", which is already live");
                    }
                    live.put(addr, entries.size(i));
                } else if (entries.action(i) == SnapshotEntries.FREE_COMPLETED && live.remove(addr) == TraceBuilder.NOT_LIVE) {
                    before.addLong(addr);
                    before.addLong(entries.size(i));
                    before.addLong(entries.stream(i));
                }
            }
            return live;
        }

        /** Blocks allocated in the snapshot's segments that the trace never allocated: made before it, still live. */
        private void addStillAllocatedBlocks(Long2LongHashMap liveAtEnd, LongArrayList before) {
            for (Map<?, ?> segment : segments) {
                long address = number(segment, "address", 0);
                long stream = number(segment, "stream", 0);
                if (!(segment.get("blocks") instanceof List<?> blocks)) continue;
                for (Object item : blocks) {
                    if (!(item instanceof Map<?, ?> block)) continue;
                    long size = number(block, "size", 0);
                    long blockAddress = number(block, "address", address);
                    Object state = block.get("state");
                    boolean allocated = "active_allocated".equals(state) || "active_pending_free".equals(state);
                    if (allocated && liveAtEnd.get(blockAddress) == TraceBuilder.NOT_LIVE) {
                        before.addLong(blockAddress);
                        before.addLong(size);
                        before.addLong(stream);
                    }
                    address = blockAddress + size;
                }
            }
        }
    }
}
