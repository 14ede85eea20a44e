package dev.vmmkit.driver;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.logging.ConsoleHandler;
import java.util.logging.Formatter;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The one logging set-up of vmmkit. The level comes from the system property {@code vmmkit.log}
 * when set, else the environment variable {@code VMM_LOG} (read once): {@code warn} (the default:
 * warnings only), {@code info} (progress messages) or {@code debug} (also every driver call,
 * through {@link LoggingDriver}, and every cache miss of the allocator with the budget it saw).
 * Messages go to stderr, so a host program's stdout stays its own.
 */
public final class VmmLog {
    private static final String ENVIRONMENT_LEVEL = level(System.getenv("VMM_LOG"));

    /** Keeps the loggers configured for debug output alive (java.util.logging holds loggers weakly). */
    private static final Map<String, Logger> debugLoggers = new HashMap<>();

    private VmmLog() {
    }

    /** {@code debug}, {@code info} or {@code warn} for a setting such as {@code "INFO"}; warn when unset or unknown. */
    static String level(String setting) {
        String s = setting == null ? "" : setting.trim().toLowerCase(Locale.ROOT);
        return switch (s) {
            case "debug", "info" -> s;
            default -> "warn";
        };
    }

    /** The level in force: {@code debug}, {@code info} or {@code warn}. */
    public static String level() {
        String property = System.getProperty("vmmkit.log");
        return property == null ? ENVIRONMENT_LEVEL : level(property);
    }

    /** True at {@code info} and {@code debug}. */
    public static boolean isInfo() {
        return !level().equals("warn");
    }

    /** True at {@code debug}: drivers come wrapped in a {@link LoggingDriver}. */
    public static boolean isDebug() {
        return level().equals("debug");
    }

    /**
     * One line per log record (time, level, logger, message) instead of the JDK logger's two, for
     * long-running commands whose stderr is a log ({@code vmmkit serve}). Call before the first
     * record; a format given on the command line wins.
     */
    public static void oneLinePerRecord() {
        if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
            System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tF %1$tT %4$s %3$s: %5$s%6$s%n");
        }
    }

    /**
     * The default System.Logger backend (java.util.logging) drops DEBUG; when nothing else was
     * configured, let the logger {@code loggerName} print DEBUG to stderr, each line after
     * {@code prefix}, so that VMM_LOG=debug shows something: the driver's calls
     * ({@link LoggingDriver}) and the allocator's cache misses.
     */
    public static synchronized void routeDebugToStderr(String loggerName, String prefix) {
        if (debugLoggers.containsKey(loggerName) || System.getLogger(loggerName).isLoggable(System.Logger.Level.DEBUG)) {
            return;
        }
        Logger logger = Logger.getLogger(loggerName);
        ConsoleHandler stderr = new ConsoleHandler();
        stderr.setLevel(Level.FINE);
        stderr.setFormatter(new Formatter() {
            @Override
            public String format(LogRecord record) {
                return prefix + formatMessage(record) + System.lineSeparator();
            }
        });
        logger.addHandler(stderr);
        logger.setLevel(Level.FINE);
        logger.setUseParentHandlers(false);
        debugLoggers.put(loggerName, logger);
    }
}
