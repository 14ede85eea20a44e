package dev.vmmkit.core;

import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.LongArrayList;

/**
 * The streams of one pause's or resume's host copies. Copies alternate between {@link #STREAMS}
 * streams of their own, so that the gap between one copy's end and the next one's start on a
 * stream is covered by the other stream's copy, and two copy engines share the bus. Nothing waits
 * between copies: {@link #finish} records one event per stream at the end and waits for both.
 * {@link #markLast} records an event after one copy, for a caller that acts on each copy's landing
 * while the later ones run ({@link #awaitMark}). Streams and marks are made on demand and destroyed
 * by {@link #finish} or {@link #abandon}.
 */
final class CopyStreams {
    static final int STREAMS = 2;

    private final HostTransfers transfers;
    private final StreamEvents events;
    private final long[] streams = new long[STREAMS];
    private int made;
    private int copies;
    /** Events from {@link #markLast}, by mark number (the first mark is 0). */
    private final LongArrayList marks = new LongArrayList();

    CopyStreams(HostTransfers transfers, StreamEvents events) {
        this.transfers = transfers;
        this.events = events;
    }

    /** Queues a copy of {@code bytes} from device {@code va} to pinned {@code host}. */
    void toHost(long host, long va, long bytes) {
        transfers.copyToHost(host, va, bytes, nextStream());
    }

    /** Queues a copy of {@code bytes} from pinned {@code host} to device {@code va}. */
    void toDevice(long va, long host, long bytes) {
        transfers.copyToDevice(va, host, bytes, nextStream());
    }

    private long nextStream() {
        int i = copies % STREAMS;
        if (i == made) streams[made++] = transfers.createStream();
        copies++;
        return streams[i];
    }

    /** Records an event after the copy queued last, on its stream: the next mark, numbered from 0. */
    void markLast() {
        long event = events.create();
        try {
            events.record(event, streams[(copies - 1) % STREAMS]);
        } catch (RuntimeException e) {
            events.destroy(event);
            throw e;
        }
        marks.addLong(event);
    }

    /** Waits until the copy marked {@code mark} has landed. */
    void awaitMark(int mark) {
        events.synchronize(marks.getLong(mark));
    }

    /** Waits until every copy queued has landed, then destroys the streams. */
    void finish() {
        for (int i = 0; i < made; i++) waitFor(streams[i]);
        destroyAll(null);
    }

    /** After a failure: lets the copies already queued finish before their buffers go, then destroys the streams. */
    void abandon(RuntimeException cause) {
        for (int i = 0; i < made; i++) {
            try {
                waitFor(streams[i]);
            } catch (RuntimeException e) {
                cause.addSuppressed(e);
                try {
                    events.synchronizeDevice();
                } catch (RuntimeException again) {
                    cause.addSuppressed(again);
                }
            }
        }
        destroyAll(cause);
    }

    private void waitFor(long stream) {
        long event = events.create();
        try {
            events.record(event, stream);
            events.synchronize(event);
        } finally {
            events.destroy(event);
        }
    }

    private void destroyAll(RuntimeException cause) {
        for (int i = 0; i < marks.size(); i++) {
            try {
                events.destroy(marks.getLong(i));
            } catch (RuntimeException e) {
                if (cause != null) cause.addSuppressed(e);
            }
        }
        marks.clear();
        for (int i = 0; i < made; i++) {
            try {
                transfers.destroyStream(streams[i]);
            } catch (RuntimeException e) {
                // a stream that cannot be destroyed costs a few bytes; its copies are done
                if (cause != null) cause.addSuppressed(e);
            }
        }
        made = 0;
        copies = 0;
    }
}
