package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** How far below the budget's limit a trim after an overshoot goes, and what counts as recycled memory. */
class PhysicalBudgetTest {
    private static final long MIB = 1L << 20;
    private static final long PAGE = 2 * MIB;

    @Test
    void aTrimKeepsTwoPagesOfRoomOnlyWhereAPageIsMoreThanOnePercentOfThePeak() {
        MemoryAccounting accounting = new MemoryAccounting();
        PhysicalBudget budget = new PhysicalBudget(accounting, VmmConfig.DEFAULTS, PAGE);
        accounting.allocated(110 * MIB); // a page is 1.8 % of the peak
        assertEquals(2 * PAGE, budget.trimMargin(0));
        accounting.allocated(90 * MIB); // 200 MiB: exactly 1 %
        assertEquals(0, budget.trimMargin(0));
        accounting.freed(150 * MIB); // the peak, not what lives now, decides
        assertEquals(0, budget.trimMargin(0));
    }

    @Test
    void withoutAHintOnlyLiveBytesWithinTheirPeakAreRecycled() {
        MemoryAccounting accounting = new MemoryAccounting();
        PhysicalBudget budget = new PhysicalBudget(accounting, VmmConfig.DEFAULTS, PAGE);
        accounting.allocated(100 * MIB);
        accounting.freed(10 * MIB);
        assertTrue(budget.recycles(10 * MIB), "back to the peak");
        assertFalse(budget.recycles(10 * MIB + 512), "past the peak: growth");
    }

    @Test
    void withAHintLiveBytesWithinItAreRecycledOnceThePeakReachedIsThreeQuartersOfIt() {
        MemoryAccounting accounting = new MemoryAccounting();
        PhysicalBudget budget = new PhysicalBudget(accounting, VmmConfig.DEFAULTS.withPeakHintBytes(400 * MIB), PAGE);
        accounting.allocated(299 * MIB);
        assertFalse(budget.recycles(MIB), "below three quarters of the hint the program still builds its working set");
        accounting.allocated(MIB); // 300 MiB: three quarters
        assertTrue(budget.recycles(100 * MIB), "up to the hint");
        assertFalse(budget.recycles(100 * MIB + 512), "past the hint: growth");
    }
}
