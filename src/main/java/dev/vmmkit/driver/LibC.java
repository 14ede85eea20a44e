package dev.vmmkit.driver;

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
 * The libc functions vmmkit calls (the host emulation's memory files and mappings, the descriptors
 * that IPC moves between processes, signals), bound once through the FFM API: the one place that
 * binds libc and captures errno.
 *
 * <p>Pointers and {@code size_t}/{@code off_t} values are passed as 64-bit integers: on every 64-bit
 * Linux ABI they travel in the same registers as pointers, and a {@code long} needs no
 * {@link MemorySegment} per call. Each call records {@code errno} into a capture segment owned by
 * the calling thread, so {@link #errno()} after a failed call is that call's error and normal calls
 * allocate nothing.
 */
@SuppressWarnings("restricted") // binding native functions is this class's whole job
public final class LibC {
    public static final int PROT_NONE = 0;
    public static final int PROT_READ = 0x1;
    public static final int PROT_WRITE = 0x2;

    public static final int MAP_SHARED = 0x01;
    public static final int MAP_PRIVATE = 0x02;
    public static final int MAP_FIXED = 0x10;
    public static final int MAP_ANONYMOUS = 0x20;
    public static final int MAP_NORESERVE = 0x4000;

    /** What mmap returns on failure: {@code (void *) -1}. */
    public static final long MAP_FAILED = -1L;

    /** madvise: back the range with transparent huge pages where the kernel can. */
    public static final int MADV_HUGEPAGE = 14;

    public static final int EPERM = 1;
    public static final int ESRCH = 3;
    public static final int EBADF = 9;
    public static final int ENOMEM = 12;
    public static final int EINVAL = 22;
    public static final int ENFILE = 23;
    public static final int EMFILE = 24;
    public static final int ENOSPC = 28;

    private static final int MFD_CLOEXEC = 0x1;
    private static final int SEEK_END = 2;
    private static final long SYS_PIDFD_OPEN = 434;   // the same number on x86-64 and arm64
    private static final long SYS_PIDFD_GETFD = 438;
    private static final int PR_SET_PTRACER = 0x59616d61;
    private static final long PR_SET_PTRACER_ANY = -1L;
    private static final int RLIMIT_NOFILE = 7;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(PathElement.groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CAPTURE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    /** The name the host emulation's memfds get; allocated once for the life of the process. */
    private static final MemorySegment MEMFD_NAME = Arena.global().allocateFrom("vmmkit");

    private static final MethodHandle MMAP = bind("mmap",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = bind("munmap",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle MADVISE = bind("madvise",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle MPROTECT = bind("mprotect",
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle MEMFD_CREATE = bind("memfd_create",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle FTRUNCATE = bind("ftruncate",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle DUP = bind("dup",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle DUP2 = bind("dup2",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle LSEEK = bind("lseek",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT));
    private static final MethodHandle CLOSE = bind("close",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle KILL = bind("kill",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle GETRLIMIT = bind("getrlimit",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle SETRLIMIT = bind("setrlimit",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle SYSCALL = bindVariadic("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle PRCTL = bindVariadic("prctl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle GETPAGESIZE = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("getpagesize"), FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle STRERROR = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private LibC() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow(name), descriptor, CAPTURE_ERRNO);
    }

    /** A function declared {@code (first, ...)}: the arguments after the first are variadic. */
    private static MethodHandle bindVariadic(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow(name), descriptor, CAPTURE_ERRNO,
                Linker.Option.firstVariadicArg(1));
    }

    /** The errno of this thread's last call through this class. */
    public static int errno() {
        return (int) ERRNO.get(CAPTURE.get(), 0L);
    }

    /** errno as text, e.g. "Cannot allocate memory (errno 12)"; for error messages only. */
    public static String describeErrno(int errno) {
        try {
            MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
            return text.reinterpret(256).getString(0) + " (errno " + errno + ")";
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    public static long mmap(long address, long length, int prot, int flags, int fd, long offset) {
        try {
            return (long) MMAP.invokeExact(CAPTURE.get(), address, length, prot, flags, fd, offset);
        } catch (Throwable t) {
            throw new AssertionError("mmap downcall failed", t);
        }
    }

    public static int munmap(long address, long length) {
        try {
            return (int) MUNMAP.invokeExact(CAPTURE.get(), address, length);
        } catch (Throwable t) {
            throw new AssertionError("munmap downcall failed", t);
        }
    }

    public static int madvise(long address, long length, int advice) {
        try {
            return (int) MADVISE.invokeExact(CAPTURE.get(), address, length, advice);
        } catch (Throwable t) {
            throw new AssertionError("madvise downcall failed", t);
        }
    }

    public static int mprotect(long address, long length, int prot) {
        try {
            return (int) MPROTECT.invokeExact(CAPTURE.get(), address, length, prot);
        } catch (Throwable t) {
            throw new AssertionError("mprotect downcall failed", t);
        }
    }

    /** A new anonymous memory file named "vmmkit", closed on exec; -1 on failure. Allocates nothing. */
    public static int memfdCreate() {
        return memfdCreate(MEMFD_NAME);
    }

    /** A new anonymous memory file named {@code name}, closed on exec; -1 on failure. */
    public static int memfdCreate(String name) {
        try (Arena arena = Arena.ofConfined()) {
            return memfdCreate(arena.allocateFrom(name));
        }
    }

    private static int memfdCreate(MemorySegment name) {
        try {
            return (int) MEMFD_CREATE.invokeExact(CAPTURE.get(), name, MFD_CLOEXEC);
        } catch (Throwable t) {
            throw new AssertionError("memfd_create downcall failed", t);
        }
    }

    public static int ftruncate(int fd, long length) {
        try {
            return (int) FTRUNCATE.invokeExact(CAPTURE.get(), fd, length);
        } catch (Throwable t) {
            throw new AssertionError("ftruncate downcall failed", t);
        }
    }

    /** A second descriptor of the same open file; -1 on failure. */
    public static int dup(int fd) {
        try {
            return (int) DUP.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw new AssertionError("dup downcall failed", t);
        }
    }

    /** Makes {@code target} a second descriptor of {@code fd}'s open file (closing what it was); -1 on failure. */
    public static int dup2(int fd, int target) {
        try {
            return (int) DUP2.invokeExact(CAPTURE.get(), fd, target);
        } catch (Throwable t) {
            throw new AssertionError("dup2 downcall failed", t);
        }
    }

    /** The size of the file behind {@code fd} (lseek to its end, which memfds allow); -1 on failure. */
    public static long fileSize(int fd) {
        try {
            return (long) LSEEK.invokeExact(CAPTURE.get(), fd, 0L, SEEK_END);
        } catch (Throwable t) {
            throw new AssertionError("lseek downcall failed", t);
        }
    }

    public static int close(int fd) {
        try {
            return (int) CLOSE.invokeExact(CAPTURE.get(), fd);
        } catch (Throwable t) {
            throw new AssertionError("close downcall failed", t);
        }
    }

    public static long pageSize() {
        try {
            return (int) GETPAGESIZE.invokeExact();
        } catch (Throwable t) {
            throw new AssertionError("getpagesize downcall failed", t);
        }
    }

    /** Sends signal {@code signal} to process {@code pid} (0 only checks that it exists); -1 on failure. */
    public static int kill(int pid, int signal) {
        try {
            return (int) KILL.invokeExact(CAPTURE.get(), pid, signal);
        } catch (Throwable t) {
            throw new AssertionError("kill downcall failed", t);
        }
    }

    /** A descriptor of process {@code pid} (Linux 5.6); -1 with errno ESRCH when it does not exist. */
    public static int pidfdOpen(int pid) {
        return (int) syscall(SYS_PIDFD_OPEN, pid, 0, 0);
    }

    /** A copy, in this process, of descriptor {@code fd} of the process behind {@code pidfd}; -1 on failure. */
    public static int pidfdGetfd(int pidfd, int fd) {
        return (int) syscall(SYS_PIDFD_GETFD, pidfd, fd, 0);
    }

    /**
     * Lets any process of this user take descriptors from this one with pidfd_getfd, where the
     * Yama security module would allow only ancestors (a child importing from its parent is the
     * usual case, as torch.multiprocessing does). Fails harmlessly where Yama is absent.
     */
    public static void allowDescriptorTakers() {
        try {
            int ignored = (int) PRCTL.invokeExact(CAPTURE.get(), PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0L, 0L, 0L);
        } catch (Throwable t) {
            throw new AssertionError("prctl downcall failed", t);
        }
    }

    /**
     * Raises this process's soft limit of open descriptors to its hard limit (a process that holds
     * one descriptor per page can pass the usual soft limit of 1024). Returns the soft limit in
     * force afterwards (-1 if unknown).
     */
    public static long raiseDescriptorLimit() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment limits = arena.allocate(JAVA_LONG, 2); // struct rlimit { rlim_t cur, max; }
            if ((int) GETRLIMIT.invokeExact(CAPTURE.get(), RLIMIT_NOFILE, limits) != 0) return -1;
            if (limits.getAtIndex(JAVA_LONG, 0) != limits.getAtIndex(JAVA_LONG, 1)) {
                limits.setAtIndex(JAVA_LONG, 0, limits.getAtIndex(JAVA_LONG, 1));
                int ignored = (int) SETRLIMIT.invokeExact(CAPTURE.get(), RLIMIT_NOFILE, limits);
                if ((int) GETRLIMIT.invokeExact(CAPTURE.get(), RLIMIT_NOFILE, limits) != 0) return -1;
            }
            return limits.getAtIndex(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw new AssertionError("getrlimit/setrlimit downcall failed", t);
        }
    }

    private static long syscall(long number, long a, long b, long c) {
        try {
            return (long) SYSCALL.invokeExact(CAPTURE.get(), number, a, b, c);
        } catch (Throwable t) {
            throw new AssertionError("syscall downcall failed", t);
        }
    }
}
