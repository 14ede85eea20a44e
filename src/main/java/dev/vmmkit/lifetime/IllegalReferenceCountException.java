package dev.vmmkit.lifetime;

/** A reference count used wrongly: released below zero, or used or retained after it reached zero. */
public final class IllegalReferenceCountException extends IllegalStateException {
    public IllegalReferenceCountException(String message) {
        super(message);
    }
}
