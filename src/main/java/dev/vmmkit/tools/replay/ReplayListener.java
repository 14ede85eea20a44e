package dev.vmmkit.tools.replay;

/**
 * Follows a replay as it goes (the HTML report's samples, the progress bar). The replayer calls it
 * only after the operations it names, between operations and outside the timed calls, so a listener
 * that asks rarely costs the loop one comparison per operation.
 */
public interface ReplayListener {

    /** The first operation (0-based) after which to be called. */
    int first();

    /** Called after operation {@code op}; returns the next operation after which to be called (-1: never). */
    int afterOp(int op, ReplayTarget target);
}
