package dev.vmmkit.interpose;

import dev.vmmkit.core.ByteSize;
import dev.vmmkit.core.PinAheadSetting;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.Drivers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The one check of the environment an interposed program runs with: the allocator's VMM_* settings
 * ({@link VmmConfig#problems}) and the interposer's own, {@code VMM_MODE}, {@code VMM_DRIVER},
 * {@code VMM_ZERO_COPY}, {@code VMM_WARM_UP}, {@code VMM_SERVES}, {@code VMM_DEVICE_MEMORY}, {@code VMM_PROFILE}, {@code VMM_PIN_AHEAD} ({@link PinAheadSetting}) and {@code VMM_PINNED_HOST}. {@code vmmkit run} refuses to start the program when it finds a problem
 * (exit 2); under a bare LD_PRELOAD the shim's Java side prints the problems and passes every call
 * to the CUDA runtime.
 */
public final class InterposeSettings {
    private static final Set<String> MODES = Set.of("vmm", "monitor");
    private static final Set<String> DRIVERS = Set.of("cuda", "host");
    private static final Set<String> SWITCHES = Set.of("0", "1");
    /** How the CUDA driver pins host memory for paused tags' contents (CudaTransfers). */
    private static final Set<String> PINNED_HOST = Set.of("alloc", "register");
    /**
     * What the program routes to vmmkit: {@code all} (the default: under {@code vmmkit run}, or as
     * PyTorch's whole allocator) or {@code tags} (only its memory tags' pools, as the Python module's
     * {@code use_for_tags} does; memory from elsewhere is then expected, and not reported at exit).
     * Each way in sets it, since a child process inherits its parent's value: {@code vmmkit run}
     * and the module's {@code use_as_torch_allocator} set {@code all}, {@code use_for_tags} {@code tags}.
     */
    public static final String SERVES = "VMM_SERVES";
    private static final Set<String> SERVES_VALUES = Set.of("all", "tags");
    /** How much device memory vmmkit may use; {@code vmmkit run --device-memory} sets it. */
    static final String DEVICE_MEMORY = "VMM_DEVICE_MEMORY";

    private InterposeSettings() {
    }

    /** One line per problem, naming the variable, its value and the rule; empty when all are good. */
    public static List<String> problems(Map<String, String> env) {
        List<String> problems = new ArrayList<>();
        oneOf(env, "VMM_MODE", MODES, problems);
        oneOf(env, "VMM_DRIVER", DRIVERS, problems);
        oneOf(env, "VMM_ZERO_COPY", SWITCHES, problems);
        oneOf(env, "VMM_PINNED_HOST", PINNED_HOST, problems);
        oneOf(env, StartUpWarmUp.SETTING, SWITCHES, problems);
        oneOf(env, SERVES, SERVES_VALUES, problems);
        String deviceMemory = env.get(DEVICE_MEMORY);
        if (deviceMemory != null && !deviceMemory.isBlank() && deviceMemoryBytes(env) <= 0) {
            problems.add(DEVICE_MEMORY + "=" + deviceMemory + ": must be a size above 0 (examples: 64M, 8G), "
                    + "the device memory vmmkit may use (the host emulation's size; a cap on a GPU)");
        }
        String profile = PeakProfileStore.problem(env);
        if (profile != null) problems.add(profile);
        String pinAhead = PinAheadSetting.problem(env);
        if (pinAhead != null) problems.add(pinAhead);
        problems.addAll(VmmConfig.problems(env));
        return problems;
    }

    /** Whether {@code VMM_SERVES} says the program routes only its memory tags to vmmkit. */
    static boolean servesTagsOnly(Map<String, String> env) {
        String value = env.get(SERVES);
        return value != null && value.trim().equals("tags");
    }

    /**
     * {@code VMM_DEVICE_MEMORY} in bytes: {@link Drivers#WHOLE_DEVICE} when unset, -1 when it is no
     * size (a problem {@link #problems} reports).
     */
    static long deviceMemoryBytes(Map<String, String> env) {
        String value = env.get(DEVICE_MEMORY);
        if (value == null || value.isBlank()) return Drivers.WHOLE_DEVICE;
        try {
            return ByteSize.parse(value);
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private static void oneOf(Map<String, String> env, String key, Set<String> allowed, List<String> problems) {
        String value = env.get(key);
        if (value != null && !value.isBlank() && !allowed.contains(value.trim())) {
            problems.add(key + "=" + value + ": must be " + String.join(" or ", allowed.stream().sorted().toList()));
        }
    }
}
