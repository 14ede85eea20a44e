package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The allocators a Java process that runs vmmkit itself lends to vmmkit's native shim preloaded
 * into the same process. Native code there (an engine plugin calling {@code cudaMalloc}) then gets
 * its memory from the allocator the process already runs: one allocator and one set of figures per
 * process, never a second one the shim would make from the environment.
 *
 * <p>An engine worker {@link #claim claims} the shim as it starts and {@link #lend lends} its
 * allocator before the plugin runs; the shim's Java side ({@code interpose}) asks {@link #claimed}
 * when it starts and then serves each device from {@link #lent}, passing the calls of a device
 * with no allocator to the CUDA runtime.
 */
public final class ProcessAllocators {
    private static final int MAX_DEVICES = 64;
    private static final AtomicReferenceArray<ManagedMemoryResource> LENT = new AtomicReferenceArray<>(MAX_DEVICES);
    private static volatile boolean claimed;

    private ProcessAllocators() {
    }

    /** From now on the shim in this process serves only allocators lent here. */
    public static void claim() {
        claimed = true;
    }

    /** True once the process claimed the shim. */
    public static boolean claimed() {
        return claimed;
    }

    /**
     * Lends {@code resource} for {@code device}'s calls; the caller keeps owning it (the shim never
     * closes it). Claims the shim too.
     *
     * @throws IllegalArgumentException for a device ordinal out of range
     */
    public static void lend(int device, ManagedMemoryResource resource) {
        if (device < 0 || device >= MAX_DEVICES) throw new IllegalArgumentException("device " + device + " is out of range");
        claimed = true;
        LENT.set(device, resource);
    }

    /** The allocator lent for {@code device}, or null (then its calls go to the CUDA runtime). */
    public static ManagedMemoryResource lent(int device) {
        return device < 0 || device >= MAX_DEVICES ? null : LENT.get(device);
    }
}
