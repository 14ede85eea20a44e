package dev.vmmkit.tools.demo;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code vmmkit demo}: programs that show the lifetime layer at work. */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Demonstrations of reference-counted device tensors.",
        subcommands = {MlpDemoCommand.class, OpsCheckCommand.class})
public final class DemoCommand implements Runnable {
    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }
}
