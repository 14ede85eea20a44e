package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Handle sizes: the run, capped; the cap fixed or adapting to the peak. */
class HandleSizerTest {
    private static final long MIB = 1L << 20;

    @Test
    void aFixedCapIsKept() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 8 * MIB);
        assertEquals(8 * MIB, sizer.nextHandleBytes(100 * MIB, 1L << 40));
        assertEquals(6 * MIB, sizer.nextHandleBytes(6 * MIB, 0), "never more than the run");
    }

    @Test
    void theAdaptiveCapFollowsThePeak() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        assertEquals(2 * MIB, sizer.cap(10 * MIB), "at least a page");
        assertEquals(8 * MIB, sizer.cap(710 * MIB), "1/64 of the peak, a power of two");
        assertEquals(128 * MIB, sizer.cap(13L << 30));
        assertEquals(1L << 30, sizer.cap(1L << 40), "at most 1 GiB");
    }
}
