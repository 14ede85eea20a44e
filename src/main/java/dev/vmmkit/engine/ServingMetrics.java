package dev.vmmkit.engine;

import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * What generations did, per model, in the shape serving users scrape (as vLLM and Triton name
 * theirs): histograms of request duration, time to first token and time per output token, counters
 * of prompt and generated tokens, and requests by finish reason.
 */
final class ServingMetrics {
    /** Seconds; buckets as vLLM's, from a fast token to a long request. */
    private static final double[] DURATION_BUCKETS = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
    private static final double[] TOKEN_BUCKETS = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5};

    /** One Prometheus histogram: cumulative buckets, sum and count. */
    static final class Histogram {
        private final double[] bounds;
        private final LongAdder[] counts;
        private final LongAdder count = new LongAdder();
        private final java.util.concurrent.atomic.DoubleAdder sum = new java.util.concurrent.atomic.DoubleAdder();

        Histogram(double[] bounds) {
            this.bounds = bounds;
            this.counts = new LongAdder[bounds.length];
            for (int i = 0; i < bounds.length; i++) counts[i] = new LongAdder();
        }

        void observe(double seconds) {
            for (int i = 0; i < bounds.length; i++) {
                if (seconds <= bounds[i]) {
                    counts[i].increment();
                    break;
                }
            }
            count.increment();
            sum.add(seconds);
        }

        void render(StringBuilder out, String name, String labels) {
            long cumulative = 0;
            for (int i = 0; i < bounds.length; i++) {
                cumulative += counts[i].sum();
                out.append(name).append("_bucket{").append(labels).append(",le=\"").append(bounds[i]).append("\"} ")
                        .append(cumulative).append('\n');
            }
            out.append(name).append("_bucket{").append(labels).append(",le=\"+Inf\"} ").append(count.sum()).append('\n');
            out.append(name).append("_sum{").append(labels).append("} ").append(sum.sum()).append('\n');
            out.append(name).append("_count{").append(labels).append("} ").append(count.sum()).append('\n');
        }
    }

    /** One model's figures. */
    private static final class PerModel {
        final Histogram duration = new Histogram(DURATION_BUCKETS);
        final Histogram firstToken = new Histogram(DURATION_BUCKETS);
        final Histogram perToken = new Histogram(TOKEN_BUCKETS);
        final LongAdder promptTokens = new LongAdder();
        final LongAdder generatedTokens = new LongAdder();
        final Map<String, LongAdder> byFinish = new ConcurrentSkipListMap<>();
    }

    private final Map<String, PerModel> models = new ConcurrentSkipListMap<>();

    /**
     * One generation ended.
     *
     * @param firstTokenNanos time from the request's start to its first token, or -1 for none
     */
    void generated(String model, String finishReason, long durationNanos, long firstTokenNanos, int promptTokens,
                   int generatedTokens) {
        PerModel m = models.computeIfAbsent(model, k -> new PerModel());
        m.duration.observe(durationNanos / 1e9);
        if (firstTokenNanos >= 0) {
            m.firstToken.observe(firstTokenNanos / 1e9);
            if (generatedTokens > 1) m.perToken.observe((durationNanos - firstTokenNanos) / 1e9 / (generatedTokens - 1));
        }
        if (promptTokens > 0) m.promptTokens.add(promptTokens);
        m.generatedTokens.add(generatedTokens);
        m.byFinish.computeIfAbsent(finishReason, k -> new LongAdder()).increment();
    }

    void render(StringBuilder out) {
        histogram(out, "vmmkit_request_duration_seconds", "Time from a generation request's arrival to its last token, by model.", m -> m.duration);
        histogram(out, "vmmkit_time_to_first_token_seconds", "Time from a generation request's arrival to its first token, by model.", m -> m.firstToken);
        histogram(out, "vmmkit_time_per_output_token_seconds", "Mean time between tokens after the first, per request, by model.", m -> m.perToken);
        counter(out, "vmmkit_prompt_tokens_total", "Prompt tokens processed, by model.", m -> m.promptTokens.sum());
        counter(out, "vmmkit_generation_tokens_total", "Tokens generated, by model.", m -> m.generatedTokens.sum());
        out.append("# HELP vmmkit_request_finish_total Generations ended, by model and finish reason (length, stop, cancelled, error).\n");
        out.append("# TYPE vmmkit_request_finish_total counter\n");
        models.forEach((name, m) -> m.byFinish.forEach((reason, n) -> out.append("vmmkit_request_finish_total{model=\"")
                .append(EngineMetrics.escape(name)).append("\",finish_reason=\"").append(reason).append("\"} ")
                .append(n.sum()).append('\n')));
    }

    private void histogram(StringBuilder out, String name, String help, java.util.function.Function<PerModel, Histogram> which) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(" histogram\n");
        models.forEach((model, m) -> which.apply(m).render(out, name, "model=\"" + EngineMetrics.escape(model) + "\""));
    }

    private void counter(StringBuilder out, String name, String help, java.util.function.ToLongFunction<PerModel> value) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(" counter\n");
        models.forEach((model, m) -> out.append(name).append("{model=\"").append(EngineMetrics.escape(model)).append("\"} ")
                .append(value.applyAsLong(m)).append('\n'));
    }
}
