package dev.vmmkit.engine;

/**
 * One streamed generation as the ABI's version 2 delivers it ({@code engine_generate_stream}):
 * tokens one at a time to a {@link Sink}, then an {@link Outcome}. Version 1 engines are served
 * through the same shape, all their tokens delivered when the call returns.
 */
final class Generation {
    private Generation() {
    }

    /**
     * One token, copied out of the engine.
     *
     * @param text        the token's piece of output, UTF-8 bytes (may end inside a character); empty for version 1
     * @param logprob     the token's log-probability (NaN when the engine gave none)
     * @param topIds      the most likely tokens at this step, best first
     * @param topLogprobs their log-probabilities (version 1: the engine's logprobs array, topIds empty)
     */
    record Token(long id, byte[] text, float logprob, long[] topIds, float[] topLogprobs) {
    }

    /** Receives tokens as they come, on the generating thread; false stops the generation. */
    @FunctionalInterface
    interface Sink {
        boolean accept(Token token);

        /**
         * False when nobody looks at the tokens before the generation ends and nothing here stops it
         * early: they may then arrive together at its end (a worker sends them with its answer, in
         * one write, instead of a frame each as they are made).
         */
        default boolean live() {
            return true;
        }

        /** {@code sink}, saying that its tokens may arrive together at the end (see {@link #live}). */
        static Sink atEnd(Sink sink) {
            return new Sink() {
                @Override
                public boolean accept(Token token) {
                    return sink.accept(token);
                }

                @Override
                public boolean live() {
                    return false;
                }
            };
        }
    }

    /** Why a generation ended (the ABI's {@code ENGINE_FINISH_*}). */
    enum Finish {
        LENGTH, STOP, CANCELLED, ERROR;

        static Finish of(int code) {
            return switch (code) {
                case EngineAbi.FINISH_LENGTH -> LENGTH;
                case EngineAbi.FINISH_STOP -> STOP;
                case EngineAbi.FINISH_CANCELLED -> CANCELLED;
                default -> ERROR;
            };
        }

        /** The lower-case name the HTTP APIs and metrics use. */
        String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /**
     * How it ended, and the prompt's token count (-1 when the engine does not say: version 1).
     *
     * @param firstTokenAt when the engine made its first token ({@link System#nanoTime()}), for tokens that
     *                     arrived later than they were made (a sink that is not {@link Sink#live}); -1 when
     *                     they came as they were made, or there was none
     */
    record Outcome(Finish finish, int promptTokens, long firstTokenAt) {
        Outcome(Finish finish, int promptTokens) {
            this(finish, promptTokens, -1);
        }
    }
}
