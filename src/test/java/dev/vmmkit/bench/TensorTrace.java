package dev.vmmkit.bench;

import dev.vmmkit.trace.TraceWriter;

import java.io.IOException;

/**
 * Writes a trace tensor by tensor, as PyTorch's allocator sees a model run: every allocation gets a
 * key of its own (its bytes rounded to 512, as addresses would be), frees name the tensors. The
 * model traces ({@link GenerateTrace}, {@link DecodingTrace}) are written through it.
 */
final class TensorTrace {
    /** A device tensor: its key in the trace and its bytes. */
    record T(long key, long bytes) {
    }

    private final TraceWriter out;
    private long nextKey = 1L << 32;

    TensorTrace(TraceWriter out) {
        this.out = out;
    }

    T alloc(long bytes) throws IOException {
        T t = new T(nextKey, bytes);
        nextKey += (bytes + 511) & -512L;
        out.alloc(t.key, t.bytes, 0);
        return t;
    }

    /** Frees {@code tensors} in order; nulls (tensors a model variant does not make) are skipped. */
    void free(T... tensors) throws IOException {
        for (T t : tensors) if (t != null) out.free(t.key, t.bytes, 0);
    }

    /** Allocates and frees {@code count} small temporaries of {@code bytes} each (index and mask bookkeeping). */
    void scratch(int count, long bytes) throws IOException {
        for (int i = 0; i < count; i++) free(alloc(bytes));
    }

    /** apply_rotary_pos_emb for one tensor of {@code bytes}: x*cos, rotate_half (slice, neg, cat), *sin, sum. */
    T rotate(long bytes) throws IOException {
        T timesCos = alloc(bytes);
        T negated = alloc(bytes / 2);
        T rotated = alloc(bytes);
        free(negated);
        T timesSin = alloc(bytes);
        free(rotated);
        T sum = alloc(bytes);
        free(timesCos, timesSin);
        return sum;
    }
}
