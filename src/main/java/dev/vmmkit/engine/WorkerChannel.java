package dev.vmmkit.engine;

import java.io.BufferedInputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The framing between the host and an engine worker, over the worker's standard input (host to
 * worker) and a private copy of its standard output (worker to host). docs/engine.md describes it:
 * every frame is {@code u32 length | u8 type | u32 call | payload}, big-endian, where length counts
 * type, call and payload. The call number pairs an answer with its request, so several calls can be
 * in flight on one worker (a concurrent engine), and a stream of frames can answer one call.
 * Writing is thread-safe; reading is for one thread.
 */
final class WorkerChannel implements AutoCloseable {
    /** Host to worker: load the model (the engine's identity, the driver, the model file). */
    static final int LOAD = 1;
    /** Host to worker: engine_generate with a prompt. */
    static final int GENERATE = 2;
    /** Host to worker: engine_shutdown, free what is left, exit. */
    static final int SHUTDOWN = 3;
    /** Host to worker: engine_generate_stream with a prompt and the request's options (TOKEN frames, then DONE). */
    static final int GENERATE_STREAM = 4;
    /** Host to worker: stop the call with this number at its next token (no answer of its own). */
    static final int CANCEL = 5;
    /** Host to worker: load a staged binary, read and check its engine_get_info(), unload it (answered with the info). */
    static final int PROBE = 6;
    /** Host to worker: engine_apply_chat_template with a chat's messages (DONE: whether rendered, then the text). */
    static final int CHAT_TEMPLATE = 7;
    /** Host to worker: give the model's device memory back, its contents kept in host memory (DONE: what was given back). */
    static final int PAUSE = 8;
    /** Host to worker: bring a paused model's memory and contents back at the same addresses (DONE: how long it took). */
    static final int RESUME = 9;
    /** Worker to host, first frame: the worker is up (its pid). */
    static final int READY = 64;
    /** Worker to host: a call succeeded (memory figures, then the call's results). */
    static final int DONE = 65;
    /** Worker to host: a call failed (out-of-memory flag, memory figures, message). */
    static final int FAILED = 66;

    /** Worker to host: one token of a GENERATE_STREAM call, as the engine produced it. */
    static final int TOKEN = 67;

    /** A frame longer than this is garbage, not a message. */
    static final int MAX_FRAME = 64 << 20;

    /** A frame that does not follow the framing; the peer is broken. */
    static final class GarbageException extends IOException {
        GarbageException(String message) {
            super(message);
        }
    }

    /** One received frame. */
    record Frame(int type, int call, DataInputStream payload) {
    }

    private final DataInputStream in;
    private final OutputStream out;

    WorkerChannel(InputStream in, OutputStream out) {
        this.in = new DataInputStream(new BufferedInputStream(in, 1 << 16));
        this.out = out;
    }

    /** The next frame; EOFException when the peer closed its end. */
    Frame read() throws IOException {
        int length = in.readInt();
        if (length < 5 || length > MAX_FRAME) throw new GarbageException("a frame of " + length + " bytes");
        int type = in.readUnsignedByte();
        int call = in.readInt();
        byte[] payload = new byte[length - 5];
        in.readFully(payload);
        return new Frame(type, call, new DataInputStream(new ByteArrayInputStream(payload)));
    }

    /**
     * Spins up to {@code nanos} until a frame has begun to arrive; false when none did (the caller
     * then blocks in {@link #read}). A blocked reader is woken by the kernel, tens of microseconds
     * on a virtual machine; a reader that spins sees the bytes at once. A channel that fails here
     * ends the spin: the {@link #read} that follows meets the same failure and reports it as usual.
     */
    boolean spinUntilReadable(long nanos) {
        long until = System.nanoTime() + nanos;
        do {
            try {
                if (in.available() > 0) return true;
            } catch (IOException e) {
                return false;
            }
            Thread.onSpinWait();
        } while (System.nanoTime() - until < 0);
        return false;
    }

    /** What a frame carries, written by the caller. */
    interface Payload {
        void write(DataOutputStream out) throws IOException;
    }

