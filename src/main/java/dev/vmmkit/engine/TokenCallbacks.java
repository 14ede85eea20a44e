package dev.vmmkit.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The one on_token function every streamed call of the process hands its engine: an FFM upcall
 * stub made once, whose {@code user} argument names the call ({@link #register}) so the token
 * reaches that call's {@link Receiver}.
 *
 * <p>Why one: a stub made per call bound a new method handle each time, and the JVM specialises a
 * method handle that has run about 128 times by generating a class for it. With a stub per call
 * every generation of 128 tokens paid for making the stub and for that class, and every token
 * went through a handle not compiled yet: the host's share of a token in the engine's timing
 * ("host") was 15-46 us on the CPU build, and 5-8 us with one stub (docs/engine.md).
 */
final class TokenCallbacks {
    /** What a call does with each token: 0 to go on, 1 to stop (the engine's on_token contract). */
    interface Receiver {
        int onToken(MemorySegment raw);
    }

    private static final ConcurrentHashMap<Long, Receiver> RECEIVERS = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_CALL = new AtomicLong(1); // 0 would be a NULL user pointer

    /** The engine's on_token: int (*)(void* user, const EngineToken* token). */
    static final MemorySegment STUB;

    static {
        try {
            STUB = Linker.nativeLinker().upcallStub(
                    MethodHandles.lookup().findStatic(TokenCallbacks.class, "onToken",
                            MethodType.methodType(int.class, MemorySegment.class, MemorySegment.class)),
                    EngineAbi.ON_TOKEN_FN, Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private TokenCallbacks() {
    }

    /** Makes {@code receiver} the one that gets the tokens of the call whose user pointer is the returned value. */
    static MemorySegment register(Receiver receiver) {
        long call = NEXT_CALL.getAndIncrement();
        RECEIVERS.put(call, receiver);
        return MemorySegment.ofAddress(call);
    }

    /** The call is over: a token that still came for it is refused (the engine is told to stop). */
    static void unregister(MemorySegment user) {
        RECEIVERS.remove(user.address());
    }

    private static int onToken(MemorySegment user, MemorySegment raw) {
        Receiver receiver = RECEIVERS.get(user.address());
        return receiver == null ? 1 : receiver.onToken(raw); // never throws: a Receiver catches everything
    }
}
