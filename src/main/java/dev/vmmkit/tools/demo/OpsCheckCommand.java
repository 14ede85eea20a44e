package dev.vmmkit.tools.demo;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit demo ops-check}: runs each kernel of a driver (CUDA) and of the host emulation on the
 * same inputs and compares them, one line per case. Exit 0 when all agree, 1 otherwise.
 */
@Command(name = "ops-check", mixinStandardHelpOptions = true,
        description = "Compare every kernel of a driver with the host emulation's, one line per case.")
public final class OpsCheckCommand implements Callable<Integer> {
    @Spec
    private CommandSpec spec;

    @Option(names = "--driver", defaultValue = "auto", paramLabel = "host|cuda|auto",
            description = "Driver whose kernels are checked. Default: ${DEFAULT-VALUE}.")
    private String driverKind;

    @Option(names = "--device", defaultValue = "0", paramLabel = "N", description = "Device ordinal. Default: ${DEFAULT-VALUE}.")
    private int device;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        try (VmmDriver target = Drivers.open(driverKind, device);
             VmmManager targetMemory = new VmmManager(target, VmmConfig.DEFAULTS);
             HostDriver host = HostDriver.open();
             VmmManager hostMemory = new VmmManager(host, VmmConfig.DEFAULTS)) {
            out.println("checking the kernels of driver " + target.name() + " (device " + device + ") against the host emulation");
            out.flush();
            List<OpsCheck.Outcome> outcomes = OpsCheck.run(
                    new OpsCheck.Side("host", hostMemory, host.compute()),
                    new OpsCheck.Side(target.name(), targetMemory, target.compute()));
            long failed = 0;
            for (OpsCheck.Outcome o : outcomes) {
                out.println(o.line());
                if (!o.passed()) failed++;
            }
            out.println((outcomes.size() - failed) + " passed, " + failed + " failed");
            out.flush();
            return failed == 0 ? 0 : 1;
        }
    }
}
