package dev.vmmkit.lifetime;

import org.junit.jupiter.api.Test;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Reference counts, scopes, promote, containers and zero-size tensors, with the bad uses the API must refuse. */
class TensorLifetimeTest extends OnTestDevice {
    @Test
    void retainAndReleaseCountAndTheLastReleaseFrees() {
        Tensor t = device.zeros(4, 4);
        assertEquals(64, device.liveBytes());
        assertSame(t, t.retain());
        assertEquals(2, t.refCnt());
        assertFalse(t.release());
        assertEquals(64, device.liveBytes());
        assertTrue(t.release());
        assertEquals(0, t.refCnt());
        assertEquals(0, device.liveBytes());
    }

    @Test
    void releaseBelowZeroIsAClearErrorAndChangesNothing() {
        Tensor t = device.zeros(3);
        t.release();
        IllegalReferenceCountException e = assertThrows(IllegalReferenceCountException.class, t::release);
        assertTrue(e.getMessage().contains("already 0"), e.getMessage());
        assertEquals(0, t.refCnt());
        assertEquals(0, device.liveBytes());
    }

    @Test
    void useAfterReleaseThrowsWithoutTouchingTheMemory() {
        Tensor t = device.of(new float[] {1, 2, 3}, 3);
        t.release();
        assertTrue(assertThrows(IllegalReferenceCountException.class, t::toArray).getMessage().contains("reference count reached 0"));
        assertThrows(IllegalReferenceCountException.class, t::retain);
        assertThrows(IllegalReferenceCountException.class, () -> Ops.relu(t));
        assertThrows(IllegalReferenceCountException.class, () -> t.copyFrom(new float[3]));
        assertThrows(IllegalReferenceCountException.class, t::address);
    }

