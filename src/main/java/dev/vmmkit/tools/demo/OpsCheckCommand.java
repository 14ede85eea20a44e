package dev.vmmkit.tools.demo;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.tools.DriverOptions;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
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

    /** The driver whose kernels are checked. */
    @Mixin
    private DriverOptions driverOptions;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        try (VmmDriver target = driverOptions.open();
             VmmManager targetMemory = new VmmManager(target, VmmConfig.DEFAULTS);
             HostDriver host = HostDriver.open();
             VmmManager hostMemory = new VmmManager(host, VmmConfig.DEFAULTS);
             DeviceCompute hostKernels = Computes.open(host);
             DeviceCompute targetKernels = Computes.open(target)) {
            out.println("checking the kernels of driver " + target.name() + " (device " + driverOptions.device() + ") against the host emulation");
            out.flush();
            List<OpsCheck.Outcome> outcomes = OpsCheck.run(
                    new OpsCheck.Side("host", hostMemory, hostKernels),
                    new OpsCheck.Side(target.name(), targetMemory, targetKernels));
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
