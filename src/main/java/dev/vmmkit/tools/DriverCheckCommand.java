package dev.vmmkit.tools;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.conformance.CheckResult;
import dev.vmmkit.driver.conformance.ConformanceTarget;
import dev.vmmkit.driver.conformance.DriverConformance;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit driver-check}: runs the driver conformance checks against a real or emulated driver
 * and prints one line per check, then {@code N passed, N failed} (and {@code , N skipped} if any).
 * Exit code 0 when nothing failed, 1 when a check failed, 2 when the driver cannot be opened.
 */
@Command(name = "driver-check",
        mixinStandardHelpOptions = true,
        description = "Check that a driver behaves as vmmkit expects (one line per check).")
public final class DriverCheckCommand implements Callable<Integer> {
    static final int EXIT_FAILED = 1;
    static final int EXIT_NO_DRIVER = 2;

    @Spec
    private CommandSpec spec;

    @Mixin
    private DriverOptions driverOptions;

    @Option(names = "--oom-probe-limit-gib", defaultValue = "256", paramLabel = "GiB",
            description = "Skip the out-of-memory check when the device has more free than this. Default: ${DEFAULT-VALUE}.")
    private long oomProbeLimitGib;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        VmmDriver driver;
        try {
            driver = driverOptions.open();
        } catch (DriverException e) {
            return cannotOpen(err, "cannot open the " + driverOptions.kindName() + " driver on device "
                    + driverOptions.device() + ": " + e.getMessage());
        } catch (IllegalArgumentException e) {
            return cannotOpen(err, e.getMessage());
        }
        int passed = 0;
        int failed = 0;
        int skipped = 0;
        try (driver) {
            ConformanceTarget target;
            try {
                target = ConformanceTarget.of(driver, driverOptions::open, oomProbeLimitGib << 30);
            } catch (IllegalArgumentException e) {
                return cannotOpen(err, e.getMessage());
            }
            out.println("driver " + driver.name() + ", device " + driver.device()
                    + ", granularity " + (driver.granularity() >> 10) + " KiB");
            for (DriverConformance.Check check : DriverConformance.checks()) {
                CheckResult result = DriverConformance.run(check, target);
                out.println(result.line());
                out.flush();
                switch (result.status()) {
                    case PASS -> passed++;
                    case FAIL -> failed++;
                    case SKIP -> skipped++;
                }
            }
        }
        out.println(passed + " passed, " + failed + " failed" + (skipped > 0 ? ", " + skipped + " skipped" : ""));
        out.flush();
        return failed == 0 ? 0 : EXIT_FAILED;
    }

    private static int cannotOpen(PrintWriter err, String why) {
        err.println("vmmkit driver-check: " + why);
        err.flush();
        return EXIT_NO_DRIVER;
    }
}
