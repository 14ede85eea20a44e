package dev.vmmkit.tools.report;

import dev.vmmkit.tools.VmmkitCli;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The HTML report of {@code vmmkit replay --html}: self-contained, and it really draws in a browser
 * (headless Chromium, Debian's package; {@code scripts/install-test-deps.sh} installs it when run as
 * root, otherwise the browser test is skipped and says so).
 */
class HtmlReportTest {
    @TempDir
    static Path dir;

    private static Path report;

    /** A replay of a made-up trace with a clear peak, written once for all tests. */
    private static synchronized Path report() throws IOException {
        if (report != null) return report;
        Path trace = dir.resolve("made-up.csv");
        StringBuilder lines = new StringBuilder("# action,addr,size,stream\n");
        Random random = new Random(3);
        List<Long> live = new java.util.ArrayList<>();
        for (long key = 1; key <= 3_000; key++) {
            if (!live.isEmpty() && random.nextInt(key < 1_500 ? 3 : 2) == 0) {
                long k = live.remove(random.nextInt(live.size()));
                lines.append("free_completed,").append(k).append(",0,0\n");
            }
            live.add(key);
            lines.append("alloc,").append(key).append(',').append(1 + random.nextInt(3 << 20)).append(",0\n");
        }
        Files.writeString(trace, lines.toString()); // a free's size is taken from its alloc
        Path html = dir.resolve("report.html");
        int exit = VmmkitCli.commandLine().setOut(new java.io.PrintWriter(new java.io.StringWriter()))
                .execute("replay", "--driver", "host", "--device-memory", "16G", "--warmup", "0", "--html", html.toString(), trace.toString());
        assertEquals(0, exit);
        report = html;
        return html;
    }

    @Test
    void theReportIsOneFileThatNeedsNoNetwork() throws IOException {
        String html = Files.readString(report());
        assertFalse(Pattern.compile("(src|href)\\s*=\\s*[\"']?(https?:)?//", Pattern.CASE_INSENSITIVE).matcher(html).find(),
                "no script, style or image is fetched from elsewhere");
        assertFalse(html.contains("<link"), "no external style sheet");
        assertTrue(html.contains("var uPlot="), "the charting library is inlined");
        assertTrue(html.contains("\"trace\":\"made-up.csv\""), "the data is inlined");
        assertTrue(html.contains("The MIT License"), "the library's licence travels with it");
    }

    @Test
    void theReportDrawsInChromium() throws Exception {
        Optional<String> chromium = chromium();
        assumeTrue(chromium.isPresent(), "chromium is not installed: run scripts/install-test-deps.sh as root "
                + "(./vmmkit test does) to render the HTML report in a browser");
        Path html = report();

        String dom = runChromium(chromium.get(), "--dump-dom", "--virtual-time-budget=10000", html.toUri().toString());
        Matcher drawn = Pattern.compile("data-charts-drawn=\"(\\d+)\"").matcher(dom);
        assertTrue(drawn.find(), "the page's script ran to its end");
        // Two uPlot charts (timeline, driver calls) and one address map per region.
        assertTrue(Integer.parseInt(drawn.group(1)) >= 4, "charts drawn: " + drawn.group(1));
        assertEquals(2, count(dom, "class=\"uplot"), "two uPlot charts");
        assertTrue(count(dom, "<canvas") >= 4, "chart and address map canvases");
        assertTrue(dom.contains("Largest allocations alive at the peak") && dom.contains("fragmentation ratio"));

        Path png = dir.resolve("report.png");
        runChromium(chromium.get(), "--screenshot=" + png, "--window-size=1200,1800", "--virtual-time-budget=10000",
                html.toUri().toString());
        BufferedImage image = ImageIO.read(png.toFile());
        Set<Integer> colours = new HashSet<>();
        long notWhite = 0;
        for (int y = 0; y < image.getHeight(); y += 2) {
            for (int x = 0; x < image.getWidth(); x += 2) {
                int rgb = image.getRGB(x, y) & 0xffffff;
                colours.add(rgb);
                if (rgb != 0xffffff) notWhite++;
            }
        }
        long sampled = (long) (image.getHeight() / 2) * (image.getWidth() / 2);
        assertTrue(colours.size() > 50, "the screenshot has " + colours.size() + " colours: charts drawn, not a blank page");
        assertTrue(notWhite > sampled / 20, "at least 5% of the page is drawn on: " + notWhite + " of " + sampled);
    }

    private static int count(String text, String part) {
        int n = 0;
        for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) n++;
        return n;
    }

    static Optional<String> chromium() {
        String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
        return Stream.of("chromium", "chromium-browser")
                .flatMap(name -> Stream.of(path.split(File.pathSeparator)).map(d -> Path.of(d, name)))
                .filter(Files::isExecutable).map(Path::toString).findFirst();
    }

    /** Runs headless Chromium (its own log lines go to a file, not the test output) and returns stdout. */
    static String runChromium(String chromium, String... args) throws Exception {
        List<String> command = new java.util.ArrayList<>(List.of(chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--hide-scrollbars", "--user-data-dir=" + dir.resolve("chromium-profile")));
        command.addAll(List.of(args));
        Path out = dir.resolve("chromium-out.txt");
        Process process = new ProcessBuilder(command).redirectOutput(out.toFile())
                .redirectError(dir.resolve("chromium-log.txt").toFile()).start();
        if (!process.waitFor(120, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("chromium did not finish in 120 s");
        }
        assertEquals(0, process.exitValue(), () -> "chromium failed: " + read(dir.resolve("chromium-log.txt")));
        return Files.readString(out);
    }

    private static String read(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            return e.toString();
        }
    }
}
