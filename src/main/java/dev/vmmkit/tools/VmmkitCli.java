package dev.vmmkit.tools;

import picocli.CommandLine;
import dev.vmmkit.tools.demo.DemoCommand;
import picocli.CommandLine.Command;

/** Entry point of the {@code vmmkit} command; each subcommand is a class of its own. */
@Command(name = "vmmkit",
        mixinStandardHelpOptions = true,
        version = "vmmkit 0.1.0",
        description = "Transparent GPU memory manager on CUDA's virtual memory API.",
        subcommands = {
                CommandLine.HelpCommand.class,
                DriverCheckCommand.class,
                DriverBenchCommand.class,
                ReplayCommand.class,
                RunCommand.class,
                DemoCommand.class,
                ServeCommand.class,
                TraceCommand.class,
        })
public final class VmmkitCli implements Runnable {
    /** Exit code of a command that stopped on an unexpected error. */
    static final int EXIT_ERROR = 2;

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the CLI and returns its exit code (tests call this instead of main). */
    public static int run(String... args) {
        return commandLine().execute(args);
    }

    /** The configured command line, for callers that redirect its output (tests). */
    public static CommandLine commandLine() {
        // Enum options such as --driver are written in lower case on the command line.
        CommandLine commandLine = new CommandLine(new VmmkitCli()).setCaseInsensitiveEnumValuesAllowed(true)
                .setParameterExceptionHandler(new UsageErrors());
        // An error a command did not handle is one clear line, never a stack trace.
        commandLine.setExecutionExceptionHandler((failure, failedCommand, parsed) -> {
            String prefix = failedCommand.getCommandSpec().qualifiedName(); // "vmmkit demo mlp"
            failedCommand.getErr().println(prefix + ": " + failure.getMessage());
            failedCommand.getErr().flush();
            return EXIT_ERROR;
        });
        return commandLine;
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
