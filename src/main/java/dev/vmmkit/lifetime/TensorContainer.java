package dev.vmmkit.lifetime;

import java.util.List;

/**
 * A reference-counted holder of tensors (or other containers), the seed's struct with a reference
 * count: storing an element acquires it (+1), and freeing the container releases each element once
 * (shallow: an element someone else holds survives). A container made in a scope registers there
 * like a tensor, and {@link Scope#promote} moves only the container, which keeps its own references
 * to the elements.
 */
public abstract sealed class TensorContainer extends ScopedResource permits TensorList, TensorRecord {

    TensorContainer() {
        registerInCurrentScope(true);
    }

    /** Forgets every element, returning what was held, so deallocate can release each once. */
    abstract List<RefCounted> takeElements();

    static <T extends RefCounted> T acquire(T element) {
        element.retain();
        return element;
    }

    @Override
    final void deallocate() {
        RuntimeException failure = null;
        for (RefCounted element : takeElements()) {
            try {
                element.release();
            } catch (RuntimeException e) {
                if (failure == null) failure = e;
                else failure.addSuppressed(e);
            }
        }
        if (failure != null) throw failure;
    }
}
