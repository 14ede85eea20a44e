package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.VmmDriver;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The reservations, handles and mappings one check holds, so that whatever happens the check gives
 * all of them back: {@link #close()} unmaps, releases and frees what is still held. A check makes
 * its setup calls through here; calls that are expected to fail go to the driver directly.
 */
final class Scratch implements AutoCloseable {
    private final VmmDriver driver;
    private final Map<Long, Long> reservations = new TreeMap<>();
    private final Map<Long, Long> mappings = new TreeMap<>();
    private final Set<Long> handles = new LinkedHashSet<>();

    Scratch(VmmDriver driver) {
        this.driver = driver;
    }

    long reserve(long size) {
        long va = driver.reserve(size, 0);
        reservations.put(va, size);
        return va;
    }

    void addressFree(long va) {
        long size = reservations.get(va);
        driver.addressFree(va, size);
        reservations.remove(va);
    }

    long create(long size) {
        return create(size, true);
    }

    long create(long size, boolean exportable) {
        long handle = driver.create(size, exportable);
        handles.add(handle);
        return handle;
    }

    /** Imports an exported descriptor and holds the handle it gives, like one it created. */
    long importHandle(int fd, long size) {
        long handle = driver.importHandle(fd, size);
        handles.add(handle);
        return handle;
    }

    void release(long handle) {
        driver.release(handle);
        handles.remove(handle);
    }

    void map(long va, long size, long handle) {
        driver.map(va, size, handle);
        mappings.put(va, size);
    }

    void mapWithAccess(long va, long size, long handle) {
        driver.mapWithAccess(va, size, handle);
        mappings.put(va, size);
    }

    /** Records a mapping made through another driver (an adaptor over the same one). */
    void mapped(long va, long size) {
        mappings.put(va, size);
    }

    void unmap(long va, long size) {
        driver.unmap(va, size);
        mappings.keySet().removeIf(start -> start >= va && start < va + size);
    }

    /** Gives back everything still held, mappings first; throws if any of it could not be given back. */
    @Override
    public void close() {
        List<RuntimeException> failures = new ArrayList<>();
        mappings.forEach((va, size) -> attempt(failures, () -> driver.unmap(va, size)));
        handles.forEach(handle -> attempt(failures, () -> driver.release(handle)));
        reservations.forEach((va, size) -> attempt(failures, () -> driver.addressFree(va, size)));
        mappings.clear();
        handles.clear();
        reservations.clear();
        if (!failures.isEmpty()) {
            AssertionError leak = new AssertionError("cleanup failed: " + failures.getFirst().getMessage());
            failures.forEach(leak::addSuppressed);
            throw leak;
        }
    }

    private static void attempt(List<RuntimeException> failures, Runnable giveBack) {
        try {
            giveBack.run();
        } catch (RuntimeException e) {
            failures.add(e);
        }
    }
}
