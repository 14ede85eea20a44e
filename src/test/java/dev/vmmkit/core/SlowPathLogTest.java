package dev.vmmkit.core;

import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * At {@code VMM_LOG=debug} each cache miss logs one line: what the budget saw, whether the request
 * waited for pending frees and what that bought. Off, nothing is logged.
 */
class SlowPathLogTest {
    private static final long FREEING_STREAM = 7;
    private static final long OTHER_STREAM = 9;

    /** Collects the slow path's records; a strong reference keeps the logger's level while the test runs. */
    private static final class Lines extends Handler {
        final Logger logger = Logger.getLogger(SlowPathLog.LOGGER_NAME);
        final List<String> lines = new ArrayList<>();

        Lines() {
            logger.setLevel(Level.FINE);
            logger.addHandler(this);
        }

        @Override
        public synchronized void publish(LogRecord record) {
            lines.add(record.getMessage());
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
            logger.removeHandler(this);
            logger.setLevel(null);
        }
    }

    /** Two misses: the first within the budget; the second past it while the first block's free waits on a held event. */
    private static List<String> twoMisses(boolean debug) {
        if (debug) System.setProperty("vmmkit.log", "debug");
        Lines log = new Lines();
        HostDriver host = hostDriver(64 * MIB);
        try (host; VmmManager m = new VmmManager(host, smallConfig(256 * MIB))) {
            host.hostEvents().holdCompletion(true);
            long first = m.allocate(32 * PAGE, FREEING_STREAM); // 2 MiB: the large region
            m.deallocate(first, FREEING_STREAM); // waits for the held event
            long second = m.allocate(24 * PAGE, OTHER_STREAM); // another stream may not use it yet
            host.hostEvents().holdCompletion(false);
            host.hostEvents().completeAll();
            m.deallocate(second, OTHER_STREAM);
            return List.copyOf(log.lines);
        } finally {
            log.close();
            System.clearProperty("vmmkit.log");
        }
    }

    @Test
    void eachMissLogsWhatTheBudgetSawAndWhatTheWaitBought() {
        List<String> lines = twoMisses(true);
        assertEquals(2, lines.size(), lines.toString());
        String first = lines.get(0);
        assertTrue(first.contains("2 MiB request"), first);
        assertTrue(first.contains("before: live 0.0 MiB (peak 0.0 MiB)"), first);
        assertTrue(first.contains("within the budget, no wait"), first);
        String second = lines.get(1);
        assertTrue(second.contains("1.5 MiB request"), second);
        assertTrue(second.contains("(2.0 MiB of it pending)"), "the first block's free waits: " + second);
        assertTrue(second.contains("over the budget: waited"), second);
        assertTrue(second.contains("no pending free became usable"), second);
        assertTrue(second.contains("after: physical"), second);
    }

    @Test
    void theStartUpWarmUpsMissesOnADryDriverAreNotLogged() {
        System.setProperty("vmmkit.log", "debug");
        Lines log = new Lines();
        try (VmmManager m = new VmmManager(new DryDriver(PAGE, 64 * MIB), smallConfig(256 * MIB))) {
            m.deallocate(m.allocate(32 * PAGE, FREEING_STREAM), FREEING_STREAM);
            assertEquals(List.of(), log.lines);
        } finally {
            log.close();
            System.clearProperty("vmmkit.log");
        }
    }

    @Test
    void withoutDebugLoggingNothingIsLogged() {
        assertEquals(List.of(), twoMisses(false));
    }
}
