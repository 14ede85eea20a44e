package dev.vmmkit.lifetime;

import java.util.Arrays;

/**
 * A float32 array in device memory with a reference count ({@link RefCounted}). Made by a
 * {@link TensorDevice} or by an op ({@link Ops}); its memory goes back to the device's memory
 * resource when the count reaches zero, never later.
 *
 * <p>Every use checks the count first: a tensor whose count reached zero throws
 * {@link IllegalReferenceCountException} and its freed memory is never touched. A tensor with no
 * elements owns no memory: it belongs to no scope, its count operations do nothing and it can never
 * be freed twice.
 *
 * <p>Autograd: a leaf made with {@link #requiresGrad(boolean)} collects a gradient ({@link #grad()})
 * when {@link #backward()} runs on a result computed from it. A result of an op on such tensors
 * holds its grad function, which holds counted references to what its backward pass reads.
 *
 * <p>The count is thread-safe: tensors can be shared, retained and released by several threads.
 * The autograd state (gradient, graph) belongs to one thread at a time.
 */
public final class Tensor extends ScopedResource {
    private final TensorDevice device;
    private final int[] shape;
    private final long elements;
    private final long address;
    private final LeakRecord leak;
    private boolean requiresGrad;
    /** How this tensor was computed, for backward(); null for leaves and after backward(). */
    private GradFn gradFn;
    private boolean graphFreed;
    private Tensor grad;

    Tensor(TensorDevice device, int[] shape, long elements, long address, boolean register) {
        this.device = device;
        this.shape = shape;
        this.elements = elements;
        this.address = address;
        this.leak = elements == 0 ? null : device.leakDetector().track(this);
        registerInCurrentScope(register);
    }

    @Override
    boolean counted() {
        return elements > 0;
    }

    public int[] shape() {
        return shape.clone();
    }

    /** Size of dimension {@code i}. */
    public int dim(int i) {
        return shape[i];
    }

    public int rank() {
        return shape.length;
    }

    public long numel() {
        return elements;
    }

    public DType dtype() {
        return DType.FLOAT32;
    }

    public long byteSize() {
        return elements * DType.FLOAT32.bytes();
    }

    public TensorDevice device() {
        return device;
    }

    /** The device address of the first element (0 for a tensor with no elements). */
    public long address() {
        checkAlive("address()");
        return address;
    }

    /** Copies the elements to a new host array (waits for the device). */
    public float[] toArray() {
        checkAlive("toArray()");
        touch("toArray");
        float[] values = new float[Math.toIntExact(elements)];
        if (elements > 0) device.compute().copyToHost(values, address);
        return values;
    }

    /** The value of a one-element tensor. */
    public float item() {
        if (elements != 1) throw new IllegalStateException("item() of " + describe() + ": it has " + elements + " elements, not 1");
        return toArray()[0];
    }

    /** Overwrites the elements with {@code values}, which must have exactly {@link #numel()} of them. */
    public Tensor copyFrom(float[] values) {
        checkAlive("copyFrom()");
        if (values.length != elements) {
            throw new IllegalArgumentException("copyFrom: " + values.length + " values for " + describe()
                    + " of " + elements + " elements");
        }
        touch("copyFrom");
        if (elements > 0) device.compute().copyFromHost(address, values);
        return this;
    }

    /** Marks a leaf as collecting gradients. Results of ops get this from their inputs. */
    public Tensor requiresGrad(boolean requires) {
        checkAlive("requiresGrad()");
        if (gradFn != null) throw new IllegalStateException("requiresGrad(): " + describe() + " is the result of an op, not a leaf");
        this.requiresGrad = requires;
        return this;
    }

    public boolean requiresGrad() {
        return requiresGrad || gradFn != null;
    }

    /** True for tensors made directly (not by an op that recorded a grad function). */
    public boolean isLeaf() {
        return gradFn == null && !graphFreed;
    }

    /** The gradient accumulated by backward(), or null; borrowed: it belongs to this tensor. */
    public Tensor grad() {
        checkAlive("grad()");
        return grad;
    }

    /** Releases the gradient now (as PyTorch's zero_grad(set_to_none=True)). */
    public void zeroGrad() {
        Tensor old = grad;
        grad = null;
        if (old != null) old.release();
    }

    /**
     * Computes the gradient of this one-element tensor with respect to every leaf that requires
     * one, then drops the graph: each grad function gives back its references as soon as it has run,
     * so intermediates nothing else holds are freed during the pass.
     */
    public void backward() {
        checkAlive("backward()");
        Autograd.backward(this);
    }

    /** Records a use, for the leak report of a tensor that is later lost (paranoid level only). */
    void touch(String use) {
        if (leak != null) leak.record(use);
    }

    GradFn gradFn() {
        return gradFn;
    }

    void gradFn(GradFn fn) {
        gradFn = fn;
    }

    /** Forgets the grad function after backward() dropped the graph. */
    GradFn takeGradFn() {
        GradFn fn = gradFn;
        gradFn = null;
        graphFreed = fn != null;
        return fn;
    }

    boolean graphFreed() {
        return graphFreed;
    }

    void setGrad(Tensor newGrad) {
        grad = newGrad;
    }

    long rawAddress() {
        return address;
    }

    @Override
    void deallocate() {
        if (leak != null) leak.close(this);
        device.free(address, byteSize());
        zeroGrad();
        GradFn fn = gradFn;
        gradFn = null;
        if (fn != null) fn.releaseNode();
    }

    @Override
    String describe() {
        return "Tensor " + DType.FLOAT32 + Arrays.toString(shape);
    }

    @Override
    public String toString() {
        return describe() + "(refCnt=" + refCnt() + (requiresGrad() ? ", requiresGrad" : "") + ")";
    }
}