    /** Sends one frame in one write. */
    void write(int type, int call, Payload payload) throws IOException {
        Frames frame = new Frames(64);
        frame.add(type, call, payload);
        send(frame);
    }

    /** Sends the frames gathered in {@code frames} in one write. */
    void send(Frames frames) throws IOException {
        synchronized (out) {
            frames.writeTo(out);
            out.flush();
        }
    }

    /** Frames gathered in memory, to go in one write ({@link #send}). */
    static final class Frames extends ByteArrayOutputStream {
        private final DataOutputStream data = new DataOutputStream(this);

        Frames(int capacity) {
            super(capacity);
        }

        /** Appends one frame. */
        void add(int type, int call, Payload payload) throws IOException {
            int start = count;
            data.writeInt(0);
            data.writeByte(type);
            data.writeInt(call);
            if (payload != null) payload.write(data);
            int length = count - start - 4;
            buf[start] = (byte) (length >>> 24);
            buf[start + 1] = (byte) (length >>> 16);
            buf[start + 2] = (byte) (length >>> 8);
            buf[start + 3] = (byte) length;
        }
    }

    /** A string as u32 byte count (-1 for null) and UTF-8 bytes. */
    static void writeString(DataOutputStream out, String value) throws IOException {
        if (value == null) {
            out.writeInt(-1);
            return;
        }
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    static String readString(DataInputStream in) throws IOException {
        int length = in.readInt();
        if (length == -1) return null;
        if (length < 0 || length > MAX_FRAME) throw new GarbageException("a string of " + length + " bytes");
        byte[] bytes = new byte[length];
        in.readFully(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** A TOKEN frame's payload: id, text bytes, logprob, then the top alternatives (id, logprob each). */
    static void writeToken(DataOutputStream out, Generation.Token token) throws IOException {
        out.writeLong(token.id());
        out.writeInt(token.text().length);
        out.write(token.text());
        out.writeFloat(token.logprob());
        out.writeInt(token.topLogprobs().length);
        for (int i = 0; i < token.topLogprobs().length; i++) {
            out.writeLong(i < token.topIds().length ? token.topIds()[i] : -1);
            out.writeFloat(token.topLogprobs()[i]);
        }
    }

    /** A CHAT_TEMPLATE frame's payload: the count, then each message's role and content. */
    static void writeMessages(DataOutputStream out, java.util.List<ChatMessage> messages) throws IOException {
        out.writeInt(messages.size());
        for (ChatMessage message : messages) {
            writeString(out, message.role());
            writeString(out, message.content());
        }
    }

    static java.util.List<ChatMessage> readMessages(DataInputStream in) throws IOException {
        int count = in.readInt();
        if (count < 0 || count > MAX_FRAME / 8) throw new GarbageException("a chat of " + count + " messages");
        java.util.List<ChatMessage> messages = new java.util.ArrayList<>(count);
        for (int i = 0; i < count; i++) messages.add(new ChatMessage(readString(in), readString(in)));
        return messages;
    }

    static Generation.Token readToken(DataInputStream in) throws IOException {
        long id = in.readLong();
        int textLength = in.readInt();
        if (textLength < 0 || textLength > MAX_FRAME) throw new GarbageException("a token text of " + textLength + " bytes");
        byte[] text = new byte[textLength];
        in.readFully(text);
        float logprob = in.readFloat();
        int top = in.readInt();
        if (top < 0 || top > MAX_FRAME / 12) throw new GarbageException("a token with " + top + " alternatives");
        long[] ids = new long[top];
        float[] logprobs = new float[top];
        boolean anyId = false;
        for (int i = 0; i < top; i++) {
            ids[i] = in.readLong();
            anyId |= ids[i] >= 0;
            logprobs[i] = in.readFloat();
        }
        return new Generation.Token(id, text, logprob, anyId ? ids : new long[0], logprobs);
    }

    /** True for the end of the stream, as opposed to garbage. */
    static boolean closed(IOException e) {
        return e instanceof EOFException;
    }

    @Override
    public void close() {
        try {
            in.close();
        } catch (IOException ignored) {
            // closing a pipe end: nothing to report
        }
        try {
            out.close();
        } catch (IOException ignored) {
            // the peer is gone already
        }
    }
}
