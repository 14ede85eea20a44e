package dev.vmmkit.tools;

import picocli.CommandLine;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.UnmatchedArgumentException;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * How every command answers a usage error: one line saying what was wrong, then where the help
 * is ({@code try 'vmmkit replay --help'}), never the whole help. An unknown command is answered
 * with the commands whose names are close to it, or with all of them.
 */
final class UsageErrors implements CommandLine.IParameterExceptionHandler {

    @Override
    public int handleParseException(ParameterException e, String[] args) {
        CommandLine command = e.getCommandLine();
        PrintWriter err = command.getErr();
        String name = command.getCommandSpec().qualifiedName();
        err.println(name + ": " + message(e));
        err.println("try '" + name + " --help'");
        err.flush();
        return VmmkitCli.EXIT_ERROR;
    }

    private static String message(ParameterException e) {
        CommandLine command = e.getCommandLine();
        if (e instanceof UnmatchedArgumentException unmatched && !command.getSubcommands().isEmpty()
                && !unmatched.getUnmatched().isEmpty()) {
            String unknown = unmatched.getUnmatched().getFirst();
            if (!unknown.startsWith("-")) {
                List<String> close = closeNames(unknown, command.getSubcommands().keySet());
                return "no command '" + unknown + "'" + (close.isEmpty()
                        ? " (commands: " + String.join(", ", visible(command)) + ")"
                        : "; did you mean " + String.join(" or ", close) + "?");
            }
        }
        return e.getMessage();
    }

    private static List<String> visible(CommandLine command) {
        List<String> names = new ArrayList<>();
        command.getSubcommands().forEach((name, sub) -> {
            if (!sub.getCommandSpec().usageMessage().hidden() && !names.contains(sub.getCommandName())) names.add(name);
        });
        return names;
    }

    /** Command names within two edits of {@code typed}, or that start with it or it with them. */
    static List<String> closeNames(String typed, Iterable<String> names) {
        String t = typed.toLowerCase(Locale.ROOT);
        List<String> close = new ArrayList<>();
        for (String name : names) {
            if (name.equals("help")) continue;
            boolean prefix = t.length() >= 3 && (name.startsWith(t) || t.startsWith(name));
            if (prefix || editDistance(t, name) <= 2) close.add(name);
        }
        return close;
    }

    private static int editDistance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) previous[j] = j;
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }
}
