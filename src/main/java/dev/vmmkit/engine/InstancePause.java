package dev.vmmkit.engine;

import java.util.concurrent.locks.ReentrantLock;

/**
 * Whether one engine instance's device memory is given back (paused, its contents kept in host
 * memory by its worker) and what its pauses and resumes did. A pause runs only while nothing is in
 * flight; a request that enters meanwhile waits for it, then resumes the instance
 * ({@link #resumeIfPaused}). Only instances in a worker can pause ({@link RunningEngine#pausing}).
 */
final class InstancePause {
    /** The worker's side: the PAUSE and RESUME calls. */
    interface Calls {
        Paused pause() throws Failed;

        /** Returns the resume's time in ns. */
        long resume() throws Failed;
    }

    /**
     * What a pause did.
     *
     * @param pausedBytes    physical device memory given back
     * @param keptBytes      host memory holding the contents
     * @param stillHeldBytes device memory the model holds outside its tag (kept on the device)
     * @param nanos          the pause's time in the worker
     */
    record Paused(long pausedBytes, long keptBytes, long stillHeldBytes, long nanos) {
    }

    /** A pause or resume that did not complete; the instance stays as it was (or is given up by the caller). */
    static final class Failed extends Exception {
        private final boolean outOfMemory;

        Failed(String message, boolean outOfMemory) {
            super(message);
            this.outOfMemory = outOfMemory;
        }

        /** True when a resume found no device memory (another model may make room; then it is retried). */
        boolean outOfMemory() {
            return outOfMemory;
        }
    }

    private final Calls calls;
    private final ReentrantLock lock = new ReentrantLock();
    /**
     * False from the start of a pause until a resume completes. A pause clears it before it reads
     * the request count, and a request reads it after it entered the gate, so either the pause sees
     * the request or the request sees the pause and waits for it on the lock.
     */
    private volatile boolean running = true;
    private volatile Paused paused;
    /** Why a pause that failed partway left the instance unusable; null otherwise. */
    private volatile String broken;
    private volatile long pauses;
    private volatile long resumes;
    private volatile long lastPauseNanos;
    private volatile long lastResumeNanos;

    InstancePause(Calls calls) {
        this.calls = calls;
    }

    /**
     * Pauses the instance if nothing is in flight on {@code gate} and no pause or resume runs now.
     *
     * @return what the pause did, or null when the instance was busy or paused already
     * @throws Failed when the worker's pause failed (the caller evicts the instance instead)
     */
    Paused pauseIfIdle(InFlightGate gate) throws Failed {
        if (!lock.tryLock()) return null;
        try {
            if (!running) return null; // paused already, or left unusable by a failed pause
            running = false;
            if (gate.inFlight() > 0) {
                running = true;
                return null;
            }
            Paused done;
            try {
                done = calls.pause();
            } catch (Failed | RuntimeException e) {
                broken = e.getMessage(); // a request waiting on the lock must not run on memory half given back
                throw e;
            }
            paused = done;
            pauses++;
            lastPauseNanos = done.nanos();
            return done;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Brings a paused instance back (the caller has entered its gate). Waits while another pause or
     * resume runs. {@code makeRoom} runs before each try with the device bytes the resume needs; it
     * returns false when no room can be made, and the resume is not tried.
     *
     * @return the resume's time in ns, or 0 when the instance was running
     * @throws Failed when the resume failed or no room could be made (the instance stays paused), or
     *               when a pause failed partway (the caller gives the instance up)
     */
    long resumeIfPaused(RoomMaker makeRoom) throws Failed {
        if (running) return 0;
        lock.lock();
        try {
            if (running) return 0;
            if (broken != null) throw new Failed("its pause failed partway: " + broken, false);
            Paused now = paused;
            for (int attempt = 0; ; attempt++) {
                if (!makeRoom.makeRoom(now.pausedBytes(), attempt)) {
                    throw new Failed("no device memory for its " + now.pausedBytes() + " bytes", true);
                }
                try {
                    long nanos = calls.resume();
                    paused = null;
                    running = true;
                    resumes++;
                    lastResumeNanos = nanos;
                    return nanos;
                } catch (Failed e) {
                    if (!e.outOfMemory()) throw e;
                    // another process took the memory between the check and the resume: make room again
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Makes room on the device before a resume. */
    interface RoomMaker {
        /**
         * @param bytes   device memory the resume needs
         * @param attempt 0 for the first try, then 1, 2... after each resume that found no memory
         * @return false when no room can be made (the resume is not tried)
         */
        boolean makeRoom(long bytes, int attempt);
    }

    /**
     * Runs {@code body} (an eviction) unless a pause or resume runs now; returns its result, or null
     * when one runs (the instance is busy).
     */
    <T> T unlessTransitioning(java.util.function.Supplier<T> body) {
        if (!lock.tryLock()) return null;
        try {
            return body.get();
        } finally {
            lock.unlock();
        }
    }

    /** What the current pause did, or null while the instance runs. */
    Paused paused() {
        return paused;
    }

    long pauses() {
        return pauses;
    }

    long resumes() {
        return resumes;
    }

    long lastPauseNanos() {
        return lastPauseNanos;
    }

    long lastResumeNanos() {
        return lastResumeNanos;
    }
}
