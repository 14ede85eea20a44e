package dev.vmmkit.tools.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.trace.AtomicFile;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * Writes the memory report: one self-contained HTML file (no network needed to view it) with the
 * charting library uPlot, the page's script and the data inlined. The page itself is the resource
 * {@code report.html} next to this class.
 */
public final class HtmlReport {
    /** The uPlot webjar on the class path; keep in step with the pom. */
    private static final String UPLOT_ROOT = "META-INF/resources/webjars/uplot/1.6.30/";
    private static final String UPLOT = UPLOT_ROOT + "dist/";
    private static final ObjectMapper JSON = new ObjectMapper();

    private HtmlReport() {
    }

    /** Writes {@code reports} (one section each) to {@code file}, whole or not at all. */
    public static void write(Path file, String generatedBy, List<MemoryReport> reports) throws IOException {
        AtomicFile.writeString(file, html(generatedBy, reports));
    }

    /** The page's text. */
    public static String html(String generatedBy, List<MemoryReport> reports) throws IOException {
        // "</" inside the inlined JSON would end the script element early.
        String data = JSON.writeValueAsString(Map.of("generatedBy", generatedBy, "reports", reports)).replace("</", "<\\/");
        return resource("dev/vmmkit/tools/report/report.html")
                .replace("UPLOT_LICENSE", resource(UPLOT_ROOT + "LICENSE").replace("--", "- -"))
                .replace("/*UPLOT_CSS*/", resource(UPLOT + "uPlot.min.css"))
                .replace("/*UPLOT_JS*/", resource(UPLOT + "uPlot.iife.min.js").replace("</script", "<\\/script"))
                .replace("/*DATA*/", data);
    }

    private static String resource(String name) {
        try (InputStream in = HtmlReport.class.getClassLoader().getResourceAsStream(name)) {
            if (in == null) throw new IllegalStateException("missing from the build: " + name);
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