    @Test
    void shapeAndDataSizeMismatchIsRefusedBeforeAllocating() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> device.of(new float[5], 2, 3));
        assertTrue(e.getMessage().contains("holds 6 elements but 5 values"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> device.zeros(2, -1));
        try (Tensor t = device.zeros(2, 2); Tensor u = device.zeros(3, 1)) {
            assertThrows(IllegalArgumentException.class, () -> t.copyFrom(new float[3]));
            assertThrows(IllegalArgumentException.class, () -> Ops.matmul(t, u));
            assertThrows(IllegalArgumentException.class, () -> Ops.add(t, u));
        }
        assertEquals(0, device.liveBytes());
    }

    @Test
    void zeroSizeTensorsAllocateNothingAndCountNothing() {
        long allocations = device.stats().allocations();
        Tensor empty = device.zeros(0, 5);
        assertEquals(0, empty.numel());
        assertEquals(0, device.liveBytes());
        assertEquals(allocations, device.stats().allocations());
        assertFalse(empty.release());
        assertFalse(empty.release()); // never freed, so never freed twice
        empty.retain();
        assertEquals(1, empty.refCnt());
        assertArrayEquals(new float[0], empty.toArray());
        try (Scope scope = Scope.open()) {
            Tensor inScope = device.zeros(0);
            assertEquals(0, scope.size(), "a zero-size tensor joins no scope");
            assertSame(inScope, Scope.promote(inScope));
        }
    }

    @Test
    void scopeCloseReleasesWhatIsRegisteredAndKeepsWhatWasRetained() {
        Tensor kept;
        try (Scope scope = Scope.open()) {
            device.zeros(8);
            kept = device.zeros(8);
            kept.retain();
            assertEquals(2, scope.size());
            assertEquals(64, device.liveBytes());
        }
        assertEquals(1, kept.refCnt());
        assertEquals(32, device.liveBytes());
        kept.release();
    }

    @Test
    void promoteMovesAResultToTheCallersScope() {
        try (Scope outer = Scope.open()) {
            Tensor result = makeInInnerScope();
            assertEquals(1, result.refCnt());
            assertEquals(1, outer.size());
            assertEquals(16, device.liveBytes(), "the inner scope's temporary is gone, the result survives");
        }
        assertEquals(0, device.liveBytes());
    }

    private Tensor makeInInnerScope() {
        try (Scope inner = Scope.open()) {
            Tensor temporary = device.full(1f, 4);
            Tensor result = Ops.add(temporary, temporary);
            return Scope.promote(result);
        }
    }

    @Test
    void promoteWithNoEnclosingScopeIsAClearError() {
        Tensor loose = device.zeros(2);
        assertTrue(assertThrows(IllegalStateException.class, () -> Scope.promote(loose)).getMessage().contains("in no scope"));
        loose.release();
        try (Scope only = Scope.open()) {
            Tensor t = device.zeros(2);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> Scope.promote(t));
            assertTrue(e.getMessage().contains("no enclosing scope"), e.getMessage());
            assertEquals(1, only.size(), "a failed promote leaves the tensor where it was");
        }
    }

    @Test
    void closingAScopeOnAnotherThreadIsAClearError() throws Exception {
        ExecutorService other = Executors.newSingleThreadExecutor();
        try (Scope scope = Scope.open()) {
            device.zeros(4);
            Future<Throwable> attempt = other.submit(() -> {
                try {
                    scope.close();
                    return null;
                } catch (IllegalStateException e) {
                    return e;
                }
            });
            Throwable failure = attempt.get();
            assertTrue(failure != null && failure.getMessage().contains("belongs to the thread that opened it"),
                    String.valueOf(failure));
            assertEquals(1, scope.size(), "the failed close released nothing");
        } finally {
            other.shutdown();
        }
        assertEquals(0, device.liveBytes());
    }

    @Test
    void nestedScopesAndAnExceptionLeavingThemReleaseEverything() {
        assertThrows(IllegalStateException.class, () -> {
            try (Scope outer = Scope.open()) {
                device.zeros(16);
                try (Scope inner = Scope.open()) {
                    device.zeros(16);
                    throw new IllegalStateException("boom");
                }
            }
        });
        assertNull(Scope.current());
        assertEquals(0, device.liveBytes());
    }

    @Test
    void anInnerScopeLeftOpenIsClosedWithItsParent() {
        Scope outer = Scope.open();
        device.zeros(4);
        Scope.open();
        device.zeros(4);
        outer.close();
        assertNull(Scope.current());
        assertEquals(0, device.liveBytes());
    }

    @Test
    void closeFreesATemporaryBeforeItsScopeEnds() {
        try (Scope scope = Scope.open()) {
            try (Tensor temporary = device.zeros(100)) {
                assertEquals(400, device.liveBytes());
            }
            assertEquals(0, device.liveBytes());
            assertEquals(0, scope.size());
        }
    }

    @Test
    void anExplicitReleaseToZeroTakesTheTensorOutOfItsScope() {
        try (Scope scope = Scope.open()) {
            Tensor t = device.zeros(4);
            t.release();
            assertEquals(0, scope.size());
        } // closing does not release it a second time
    }

    @Test
    void borrowingChangesNoCount() {
        try (Tensor a = device.full(2f, 3)) {
            sumOf(a);
            assertEquals(1, a.refCnt());
        }
    }

    private static float sumOf(Tensor borrowed) {
        try (Scope s = Scope.open()) {
            return Ops.sum(borrowed).item();
        }
    }

    @Test
    void containersAcquireTheirFieldsAndReleaseThemShallowly() {
        TensorRecord layer;
        try (Scope outer = Scope.open()) {
            try (Scope inner = Scope.open()) {
                Tensor w = device.full(1f, 2, 2);
                Tensor b = device.zeros(2);
                layer = TensorRecord.of("w", w, "b", b);
                assertEquals(2, w.refCnt(), "the local and the record's field");
                Scope.promote(layer); // shallow: only the record moves
            }
            assertEquals(1, layer.tensor("w").refCnt(), "the inner scope dropped the locals; the record keeps its own");
            assertEquals(24, device.liveBytes());
            TensorList list = new TensorList(layer.tensor("w"));
            assertEquals(2, layer.tensor("w").refCnt());
            list.release();
            assertEquals(1, layer.tensor("w").refCnt());
        }
        assertEquals(0, layer.refCnt());
        assertEquals(0, device.liveBytes());
        assertThrows(IllegalReferenceCountException.class, () -> layer.tensor("w"));
    }

    @Test
    void aListReleasesReplacedElements() {
        try (Scope scope = Scope.open()) {
            TensorList list = new TensorList();
            list.add(device.zeros(4)).add(device.zeros(4));
            list.set(0, device.zeros(8));
            assertEquals(2, list.size());
            assertEquals(64, device.liveBytes());
        }
        assertEquals(0, device.liveBytes());
    }

    @Test
    void sgdOwnsItsParametersUntilClosed() {
        Tensor w = device.full(1f, 2).requiresGrad(true);
        try (Sgd sgd = new Sgd(0.5f, w)) {
            assertEquals(2, w.refCnt());
            try (Scope step = Scope.open()) {
                Ops.sum(Ops.mul(w, w)).backward();
            }
            sgd.step();
            assertArrayEquals(new float[] {0f, 0f}, w.toArray(), 1e-6f); // w - 0.5 * 2w
            assertNull(w.grad(), "gradients are freed after the step");
        }
        assertEquals(1, w.refCnt());
        w.release();
    }
}
