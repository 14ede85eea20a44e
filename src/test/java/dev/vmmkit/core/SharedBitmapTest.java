package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link SharedBitmap} against {@link BitSet} as the reference, then under concurrent writers. */
class SharedBitmapTest {

    @Test
    void randomRangesAndQueriesMatchBitSet() {
        for (int bits : new int[]{0, 1, 63, 64, 65, 200, 1024}) {
            SplittableRandom rng = new SplittableRandom(bits);
            SharedBitmap bitmap = new SharedBitmap(bits);
            BitSet model = new BitSet(bits);
            for (int op = 0; op < 2000 && bits > 0; op++) {
                int from = rng.nextInt(bits + 1);
                int to = from + rng.nextInt(bits - from + 1);
                if (rng.nextBoolean()) {
                    bitmap.set(from, to);
                    model.set(from, to);
                } else {
                    bitmap.clear(from, to);
                    model.clear(from, to);
                }
                int at = rng.nextInt(bits + 1);
                String where = bits + " bits, op " + op + ", from " + at;
                assertEquals(model.nextSetBit(at), bitmap.nextSetBit(at), "nextSetBit, " + where);
                assertEquals(Math.min(bits, model.nextClearBit(at)), bitmap.nextClearBit(at), "nextClearBit, " + where);
                if (at < bits) assertEquals(model.get(at), bitmap.get(at), "get, " + where);
            }
            assertEquals(-1, bitmap.nextSetBit(bits));
            assertEquals(bits, bitmap.nextClearBit(bits));
        }
    }

    @Test
    void badRangesAreRefusedAndChangeNothing() {
        SharedBitmap bitmap = new SharedBitmap(100);
        bitmap.set(10, 20);
        assertThrows(IndexOutOfBoundsException.class, () -> bitmap.set(90, 101));
        assertThrows(IndexOutOfBoundsException.class, () -> bitmap.clear(-1, 5));
        assertThrows(IndexOutOfBoundsException.class, () -> bitmap.set(30, 20));
        assertThrows(IndexOutOfBoundsException.class, () -> bitmap.get(100));
        assertThrows(IndexOutOfBoundsException.class, () -> bitmap.nextSetBit(-1));
        assertThrows(IllegalArgumentException.class, () -> new SharedBitmap(-1));
        assertEquals(10, bitmap.nextSetBit(0));
        assertEquals(20, bitmap.nextClearBit(10));
        assertEquals(-1, bitmap.nextSetBit(20));
    }

    /**
     * Eight threads, each owning every eighth bit (so every word has eight writers), flip their own
     * bits at random and check after each flip that all of their bits still read as they left
     * them: only a thread's own writes may change its bits, whatever the others write to the same
     * words meanwhile.
     */
    @Test
    void concurrentWritersOfOneWordNeverUndoEachOther() throws Exception {
        int threads = 8, bits = 256, rounds = 20_000;
        SharedBitmap bitmap = new SharedBitmap(bits);
        CountDownLatch start = new CountDownLatch(1);
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        List<Thread> writers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int owner = t;
            writers.add(Thread.ofPlatform().start(() -> {
                boolean[] mine = new boolean[bits / threads]; // what this thread last wrote
                SplittableRandom rng = new SplittableRandom(owner);
                try {
                    start.await();
                    for (int round = 0; round < rounds && failures.isEmpty(); round++) {
                        int k = rng.nextInt(mine.length), bit = owner + threads * k;
                        mine[k] = !mine[k];
                        if (mine[k]) bitmap.set(bit, bit + 1);
                        else bitmap.clear(bit, bit + 1);
                        for (int j = 0; j < mine.length; j++) {
                            if (bitmap.get(owner + threads * j) != mine[j]) {
                                failures.add("writer " + owner + ", round " + round + ": bit " + (owner + threads * j)
                                        + " reads " + !mine[j] + " after it was left " + mine[j]);
                                break;
                            }
                        }
                    }
                } catch (InterruptedException e) {
                    failures.add("interrupted");
                }
            }));
        }
        start.countDown();
        for (Thread w : writers) w.join();
        assertTrue(failures.isEmpty(), () -> String.join("; ", failures));
    }

}
