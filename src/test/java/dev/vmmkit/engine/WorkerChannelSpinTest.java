package dev.vmmkit.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import org.junit.jupiter.api.Test;

/** The reader's spin before it blocks: it sees a frame that has begun to arrive, and gives up when none has. */
class WorkerChannelSpinTest {
    @Test
    void aFrameThatHasArrivedIsSeenAndOneThatHasNotIsNot() throws Exception {
        PipedInputStream hostEnd = new PipedInputStream(1 << 16);
        PipedOutputStream workerEnd = new PipedOutputStream(hostEnd);
        try (WorkerChannel host = new WorkerChannel(hostEnd, new java.io.ByteArrayOutputStream());
             WorkerChannel worker = new WorkerChannel(new java.io.ByteArrayInputStream(new byte[0]), workerEnd)) {
            assertFalse(host.spinUntilReadable(20_000), "nothing written: the spin ends with nothing");
            worker.write(WorkerChannel.DONE, 7, out -> out.writeLong(42));
            assertTrue(host.spinUntilReadable(0), "written: seen on the first look, even with no time to spin");
            WorkerChannel.Frame frame = host.read();
            assertEquals(WorkerChannel.DONE, frame.type());
            assertEquals(7, frame.call());
            assertEquals(42, frame.payload().readLong());
            assertFalse(host.spinUntilReadable(0), "read: nothing more");
        }
    }
}
