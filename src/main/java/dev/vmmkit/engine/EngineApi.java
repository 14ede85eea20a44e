package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Instant;
import java.util.List;

/**
 * What each call of the HTTP API does, and its JSON answer; {@link EngineHttpServer} routes to it.
 * Failures are {@link RequestFailure}s carrying their status.
 */
final class EngineApi {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final EngineHost host;

    EngineApi(EngineHost host) {
        this.host = host;
    }

    /** {@code GET /api/engines}. */
    ArrayNode engines() {
        ArrayNode list = JSON.createArrayNode();
        for (EngineEntry entry : host.catalog().entries()) {
            PluginSnapshot snapshot = entry.snapshot();
            ObjectNode item = list.addObject().put("id", entry.id());
            if (snapshot != null) {
                item.put("version", snapshot.info().version()).put("abi_version", snapshot.info().abiVersion());
            } else {
                EngineManifest claimed = readableManifest(entry);
                if (claimed == null) item.putNull("version").putNull("abi_version");
                else item.put("version", claimed.version()).put("abi_version", claimed.abiVersion());
            }
            item.put("gpu_backend", entry.backend());
            item.put("status", snapshot == null ? "rejected" : host.registry().serves(entry) ? "loaded" : "available");
            if (entry.rejection() != null) item.put("reason", entry.rejection());
            if (entry.lastReloadError() != null) item.put("last_reload_error", entry.lastReloadError());
            ArrayNode failedModels = null;
            for (var failed : host.registry().health().failed().entrySet()) {
                if (failed.getValue().entry() != entry) continue;
                if (failedModels == null) failedModels = item.putArray("failed_models");
                failedModels.addObject().put("name", failed.getKey()).put("reason", failed.getValue().reason());
            }
        }
        return list;
    }

    /** What a refused plugin's manifest claims, when it can be read at all. */
    private static EngineManifest readableManifest(EngineEntry entry) {
        try {
            return EngineManifest.read(entry.dir());
        } catch (EngineManifest.InvalidManifestException e) {
            return null;
        }
    }

    /** {@code GET /api/models}. */
    ArrayNode models() {
        ArrayNode list = JSON.createArrayNode();
        for (ServedModel model : host.registry().models()) {
            RunningEngine instance = model.instance();
            if (instance == null) continue;
            InstancePause pausing = instance.pausing();
            InstancePause.Paused paused = pausing == null ? null : pausing.paused();
            ObjectNode item = list.addObject().put("name", model.name()).put("status", paused == null ? "loaded" : "paused")
                    .put("engine", instance.manifest().id())
                    .put("engine_version", instance.manifest().version())
                    .put("gpu_backend", instance.manifest().gpuBackend())
                    .put("device_bytes", instance.deviceBytes())
                    .put("in_flight", instance.gate().inFlight())
                    .put("last_used", Instant.ofEpochMilli(model.lastUsedMillis()).toString());
            if (instance.workerPid() >= 0) item.put("worker_pid", instance.workerPid());
            if (pausing != null) {
                item.put("paused_bytes", paused == null ? 0 : paused.pausedBytes())
                        .put("host_backup_bytes", paused == null ? 0 : paused.keptBytes())
                        .put("pauses", pausing.pauses()).put("resumes", pausing.resumes())
                        .put("last_pause_ms", pausing.lastPauseNanos() / 1e6)
                        .put("last_resume_ms", pausing.lastResumeNanos() / 1e6);
            }
        }
        for (var failed : host.registry().health().failed().entrySet()) {
            list.addObject().put("name", failed.getKey()).put("status", "failed")
                    .put("engine", failed.getValue().entry().id()).put("reason", failed.getValue().reason());
        }
        return list;
    }

    /** {@code POST /api/engines/{id}/reload}. */
    ObjectNode reload(String id) {
        List<EngineReloader.Outcome> outcomes = host.reloader().reload(id);
        ObjectNode answer = JSON.createObjectNode().put("engine", id);
        ArrayNode list = answer.putArray("reloaded");
        for (EngineReloader.Outcome outcome : outcomes) {
            ObjectNode item = list.addObject().put("gpu_backend", outcome.backend())
                    .put("previous_version", outcome.previousVersion()).put("version", outcome.version())
                    .put("drain_ms", outcome.drainMillis());
            ArrayNode models = item.putArray("models");
            outcome.models().forEach(models::add);
        }
        return answer;
    }

    /** {@code DELETE /api/models/{name}}: answers once the model's requests in flight are done. */
    ObjectNode unload(String name) {
        if (!host.registry().unload(name)) throw RequestFailure.notFound("model '" + name + "' is not loaded");
        return JSON.createObjectNode().put("unloaded", name);
    }
}
