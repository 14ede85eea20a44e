package dev.vmmkit.driver;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Faults in fresh anonymous host memory from several threads at once, so that the kernel backs it
 * (with huge pages where transparent huge pages give them) before a registration with the driver
 * walks it: the driver's pinning faults pages one thread at a time. On an H100 host 8 GiB registered
 * in 1.5 s when the registration faulted the pages, 0.5 s when 8 threads had written them first
 * (scripts/gpu/pinning.py, register-lazy and register).
 */
public final class HostPages {
    /** More threads than this add little: the kernel's page allocator is the limit. */
    private static final int MAX_THREADS = 8;
    /**
     * Each thread writes at least this much: starting threads would cost more, and callers that pin
     * in 256 MiB pieces on several threads already (the allocator's pinning threads) get two each.
     */
    private static final long ONE_THREAD_BYTES = 128L << 20;
    private static final long HUGE_PAGE = 2L << 20;

    private HostPages() {
    }

    /** Writes zeros over {@code [address, address + bytes)} (fresh anonymous memory: its contents do not change). */
    @SuppressWarnings("restricted")
    public static void faultIn(long address, long bytes) {
        MemorySegment memory = MemorySegment.ofAddress(address).reinterpret(bytes);
        int threads = (int) Math.min(Math.min(MAX_THREADS, Runtime.getRuntime().availableProcessors()), Math.max(1, bytes / ONE_THREAD_BYTES));
        if (threads <= 1) {
            memory.fill((byte) 0);
            return;
        }
        long slice = (bytes / threads + HUGE_PAGE - 1) & -HUGE_PAGE; // whole huge pages each, so no two threads share one
        List<Thread> started = new ArrayList<>();
        for (long offset = slice; offset < bytes; offset += slice) {
            MemorySegment part = memory.asSlice(offset, Math.min(slice, bytes - offset));
            started.add(Thread.ofPlatform().daemon().name("vmmkit-fault-in").start(() -> part.fill((byte) 0)));
        }
        memory.asSlice(0, Math.min(slice, bytes)).fill((byte) 0);
        for (Thread thread : started) {
            boolean interrupted = false;
            while (true) {
                try {
                    thread.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true; // the pages must be written before the caller registers them
                }
            }
            if (interrupted) Thread.currentThread().interrupt();
        }
    }
}
