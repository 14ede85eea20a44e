package dev.vmmkit.lifetime;

import java.util.ArrayList;
import java.util.List;

/**
 * A region of code whose tensors are released together when it closes, as a function's locals are.
 * Opened with try-with-resources; scopes nest, one stack per thread.
 *
 * <p>Every tensor or container made while a scope is open registers in the innermost scope of its
 * thread, which then holds the creator's reference. {@link #close()} releases every reference still
 * registered (count - 1: an object that something else retained survives). {@link #promote} moves
 * an object to the enclosing scope, so a result survives the scope that made it and the caller's
 * scope takes it. A scope belongs to the thread that opened it; using it from another thread is
 * an error.
 */
public final class Scope implements AutoCloseable {
    private static final ThreadLocal<Scope> INNERMOST = new ThreadLocal<>();

    private final Scope parent;
    private final Thread owner;
    private final List<ScopedResource> registered = new ArrayList<>();
    /** Size at which entries that left the scope are swept out of {@link #registered}. */
    private int compactAt = 64;
    private boolean closed;

    private Scope(Scope parent, Thread owner) {
        this.parent = parent;
        this.owner = owner;
    }

    /** Opens a scope nested in the current innermost scope of this thread. */
    public static Scope open() {
        Scope scope = new Scope(INNERMOST.get(), Thread.currentThread());
        INNERMOST.set(scope);
        return scope;
    }

    /** The innermost open scope of this thread, or null. */
    public static Scope current() {
        return INNERMOST.get();
    }

    /**
     * Moves {@code resource} from the scope holding it to that scope's enclosing scope, so that it
     * survives as a return value; the seed's {@code tl_tensor_promote}. Zero-size tensors belong to
     * no scope and come back unchanged.
     *
     * @throws IllegalStateException when it is in no scope, or its scope has no enclosing scope,
     *         or the scope belongs to another thread
     */
    public static <T extends RefCounted> T promote(T resource) {
        ScopedResource r = (ScopedResource) resource;
        if (!r.counted()) return resource;
        r.checkAlive("promote");
        Scope from = r.scope;
        if (from == null) {
            throw new IllegalStateException("promote: " + r.describe()
                    + " is in no scope (made outside any scope, already promoted out of the outermost one, or released)");
        }
        from.checkOwner("promote");
        if (from.parent == null) {
            throw new IllegalStateException("promote: " + r.describe() + " is in the outermost scope of thread "
                    + from.owner.getName() + "; there is no enclosing scope to take it");
        }
        from.unregister(r);
        from.parent.register(r);
        return resource;
    }

    /** Number of objects this scope still holds a reference to. */
    public int size() {
        int held = 0;
        for (ScopedResource r : registered) if (r.scope == this) held++;
        return held;
    }

    void register(ScopedResource r) {
        checkOwner("register in");
        if (closed) throw new IllegalStateException("register in a closed scope");
        r.scope = this;
        registered.add(r);
        if (registered.size() >= compactAt) {
            registered.removeIf(entry -> entry.scope != this);
            compactAt = Math.max(64, 2 * registered.size());
        }
    }

    /** Forgets {@code r} without releasing it (promote, close of a temporary). */
    void unregister(ScopedResource r) {
        checkOwner("unregister from");
        if (r.scope == this) {
            r.scope = null; // the entry stays in the list until the next sweep
        }
    }

    /**
     * Releases every reference still registered, newest first, after closing any inner scope left
     * open. Closing twice does nothing. If releases fail, the first failure is thrown after all
     * were tried, with the others suppressed.
     */
    @Override
    public void close() {
        checkOwner("close");
        if (closed) return;
        RuntimeException failure = null;
        for (Scope inner = INNERMOST.get(); inner != null && inner != this; inner = INNERMOST.get()) {
            try {
                inner.close();
            } catch (RuntimeException e) {
                failure = add(failure, e);
            }
        }
        closed = true;
        INNERMOST.set(parent);
        for (int i = registered.size() - 1; i >= 0; i--) {
            ScopedResource r = registered.get(i);
            if (r.scope != this) continue; // promoted, closed early or released to zero
            r.scope = null;
            try {
                r.release();
            } catch (RuntimeException e) {
                failure = add(failure, e);
            }
        }
        registered.clear();
        if (failure != null) throw failure;
    }

    private static RuntimeException add(RuntimeException first, RuntimeException next) {
        if (first == null) return next;
        first.addSuppressed(next);
        return first;
    }

    private void checkOwner(String action) {
        Thread caller = Thread.currentThread();
        if (caller != owner) {
            throw new IllegalStateException("cannot " + action + " a scope of thread '" + owner.getName()
                    + "' from thread '" + caller.getName() + "': a scope belongs to the thread that opened it");
        }
    }
}
