package dev.vmmkit.lifetime;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The reference count and scope membership every {@link RefCounted} shares. The count is changed by
 * compare-and-set only, so retains and releases on several threads are never lost, and exactly one
 * release frees the object. Subclasses say what freeing means ({@link #deallocate}).
 */
abstract sealed class ScopedResource implements RefCounted permits Tensor, TensorContainer {
    private static final VarHandle REF_CNT;

    static {
        try {
            REF_CNT = MethodHandles.lookup().findVarHandle(ScopedResource.class, "refCnt", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("FieldMayBeFinal") // changed through REF_CNT
    private volatile int refCnt = 1;
    /** The scope holding the creator's reference, or null; changed only on that scope's thread. */
    volatile Scope scope;

    /** Registers the new object in the innermost scope of this thread, unless {@code register} is false. */
    final void registerInCurrentScope(boolean register) {
        if (register && counted()) {
            Scope current = Scope.current();
            if (current != null) current.register(this);
        }
    }

    /** False for objects that own nothing (zero-size tensors): their count operations do nothing. */
    boolean counted() {
        return true;
    }

    /** Frees what the object owns; called once, by the release that brought the count to zero. */
    abstract void deallocate();

    /** A short description for messages: {@code Tensor float32[2, 3]}. */
    abstract String describe();

    @Override
    public int refCnt() {
        return counted() ? refCnt : 1;
    }

    @Override
    public RefCounted retain() {
        if (!counted()) return this;
        while (true) {
            int count = refCnt;
            if (count == 0) {
                throw new IllegalReferenceCountException(describe() + " was already freed; retain() cannot bring it back");
            }
            if (count == Integer.MAX_VALUE) {
                throw new IllegalReferenceCountException(describe() + ": reference count overflow");
            }
            if (REF_CNT.compareAndSet(this, count, count + 1)) return this;
        }
    }

    @Override
    public boolean release() {
        if (!counted()) return false;
        while (true) {
            int count = refCnt;
            if (count == 0) {
                throw new IllegalReferenceCountException("release() of " + describe()
                        + " whose reference count is already 0 (released once too often)");
            }
            if (REF_CNT.compareAndSet(this, count, count - 1)) {
                if (count > 1) return false;
                scope = null; // its scope skips it from now on
                deallocate();
                return true;
            }
        }
    }

    @Override
    public void close() {
        if (!counted()) return;
        Scope owner = scope;
        if (owner != null) owner.unregister(this);
        release();
    }

    /** Throws unless the object is still alive; called before anything touches its memory. */
    final void checkAlive(String use) {
        if (counted() && refCnt == 0) {
            throw new IllegalReferenceCountException(use + " of " + describe()
                    + " after its reference count reached 0; its memory was given back");
        }
    }
}
