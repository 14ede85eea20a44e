package dev.vmmkit.driver;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Which of the processes the management library lists on a device are this one, and what the others hold. */
class OtherProcessesTest {
    private static final long SELF = 4242;
    private static final long GIB = 1L << 30;

    @Test
    void listedBesideOthersThisProcessIsLeftOutAndTheirMemoryAddedUp() {
        OtherProcesses others = OtherProcesses.attribute(SELF, 3, new int[] {17, 4242, 99, 0}, new long[] {2 * GIB, 5 * GIB, GIB, 7});
        assertEquals(new OtherProcesses(3 * GIB, 0), others);
    }

    @Test
    void aProcessWithoutAFigureCannotBeAttributed() {
        OtherProcesses others = OtherProcesses.attribute(SELF, 3, new int[] {4242, 17, 99},
                new long[] {5 * GIB, OtherProcesses.NOT_AVAILABLE, GIB});
        assertEquals(new OtherProcesses(GIB, 1), others);
    }

    @Test
    void aloneOnTheDeviceThereAreNoOthers() {
        assertEquals(OtherProcesses.NONE, OtherProcesses.attribute(SELF, 1, new int[] {4242}, new long[] {GIB}));
        assertEquals(OtherProcesses.NONE, OtherProcesses.attribute(SELF, 0, new int[0], new long[0]));
    }

    /** In a container the library lists host process ids: one entry is this process, of several one is. */
    @Test
    void processIdsOfAnotherNamespaceLeaveOneEntryToThisProcessAndTheRestUnattributed() {
        assertEquals(OtherProcesses.NONE, OtherProcesses.attribute(SELF, 1, new int[] {881234}, new long[] {GIB}));
        assertEquals(new OtherProcesses(0, 2),
                OtherProcesses.attribute(SELF, 3, new int[] {881234, 881300, 12}, new long[] {GIB, GIB, GIB}));
    }

    @Test
    void processIdsAreUnsigned() {
        long highPid = 0xFFFF_FFF0L;
        OtherProcesses others = OtherProcesses.attribute(highPid, 2, new int[] {(int) highPid, 5}, new long[] {GIB, 3 * GIB});
        assertEquals(new OtherProcesses(3 * GIB, 0), others);
    }

    @Test
    void negativeFiguresAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new OtherProcesses(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> new OtherProcesses(0, -2));
    }
}
