package dev.vmmkit.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** What ended an engine worker, in words for the request's error and the logs. */
final class WorkerDeathCause {
    private WorkerDeathCause() {
    }

    /**
     * {@code worker} (who), then why: the reason the host ended it ({@code reason}, null when it
     * ended by itself or was closed by the host), else the fault its JVM caught in native code, else
     * its exit status.
     */
    static String of(String worker, String reason, int status, Path errorFile) {
        if (reason != null && !reason.equals("closed by the host")) return worker + " was ended: " + reason;
        String caught = jvmReport(errorFile);
        if (caught != null) return worker + " crashed: " + caught + " (caught by its JVM, which " + describe(status) + ")";
        return worker + " " + describe(status);
    }

    /** An exit status as the JDK reports it: 128 + N for a process killed by signal N. */
    static String describe(int status) {
        if (status > 128 && status < 128 + 65) {
            int signal = status - 128;
            return "was killed by signal " + signal + " (" + signalName(signal) + ")";
        }
        return "exited with status " + status;
    }

    private static String signalName(int signal) {
        return switch (signal) {
            case 1 -> "SIGHUP";
            case 2 -> "SIGINT";
            case 4 -> "SIGILL";
            case 6 -> "SIGABRT";
            case 7 -> "SIGBUS";
            case 8 -> "SIGFPE";
            case 9 -> "SIGKILL";
            case 11 -> "SIGSEGV";
            case 13 -> "SIGPIPE";
            case 15 -> "SIGTERM";
            default -> "signal " + signal;
        };
    }

    /**
     * The JVM in the worker catches a fault in native code, writes an error report and exits; the
     * report's first lines name the signal and the frame. Null when there is no report.
     */
    private static String jvmReport(Path errorFile) {
        if (!Files.isRegularFile(errorFile)) return null;
        try {
            List<String> lines = Files.readAllLines(errorFile);
            String signal = null;
            String frame = null;
            for (String line : lines.subList(0, Math.min(lines.size(), 40))) {
                String text = line.replaceFirst("^#\\s*", "").trim();
                if (signal == null && text.matches("SIG[A-Z]+ \\(0x[0-9a-f]+\\).*")) signal = text.split(" ")[0];
                if (frame == null && text.startsWith("C  [")) frame = text.substring(3).trim();
            }
            Files.deleteIfExists(errorFile);
            if (signal == null) return null;
            return signal + (frame == null ? "" : " in " + frame);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}
