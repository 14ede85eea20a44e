package dev.vmmkit.driver.host;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The few libc functions the host emulation needs, bound once through the FFM API.
 *
 * <p>Pointers and {@code size_t}/{@code off_t} values are passed as 64-bit integers: on every 64-bit
 * Linux ABI they travel in the same registers as pointers, and a {@code long} needs no
 * {@link MemorySegment} per call. Each call records {@code errno} into a capture segment owned by
 * the calling thread, so {@link #errno()} after a failed call is that call's error and normal calls
 * allocate nothing.
 */
@SuppressWarnings("restricted") // binding native functions is this class's whole job
final class LibC {
    static final int PROT_NONE = 0;
    static final int PROT_READ = 0x1;
    static final int PROT_WRITE = 0x2;

    static final int MAP_SHARED = 0x01;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_FIXED = 0x10;
    static final int MAP_ANONYMOUS = 0x20;
    static final int MAP_NORESERVE = 0x4000;

    static final int MFD_CLOEXEC = 0x1;
    static final int SEEK_END = 2;

    /** What mmap returns on failure: {@code (void *) -1}. */
    static final long MAP_FAILED = -1L;

    static final int EINVAL = 22;
    static final int ENOMEM = 12;
    static final int EMFILE = 24;
    static final int ENFILE = 23;
    static final int ENOSPC = 28;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(PathElement.groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CAPTURE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    /** The name every memfd gets; allocated once for the life of the process. */
    private static final MemorySegment MEMFD_NAME = Arena.global().allocateFrom("vmmkit");

    private static final MethodHandle MMAP = bind("mmap",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = bind("munmap",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle MPROTECT = bind("mprotect",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle MEMFD_CREATE = bind("memfd_create",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle FTRUNCATE = bind("ftruncate",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle DUP = bind("dup",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle LSEEK = bind("lseek",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT));
    private static final MethodHandle CLOSE = bind("close",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle GETPAGESIZE = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("getpagesize"), FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle STRERROR = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private LibC() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow(name), descriptor, CAPTURE_ERRNO);
    }

    /** The errno of this thread's last call through this class. */
    static int errno() {
        return (int) ERRNO.get(CAPTURE.get(), 0L);
    }

    /** errno as text, e.g. "Cannot allocate memory (errno 12)"; for error messages only. */
    static String describeErrno(int errno) {
        try {
            MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
            return text.reinterpret(256).getString(0) + " (errno " + errno + ")";
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    static long mmap(long address, long length, int prot, int flags, int fd, long offset) {
        try {
            return (long) MMAP.invokeExact(CAPTURE.get(), address, length, prot, flags, fd, offset);
        } catch (Throwable t) {
            throw new AssertionError("mmap downcall failed", t);
        }
    }

    static int munmap(long address, long length) {
        try {
            return (int) MUNMAP.invokeExact(CAPTURE.get(), address, length);
        } catch (Throwable t) {
            throw new AssertionError("munmap downcall failed", t);
        }
    }

    static int mprotect(long address, long length, int prot) {
        try {
            return (int) MPROTECT.invokeExact(CAPTURE.get(), address, length, prot);
        } catch (Throwable t) {
            throw new AssertionError("mprotect downcall failed", t);
        }
    }

    /** A new anonymous memory file named "vmmkit", closed on exec; -1 on failure. */
    static int memfdCreate() {
        try {
            return (int) MEMFD_CREATE.invokeExact(CAPTURE.get(), MEMFD_NAME, MFD_CLOEXEC);
        } catch (Throwable t) {
            throw new AssertionError("memfd_create downcall failed", t);
        }
    }

    static int ftruncate(int fd, long length) {
        try {
            return (int) FTRUNCATE.invokeExact(CAPTURE.get(), fd, length);
        } catch (Throwable t) {
            throw new AssertionError("ftruncate downcall failed", t);
        }
    }

    /** A second descriptor of the same open file; -1 on failure. */
    static int dup(int fd) {
        try {
            return (int) DUP.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw new AssertionError("dup downcall failed", t);
        }
    }

    /** The size of the file behind {@code fd} (lseek to its end, which memfds allow); -1 on failure. */
    static long fileSize(int fd) {
        try {
            return (long) LSEEK.invokeExact(CAPTURE.get(), fd, 0L, SEEK_END);
        } catch (Throwable t) {
            throw new AssertionError("lseek downcall failed", t);
        }
    }

    static int close(int fd) {
        try {
            return (int) CLOSE.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw new AssertionError("close downcall failed", t);
        }
    }

    static long pageSize() {
        try {
            return (int) GETPAGESIZE.invokeExact();
        } catch (Throwable t) {
            throw new AssertionError("getpagesize downcall failed", t);
        }
    }
}
