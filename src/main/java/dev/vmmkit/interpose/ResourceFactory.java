package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;

/**
 * Makes the allocator of one device. The interposer uses the real one ({@code VmmManagerFactory})
 * unless the system property {@value #PROPERTY} names another implementation (a class with a public
 * no-argument constructor); tests use that to run the native path over a stand-in allocator.
 */
public interface ResourceFactory {
    String PROPERTY = "vmmkit.interpose.resource";

    /** The allocator of {@code device}, or null when this factory serves none (its calls pass through). */
    ManagedMemoryResource open(int device);
}
