package dev.vmmkit.ipc;

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
 * The Linux calls that move descriptors between processes and share a small table: pidfd_open and
 * pidfd_getfd (Linux 5.6), memfd_create, mmap, kill(pid, 0) and prctl(PR_SET_PTRACER). Each records
 * errno for {@link #errno()}.
 */
@SuppressWarnings("restricted") // binding native functions is this class's whole job
final class Posix {
    static final int EPERM = 1;
    static final int ESRCH = 3;
    static final int EBADF = 9;

    private static final long SYS_PIDFD_OPEN = 434;   // the same number on x86-64 and arm64
    private static final long SYS_PIDFD_GETFD = 438;
    private static final int PR_SET_PTRACER = 0x59616d61;
    private static final long PR_SET_PTRACER_ANY = -1L;
    private static final int PROT_READ_WRITE = 0x3;
    private static final int MAP_SHARED = 0x01;
    private static final int MFD_CLOEXEC = 0x1;
    private static final int SEEK_END = 2;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option ERRNO_OPTION = Linker.Option.captureCallState("errno");
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(PathElement.groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CAPTURE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private static final MethodHandle SYSCALL = bind("syscall",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG), 1);
    private static final MethodHandle PRCTL = bind("prctl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG), 1);
    private static final MethodHandle MEMFD_CREATE = bind("memfd_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), -1);
    private static final MethodHandle FTRUNCATE = bind("ftruncate", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG), -1);
    private static final MethodHandle LSEEK = bind("lseek", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT), -1);
    private static final MethodHandle MMAP = bind("mmap",
            FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG), -1);
    private static final MethodHandle MUNMAP = bind("munmap", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG), -1);
    private static final MethodHandle KILL = bind("kill", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), -1);
    private static final MethodHandle GETRLIMIT = bind("getrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS), -1);
    private static final MethodHandle SETRLIMIT = bind("setrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS), -1);
    private static final int RLIMIT_NOFILE = 7;

    private Posix() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor descriptor, int firstVariadic) {
        MemorySegment symbol = LINKER.defaultLookup().findOrThrow(name);
        return firstVariadic < 0
                ? LINKER.downcallHandle(symbol, descriptor, ERRNO_OPTION)
                : LINKER.downcallHandle(symbol, descriptor, ERRNO_OPTION, Linker.Option.firstVariadicArg(firstVariadic));
    }

    static int errno() {
        return (int) ERRNO.get(CAPTURE.get(), 0L);
    }

    /** A descriptor of process {@code pid}; -1 with errno ESRCH when it does not exist. */
    static int pidfdOpen(int pid) {
        return (int) syscall(SYS_PIDFD_OPEN, pid, 0, 0);
    }

    /** A copy, in this process, of descriptor {@code fd} of the process behind {@code pidfd}; -1 on failure. */
    static int pidfdGetfd(int pidfd, int fd) {
        return (int) syscall(SYS_PIDFD_GETFD, pidfd, fd, 0);
    }

    /**
     * Lets any process of this user take descriptors from this one with pidfd_getfd, where the
     * Yama security module would allow only ancestors (a child importing from its parent is the
     * usual case, as torch.multiprocessing does). Fails harmlessly where Yama is absent.
     */
    static void allowDescriptorTakers() {
        try {
            int ignored = (int) PRCTL.invokeExact(CAPTURE.get(), PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0L, 0L, 0L);
        } catch (Throwable t) {
            throw new AssertionError("prctl downcall failed", t);
        }
    }

    /**
     * Raises this process's soft limit of open descriptors to its hard limit: an export keeps one
     * descriptor per page open, more than the usual soft limit of 1024 for a large allocation.
     * Returns the soft limit in force afterwards (-1 if unknown).
     */
    static long raiseDescriptorLimit() {
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

    /** A new memfd named {@code name}, of {@code size} bytes, closed on exec; -1 on failure. */
    static int memfd(String name, long size) {
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) MEMFD_CREATE.invokeExact(CAPTURE.get(), arena.allocateFrom(name), MFD_CLOEXEC);
            if (fd >= 0 && (int) FTRUNCATE.invokeExact(CAPTURE.get(), fd, size) != 0) {
                dev.vmmkit.driver.Descriptors.close(fd);
                return -1;
            }
            return fd;
        } catch (Throwable t) {
            throw new AssertionError("memfd_create downcall failed", t);
        }
    }

    /** Bytes in the file behind {@code fd}; -1 when it has no size (not a file). */
    static long fileSize(int fd) {
        try {
            return (long) LSEEK.invokeExact(CAPTURE.get(), fd, 0L, SEEK_END);
        } catch (Throwable t) {
            throw new AssertionError("lseek downcall failed", t);
        }
    }

    /** {@code size} bytes of {@code fd} mapped shared and writable; null on failure. */
    static MemorySegment mapShared(int fd, long size) {
        try {
            long address = (long) MMAP.invokeExact(CAPTURE.get(), 0L, size, PROT_READ_WRITE, MAP_SHARED, fd, 0L);
            return address == -1L ? null : MemorySegment.ofAddress(address).reinterpret(size);
        } catch (Throwable t) {
            throw new AssertionError("mmap downcall failed", t);
        }
    }

    static void unmap(MemorySegment segment) {
        try {
            int ignored = (int) MUNMAP.invokeExact(CAPTURE.get(), segment.address(), segment.byteSize());
        } catch (Throwable t) {
            throw new AssertionError("munmap downcall failed", t);
        }
    }

    /** True while process {@code pid} exists (it may belong to another user). */
    static boolean isAlive(int pid) {
        try {
            return (int) KILL.invokeExact(CAPTURE.get(), pid, 0) == 0 || errno() == EPERM;
        } catch (Throwable t) {
            throw new AssertionError("kill downcall failed", t);
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
