package dev.vmmkit.lifetime;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.util.ArrayDeque;
import java.util.Set;

/**
 * What the leak detector keeps about one tracked tensor: enough to report it (its shape, where it
 * was made, its last accesses) and to give its memory back, and nothing that keeps it reachable.
 */
final class LeakRecord extends PhantomReference<Tensor> {
    static final int MAX_ACCESSES = 4;
    private static final int MAX_FRAMES = 12;
    /** Frames of these classes are vmmkit's own plumbing, left out of reports. */
    private static final Set<String> INTERNAL = Set.of(
            LeakRecord.class.getName(), LeakDetector.class.getName(), Tensor.class.getName(),
            TensorDevice.class.getName(), Ops.class.getName(), ScopedResource.class.getName(),
            Kernels.class.getName(), Backward.class.getName(), GradFn.class.getName(),
            AccumulateGrad.class.getName(), Autograd.class.getName());

    final long address;
    final long bytes;
    private final String description;
    private final Throwable creation;
    private final ArrayDeque<Throwable> accesses; // null unless accesses are recorded
    private final LeakDetector detector;

    LeakRecord(Tensor tensor, LeakDetector detector, ReferenceQueue<Tensor> queue, boolean recordAccesses) {
        super(tensor, queue);
        this.address = tensor.rawAddress();
        this.bytes = tensor.byteSize();
        this.description = tensor.describe();
        this.creation = new Throwable("created");
        this.accesses = recordAccesses ? new ArrayDeque<>() : null;
        this.detector = detector;
    }

    /** Notes a use of the tensor (paranoid level). */
    void record(String use) {
        if (accesses == null) return;
        Throwable access = new Throwable(use);
        synchronized (accesses) {
            if (accesses.size() == MAX_ACCESSES) accesses.removeFirst();
            accesses.addLast(access);
        }
    }

    /** The tensor was freed normally: stop tracking it (before clearing, which a sweep would take for a leak). */
    void close(Tensor tensor) {
        detector.untrack(this);
        clear();
        Reference.reachabilityFence(tensor); // not collected (and reported) before this point
    }

    String report() {
        StringBuilder text = new StringBuilder()
                .append("LEAK: ").append(description).append(" (").append(bytes).append(" bytes at 0x")
                .append(Long.toHexString(address))
                .append(") became unreachable while its reference count was above zero; release() it, close() it")
                .append(" or make it inside a Scope. Its memory was given back.\nCreated at:\n");
        appendFrames(text, creation);
        if (accesses != null) {
            synchronized (accesses) {
                int n = accesses.size();
                for (Throwable access : accesses.reversed()) {
                    text.append("Access #").append(n--).append(" (").append(access.getMessage()).append("):\n");
                    appendFrames(text, access);
                }
            }
        }
        return text.toString();
    }

    /** {@code a.B} for {@code a.B$C} and {@code a.B$$Lambda/0x...}: nested classes and lambdas count as their outer class. */
    private static String outerClass(String className) {
        int nested = className.indexOf('$');
        return nested < 0 ? className : className.substring(0, nested);
    }

    private static void appendFrames(StringBuilder text, Throwable trace) {
        int shown = 0;
        for (StackTraceElement frame : trace.getStackTrace()) {
            if (shown == 0 && INTERNAL.contains(outerClass(frame.getClassName()))) continue;
            if (shown++ == MAX_FRAMES) {
                text.append("\t...\n");
                break;
            }
            text.append("\tat ").append(frame).append('\n');
        }
    }
}
