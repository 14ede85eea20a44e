package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.PinAheadSetting;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.VmmLog;

import java.util.Map;

/**
 * The real allocator: one {@link VmmManager} per device, over the driver named by
 * {@code VMM_DRIVER} ({@code cuda}, the default, or {@code host}, the emulation used by tests), with
 * {@code VMM_DEVICE_MEMORY} of device memory for vmmkit (e.g. {@code 64M}; see {@link Drivers#open}), configured by
 * {@link VmmConfig#fromEnvironment()}; with {@code VMM_ZERO_COPY=1}, every large request gets whole pages.
 * The peak hint of each device comes from {@code VMM_PEAK_HINT}, else from the program's peak profile
 * ({@link PeakProfileUse}).
 */
public final class VmmManagerFactory implements ResourceFactory {
    private final Map<String, String> env;
    private final PeakProfileUse profile;
    private final NotServedWatch notServed;
    private final FirstCalls firstCalls;

    public VmmManagerFactory() {
        this(System.getenv(), PeakProfileUse.NONE, null, null);
    }

    /** With {@code notServed} (or null), which then watches the device memory each device uses beyond vmmkit's. */
    VmmManagerFactory(Map<String, String> env, PeakProfileUse profile, NotServedWatch notServed,
                      FirstCalls firstCalls) {
        this.env = env;
        this.firstCalls = firstCalls;
        this.profile = profile;
        this.notServed = notServed;
    }

    /**
     * The factory named by {@value ResourceFactory#PROPERTY}, or this real one, whose peak hints come
     * from {@code profile} and whose devices {@code notServed} watches.
     */
    static ResourceFactory orSystemProperty(PeakProfileUse profile, NotServedWatch notServed,
                                            FirstCalls firstCalls) throws ReflectiveOperationException {
        String name = System.getProperty(ResourceFactory.PROPERTY);
        if (name == null || name.isBlank()) return new VmmManagerFactory(System.getenv(), profile, notServed, firstCalls);
        return (ResourceFactory) Class.forName(name.trim()).getDeclaredConstructor().newInstance();
    }

    @Override
    public ManagedMemoryResource open(int device) {
        StepTimes steps = new StepTimes();
        DriverKind kind = DriverKind.parse(env.getOrDefault("VMM_DRIVER", "cuda"));
        long deviceMemory = InterposeSettings.deviceMemoryBytes(env);
        if (deviceMemory < 0) {
            throw new IllegalArgumentException(InterposeSettings.DEVICE_MEMORY + "=" + env.get(InterposeSettings.DEVICE_MEMORY)
                    + ": not a size");
        }
        VmmDriver opened = Drivers.open(kind, device, deviceMemory);
        VmmDriver driver = firstCalls == null ? opened : firstCalls.watch(device, opened);
        steps.done("driver");
        try {
            VmmConfig config = VmmConfig.from(env);
            steps.done("settings");
            config = config.withPeakHintBytes(profile.hintFor(device, config.peakHintBytes(),
                    () -> driver.memoryInfo().totalBytes()));
            steps.done("peak profile");
            if (config.chunkBytes() % driver.granularity() != 0) {
                throw new IllegalArgumentException("VMM_CHUNK_SIZE=" + env.get("VMM_CHUNK_SIZE") + ": not a multiple of device "
                        + device + "'s allocation granularity (" + driver.granularity() + " bytes)");
            }
            VmmManager manager = new VmmManager(driver, config);
            steps.done("manager");
            // Opting into zero-copy copies: every large buffer gets whole pages, so any whole-buffer
            // copy of one may become a remap (a little more memory; see docs/zero-copy.md).
            if ("1".equals(env.get("VMM_ZERO_COPY"))) manager.useWholePagesFrom(0);
            manager.usePinAhead(PinAheadSetting.limitBytes(env));
            steps.done("pin-ahead limit");
            if (notServed != null) notServed.watch(device, ignored -> driver.memoryInfo(), ignored -> driver.otherProcesses(), manager);
            steps.done("not-served watch");
            if (VmmLog.isInfo()) {
                InterposeLog.info(new StringBuilder("device ").append(device).append(": allocator opened in ")
                        .append(steps.summary()).toString());
            }
            return manager;
        } catch (RuntimeException e) {
            driver.close();
            throw e;
        }
    }
}
