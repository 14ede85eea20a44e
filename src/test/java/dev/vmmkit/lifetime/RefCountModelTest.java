package dev.vmmkit.lifetime;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Random sequences of create, retain, release, close, scope open and close, promote and container
 * store, checked after every step against a reference model of the counts: each object's count, and
 * the live bytes, which must equal the bytes of the tensors the model says are alive.
 */
class RefCountModelTest {
    private TensorDevice device;

    @RegisterExtension
    final NoLeaks noLeaks = new NoLeaks(() -> device);

    @BeforeEach
    void open() {
        device = TestDevice.open(LeakDetector.Level.PARANOID);
    }

    @AfterEach
    void close() {
        while (Scope.current() != null) Scope.current().close(); // a failed run leaves none behind
        device.close();
    }

    /**
     * The model of one object. Its count is the sum of who holds it: references the test itself owns
     * (retains, or the creator's reference of an object made outside any scope), the scope holding
     * the creator's reference, and the containers that stored it. The test only gives back references
     * it owns; giving back a container's would be a use-after-free bug of the test, not of the API.
     */
    private static final class Expected {
        int owned;
        ModelScope scope;
        int heldByContainers;
        final long bytes;
        final List<RefCounted> elements; // for containers

        Expected(long bytes, List<RefCounted> elements) {
            this.bytes = bytes;
            this.elements = elements;
        }

        int count() {
            return owned + (scope != null ? 1 : 0) + heldByContainers;
        }
    }

    private record ModelScope(Scope scope, List<RefCounted> members, ModelScope parent) {
    }

    private final Map<RefCounted, Expected> model = new IdentityHashMap<>();
    private final List<RefCounted> alive = new ArrayList<>();
    private final ArrayDeque<ModelScope> scopes = new ArrayDeque<>();

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 4, 5, 6, 7, 8})
    void countsFollowTheModel(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        for (int step = 0; step < 1500; step++) {
            int action = random.nextInt(100);
            if (action < 25 || alive.isEmpty()) create(random);
            else if (action < 40) retain(pick(random));
            else if (action < 55) release(pick(random));
            else if (action < 62) closeEarly(pick(random));
            else if (action < 72) openScope();
            else if (action < 82) closeScope();
            else if (action < 90) promote(pick(random));
            else storeInContainer(random);
            verify();
        }
        while (!scopes.isEmpty()) {
            closeScope();
            verify();
        }
        for (RefCounted r : new ArrayList<>(alive)) {
            while (model.containsKey(r) && model.get(r).owned > 0) release(r);
            verify();
        }
        assertEquals(0, model.size(), "once the test gave back its own references, nothing is held");
        assertEquals(0, device.liveBytes());
    }

    private RefCounted pick(SplittableRandom random) {
        return alive.get(random.nextInt(alive.size()));
    }

    private void create(SplittableRandom random) {
        Tensor t = device.zeros(1 + random.nextInt(64));
        Expected e = new Expected(t.byteSize(), List.of());
        track(t, e);
    }

    private void storeInContainer(SplittableRandom random) {
        List<RefCounted> fields = new ArrayList<>();
        for (int i = 0; i < 1 + random.nextInt(3); i++) {
            RefCounted r = pick(random);
            if (r instanceof Tensor && !fields.contains(r)) fields.add(r);
        }
        if (fields.isEmpty()) return;
        RefCounted container;
        if (random.nextBoolean()) {
            container = new TensorList(fields.toArray(Tensor[]::new));
        } else {
            Object[] pairs = new Object[fields.size() * 2];
            for (int i = 0; i < fields.size(); i++) {
                pairs[2 * i] = "f" + i;
                pairs[2 * i + 1] = fields.get(i);
            }
            container = TensorRecord.of(pairs);
        }
        for (RefCounted f : fields) model.get(f).heldByContainers++;
        track(container, new Expected(0, fields));
    }

    private void track(RefCounted r, Expected e) {
        ModelScope innermost = scopes.peek();
        if (innermost != null) {
            e.scope = innermost;
            innermost.members().add(r);
        } else {
            e.owned = 1;
        }
        model.put(r, e);
        alive.add(r);
    }

    private void retain(RefCounted r) {
        r.retain();
        model.get(r).owned++;
    }

    /** Gives back a reference the test owns (none: nothing to do). */
    private void release(RefCounted r) {
        Expected e = model.get(r);
        if (e.owned == 0) return;
        r.release();
        e.owned--;
        freeIfUnheld(r);
    }

    /** At count zero the object is freed, leaves its scope and gives back its elements. */
    private void freeIfUnheld(RefCounted r) {
        Expected e = model.get(r);
        if (e.count() > 0) return;
        model.remove(r);
        alive.remove(r);
        for (RefCounted element : e.elements) {
            model.get(element).heldByContainers--;
            freeIfUnheld(element);
        }
    }

    /** close(): gives back the scope's reference if it has one, else one the test owns. */
    private void closeEarly(RefCounted r) {
        Expected e = model.get(r);
        if (e.scope == null && e.owned == 0) return;
        r.close();
        if (e.scope != null) {
            e.scope.members().remove(r);
            e.scope = null;
        } else {
            e.owned--;
        }
        freeIfUnheld(r);
    }

    private void openScope() {
        scopes.push(new ModelScope(Scope.open(), new ArrayList<>(), scopes.peek()));
    }

    private void closeScope() {
        if (scopes.isEmpty()) return;
        ModelScope closing = scopes.pop();
        closing.scope().close();
        List<RefCounted> members = new ArrayList<>(closing.members());
        for (int i = members.size() - 1; i >= 0; i--) {
            RefCounted r = members.get(i);
            Expected e = model.get(r);
            if (e == null || e.scope != closing) continue;
            e.scope = null;
            closing.members().remove(r);
            freeIfUnheld(r);
        }
    }

    private void promote(RefCounted r) {
        Expected e = model.get(r);
        if (e.scope == null || e.scope.parent() == null) {
            try {
                Scope.promote(r);
                throw new AssertionError("promote without an enclosing scope must fail");
            } catch (IllegalStateException expected) {
                return;
            }
        }
        Scope.promote(r);
        e.scope.members().remove(r);
        e.scope = e.scope.parent();
        e.scope.members().add(r);
    }

    private void verify() {
        long bytes = 0;
        for (Map.Entry<RefCounted, Expected> entry : model.entrySet()) {
            assertEquals(entry.getValue().count(), entry.getKey().refCnt(), () -> "count of " + entry.getKey());
            bytes += entry.getValue().bytes;
        }
        assertEquals(bytes, device.liveBytes(), "live bytes equal the model's");
    }
}
