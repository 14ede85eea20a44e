package dev.vmmkit.tools;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** Entry point of the {@code vmmkit} command; each subcommand is a class of its own. */
@Command(name = "vmmkit",
        mixinStandardHelpOptions = true,
        version = "vmmkit 0.1.0",
        description = "Transparent GPU memory manager on CUDA's virtual memory API.",
        subcommands = {
                CommandLine.HelpCommand.class,
                RunCommand.class,
        })
public final class VmmkitCli implements Runnable {

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the CLI and returns its exit code (tests call this instead of main). */
    public static int run(String... args) {
        return new CommandLine(new VmmkitCli()).execute(args);
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
