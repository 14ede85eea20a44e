package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The process's one on_token stub hands each call's tokens to that call's receiver, and refuses ended calls. */
class TokenCallbacksTest {
    /** The stub called as an engine calls it, through its native address. */
    private static final MethodHandle ENGINE_CALLS = Linker.nativeLinker().downcallHandle(TokenCallbacks.STUB, EngineAbi.ON_TOKEN_FN);

    private static int call(MemorySegment user, long token) throws Throwable {
        return (int) ENGINE_CALLS.invokeExact(user, MemorySegment.ofAddress(token));
    }

    @Test
    void concurrentCallsGetOnlyTheirOwnTokens() throws Throwable {
        int calls = 8;
        int tokens = 5_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int c = 0; c < calls; c++) {
            long mark = 1_000_000L * (c + 1);
            threads.add(Thread.ofPlatform().start(() -> {
                AtomicInteger seen = new AtomicInteger();
                MemorySegment user = TokenCallbacks.register(raw -> {
                    if (raw.address() != mark + seen.get()) failures.add(new AssertionError("a token of another call: " + raw.address()));
                    seen.incrementAndGet();
                    return 0;
                });
                try {
                    start.await();
                    for (int i = 0; i < tokens; i++) assertEquals(0, call(user, mark + i));
                    assertEquals(tokens, seen.get());
                } catch (Throwable t) {
                    failures.add(t);
                } finally {
                    TokenCallbacks.unregister(user);
                }
            }));
        }
        start.countDown();
        for (Thread thread : threads) thread.join();
        assertEquals(List.of(), failures);
    }

    @Test
    void aReceiverThatSaysStopStopsAndAnEndedCallIsRefused() throws Throwable {
        MemorySegment user = TokenCallbacks.register(raw -> raw.address() == 3 ? 1 : 0);
        assertEquals(0, call(user, 2));
        assertEquals(1, call(user, 3));
        TokenCallbacks.unregister(user);
        assertEquals(1, call(user, 2), "a token after the call ended tells the engine to stop");
    }
}
