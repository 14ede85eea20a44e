package dev.vmmkit.engine;

/**
 * Counts the requests in flight on one engine instance and closes the instance to new ones: a
 * request {@link #tryEnter enters} before it calls the engine and {@link #exit exits} after; an
 * unload or reload closes the gate and then waits for the count to reach zero.
 */
final class InFlightGate {
    private int inFlight;
    private boolean closed;

    /** Counts a request in; false once the gate is closed (the caller looks for the new instance). */
    synchronized boolean tryEnter() {
        if (closed) return false;
        inFlight++;
        return true;
    }

    synchronized void exit() {
        if (--inFlight == 0) notifyAll();
    }

    /** Closes the gate only when nothing is in flight; true when it closed (or was closed). */
    synchronized boolean closeIfIdle() {
        if (inFlight > 0 && !closed) return false;
        closed = true;
        return true;
    }

    /** Closes the gate and waits until every request that entered has exited. */
    synchronized void closeAndDrain() {
        closed = true;
        boolean interrupted = false;
        while (inFlight > 0) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    synchronized int inFlight() {
        return inFlight;
    }
}
