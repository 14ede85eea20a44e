package dev.vmmkit.driver;

import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Which driver calls a {@link FaultInjectingDriver} makes fail, and with which CUresult. At most one
 * rule per kind of call; setting a rule replaces the kind's earlier one. Rules can be set and
 * cleared while calls run (thread-safe); a kind without a rule costs one volatile read per call.
 *
 * <pre>{@code
 * FaultPlan plan = new FaultPlan(42)
 *         .failNth(DriverCall.SET_ACCESS, 3, CudaResult.OUT_OF_MEMORY)   // the 3rd setAccess from now
 *         .failWithProbability(DriverCall.CREATE, 0.1, CudaResult.OUT_OF_MEMORY);
 * }</pre>
 */
public final class FaultPlan {
    private final AtomicReferenceArray<Rule> rules = new AtomicReferenceArray<>(DriverCall.all().length);
    private final AtomicLongArray injected = new AtomicLongArray(DriverCall.all().length);
    private final SplittableRandom random;

    /** A plan whose probabilistic rules draw from a generator seeded with {@code seed}. */
    public FaultPlan(long seed) {
        this.random = new SplittableRandom(seed);
    }

    /** A plan with a fixed seed, so runs repeat. */
    public FaultPlan() {
        this(0x5EEDL);
    }

    /** The {@code n}th call of {@code call} from now on (1 = the next one) fails with {@code result}, once. */
    public FaultPlan failNth(DriverCall call, long n, int result) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        rules.set(call.ordinal(), new Rule(requireFailure(result), n, 0));
        return this;
    }

    /** Each call of {@code call} fails with {@code result} with probability {@code p}, until cleared. */
    public FaultPlan failWithProbability(DriverCall call, double p, int result) {
        if (!(p >= 0 && p <= 1)) {
            throw new IllegalArgumentException("probability must be in [0, 1], got " + p);
        }
        rules.set(call.ordinal(), new Rule(requireFailure(result), 0, p));
        return this;
    }

    /** Every call of {@code call} fails with {@code result} until cleared. */
    public FaultPlan failAlways(DriverCall call, int result) {
        return failWithProbability(call, 1.0, result);
    }

    /** Removes the rule of one kind. */
    public void clear(DriverCall call) {
        rules.set(call.ordinal(), null);
    }

    /** Removes every rule; calls go through again. */
    public void clear() {
        for (int i = 0; i < rules.length(); i++) {
            rules.set(i, null);
        }
    }

    /** How many calls of {@code call} this plan has made fail. */
    public long injected(DriverCall call) {
        return injected.get(call.ordinal());
    }

    /**
     * Decides the fate of one call of {@code call}: the CUresult it must fail with, or
     * {@link CudaResult#SUCCESS} to let it through.
     */
    public int faultFor(DriverCall call) {
        Rule rule = rules.get(call.ordinal());
        if (rule == null) {
            return CudaResult.SUCCESS;
        }
        boolean fail;
        if (rule.nth > 0) {
            long seen = rule.calls.incrementAndGet();
            fail = seen == rule.nth;
            if (fail) {
                rules.compareAndSet(call.ordinal(), rule, null); // a one-shot rule is spent
            }
        } else {
            fail = rule.probability >= 1.0 || draw() < rule.probability;
        }
        if (!fail) {
            return CudaResult.SUCCESS;
        }
        injected.incrementAndGet(call.ordinal());
        return rule.result;
    }

    private double draw() {
        synchronized (random) {
            return random.nextDouble();
        }
    }

    private static int requireFailure(int result) {
        if (result == CudaResult.SUCCESS) {
            throw new IllegalArgumentException("an injected fault needs a failing CUresult, not CUDA_SUCCESS");
        }
        return result;
    }

    /** One kind's rule: the {@code nth} call fails (nth > 0), or each call with {@code probability}. */
    private static final class Rule {
        final int result;
        final long nth;
        final double probability;
        final AtomicLong calls = new AtomicLong();

        Rule(int result, long nth, double probability) {
            this.result = result;
            this.nth = nth;
            this.probability = probability;
        }
    }
}
