package dev.vmmkit.tools;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.cuda.CudaCallWarmUp;

import java.io.PrintStream;
import java.util.Locale;

/**
 * {@code vmmkit driver-bench --first SIZE}: a process's first large allocation made straight on
 * the driver from Java (create, reserve, map, setAccess, one call each, no allocator), as
 * {@code scripts/gpu/first_vmm.c} makes it from C. Side by side, the two say whether the JVM's
 * process makes the driver's calls slower than in a C program, and which step before them
 * ({@link Before}, up to making vmmkit's allocator) does.
 */
final class FirstAllocationTiming {
    /** What the process does before the timed allocation. */
    enum Before {
        /** Nothing but opening the driver: the downcalls run for the first time inside the timing. */
        NOTHING,
        /** Every downcall linked and called once with arguments the driver refuses, as vmmkit's start-up does. */
        LINKED,
        /** Linked, then one allocation of the granularity made and freed, as a program's small first request does. */
        SMALL,
        /** As SMALL, then the thread idles 200 ms: the JVM's start-up work (its compilers) has settled. */
        SETTLED,
        /** As SMALL, then the device synchronised (a program's cudaDeviceSynchronize, vmmkit's fence after a cudaFree). */
        SYNCED,
        /**
         * Linked, then vmmkit's allocator made on the driver (its threads started), a 4 KiB request
         * served and freed as cudaFree frees it, and the device synchronised: what a program's
         * warm-up pair does under {@code vmmkit run}. The timed calls are still the driver's own.
         */
        MANAGER
    }

    private static final long SETTLE_MILLIS = 200;

    private FirstAllocationTiming() {
    }

    static void run(VmmDriver driver, long size, Before before, PrintStream out) throws InterruptedException {
        if (before != Before.NOTHING) CudaCallWarmUp.run();
        if (before == Before.SMALL || before == Before.SETTLED || before == Before.SYNCED) {
            long small = driver.granularity();
            long va = driver.reserve(small, 0);
            long handle = driver.create(small);
            driver.map(va, small, handle);
            driver.setAccess(va, small);
            driver.unmap(va, small);
            driver.release(handle);
            driver.addressFree(va, small);
        }
        if (before == Before.SETTLED) Thread.sleep(SETTLE_MILLIS);
        if (before == Before.SYNCED) driver.events().synchronizeDevice();
        VmmManager manager = null;
        if (before == Before.MANAGER) {
            manager = new VmmManager(driver, VmmConfig.fromEnvironment());
            long small = manager.allocate(4096, 0);
            manager.deallocate(small, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            driver.events().synchronizeDevice();
        }
        try {
            timeFirstAllocation(driver, size, before, out);
        } finally {
            if (manager != null) manager.close();
        }
    }

    private static void timeFirstAllocation(VmmDriver driver, long size, Before before, PrintStream out) {
        long t0 = System.nanoTime();
        long handle = driver.create(size);
        long t1 = System.nanoTime();
        long va = driver.reserve(size, 0);
        long t2 = System.nanoTime();
        driver.map(va, size, handle);
        long t3 = System.nanoTime();
        driver.setAccess(va, size);
        long t4 = System.nanoTime();
        driver.unmap(va, size);
        driver.release(handle);
        driver.addressFree(va, size);
        out.printf(Locale.ROOT, "{\"test\":\"java-first\",\"before\":\"%s\",\"size\":%d,\"create_us\":%.1f,\"reserve_us\":%.1f,"
                        + "\"map_us\":%.1f,\"set_access_us\":%.1f,\"total_us\":%.1f}%n",
                before.name().toLowerCase(Locale.ROOT), size, (t1 - t0) / 1e3, (t2 - t1) / 1e3, (t3 - t2) / 1e3,
                (t4 - t3) / 1e3, (t4 - t0) / 1e3);
    }
}
