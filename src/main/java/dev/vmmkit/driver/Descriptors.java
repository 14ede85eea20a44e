package dev.vmmkit.driver;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;

/** Closing the POSIX descriptors that {@link VmmDriver#exportHandle} hands out. */
@SuppressWarnings("restricted") // one libc call
public final class Descriptors {
    private static final MethodHandle CLOSE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().findOrThrow("close"), FunctionDescriptor.of(JAVA_INT, JAVA_INT));

    private Descriptors() {
    }

    /** Closes {@code fd}; negative descriptors are ignored. Returns close's result. */
    public static int close(int fd) {
        if (fd < 0) return 0;
        try {
            return (int) CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw new AssertionError("close downcall failed", t);
        }
    }
}
