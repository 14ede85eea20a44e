package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;

/**
 * Makes the allocator of one device. The interposer uses {@link VmmManagerFactory} unless the
 * system property {@value #PROPERTY} names another implementation (a class with a public no-argument
 * constructor); tests use that to run the native path over a stand-in allocator.
 */
public interface ResourceFactory {
    String PROPERTY = "vmmkit.interpose.resource";

    /** The allocator of {@code device}, or null when this factory serves none (its calls pass through). */
    ManagedMemoryResource open(int device);

    /**
     * The factory named by {@value #PROPERTY}, or the real one, whose peak hints come from {@code profile}
     * and whose devices {@code notServed} watches.
     */
    static ResourceFactory fromSystemProperty(PeakProfileUse profile, NotServedWatch notServed)
            throws ReflectiveOperationException {
        String name = System.getProperty(PROPERTY);
        if (name == null || name.isBlank()) return new VmmManagerFactory(System.getenv(), profile, notServed);
        return (ResourceFactory) Class.forName(name.trim()).getDeclaredConstructor().newInstance();
    }
}
