package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** How far below the budget's limit a trim after an overshoot goes. */
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
}
