package dev.vmmkit.core;

import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.Long2ObjectHashMap;
import org.agrona.collections.LongArrayList;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * The FREE blocks of one region, by what may still use them (seed 004's waiting list): one size
 * tree for blocks no queued work can touch ({@link StreamWaitList#NO_PENDING_WORK}), and one per
 * stream for blocks freed on that stream whose earlier work may still run. A block's tag
 * ({@link BlockTable#requestedOrStream}) names its tree.
 *
 * <p>Frees merge with FREE address neighbours of the same tag, and a stream's free absorbs
 * neighbours with no pending work (the merged block takes the stream's tag). Promotion moves blocks whose
 * stream's work has completed into the no-pending-work tree, where any stream may reuse them and
 * their pages may be unmapped. A stream whose tree is empty and whose event is idle is forgotten
 * (its event destroyed) once more than {@value #IDLE_STREAMS_KEPT} streams are tracked, so
 * thousands of short-lived streams do not grow the lists forever.
 *
 * <p>Not thread-safe: used under the region's lock. Only {@link #awaitOffLock} runs without it.
 */
final class StreamFreeLists {
    /** Idle streams kept (with their event) for reuse before empty ones are forgotten. */
    static final int IDLE_STREAMS_KEPT = 8;
    /** Whether a cache hit promotes covered device-wide frees first ({@link #promoteCoveredDeviceWide}). */
    private static final boolean PROMOTE_ON_HIT = !"false".equals(System.getProperty("vmmkit.freeLists.promoteOnHit"));

    private final BlockTable blocks;
    private final StreamWaitList waitList;
    private final SizeTree noPendingWork;
    private final Long2ObjectHashMap<SizeTree> byStream = new Long2ObjectHashMap<>();
    private final LongArrayList forgettable = new LongArrayList();
    private long freeSequence;
    /** Waits running without the lock; their events must stay alive until they finish. */
    private int waitsInFlight;
    private int[] scratch = new int[64];
    /** The device-wide free sequence promoted up to ({@link #promoteCoveredDeviceWide}). */
    private long promotedDeviceWideUpTo = -1;

    // Hot-path memo: the tree of the stream used last. Starts at NO_PENDING_WORK, which treeOf
    // answers before consulting the memo, so the memo never matches before it is set.
    private long lastStream = NO_PENDING_WORK;
    private SizeTree lastStreamTree;

    StreamFreeLists(BlockTable blocks, StreamEvents events, DeviceWideFence deviceFence) {
        this.blocks = blocks;
        this.waitList = new StreamWaitList(events, deviceFence);
        this.noPendingWork = new SizeTree(blocks);
    }

    /** The sequence number of a new free; events recorded later cover it. */
    long nextFreeSequence() {
        return ++freeSequence;
    }

    /** As {@link #nextFreeSequence()}, for a free on {@code stream}; a device-wide one asks for its synchronisation now. */
    long nextFreeSequence(long stream) {
        long sequence = ++freeSequence;
        if (stream == VmmManager.DEVICE_WIDE_STREAM) waitList.freedDeviceWide(sequence);
        return sequence;
    }

    /** The newest device-wide free this region published to its fence (a recorder's mark). */
    long deviceWidePublished() {
        return waitList.deviceWidePublished();
    }

    /** How far the fence has covered this region's device-wide frees. */
    long deviceWideCovered() {
        return waitList.deviceWideCovered();
    }

    /** The smallest FREE block of at least {@code bytes} that {@code stream} may use now, or NONE. */
    int bestFit(long bytes, long stream) {
        SizeTree own = reusesOwnFreesAtOnce(stream) ? treeOf(stream, false) : null;
        int a = own == null ? NONE : own.bestFit(bytes);
        int b = noPendingWork.bestFit(bytes);
        if (a == NONE) return b;
        if (b == NONE) return a;
        return blocks.size[a] <= blocks.size[b] ? a : b;
    }

    /**
     * How many FREE blocks of {@code bytes} up to {@code maxBytes} exist that {@code stream} may not
     * use yet (their free waits for work on another stream, or for a device synchronisation: a
     * cudaFree), counting no further than {@code most}. Slow path only: it looks at every stream's tree.
     */
    int waitingFits(long bytes, long maxBytes, long stream, int most) {
        boolean ownUsable = reusesOwnFreesAtOnce(stream);
        int n = 0;
        for (Long2ObjectHashMap<SizeTree>.KeyIterator it = byStream.keySet().iterator(); it.hasNext() && n < most; ) {
            long tag = it.nextLong();
            if (tag == stream && ownUsable) continue;
            n += byStream.get(tag).countSized(bytes, maxBytes, most - n);
        }
        return n;
    }

    /**
     * Whether a FREE block of at least {@code bytes} waits for the device-wide fence (a cudaFree
     * not yet covered by a device synchronisation): the request could use it once one runs.
     */
    boolean deviceWideFreeFits(long bytes) {
        SizeTree waiting = byStream.get(VmmManager.DEVICE_WIDE_STREAM);
        return waiting != null && waiting.countSized(bytes, Long.MAX_VALUE, 1) > 0;
    }

    /**
     * Memory freed on a stream is safe for that stream's later work at once. Not so for
     * {@link VmmManager#DEVICE_WIDE_STREAM}: it names no stream whose order would protect the
     * memory, so even an allocation "on" it waits for the device synchronisation.
     */
    static boolean reusesOwnFreesAtOnce(long stream) {
        return stream != VmmManager.DEVICE_WIDE_STREAM;
    }

    /** Adds FREE block {@code id} (tag set, in no tree), merged with FREE neighbours of the same tag. */
    void add(int id) {
        insert(coalesce(id));
    }

    void insert(int id) {
        treeOf(blocks.requestedOrStream[id], true).insert(id);
    }

    void remove(int id) {
        treeOf(blocks.requestedOrStream[id], false).remove(id);
    }

    /** The blocks no queued work can touch: the only ones whose pages may be unmapped. */
    SizeTree noPendingWork() {
        return noPendingWork;
    }

    /** Merges FREE block {@code id} (in no tree) with the FREE neighbours it may merge with ({@link #mergeable}); returns the merged block. */
    int coalesce(int id) {
        long tag = blocks.requestedOrStream[id];
        int n = blocks.next[id];
        if (n != NONE && blocks.kind[n] == FREE && mergeable(tag, blocks.requestedOrStream[n])) {
            remove(n);
            blocks.size[id] += blocks.size[n];
            blocks.freeSequence[id] = Math.max(blocks.freeSequence[id], blocks.freeSequence[n]);
            blocks.unlink(n);
            blocks.recycle(n);
        }
        int p = blocks.prev[id];
        if (p != NONE && blocks.kind[p] == FREE && mergeable(tag, blocks.requestedOrStream[p])) {
            remove(p);
            blocks.requestedOrStream[p] = tag;
            blocks.size[p] += blocks.size[id];
            blocks.freeSequence[p] = Math.max(blocks.freeSequence[id], blocks.freeSequence[p]);
            blocks.unlink(id);
            blocks.recycle(id);
            id = p;
        }
        return id;
    }

    /**
     * Whether a free block tagged {@code tag} merges with a free neighbour tagged {@code neighbourTag}:
     * the same tag, or a neighbour that no queued work can touch, which a stream's block absorbs
     * (that memory is as safe for the stream as its own frees; other streams wait for the merged
     * block's promotion). Without absorbing, a program on one stream, whose cache hits never promote,
     * keeps its free space in pairs of neighbours that best fit cannot join: the blocks promoted at
     * the last miss and the frees since. Device-wide frees absorb nothing: no one may reuse them
     * before a device synchronisation, so that would hide memory that is reusable now. Nor do they
     * merge with each other: nobody can use a pending device-wide block, so merging gains nothing,
     * and the merged block would wait for the newer free's synchronisation (a cudaMalloc/cudaFree
     * loop's two blocks, side by side, would both wait at every turn). Promotion merges them.
     */
    private static boolean mergeable(long tag, long neighbourTag) {
        if (tag == VmmManager.DEVICE_WIDE_STREAM) return false;
        return neighbourTag == tag || neighbourTag == NO_PENDING_WORK && reusesOwnFreesAtOnce(tag);
    }

    /**
     * Frees on {@code stream} up to the returned sequence number have completed (-1: none known
     * yet); records an event if none is in flight, so a later call can answer. Never waits.
     */
    long completedUpTo(long stream) {
        return waitList.completedUpTo(stream, freeSequence);
    }

    /**
     * Promotes the device-wide frees the fence has covered since the last look, so that best fit
     * sees them: a read of one value the fence's thread writes once per synchronisation, no driver
     * call, so a cache hit may call it. Without it a covered cudaFree's block waited for the next
     * miss, and hits carved other blocks meanwhile: a backward pass's gradient, asked for right
     * after the activation it could reuse was freed, went elsewhere, and the layout drifted from
     * the program's (a recorded training loop under {@code vmmkit run} held 1.21 times its peak of
     * live bytes where its replay held 1.035; docs/cold-path.md, "cudaFree's frees in a live run").
     * The system property {@code vmmkit.freeLists.promoteOnHit=false} leaves it to the misses
     * again, to measure what it saves.
     */
    void promoteCoveredDeviceWide() {
        if (!PROMOTE_ON_HIT) return;
        long covered = waitList.deviceWideCovered();
        if (covered <= promotedDeviceWideUpTo) return;
        promotedDeviceWideUpTo = covered;
        SizeTree tree = byStream.get(VmmManager.DEVICE_WIDE_STREAM);
        if (tree != null && !tree.isEmpty()) promote(tree, covered);
    }

    /** Promotes the blocks of every stream whose work has completed, without waiting. True if any moved. */
    boolean promoteCompleted() {
        boolean promoted = false;
        for (Long2ObjectHashMap<SizeTree>.KeyIterator it = byStream.keySet().iterator(); it.hasNext(); ) {
            long stream = it.nextLong();
            SizeTree tree = byStream.get(stream);
            if (!tree.isEmpty()) {
                long done = waitList.completedUpTo(stream, freeSequence);
                if (done >= 0) promoted |= promote(tree, done);
            }
            if (tree.isEmpty()) forgettable.addLong(stream);
        }
        forgetIdleStreams();
        return promoted;
    }

    // ---------------------------------------------------------------- waits without the lock

    /** Streams with pending frees, and what to wait for on each: made under the lock, awaited without it. */
    static final class Waits {
        final long[] streams;
        final long[] tokens;
        final long[] sequences;
        final boolean[] completed;

        Waits(int n) {
            streams = new long[n];
            tokens = new long[n];
            sequences = new long[n];
            completed = new boolean[n];
        }
    }

    /**
     * Under the lock: starts an event (or fence ticket) for every stream with pending frees;
     * {@code fresh} new ones even where one is in flight (for a wait that must not reuse a failed one).
     */
    Waits prepareWaits(boolean fresh) {
        int n = 0;
        for (SizeTree t : byStream.values()) if (!t.isEmpty()) n++;
        Waits w = new Waits(n);
        int i = 0;
        for (Long2ObjectHashMap<SizeTree>.KeyIterator it = byStream.keySet().iterator(); it.hasNext(); ) {
            long stream = it.nextLong();
            if (byStream.get(stream).isEmpty()) continue;
            w.streams[i] = stream;
            w.sequences[i] = freeSequence;
            w.tokens[i] = waitList.waitToken(stream, freeSequence, fresh);
            i++;
        }
        waitsInFlight++;
        return w;
    }

    /**
     * Without the lock: waits for the streams of {@code w}, at most {@code timeoutNanos} in all
     * (forever when negative). True if any completed.
     */
    boolean awaitOffLock(Waits w, long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        boolean any = false;
        for (int i = 0; i < w.streams.length; i++) {
            long left = timeoutNanos < 0 ? -1 : Math.max(0, deadline - System.nanoTime());
            // Past the deadline no event is queried (a driver call); the device-wide frees are still
            // looked at once (a read), so a wait that ends without them counts as given up (GivenUpWaits).
            if (left == 0 && w.streams[i] != VmmManager.DEVICE_WIDE_STREAM) continue;
            w.completed[i] = waitList.await(w.streams[i], w.tokens[i], left);
            any |= w.completed[i];
        }
        return any;
    }

    /** Under the lock again: promotes what the wait found completed. True if any block moved. */
    boolean promoteWaited(Waits w) {
        waitsInFlight--;
        boolean promoted = false;
        for (int i = 0; i < w.streams.length; i++) {
            if (!w.completed[i]) continue;
            SizeTree tree = byStream.get(w.streams[i]);
            if (tree != null) promoted |= promote(tree, w.sequences[i]);
        }
        return promoted;
    }

    /** True when memory freed device-wide waits for a device synchronisation. */
    boolean hasDeviceWideFrees() {
        SizeTree t = byStream.get(VmmManager.DEVICE_WIDE_STREAM);
        return t != null && !t.isEmpty();
    }

    /** Blocks until the frees made device-wide so far are safe (close only). */
    void synchronizeDeviceWide() {
        waitList.synchronize(VmmManager.DEVICE_WIDE_STREAM, freeSequence);
    }

    /** Bytes of every FREE block, pending or not. */
    long freeBytes() {
        return sumOf(noPendingWork) + pendingBytes();
    }

    /** Bytes of the FREE blocks that still wait for device work (for the slow path's log). */
    long pendingBytes() {
        long sum = 0;
        for (SizeTree t : byStream.values()) sum += sumOf(t);
        return sum;
    }

    /** Streams with a free tree (for figures and tests). */
    int trackedStreams() {
        return byStream.size();
    }

    /** Destroys the events. */
    void close() {
        waitList.close();
    }

    private long sumOf(SizeTree tree) {
        int[] ids = new int[Math.max(1, tree.size())];
        int n = tree.descending(ids);
        long sum = 0;
        for (int i = 0; i < n; i++) sum += blocks.size[ids[i]];
        return sum;
    }

    private boolean promote(SizeTree tree, long completedSequence) {
        int count = tree.size();
        if (scratch.length < count) scratch = new int[Math.max(count, scratch.length * 2)];
        int n = tree.descending(scratch); // add() below never uses scratch: no copy needed
        boolean any = false;
        for (int i = 0; i < n; i++) {
            int id = scratch[i];
            if (blocks.kind[id] != FREE || blocks.freeSequence[id] > completedSequence) continue;
            tree.remove(id);
            blocks.requestedOrStream[id] = NO_PENDING_WORK;
            add(id);
            any = true;
        }
        return any;
    }

    /** Forgets streams with empty trees and idle events, beyond the few kept for reuse. */
    private void forgetIdleStreams() {
        for (int i = 0; i < forgettable.size() && byStream.size() > IDLE_STREAMS_KEPT && waitsInFlight == 0; i++) {
            long stream = forgettable.getLong(i);
            if (stream == VmmManager.DEVICE_WIDE_STREAM || !waitList.isIdle(stream)) continue;
            byStream.remove(stream);
            waitList.forget(stream);
            if (lastStream == stream) {
                lastStream = NO_PENDING_WORK;
                lastStreamTree = null;
            }
        }
        forgettable.clear();
    }

    private SizeTree treeOf(long tag, boolean create) {
        if (tag == NO_PENDING_WORK) return noPendingWork;
        if (tag == lastStream) return lastStreamTree;
        SizeTree t = byStream.get(tag);
        if (t == null) {
            if (!create) return null;
            t = new SizeTree(blocks);
            byStream.put(tag, t);
        }
        lastStream = tag;
        lastStreamTree = t;
        return t;
    }
}
