package dev.vmmkit.interpose;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The settings that send a framework's every buffer to vmmkit, where the framework's default would
 * keep them from it. JAX's BFC and platform allocators make their memory with cuMemCreate (JAX 0.11),
 * which vmmkit does not serve; its cuda_async allocator asks the device's default pool for each
 * buffer, which vmmkit serves, and without preallocation it asks for no buffer of most of the device
 * first. {@code vmmkit run} sets these for the program unless they are set already; the exit line
 * names them when a JAX program ran without them.
 */
public final class FrameworkSettings {
    public static final String JAX_ALLOCATOR = "XLA_PYTHON_CLIENT_ALLOCATOR";
    public static final String JAX_PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE";
    static final String JAX_ALLOCATOR_SERVED = "cuda_async";
    static final String JAX_PREALLOCATE_SERVED = "false";

    private FrameworkSettings() {
    }

    /** The settings vmm mode gives a program that has not chosen them itself ({@code current}: its environment). */
    public static Map<String, String> missingFrom(Map<String, String> current) {
        Map<String, String> missing = new LinkedHashMap<>();
        if (!current.containsKey(JAX_ALLOCATOR)) missing.put(JAX_ALLOCATOR, JAX_ALLOCATOR_SERVED);
        if (!current.containsKey(JAX_PREALLOCATE)) missing.put(JAX_PREALLOCATE, JAX_PREALLOCATE_SERVED);
        return missing;
    }

    /** How the exit line says them: {@code set A=a and B=b}. */
    static String jaxAdvice() {
        return "set " + JAX_ALLOCATOR + "=" + JAX_ALLOCATOR_SERVED + " and " + JAX_PREALLOCATE + "=" + JAX_PREALLOCATE_SERVED;
    }
}
