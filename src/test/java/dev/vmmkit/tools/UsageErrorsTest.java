package dev.vmmkit.tools;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Usage errors: one line naming what was wrong, then where the help is; never the whole help. */
class UsageErrorsTest {
    @TempDir
    Path dir;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true)).execute(args);
    }

    private List<String> errLines() {
        return err.toString().strip().lines().toList();
    }

    @Test
    void anUnknownCommandListsTheCommandsAndSuggestsNothingFarFetched() {
        assertEquals(2, run("nosuchcmd"));

        assertEquals(List.of("vmmkit: no command 'nosuchcmd' (commands: help, driver-check, driver-bench, replay, run, demo, "
                + "serve, trace)", "try 'vmmkit --help'"), errLines());
    }

    @Test
    void aMistypedCommandIsSuggested() {
        assertEquals(2, run("repaly", "x.csv"));

        assertEquals(List.of("vmmkit: no command 'repaly'; did you mean replay?", "try 'vmmkit --help'"), errLines());
    }

    @Test
    void aBadOptionIsOneLineAndTheHelpCommand() {
        assertEquals(2, run("replay", "--warmup", "-1", "x.csv"));

        assertEquals(List.of("vmmkit replay: --warmup must be >= 0", "try 'vmmkit replay --help'"), errLines());
        assertEquals("", out.toString());
    }

    @Test
    void aBadSizeSaysWhichUnitsThereAre() {
        assertEquals(2, run("serve", "--device-memory", "5Q"));

        assertEquals(2, errLines().size(), err.toString());
        String line = errLines().getFirst();
        assertTrue(line.startsWith("vmmkit serve: Invalid value for option '--device-memory': unknown unit in '5Q' ("), line);
        assertTrue(line.contains("K, M, G, T or KiB, MiB, GiB, TiB"), line);
    }

    @Test
    void eachBadDemoOptionIsNamedAlone() {
        assertEquals(2, run("demo", "mlp", "--driver", "host", "--steps", "-5"));

        assertEquals(List.of("vmmkit demo mlp: --steps must be at least 1, not -5", "try 'vmmkit demo mlp --help'"), errLines());
    }

    @Test
    void theDemoChecksItsOutputFileBeforeTraining() {
        Path missing = dir.resolve("missing").resolve("x.json");

        assertEquals(2, run("demo", "mlp", "--driver", "host", "--json", missing.toString()));

        assertEquals("", out.toString(), "nothing trained");
        assertEquals("vmmkit demo mlp: --json " + missing + ": the folder " + missing.getParent() + " does not exist",
                errLines().getFirst());
    }

    @Test
    void serveNamesAMissingFolderByItsOption() {
        Path missing = dir.resolve("no-engines");

        assertEquals(2, run("serve", "--driver", "host", "--engines", missing.toString(), "--models", dir.toString()));

        assertEquals(List.of("vmmkit serve: --engines " + missing + ": no such folder", "try 'vmmkit serve --help'"), errLines());
    }

    @Test
    void serveNamesABusyPortBeforeStartingAnything() throws Exception {
        try (ServerSocket taken = new ServerSocket()) {
            taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            int port = taken.getLocalPort();

            assertEquals(2, run("serve", "--driver", "host", "--engines", dir.toString(), "--models", dir.toString(),
                    "--port", Integer.toString(port)));

            assertEquals(List.of("vmmkit serve: --port " + port + ": 127.0.0.1:" + port
                    + " is already in use (another server? --port 0 picks a free one)"), errLines());
            assertEquals("", out.toString(), "never listening");
        }
    }
}
