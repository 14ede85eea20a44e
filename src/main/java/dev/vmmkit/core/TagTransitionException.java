package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

/**
 * A pause or resume of a tag that failed partway. The tag is left consistent: each of its ranges
 * is either mapped with its contents or released with its kept copy. Calling the same operation
 * again continues where it stopped; the other operation undoes it.
 */
public final class TagTransitionException extends RuntimeException {
    private final String tag;
    private final boolean outOfMemory;

    TagTransitionException(String tag, String operation, String state, RuntimeException cause) {
        super(operation + " of memory tag '" + tag + "' failed: " + cause.getMessage() + "; the tag is " + state
                + " and consistent: call " + operation + " again to finish, or " + (operation.equals("pause") ? "resume" : "pause")
                + " to go back", cause);
        this.tag = tag;
        this.outOfMemory = cause instanceof DriverException d && d.isOutOfMemory();
    }

    public String tag() {
        return tag;
    }

    /** True when the device had no memory for the resume (retry once memory was given back). */
    public boolean isOutOfMemory() {
        return outOfMemory;
    }
}
