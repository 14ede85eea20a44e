package dev.vmmkit.trace;

import java.util.BitSet;

/**
 * The requests of one trace, in file order, held in primitive arrays: about 29 bytes an operation,
 * so a 320k-event trace costs ~9 MiB and replaying it allocates nothing.
 *
 * <p>Operation {@code i} is {@link #kind(int) kind(i)} ({@link #ALLOC}, {@link #FREE} or
 * {@link #COVER}) of the allocation named {@link #key(int) key(i)}. A free on
 * {@link #DEVICE_WIDE_STREAM} is a cudaFree, made when the program freed; its memory became
 * reusable at a later {@link #COVER} (a trace recorded by {@code vmmkit run --trace}), or never
 * in the trace. Keys are the addresses the recording allocator returned;
 * they only pair a free with its alloc. For a free, {@link #size(int)} is the size of the matching
 * alloc. Made by {@link TraceReader} or {@link SnapshotReader}, which have already checked that every
 * free matches a live alloc: the trace's own, or one of the {@link #allocationsBeforeTrace()} that
 * start it.
 */
public final class AllocationTrace {
    public static final byte ALLOC = 0;
    public static final byte FREE = 1;
    /**
     * The memory of an earlier cudaFree became reusable: the device finished the work before it.
     * Not a request: it moves no bytes in or out of use. {@link #coveredFree} says which free.
     */
    public static final byte COVER = 2;
    /** The stream of a cudaFree: the whole device's work before it, as {@code DeviceMemoryResource} names it. */
    public static final long DEVICE_WIDE_STREAM = -1L;

    private final String name;
    private final int ops;
    private final byte[] kinds;
    private final long[] keys;
    private final long[] sizes;
    private final long[] streams;
    private final int[] lineNumbers;
    private final int allocs;
    private final int covers;
    private final int maxLiveAllocations;
    private final long peakLiveBytes;
    private final int allocationsBeforeTrace;
    private final RecordedMemory recorded;
    /** The allocations that gave up waiting for cudaFrees' memory ({@link #waitGaveUp}). */
    private final BitSet waitsGivenUp;

    AllocationTrace(String name, int ops, byte[] kinds, long[] keys, long[] sizes, long[] streams,
                    int[] lineNumbers, int allocs, int covers, int maxLiveAllocations, long peakLiveBytes,
                    int allocationsBeforeTrace, RecordedMemory recorded, BitSet waitsGivenUp) {
        this.name = name;
        this.ops = ops;
        this.kinds = kinds;
        this.keys = keys;
        this.sizes = sizes;
        this.streams = streams;
        this.lineNumbers = lineNumbers;
        this.allocs = allocs;
        this.covers = covers;
        this.maxLiveAllocations = maxLiveAllocations;
        this.peakLiveBytes = peakLiveBytes;
        this.allocationsBeforeTrace = allocationsBeforeTrace;
        this.recorded = recorded;
        this.waitsGivenUp = waitsGivenUp;
    }

    /** What the recording allocator itself held, when the trace came from a PyTorch memory snapshot. */
    public java.util.Optional<RecordedMemory> recorded() {
        return java.util.Optional.ofNullable(recorded);
    }

    /** The trace's name, normally its file name; used in messages and reports. */
    public String name() {
        return name;
    }

    /** Number of operations: allocs, frees and covers. */
    public int ops() {
        return ops;
    }

    public int allocs() {
        return allocs;
    }

    public int frees() {
        return ops - allocs - covers;
    }

    /** Completions of cudaFrees written apart from them ({@link #COVER}); 0 for most traces. */
    public int covers() {
        return covers;
    }

    /**
     * For a {@link #COVER}: which device-wide free it completes, counting the trace's frees on
     * {@link #DEVICE_WIDE_STREAM} from 0 in order.
     */
    public int coveredFree(int op) {
        return (int) sizes[op];
    }

    /**
     * True for an {@link #ALLOC} whose request gave up waiting for memory freed by cudaFree in the
     * recorded program ({@code wait_gave_up}): the device was still busy past the allocator's bound,
     * so a replay must not wait for the device there either.
     */
    public boolean waitGaveUp(int op) {
        return waitsGivenUp.get(op);
    }

    /** How many allocations gave up waiting ({@link #waitGaveUp}); 0 for most traces. */
    public int waitsGivenUp() {
        return waitsGivenUp.cardinality();
    }

    /** Most allocations live at once; sizes the replayer's key-to-address map so it never grows. */
    public int maxLiveAllocations() {
        return maxLiveAllocations;
    }

    /** Highest sum of the sizes of live allocations, computed from the trace alone. */
    public long peakLiveBytes() {
        return peakLiveBytes;
    }

    /**
     * Allocations the program made before the trace began, its first operations (line 0): ones the
     * trace frees without allocating them (recording began late, or a ring buffer kept only the last
     * entries), and for a snapshot also ones still live in its segments. 0 when the trace begins with
     * the program.
     */
    public int allocationsBeforeTrace() {
        return allocationsBeforeTrace;
    }

    /** {@link #ALLOC}, {@link #FREE} or {@link #COVER}. */
    public byte kind(int op) {
        return kinds[op];
    }

    public long key(int op) {
        return keys[op];
    }

    /** Bytes requested (for a free: by the matching alloc; for a cover, see {@link #coveredFree}). */
    public long size(int op) {
        return sizes[op];
    }

    public long stream(int op) {
        return streams[op];
    }

    /**
     * 1-based line of the trace file that the operation came from, for messages; for a snapshot the
     * 1-based entry of its device trace; 0 for an allocation made before the trace began.
     */
    public int lineNumber(int op) {
        return lineNumbers[op];
    }
}
