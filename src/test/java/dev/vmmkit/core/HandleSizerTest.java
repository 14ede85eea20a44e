package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Handle sizes: the run, capped; the cap fixed or adapting to the peak (and halved where moving
 * fell short for a request that is not large, while above a page); one handle for a large
 * loading request; one-page handles for a request that is not large while memory is recycled,
 * and for any request whose moves fell far short under a peak hint.
 */
class HandleSizerTest {
    private static final long MIB = 1L << 20;

    @Test
    void aFixedCapIsKept() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 8 * MIB);
        assertEquals(8 * MIB, sizer.nextHandleBytes(100 * MIB, 1L << 40, 100 * MIB, false, false));
        assertEquals(6 * MIB, sizer.nextHandleBytes(6 * MIB, 0, 6 * MIB, false, false), "never more than the run");
        assertEquals(8 * MIB, sizer.nextHandleBytes(100 * MIB, 1L << 40, 4 * MIB, true, false), "sizes every handle, at the budget too");
    }

    @Test
    void theAdaptiveCapFollowsThePeak() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        assertEquals(2 * MIB, sizer.cap(10 * MIB), "at least a page");
        assertEquals(8 * MIB, sizer.cap(710 * MIB), "1/64 of the peak, a power of two");
        assertEquals(128 * MIB, sizer.cap(13L << 30));
        assertEquals(1L << 30, sizer.cap(1L << 40), "at most 1 GiB");
    }

    @Test
    void eachShortfallOfARequestThatIsNotLargeHalvesTheAdaptiveCapTwiceAtMost() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        long peak = 1100 * MIB; // 1/64 is 17 MiB: a cap of 16 MiB
        assertEquals(16 * MIB, sizer.cap(peak));
        sizer.movingFellShort(40 * MIB, peak);
        assertEquals(16 * MIB, sizer.cap(peak), "a large request's shortfall does not count");
        sizer.movingFellShort(12 * MIB, peak);
        assertEquals(8 * MIB, sizer.cap(peak));
        assertEquals(8 * MIB, sizer.nextHandleBytes(100 * MIB, peak, 100 * MIB, false, false), "the next handles are smaller");
        sizer.movingFellShort(12 * MIB, peak);
        assertEquals(4 * MIB, sizer.cap(peak));
        sizer.movingFellShort(12 * MIB, peak);
        assertEquals(4 * MIB, sizer.cap(peak), "two halvings at most");
        assertEquals(2 * MIB, sizer.cap(10 * MIB), "still at least a page");
        assertEquals(256 * MIB, sizer.cap(1L << 40), "halved from the largest, 1 GiB");
    }

    @Test
    void aShortfallWhileTheCapIsOnePageHalvesNothingLater() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        sizer.movingFellShort(6 * MIB, 20 * MIB); // a program's first requests: the cap is one page
        sizer.movingFellShort(6 * MIB, 60 * MIB);
        assertEquals(16 * MIB, sizer.cap(1100 * MIB), "no halving was taken");
    }

    @Test
    void aShortfallLeavesAFixedCapAlone() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 8 * MIB);
        sizer.movingFellShort(12 * MIB, 1L << 40);
        assertEquals(8 * MIB, sizer.cap(1L << 40));
    }

    @Test
    void aRequestOfMoreThanSixteenPagesIsLarge() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        assertFalse(sizer.isLarge(32 * MIB));
        assertTrue(sizer.isLarge(32 * MIB + 512));
        assertFalse(sizer.backsLoadingWithOneHandle(32 * MIB), "a mid-sized loading request gets capped handles");
        assertTrue(sizer.backsLoadingWithOneHandle(34 * MIB));
        assertEquals(1L << 30, sizer.firstBackingBytes(1L << 30), "one handle for all of a large loading request");
    }

    @Test
    void recycledMemoryForARequestThatIsNotLargeGetsOnePageHandles() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        long peak = 710 * MIB; // a cap of 8 MiB
        assertEquals(2 * MIB, sizer.nextHandleBytes(6 * MIB, peak, 6 * MIB, true, false));
        assertEquals(2 * MIB, sizer.nextHandleBytes(32 * MIB, peak, 32 * MIB, true, false));
        assertEquals(8 * MIB, sizer.nextHandleBytes(40 * MIB, peak, 40 * MIB, true, false), "a large request: capped");
        assertEquals(6 * MIB, sizer.nextHandleBytes(6 * MIB, peak, 6 * MIB, false, false), "a program growing: capped");
    }

    @Test
    void movesThatCoverLessThanHalfFellFarShortUnderAHint() {
        assertTrue(HandleSizer.fellFarShort(0, 34 * MIB, true), "nothing could move");
        assertTrue(HandleSizer.fellFarShort(14 * MIB, 30 * MIB, true), "14 of 30 is under half");
        assertFalse(HandleSizer.fellFarShort(16 * MIB, 32 * MIB, true), "exactly half");
        assertFalse(HandleSizer.fellFarShort(58 * MIB, 60 * MIB, true), "a page short: rounding");
        assertFalse(HandleSizer.fellFarShort(0, 34 * MIB, false), "no peak hint: the budget may still be growing");
    }

    @Test
    void aRequestWhoseMovesFellFarShortGetsOnePageHandlesLargeOrNot() {
        HandleSizer sizer = new HandleSizer(2 * MIB, 0);
        long peak = 1100 * MIB; // a cap of 16 MiB
        assertEquals(2 * MIB, sizer.nextHandleBytes(40 * MIB, peak, 50 * MIB, true, true), "large");
        assertEquals(2 * MIB, sizer.nextHandleBytes(12 * MIB, peak, 12 * MIB, false, true), "not large");
        assertEquals(16 * MIB, sizer.nextHandleBytes(40 * MIB, peak, 50 * MIB, true, false), "moves that did not fall far short");
        HandleSizer fixed = new HandleSizer(2 * MIB, 8 * MIB);
        assertEquals(8 * MIB, fixed.nextHandleBytes(40 * MIB, peak, 50 * MIB, true, true), "a fixed cap still sizes every handle");
    }
}
