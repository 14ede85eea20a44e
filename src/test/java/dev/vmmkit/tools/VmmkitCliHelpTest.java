package dev.vmmkit.tools;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every command answers {@code --help} and {@code -h} with its usage and exit code 0, as users expect. */
class VmmkitCliHelpTest {

    @Test
    void everyCommandAnswersHelpAndH() {
        for (String name : VmmkitCli.commandLine().getSubcommands().keySet()) {
            if (name.equals("help")) continue;
            for (String flag : new String[]{"--help", "-h"}) {
                CommandLine cli = VmmkitCli.commandLine();
                StringWriter out = new StringWriter();
                StringWriter err = new StringWriter();
                cli.setOut(new PrintWriter(out));
                cli.setErr(new PrintWriter(err));
                int code = cli.execute(name, flag);
                assertEquals(0, code, name + " " + flag + ": " + err);
                assertTrue(out.toString().startsWith("Usage: vmmkit " + name), name + " " + flag + ": " + out);
            }
        }
    }

    /** Device memory has one spelling on every command that sizes a device. */
    @Test
    void replayRunAndServeTakeDeviceMemoryAndNothingElseSaysCapacity() {
        for (String name : new String[] {"replay", "run", "serve"}) {
            String usage = VmmkitCli.commandLine().getSubcommands().get(name).getUsageMessage(CommandLine.Help.Ansi.OFF);
            assertTrue(usage.contains("--device-memory=SIZE"), name + ": " + usage);
            assertTrue(usage.contains("VMM_DEVICE_MEMORY"), name + ": " + usage);
            assertFalse(usage.contains("--capacity"), name + ": " + usage);
        }
    }
}
