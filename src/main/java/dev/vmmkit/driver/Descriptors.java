package dev.vmmkit.driver;

/** Closing the POSIX descriptors that {@link VmmDriver#exportHandle} hands out. */
public final class Descriptors {
    private Descriptors() {
    }

    /** Closes {@code fd}; negative descriptors are ignored. Returns close's result. */
    public static int close(int fd) {
        return fd < 0 ? 0 : LibC.close(fd);
    }
}
