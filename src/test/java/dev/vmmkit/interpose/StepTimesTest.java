package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class StepTimesTest {
    @Test
    void millisecondsHaveTwoDecimalsRoundedToTheNearest() {
        assertEquals("0.00 ms", StepTimes.millis(0));
        assertEquals("0.01 ms", StepTimes.millis(5_000));
        assertEquals("0.05 ms", StepTimes.millis(54_999));
        assertEquals("1.20 ms", StepTimes.millis(1_200_000));
        assertEquals("12.35 ms", StepTimes.millis(12_345_678));
        assertEquals("100.00 ms", StepTimes.millis(99_999_999));
    }

    @Test
    void theSummaryNamesEveryStepInOrder() {
        StepTimes steps = new StepTimes();
        steps.done("driver");
        steps.done("manager");
        String summary = steps.summary();
        assertTrue(summary.matches("\\d+\\.\\d\\d ms \\(driver \\d+\\.\\d\\d ms, manager \\d+\\.\\d\\d ms\\)"), summary);
    }
}
