package dev.vmmkit.engine;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.LongAdder;

/** The host's counters and their Prometheus text form ({@code GET /metrics}, names prefixed {@code vmmkit_}). */
final class EngineMetrics {
    private final Map<Integer, LongAdder> requestsByStatus = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> reloadsByResult = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> evictionsByReason = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> crashesByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> restartsByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> timeoutsByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> pausesByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> pauseNanosByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> resumesByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> resumeNanosByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> pauseFailuresByModel = new ConcurrentSkipListMap<>();
    private final Map<String, LongAdder> resumeFailuresByModel = new ConcurrentSkipListMap<>();
    private final ServingMetrics serving = new ServingMetrics();

    /** Per-model generation figures (histograms, token counters, finish reasons). */
    ServingMetrics serving() {
        return serving;
    }

    void answered(int status) {
        requestsByStatus.computeIfAbsent(status, s -> new LongAdder()).increment();
    }

    void reloaded(boolean ok) {
        reloadsByResult.computeIfAbsent(ok ? "ok" : "failed", r -> new LongAdder()).increment();
    }

    void evicted(String reason) {
        evictionsByReason.computeIfAbsent(reason, r -> new LongAdder()).increment();
    }

    /** A model's engine worker died (a timeout ends the worker too, and counts as both). */
    void crashed(String model) {
        crashesByModel.computeIfAbsent(model, m -> new LongAdder()).increment();
    }

    /** A model whose worker crashed was loaded again. */
    void restarted(String model) {
        restartsByModel.computeIfAbsent(model, m -> new LongAdder()).increment();
    }

    /** A call into a model's engine ran past the request timeout; its worker was ended. */
    void timedOut(String model) {
        timeoutsByModel.computeIfAbsent(model, m -> new LongAdder()).increment();
    }

    /** An idle model was paused; {@code nanos}: the pause's time in its worker. */
    void paused(String model, long nanos) {
        add(pausesByModel, model, 1);
        add(pauseNanosByModel, model, nanos);
    }

    /** A paused model was resumed for a request. */
    void resumed(String model, long nanos) {
        add(resumesByModel, model, 1);
        add(resumeNanosByModel, model, nanos);
    }

    /** A pause failed (the model was evicted instead). */
    void pauseFailed(String model) {
        add(pauseFailuresByModel, model, 1);
    }

    /** A resume failed (503 for lack of memory, or the model loaded again). */
    void resumeFailed(String model) {
        add(resumeFailuresByModel, model, 1);
    }

    private static void add(Map<String, LongAdder> counts, String model, long n) {
        counts.computeIfAbsent(model, m -> new LongAdder()).add(n);
    }

    /**
     * One loaded model's row.
     *
     * @param pausedBytes     device memory its pause gave back (0 while it runs)
     * @param hostBackupBytes host memory holding its contents while paused
     */
    record ModelRow(String name, String engine, String version, long deviceBytes, int inFlight, boolean paused,
                    long pausedBytes, long hostBackupBytes) {
    }

