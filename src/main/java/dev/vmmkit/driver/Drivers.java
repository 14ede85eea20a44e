package dev.vmmkit.driver;

import dev.vmmkit.driver.cuda.CudaDriver;
import dev.vmmkit.driver.host.HostDriver;

import java.util.Locale;
import java.util.logging.ConsoleHandler;
import java.util.logging.Formatter;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * Opens the driver a run asks for: {@code "cuda"}, {@code "host"} (the emulation) or {@code "auto"}
 * (CUDA when libcuda and a device are present, else host). With env {@code VMM_LOG=debug} or system
 * property {@code vmmkit.log=debug} the driver comes wrapped in a {@link LoggingDriver}.
 */
public final class Drivers {
    /** Keeps the logger configured for debug output alive (java.util.logging holds loggers weakly). */
    private static Logger debugLogger;

    private Drivers() {
    }

    /**
     * Opens a driver on {@code device}.
     *
     * @throws IllegalArgumentException for an unknown kind
     * @throws DriverException when CUDA was asked for and cannot be opened
     */
    public static VmmDriver open(String kind, int device) {
        VmmDriver driver = switch (kind.toLowerCase(Locale.ROOT)) {
            case "host" -> HostDriver.builder().device(device).build();
            case "cuda" -> CudaDriver.open(device);
            case "auto" -> CudaDriver.isAvailable() ? CudaDriver.open(device)
                    : HostDriver.builder().device(device).build();
            default -> throw new IllegalArgumentException(
                    "unknown driver '" + kind + "' (expected cuda, host or auto)");
        };
        if (debugLoggingRequested()) {
            routeDebugLogToStderr();
            return new LoggingDriver(driver);
        }
        return driver;
    }

    /** True when {@code VMM_LOG=debug} or {@code -Dvmmkit.log=debug}. */
    public static boolean debugLoggingRequested() {
        String level = System.getProperty("vmmkit.log", System.getenv("VMM_LOG"));
        return "debug".equalsIgnoreCase(level);
    }

    /**
     * The default System.Logger backend (java.util.logging) drops DEBUG; when nothing else was
     * configured, let the driver logger print DEBUG to stderr so that VMM_LOG=debug shows something.
     */
    private static synchronized void routeDebugLogToStderr() {
        if (debugLogger != null || System.getLogger(LoggingDriver.LOGGER_NAME).isLoggable(System.Logger.Level.DEBUG)) {
            return;
        }
        Logger logger = Logger.getLogger(LoggingDriver.LOGGER_NAME);
        ConsoleHandler stderr = new ConsoleHandler();
        stderr.setLevel(Level.FINE);
        stderr.setFormatter(new Formatter() {
            @Override
            public String format(LogRecord record) {
                return "vmmkit driver: " + formatMessage(record) + System.lineSeparator();
            }
        });
        logger.addHandler(stderr);
        logger.setLevel(Level.FINE);
        logger.setUseParentHandlers(false);
        debugLogger = logger;
    }
}
