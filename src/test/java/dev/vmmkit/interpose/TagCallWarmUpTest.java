package dev.vmmkit.interpose;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.trace.AllocationRecorder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The tag-call warm-up runs beside a program's own tags: its calls reach none and say nothing. */
class TagCallWarmUpTest {
    private static final long MIB = 1L << 20;

    @AfterEach
    void uninstall() {
        InterposedCalls.install(null);
    }

    @Test
    void theWarmUpsCallsLeaveAProgramsTagRunningAndPrintNothing() {
        try (VmmManager manager = new VmmManager(new DryDriver(2 * MIB, 1L << 30), VmmConfig.DEFAULTS);
             Arena arena = Arena.ofConfined()) {
            InterposedCalls.install(new InterposeSession(false, device -> device == 0 ? manager : null,
                    AllocationRecorder.NONE, null));
            MemorySegment kv = arena.allocateFrom("kv");
            assertEquals(0, TagCalls.regionBegin(kv.address(), 2, 0, 0));
            long block = InterposedCalls.allocate(8 * MIB, 0, 0);
            assertEquals(0, TagCalls.regionEnd(0));
            assertTrue(block > 0);

            PrintStream err = System.err;
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            System.setErr(new PrintStream(printed, true));
            try {
                // The arguments TagCallWarmUp passes: a region for no device, the empty name's pause and resume.
                MemorySegment name = arena.allocateFrom("vmmkit-warm-up");
                assertEquals(-InterposedCalls.CUDA_ERROR_INVALID_VALUE, TagCalls.regionBegin(name.address(), 14, 0, -1));
                assertEquals(-InterposedCalls.CUDA_ERROR_INVALID_VALUE, TagCalls.regionEnd(-1));
                assertEquals(0, TagCalls.pause(name.address(), 0, -1, TagCalls.KEEP_AS_SET));
                assertEquals(0, TagCalls.resume(name.address(), 0, -1));
            } finally {
                System.setErr(err);
            }
            assertEquals("", printed.toString());
            assertEquals(0, manager.stats().tags().pausedBytes());
            assertEquals(0, TagCalls.pause(kv.address(), 2, 0, TagCalls.KEEP_AS_SET)); // the program's own pause still works
            assertEquals(8 * MIB, manager.stats().tags().pausedBytes());
            assertEquals(0, TagCalls.resume(kv.address(), 2, 0));
            assertEquals(InterposedCalls.FREED, InterposedCalls.release(block, 0, 0));
        }
    }

    @Test
    void itCallsEveryTagStubOfABootstrappedTable() {
        System.setProperty(ResourceFactory.PROPERTY, BumpResourceFactory.class.getName());
        try {
            MemorySegment table = Arena.ofAuto().allocate(NativeBootstrap.TABLE);
            table.set(JAVA_INT, 0, (int) NativeBootstrap.TABLE.byteSize());
            table.set(JAVA_INT, NativeBootstrap.offset("monitor_mode"), 1);
            assertEquals(0, NativeBootstrap.entryPoints(table.address()));
            assertEquals(3, TagCallWarmUp.run(table, 3));
        } finally {
            System.clearProperty(ResourceFactory.PROPERTY);
        }
    }
}
