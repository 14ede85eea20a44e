package dev.vmmkit.trace;

/**
 * Where a program's requests are recorded ({@code vmmkit run --trace}). Kept behind this small
 * interface so that tests can record in memory and a run without a trace records nothing.
 */
public interface AllocationRecorder extends AutoCloseable {

    /** Records nothing. */
    AllocationRecorder NONE = new AllocationRecorder() {
        @Override
        public boolean isRecording() {
            return false;
        }

        @Override
        public void allocated(long address, long size, long stream) {
        }

        @Override
        public void freed(long address, long size, long stream) {
        }

        @Override
        public void close() {
        }
    };

    /** False for {@link #NONE} (and a recorder that stopped), so callers can skip finding a size. */
    boolean isRecording();

    void allocated(long address, long size, long stream);

    /** A free the program asked for; {@code size} is -1 when unknown. */
    void freed(long address, long size, long stream);

    @Override
    void close();
}