    /** The Prometheus text exposition of everything, with the memory figures read now. */
    String render(MemoryFigures device, MemoryFigures ram, List<ModelRow> models) {
        StringBuilder out = new StringBuilder(1024);
        gauge(out, "vmmkit_device_used_bytes", "Device memory in use, as the driver reports it.", device.usedBytes());
        gauge(out, "vmmkit_device_total_bytes", "Device memory in all.", device.totalBytes());
        gauge(out, "vmmkit_host_ram_used_bytes", "Host RAM in use (or the cgroup's usage when its limit is lower).", ram.usedBytes());
        gauge(out, "vmmkit_host_ram_total_bytes", "Host RAM in all (or the cgroup limit when lower).", ram.totalBytes());
        gauge(out, "vmmkit_models_loaded", "Models loaded now (paused ones included).", models.size());
        gauge(out, "vmmkit_models_paused", "Models paused now: device memory given back, contents kept in host memory.",
                models.stream().filter(ModelRow::paused).count());
        gauge(out, "vmmkit_paused_host_bytes", "Host memory the paused models' contents take now.",
                models.stream().mapToLong(ModelRow::hostBackupBytes).sum());
        header(out, "vmmkit_requests_total", "counter", "HTTP requests answered, by status code.");
        requestsByStatus.forEach((status, n) -> out.append("vmmkit_requests_total{status=\"").append(status)
                .append("\"} ").append(n.sum()).append('\n'));
        labelled(out, "vmmkit_reloads_total", "Engine reloads, by result.", "result", reloadsByResult, List.of("ok", "failed"));
        labelled(out, "vmmkit_evictions_total", "Models evicted, by reason (vram, ram, load).", "reason",
                evictionsByReason, List.of("vram", "ram", "load"));
        perModel(out, "vmmkit_model_crashes_total", "Engine worker crashes, by model (exits, signals, broken channels, timeouts).", crashesByModel);
        perModel(out, "vmmkit_model_restarts_total", "Models loaded again after their engine worker crashed.", restartsByModel);
        perModel(out, "vmmkit_model_timeouts_total", "Engine calls that ran past the request timeout, by model.", timeoutsByModel);
        header(out, "vmmkit_model_device_bytes", "gauge", "Device memory each loaded model's engine holds.");
        for (ModelRow model : models) {
            out.append("vmmkit_model_device_bytes{model=\"").append(escape(model.name())).append("\",engine=\"")
                    .append(escape(model.engine())).append("\",version=\"").append(escape(model.version()))
                    .append("\"} ").append(model.deviceBytes()).append('\n');
        }
        header(out, "vmmkit_model_in_flight", "gauge", "Requests in flight on each loaded model.");
        for (ModelRow model : models) {
            out.append("vmmkit_model_in_flight{model=\"").append(escape(model.name())).append("\"} ")
                    .append(model.inFlight()).append('\n');
        }
        header(out, "vmmkit_model_paused_bytes", "gauge", "Device memory each paused model gave back (0 while it runs).");
        for (ModelRow model : models) {
            out.append("vmmkit_model_paused_bytes{model=\"").append(escape(model.name())).append("\"} ")
                    .append(model.pausedBytes()).append('\n');
        }
        perModel(out, "vmmkit_model_pauses_total", "Pauses of idle models, by model.", pausesByModel);
        perModelSeconds(out, "vmmkit_model_pause_seconds_total", "Time spent pausing, by model.", pauseNanosByModel);
        perModel(out, "vmmkit_model_resumes_total", "Resumes of paused models for a request, by model.", resumesByModel);
        perModelSeconds(out, "vmmkit_model_resume_seconds_total", "Time spent resuming, by model.", resumeNanosByModel);
        perModel(out, "vmmkit_model_pause_failures_total", "Pauses that failed (the model was evicted instead), by model.", pauseFailuresByModel);
        perModel(out, "vmmkit_model_resume_failures_total", "Resumes that failed (503, or the model loaded again), by model.", resumeFailuresByModel);
        serving.render(out);
        return out.toString();
    }

    private static void gauge(StringBuilder out, String name, String help, long value) {
        header(out, name, "gauge", help);
        out.append(name).append(' ').append(value).append('\n');
    }

    private static void labelled(StringBuilder out, String name, String help, String label,
                                 Map<String, LongAdder> counts, List<String> always) {
        header(out, name, "counter", help);
        for (String key : always) {
            LongAdder n = counts.get(key);
            out.append(name).append('{').append(label).append("=\"").append(key).append("\"} ")
                    .append(n == null ? 0 : n.sum()).append('\n');
        }
    }

    private static void perModel(StringBuilder out, String name, String help, Map<String, LongAdder> counts) {
        header(out, name, "counter", help);
        counts.forEach((model, n) -> out.append(name).append("{model=\"").append(escape(model)).append("\"} ")
                .append(n.sum()).append('\n'));
    }

    private static void perModelSeconds(StringBuilder out, String name, String help, Map<String, LongAdder> nanos) {
        header(out, name, "counter", help);
        nanos.forEach((model, n) -> out.append(name).append("{model=\"").append(escape(model)).append("\"} ")
                .append(String.format(java.util.Locale.ROOT, "%.6f", n.sum() / 1e9)).append('\n'));
    }

    private static void header(StringBuilder out, String name, String type, String help) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(' ').append(type).append('\n');
    }

    static String escape(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }
}
