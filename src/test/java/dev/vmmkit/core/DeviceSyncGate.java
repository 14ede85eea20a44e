package dev.vmmkit.core;

import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * Holds device synchronisations back until a test lets them through, as a device busy with a long
 * kernel would, so a test can look at the allocator while one is under way.
 */
final class DeviceSyncGate {
    private final Semaphore permits = new Semaphore(0);
    private final AtomicInteger arrived = new AtomicInteger();
    private final AtomicInteger returned = new AtomicInteger();
    private volatile boolean open;

    /** Called by a synchronisation: returns once let through. Interrupted (fence closing), it fails as a driver call would. */
    void pass() {
        arrived.incrementAndGet();
        if (open) {
            returned.incrementAndGet();
            return;
        }
        try {
            permits.acquire();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while held at the gate");
        }
        returned.incrementAndGet();
    }

    /** Lets {@code n} synchronisations through, waiting or still to come. */
    void letThrough(int n) {
        permits.release(n);
    }

    /** Lets every synchronisation through from now on. */
    void open() {
        open = true;
        permits.release(Integer.MAX_VALUE / 2);
    }

    /** Synchronisations that reached the gate so far. */
    int arrived() {
        return arrived.get();
    }

    /**
     * Synchronisations that passed the gate so far (the device finished them). One thread
     * synchronises at a time, so they pass in the order they arrived: the n-th to arrive has
     * finished once this reaches n.
     */
    int returned() {
        return returned.get();
    }

    /** Live fence threads ("vmmkit-device-fence") other than those in {@code earlier}. */
    static Set<Thread> fenceThreadsSince(Set<Thread> earlier) {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().equals(DeviceWideFence.THREAD_NAME) && !earlier.contains(t))
                .collect(Collectors.toSet());
    }

    /** Waits until {@code n} synchronisations have reached the gate (tests bound it with a timeout). */
    void awaitArrivals(int n) throws InterruptedException {
        while (arrived.get() < n) TimeUnit.MILLISECONDS.sleep(1);
    }

    /**
     * Opens the gate, closes {@code m} (when made) and checks that the driver holds nothing and no
     * fence thread made since {@code fenceThreadsBefore} is left; then closes {@code host}.
     */
    void openAndCloseCleanly(VmmManager m, dev.vmmkit.driver.host.HostDriver host, Set<Thread> fenceThreadsBefore) {
        open();
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> {
            if (m != null) {
                m.close();
                org.junit.jupiter.api.Assertions.assertTrue(host.usage().isEmpty(),
                        "after close the driver holds nothing: " + host.usage());
                org.junit.jupiter.api.Assertions.assertEquals(Set.of(), fenceThreadsSince(fenceThreadsBefore),
                        "close stops the fence's thread");
            }
            if (host != null) host.close();
        });
    }
}
