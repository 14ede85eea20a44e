package dev.vmmkit.lifetime;

import java.util.ArrayList;
import java.util.List;

/** A growable list of tensors that acquires each tensor it stores and releases them when freed. */
public final class TensorList extends TensorContainer {
    private final List<Tensor> tensors = new ArrayList<>();

    /** A list holding its own reference to each of {@code initial}. */
    public TensorList(Tensor... initial) {
        for (Tensor t : initial) add(t);
    }

    /** Stores {@code tensor}, acquiring a reference (+1). */
    public synchronized TensorList add(Tensor tensor) {
        checkAlive("add");
        tensors.add(acquire(tensor));
        return this;
    }

    /** Replaces element {@code index}: acquires the new tensor, then releases the old one. */
    public synchronized TensorList set(int index, Tensor tensor) {
        checkAlive("set");
        Tensor old = tensors.set(index, acquire(tensor));
        old.release();
        return this;
    }

    /** Element {@code index}, borrowed: retain it to keep it beyond the list's life. */
    public synchronized Tensor get(int index) {
        checkAlive("get");
        return tensors.get(index);
    }

    public synchronized int size() {
        checkAlive("size");
        return tensors.size();
    }

    /** A snapshot of the elements, borrowed. */
    public synchronized List<Tensor> tensors() {
        checkAlive("tensors");
        return List.copyOf(tensors);
    }

    @Override
    synchronized List<RefCounted> takeElements() {
        List<RefCounted> taken = List.copyOf(tensors);
        tensors.clear();
        return taken;
    }

    @Override
    String describe() {
        return "TensorList";
    }
}
