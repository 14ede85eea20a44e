package dev.vmmkit.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

import dev.vmmkit.driver.cuda.CudaDriver;

class DriverBenchCommandTest {

    @Test
    void withoutAGpuItFailsCleanly() {
        assumeFalse(CudaDriver.isAvailable(), "a GPU is here");
        assertEquals(1, VmmkitCli.run("driver-bench", "--iterations", "10"));
    }

    @Test
    void unknownDriverIsAUsageError() {
        assertEquals(2, VmmkitCli.run("driver-bench", "--driver", "nonsense"));
    }

    @Test
    void benchesTheHostEmulation() {
        assertEquals(0, VmmkitCli.run("driver-bench", "--driver", "host", "--iterations", "20", "--stitch", "4"));
    }
}
