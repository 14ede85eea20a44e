package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The worker's writer thread delivers every frame of every stream, each stream's in its order, its answer last. */
class StreamWriterTest {

    @Test
    void concurrentStreamsArriveWholeAndInOrder() throws Exception {
        int streams = 4;
        int tokens = 2_000;
        PipedInputStream hostEnd = new PipedInputStream(1 << 16);
        WorkerChannel workerSide = new WorkerChannel(new PipedInputStream(), new PipedOutputStream(hostEnd));
        WorkerChannel hostSide = new WorkerChannel(hostEnd, new PipedOutputStream(new PipedInputStream()));
        CountDownLatch start = new CountDownLatch(1);
        try (StreamWriter writer = new StreamWriter(workerSide)) {
            List<Thread> producers = new ArrayList<>();
            for (int s = 0; s < streams; s++) {
                int call = s + 1;
                producers.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        writer.open();
                        for (int i = 0; i < tokens; i++) writer.send(frame(WorkerChannel.TOKEN, call, i));
                        writer.send(frame(WorkerChannel.DONE, call, tokens));
                        writer.end();
                    } catch (InterruptedException | IOException e) {
                        throw new AssertionError(e);
                    }
                }));
            }
            start.countDown();
            Map<Integer, Integer> next = new HashMap<>();
            int done = 0;
            while (done < streams) { // blocking reads: each frame arrives or the test times out
                WorkerChannel.Frame frame = hostSide.read();
                int index = frame.payload().readInt();
                int expected = next.getOrDefault(frame.call(), 0);
                assertEquals(expected, index, "call " + frame.call() + "'s frames in order");
                next.put(frame.call(), expected + 1);
                if (frame.type() == WorkerChannel.DONE) {
                    assertEquals(tokens, index, "the answer after every token");
                    done++;
                } else {
                    assertEquals(WorkerChannel.TOKEN, frame.type());
                }
            }
            for (Thread producer : producers) producer.join();
            for (int call = 1; call <= streams; call++) assertEquals(tokens + 1, next.get(call));
        }
    }

    @Test
    void anAnswerQueuedAfterTheLastStreamEndedStillGoesOut() throws Exception {
        PipedInputStream hostEnd = new PipedInputStream(1 << 16);
        WorkerChannel workerSide = new WorkerChannel(new PipedInputStream(), new PipedOutputStream(hostEnd));
        WorkerChannel hostSide = new WorkerChannel(hostEnd, new PipedOutputStream(new PipedInputStream()));
        try (StreamWriter writer = new StreamWriter(workerSide)) {
            for (int round = 0; round < 50; round++) { // the thread parks between streams and must wake for each
                writer.open();
                writer.send(frame(WorkerChannel.TOKEN, 7, round));
                writer.send(frame(WorkerChannel.DONE, 7, round));
                writer.end();
                assertEquals(round, hostSide.read().payload().readInt());
                assertEquals(round, hostSide.read().payload().readInt());
            }
        }
    }

    private static WorkerChannel.Frames frame(int type, int call, int index) throws IOException {
        WorkerChannel.Frames frames = new WorkerChannel.Frames(16);
        frames.add(type, call, out -> out.writeInt(index));
        return frames;
    }
}
