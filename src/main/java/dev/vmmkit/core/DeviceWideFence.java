package dev.vmmkit.core;

import dev.vmmkit.driver.StreamEvents;

import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits for the whole device on a thread of its own, for cudaFree-style frees
 * ({@link VmmManager#DEVICE_WIDE_STREAM}). Such a free must wait for earlier work on every stream,
 * and no event on a stream the allocator knows covers a non-blocking stream it has never seen; a
 * device synchronisation does. Running it here means neither the freeing thread nor an allocation
 * blocks on it.
 *
 * <p>Two ways to ask for a synchronisation. A device-wide free {@linkplain DeviceWideFrees#publish
 * publishes} its region's free sequence ({@link #register}: one {@link DeviceWideFrees} per region)
 * and {@linkplain #wake wakes} the thread if it sleeps: a plain store to a cache line of the region's
 * own and a read of one the thread writes only when it parks, no atomic read-modify-write and no
 * line the thread writes at every synchronisation, so a malloc/free loop on one core and this
 * thread on another do not pass cache lines back and forth at every pair. A slow path or a close
 * takes a {@linkplain #request ticket} instead (an atomic increment), and later reads whether it is
 * {@linkplain #completedTicket complete} or waits for it (the tickets and their waits are
 * {@link SynchronisationTickets}; this class serves them). The thread, {@linkplain #start started}
 * when the manager opens (or else on the first request or free), turns published frees that no
 * synchronisation covers yet into a ticket of its own, reads every region's published sequence
 * ({@link FreesToCover}), calls {@link StreamEvents#synchronizeDevice}, then marks those
 * sequences {@linkplain DeviceWideFrees#covered covered} and completes every ticket issued before
 * that synchronisation <em>started</em> ({@link #startedTicket}; work submitted before such a
 * ticket or free was queued before the synchronisation, so it is finished). Requests made meanwhile
 * share the next synchronisation. A failed synchronisation is logged once and retried after a
 * pause; its tickets and frees stay waiting, so nothing is lost.
 *
 * <p>While frees come in a stream, the thread looks for work for {@link #SPIN_NANOS} ns between
 * synchronisations before it parks, reading the regions' lines only from {@link #POLL_NANOS} ns
 * after its last synchronisation (so a free finds its line still its own most of the time): a
 * program that frees device-wide in a loop (cudaMalloc + cudaFree of one size) gets its frees
 * covered a batch at a time, with no wake-up latency (tens of microseconds) between; a ticket is
 * served at its next spin. After a lone synchronisation it parks at once; an idle program costs
 * nothing.
 *
 * <p>A lone synchronisation for frees that nobody can use yet is put off
 * ({@link SynchronisationPutOff}: a grace, then a hold while slow paths are in their driver
 * calls). The wait ends at once when a request or a wait asks for a
 * synchronisation, or a slow path finds a waiting free that would fit its request ({@link #hurry}).
 * Frees in a stream are never put off.
 *
 * <p>No synchronisation runs while a CUDA stream capture is under way ({@link StreamCaptures}: it
 * would invalidate the capture). The thread wakes the waits without a time limit, which fail
 * meanwhile ({@link SynchronisationTickets}), and waits for the capture's end.
 *
 * <p>Thread-safe: one per manager, shared by its regions.
 *
 * <p>{@link #onCallingThread} makes a fence without a thread, for seeded tests that must repeat
 * exactly: each request synchronises at once, on the caller's thread.
 */
final class DeviceWideFence implements AutoCloseable {
    static final String THREAD_NAME = "vmmkit-device-fence";
    private static final System.Logger LOG = System.getLogger(DeviceWideFence.class.getName());
    private static final long FIRST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long LONGEST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    /**
     * How long the thread looks for new tickets before it parks, after a synchronisation that came
     * within {@link #STREAM_NANOS} of the one before (frees arriving in a stream: a malloc/free
     * loop). After a lone synchronisation it parks at once: its spin slowed the driver calls the
     * program made meanwhile (a first 1 GiB cudaMalloc after a cudaFree took 255.6 us with the spin,
     * 201.3 without, median of 5 on an H100; the same calls from Java alone 370 against 277). The
     * system property {@code vmmkit.fence.spinNanos} sets it, to measure that
     * ({@code scripts/gpu/cold-path.sh}'s FIRST_VARIANTS).
     */
    static final long SPIN_NANOS = Math.max(0, Long.getLong("vmmkit.fence.spinNanos", 100_000));
    /** Two synchronisations this close make a stream of frees, after which the thread spins. */
    static final long STREAM_NANOS = 1_000_000;
    /**
     * The shortest time between two synchronisations the thread starts for published frees: it
     * reads the lines that frees write only once this long has passed since the last one (each read
     * may pull a line from the freeing core, and each synchronisation slows the freeing thread's
     * driver calls). So frees that come back to back share one synchronisation every this many
     * nanoseconds, while a free after a quiet spell is read at once (and its synchronisation put
     * off, see the class comment); anything that waits ({@link #request}, {@link #awaitCovered}) is
     * synchronised at once. On an H200 a cudaMalloc + cudaFree pair of 2
     * or 64 MiB took 1.3-1.4 us when the thread read the lines every 250 ns, and 0.93-0.99 us with
     * this rule ({@code scripts/gpu/cold-path.sh}, whose {@code FENCE_POLLS} sets the system property
     * {@code vmmkit.fence.pollNanos} to compare; docs/cold-path.md).
     */
    static final long POLL_NANOS = Math.max(0, Long.getLong("vmmkit.fence.pollNanos", 16_000));
    /** The slot of {@link #parking} in its middle, 128 bytes from either end. */
    private static final int PARKED = 16;

    private final StreamEvents events;
    private final boolean onCallingThread;
    /** Whether a device-wide free publishes its sequence at once (false: the next miss publishes it). */
    private final boolean publishesAtFree;
    /** Where a replay covers the frees (a fence {@link #forReplay}); null for any other fence. */
    private final ReplayedCovers replayedCovers;
    /** Stream captures under way, during which no synchronisation may run. */
    private final StreamCaptures captures = new StreamCaptures(this::synchroniseBeforeCapture);
    /** When a lone synchronisation waits, and for how long. */
    private final SynchronisationPutOff putOff;
    /** The tickets this fence serves, and the waits for them. */
    private final SynchronisationTickets tickets;
    /**
     * PARKED: 1 while the thread is parked (a request or a free unparks it). Alone on its lines: a
     * free reads it, and the thread writes it only when it parks, not at every synchronisation as it
     * does its tickets' progress.
     */
    private final AtomicLongArray parking = new AtomicLongArray(2 * PARKED);
    /** Every region's device-wide frees. */
    private final FreesToCover regions = new FreesToCover();
    private final GivenUpWaits givenUpWaits = new GivenUpWaits();
    /** Set by a wait for published frees: the thread reads them at its next spin, however recent its last synchronisation. */
    private volatile boolean lookNow;
    /** The serving thread, or null; set and cleared under this object's monitor. */
    private volatile Thread thread;
    /** The thread's newest ticket for published frees that no wait asked for (only the thread touches it). */
    private long unaskedTicket = -1;

    DeviceWideFence(StreamEvents events) {
        this(events, false, true, SynchronisationPutOff.GRACE_NANOS, SynchronisationPutOff.HOLD_NANOS);
    }

    /** A fence whose lone synchronisations wait {@code graceNanos}, then up to {@code holdNanos} for slow paths (tests). */
    DeviceWideFence(StreamEvents events, long graceNanos, long holdNanos) {
        this(events, false, true, graceNanos, holdNanos);
    }

    private DeviceWideFence(StreamEvents events, boolean onCallingThread, boolean publishesAtFree,
                            long graceNanos, long holdNanos) {
        this.events = events;
        this.onCallingThread = onCallingThread;
        this.publishesAtFree = publishesAtFree;
        // Only a fence with no thread of its own, whose frees are published, is covered by a replay.
        this.replayedCovers = onCallingThread && publishesAtFree ? new ReplayedCovers(regions) : null;
        this.putOff = new SynchronisationPutOff(graceNanos, holdNanos);
        this.tickets = new SynchronisationTickets(captures, onCallingThread ? this::synchronizeOnce : null);
    }

    /** A fence that synchronises inside {@link #request}, on the caller's thread (deterministic tests). */
    static DeviceWideFence onCallingThread(StreamEvents events) {
        return new DeviceWideFence(events, true, false, 0, 0);
    }

    /**
     * A fence for a replay of a recorded trace ({@link ReplayedCovers}): no thread; frees publish at
     * once, as in a live run, and stay waiting until the replay covers them where the trace says
     * the program's device finished, or a wait synchronises here, as it would have in the program.
     */
    static DeviceWideFence forReplay(StreamEvents events) {
        return new DeviceWideFence(events, true, true, 0, 0);
    }

    /** Where a replay covers this fence's frees ({@link #forReplay}); null for any other fence. */
    ReplayedCovers replayedCovers() {
        return replayedCovers;
    }

    /**
     * Starts the thread now, when its manager opens, rather than inside a program's first
     * cudaFree: starting a thread takes tens to hundreds of microseconds, and the new thread's
     * first driver call sets the driver up for it ({@link StreamEvents#prepareThread}), which
     * otherwise ran beside the program's next allocation and slowed its driver calls (a 224 us
     * synchronisation during a first 1 GiB cudaMalloc on an H100). Does nothing for a fence on the
     * calling thread.
     */
    void start() {
        if (!onCallingThread) startThread();
    }

    /** The stream captures this fence must not synchronise during (the shim reports them). */
    StreamCaptures captures() {
        return captures;
    }

    /** A ticket that completes once a device synchronisation started after this call has finished. */
    long request() {
        if (onCallingThread) return tickets.issueAndServeHere();
        long ticket = tickets.issue();
        wake(); // after the increment: a thread about to park sees the ticket
        putOff.wakeIfWaiting();
        return ticket;
    }

    /** An allocating thread enters a slow path's driver calls ({@link SynchronisationPutOff#requestDriving}). */
    void requestDriving() {
        putOff.requestDriving();
    }

    /**
     * A slow path found a free waiting for this fence that would fit its request: whatever
     * synchronisation is put off runs now. Does not wait.
     */
    void hurry() {
        if (onCallingThread) return;
        lookNow = true;
        wake();
        putOff.wakeIfWaiting();
    }

    /** An allocating thread left a slow path's driver calls ({@link SynchronisationPutOff#requestDriven}). */
    void requestDriven() {
        putOff.requestDriven();
    }

    /** The frees of one more region; {@link #forget} it when the region closes. */
    DeviceWideFrees register() {
        return regions.register();
    }

    /** A closed region's frees: no synchronisation covers them any more. */
    void forget(DeviceWideFrees frees) {
        regions.forget(frees);
    }

    /**
     * Called after a region {@linkplain DeviceWideFrees#publish published} a free (a volatile store
     * first, so a thread about to park sees it or is seen parked): starts or unparks the thread when
     * it does not run. Reads two values the thread rarely writes.
     */
    void wake() {
        if (onCallingThread) return;
        Thread serving = thread;
        if (serving == null) {
            startThread();
        } else if (parking.get(PARKED) != 0) {
            LockSupport.unpark(serving);
        }
    }

    /**
     * Waits at most {@code timeoutNanos} until the frees of {@code frees} up to {@code sequence} are
     * covered; true when they are. Has the thread look at the published frees at once, then
     * {@linkplain SynchronisationTickets#awaitCovered waits}. Returns false at once while a stream
     * capture is under way. With a fence on the calling thread, synchronises here.
     */
    boolean awaitCovered(DeviceWideFrees frees, long sequence, long timeoutNanos) {
        if (frees.covered() >= sequence) return true;
        if (waitUntilCovered(frees, sequence, timeoutNanos)) return true;
        givenUpWaits.count();
        return false;
    }

    private boolean waitUntilCovered(DeviceWideFrees frees, long sequence, long timeoutNanos) {
        if (captures.holdsCallsBack()) return false; // no synchronisation runs before the capture ends
        if (onCallingThread) {
            if (replayedCovers != null && replayedCovers.givingUpWaits()) return false; // as the recorded program's wait did
            request();
            return frees.covered() >= sequence;
        }
        lookNow = true; // the thread reads the published frees at once, however recent its last synchronisation
        wake();
        putOff.wakeIfWaiting();
        return tickets.awaitCovered(frees, sequence, timeoutNanos);
    }

    /** The timed waits ({@link #awaitCovered}) that ended with their frees not covered, per thread and in all. */
    GivenUpWaits givenUpWaits() {
        return givenUpWaits;
    }

    private synchronized void startThread() {
        if (thread == null && !tickets.closed()) thread = Thread.ofPlatform().daemon().name(THREAD_NAME).start(this::serve);
    }

    /** The newest ticket whose synchronisation has started ({@link SynchronisationTickets#startedTicket}). */
    long startedTicket() {
        return tickets.startedTicket();
    }

    /** False for a fence that synchronises on the calling thread (a test's, a replay's). */
    boolean servesInBackground() {
        return !onCallingThread;
    }

    /**
     * True when a device-wide free publishes its sequence at once; false for a fence that
     * synchronises on the calling thread for tests, whose frees wait for the next miss to publish.
     */
    boolean publishesAtFree() {
        return publishesAtFree;
    }

    /** Every ticket up to the returned one is complete ({@link SynchronisationTickets#completedTicket}). */
    long completedTicket() {
        return tickets.completedTicket();
    }

    /** Blocks until {@code ticket} is complete, or throws ({@link SynchronisationTickets#await(long)}). */
    void await(long ticket) {
        tickets.await(ticket);
    }

    /**
     * As {@link #await(long)}, but false at once while a stream capture is under way
     * ({@link SynchronisationTickets#awaitUnlessCapturing}).
     */
    boolean awaitUnlessCapturing(long ticket) {
        return tickets.awaitUnlessCapturing(ticket);
    }

    /**
     * Waits at most {@code timeoutNanos} for {@code ticket}; true when it completed
     * ({@link SynchronisationTickets#await(long, long)}).
     */
    boolean await(long ticket, long timeoutNanos) {
        return tickets.await(ticket, timeoutNanos);
    }

    /** Stops the thread, after a synchronisation it may be running; tickets still waiting never complete. */
    @Override
    public void close() {
        if (!tickets.close()) return; // every wait fails from now on
        Thread serving;
        synchronized (this) {
            serving = thread; // after closing: a startThread that found the fence open has set it by now
        }
        if (serving == null) return;
        LockSupport.unpark(serving);
        serving.interrupt(); // cuts a retry pause short
        boolean interrupted = false;
        while (serving.isAlive()) {
            try {
                serving.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    /**
     * One attempt on the caller's thread, for {@link #onCallingThread}: the tickets run it under their
     * monitor, one at a time.
     */
    private void synchronizeOnce(long target) {
        DeviceWideFrees[] covering = regions.read();
        try {
            if (!synchronizeUnlessCapturing(target, covering)) throw SynchronisationTickets.captureUnderway();
        } catch (RuntimeException e) {
            tickets.failed(target, e);
        }
    }

    /**
     * Before a stream capture begins: synchronises for the frees published so far, as cudaFree
     * would have at each free, so that memory freed before the capture serves allocations made
     * during it. Never throws: after a failure the frees wait, as after any failed synchronisation.
     */
    private void synchroniseBeforeCapture() {
        if (tickets.closed() || !regions.anyUncovered()) return;
        try {
            await(request());
        } catch (RuntimeException e) {
            // the frees stay waiting (another capture under way, a failed synchronisation, closed)
        }
    }

    /**
     * One device synchronisation for {@code target}, then its frees ({@code covering}) covered and
     * the tickets up to {@code target} completed; false, with nothing run, while a stream capture is
     * under way. A capture waiting to begin is let go only after that publication, so a wait for a
     * ticket the synchronisation covered never meets the capture instead.
     */
    private boolean synchronizeUnlessCapturing(long target, DeviceWideFrees[] covering) {
        if (!captures.startUnlessCapturing()) return false;
        try {
            tickets.markStarted(target);
            events.synchronizeDevice();
            regions.cover(covering);
            tickets.completedUpTo(target);
        } finally {
            captures.finished();
        }
        return true;
    }

    /**
     * While a stream capture is under way: wakes the waits without a time limit (they fail, see
     * {@link #await(long)}), then waits for the capture's end; false once closed.
     */
    private boolean waitOutCaptures() {
        tickets.wakeWaits();
        return captures.awaitNone(tickets::closed);
    }

    private void serve() {
        try {
            try {
                events.prepareThread();
            } catch (RuntimeException e) {
                LOG.log(Level.DEBUG, "could not ready the fence's thread; its first synchronisation will: " + e.getMessage());
            }
            serveUntilClosed();
        } finally {
            threadEnded();
        }
    }

    private void serveUntilClosed() {
        long retryPause = FIRST_RETRY_PAUSE_NANOS;
        long lastSynchronised = System.nanoTime() - POLL_NANOS; // the first free is read at once
        boolean synchronisedBefore = false; // the thread's start is no synchronisation: no spin after the first
        boolean inAStream = false;
        while (true) {
            long target = nextTarget(lastSynchronised, inAStream);
            if (target < 0) return;
            boolean lone = !synchronisedBefore || System.nanoTime() - lastSynchronised >= STREAM_NANOS;
            if (lone && target == unaskedTicket) {
                long ownTicket = target;
                putOff.await(() -> tickets.newestIssued() != ownTicket || lookNow || tickets.closed());
                Thread.interrupted(); // close() interrupts after setting closed
                target = tickets.newestIssued(); // a request that ended the wait shares this synchronisation
            }
            DeviceWideFrees[] covering = regions.read(); // before the synchronisation starts
            try {
                if (!synchronizeUnlessCapturing(target, covering)) {
                    if (!waitOutCaptures()) return;
                    continue;
                }
            } catch (RuntimeException e) {
                tickets.failed(target, e);
                if (!pause(retryPause)) return;
                retryPause = Math.min(2 * retryPause, LONGEST_RETRY_PAUSE_NANOS);
                continue;
            }
            retryPause = FIRST_RETRY_PAUSE_NANOS;
            long now = System.nanoTime();
            inAStream = synchronisedBefore && now - lastSynchronised < STREAM_NANOS;
            synchronisedBefore = true;
            lastSynchronised = now;
        }
    }

    /**
     * Waits for a ticket not yet completed or a published free not yet covered (which gets a ticket
     * of the thread's own; frees are read only from {@link #POLL_NANOS} after {@code lastSynchronised},
     * or when a wait asks): looks for a while, then parks; returns the newest ticket issued, which
     * the next synchronisation covers, or -1 once closed.
     */
    private long nextTarget(long lastSynchronised, boolean inAStream) {
        long now = System.nanoTime();
        long spinUntil = inAStream ? now + SPIN_NANOS : now;
        long readFrom = lastSynchronised + POLL_NANOS; // at most one synchronisation of frees per POLL_NANOS
        while (!tickets.closed()) {
            long newest = tickets.newestIssued();
            if (newest != tickets.completedTicket()) return newest;
            boolean asked = lookNow;
            if (now - readFrom >= 0 || asked) {
                if (asked) lookNow = false; // written only when set: frees read the line it shares
                if (regions.anyUncovered()) {
                    long ticket = tickets.issue();
                    if (!asked) unaskedTicket = ticket;
                    return ticket;
                }
            }
            if (now - spinUntil < 0) {
                Thread.onSpinWait();
                now = System.nanoTime();
                continue;
            }
            parking.set(PARKED, 1);
            // A request or free after this line sees PARKED and unparks.
            if (tickets.newestIssued() == tickets.completedTicket() && !regions.anyUncovered() && !tickets.closed()) {
                LockSupport.park(this);
            }
            parking.set(PARKED, 0);
            Thread.interrupted(); // close() interrupts after setting closed; the loop condition tells
            now = System.nanoTime();
            spinUntil = now + SPIN_NANOS;
        }
        return -1;
    }

    /** Whether the thread puts a lone synchronisation off now (tests). */
    boolean holding() {
        return putOff.waiting();
    }

    /** Allocating threads inside a slow path's driver calls now (tests: none once every call returned). */
    int requestsDriving() {
        return putOff.requestsDriving();
    }

    /** Normally after close; if an Error ended the thread early, the next request starts another. */
    private synchronized void threadEnded() {
        if (thread == Thread.currentThread()) thread = null;
    }

    /** Sleeps before a retry; false once closed. */
    private boolean pause(long nanos) {
        if (tickets.closed()) return false;
        try {
            TimeUnit.NANOSECONDS.sleep(nanos);
        } catch (InterruptedException e) {
            // close() interrupts; otherwise just retry sooner
        }
        return !tickets.closed();
    }
}
