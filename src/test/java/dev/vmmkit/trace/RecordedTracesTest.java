package dev.vmmkit.trace;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.tools.replay.ReplayReport;
import dev.vmmkit.tools.replay.ReplayTarget;
import dev.vmmkit.tools.replay.Replayer;
import dev.vmmkit.tools.replay.VmmBackend;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The real traces and snapshots the repository ships in {@code traces/}, recorded on an H100 from
 * programs nobody tuned for vmmkit. Each snapshot's {@code NAME.json} is the recording program's own
 * line, with {@code torch.cuda.max_memory_reserved()}; the truncated snapshot's figures were worked
 * out by a separate pass over the whole snapshot it was cut from ({@code traces/README.md}).
 */
class RecordedTracesTest {
    private static final Path SNAPSHOTS = Path.of("traces", "snapshots");

    @ParameterizedTest
    @ValueSource(strings = {"train_gpt2", "train_gpt2_expandable", "unet_train", "gen_llama_b8"})
    void theReservedPeakReadFromASnapshotIsPyTorchsOwn(String name) throws IOException {
        JsonNode program = json(name);

        List<AllocationTrace> traces = TraceFiles.read(shipped(name + ".pickle.gz"), OptionalInt.empty());

        assertEquals(1, traces.size(), "one device");
        RecordedMemory recorded = traces.getFirst().recorded().orElseThrow();
        assertEquals(program.get("max_memory_reserved").asLong(), recorded.reservedPeakBytes(), "max_memory_reserved()");
        assertEquals(0, traces.getFirst().allocationsBeforeTrace());
        // Allocated counts whole blocks; the trace's requests are at most that.
        assertTrue(recorded.livePeakBytes() <= program.get("max_memory_allocated").asLong());
        assertTrue(recorded.livePeakBytes() > 0.98 * program.get("max_memory_allocated").asLong());
    }

    @Test
    void aTruncatedSnapshotStartsFromTheAllocationsLiveBeforeIt() throws IOException {
        JsonNode expected = json("unet_train_last3000");

        AllocationTrace trace = TraceFiles.read(shipped("unet_train_last3000.pickle.gz"), OptionalInt.empty()).getFirst();

        RecordedMemory recorded = trace.recorded().orElseThrow();
        assertEquals(expected.get("allocations_before_trace").asInt(), trace.allocationsBeforeTrace());
        assertEquals(expected.get("reserved_peak_bytes").asLong(), recorded.reservedPeakBytes());
        assertEquals(expected.get("live_peak_bytes").asLong(), recorded.livePeakBytes());
        assertEquals(expected.get("live_peak_bytes").asLong(), replay(trace).peakLiveBytes(), "vmmkit sees the same peak");
    }

    @ParameterizedTest
    @ValueSource(strings = {"bert_varying.csv.gz", "resnet_varying.csv.gz", "train_gpt2.csv.gz", "unet_sample.csv.gz",
            "unet_train.csv.gz", "gen_llama_b8.csv.gz", "gen_llama_b32.csv.gz", "gen_llama_b48.csv.gz",
            "gen_llama_b24.csv.gz", "gen_llama_b64.csv.gz", "gen_qwen2_b32.csv.gz", "gen_gpt2_b32.csv.gz",
            "gen_llama_b40.csv.gz", "gen_qwen2_b48_sampled.csv.gz", "gen_mistral_b32_window.csv.gz", "gen_opt_b24.csv.gz",
            "gen_llama_b32_long.csv.gz", "gen_llama_b16_long.csv.gz", "gen_llama_b28.csv.gz", "gen_gemma_b32.csv.gz",
            "gen_phi3_b32.csv.gz", "gen_llama_beam4.csv.gz", "gen_mixtral_b16.csv.gz", "gen_t5_b32.csv.gz",
            "train_llama_varlen.csv.gz", "jax_generate.csv.gz", "jax_encode_varying.csv.gz", "jax_train_gpt.csv.gz",
            "cupy_loop_nopool.csv.gz", "gen_llama_b32_static.csv.gz", "gen_llama_b24_eager.csv.gz",
            "train_llama_checkpointed.csv.gz", "gen_neox_b32.csv.gz", "gen_bloom_b24.csv.gz", "gen_falcon_b32.csv.gz",
            "gen_bart_b32.csv.gz", "gen_llama_large_b16.csv.gz", "vit_varying.csv.gz", "gen_llama_assisted.csv.gz",
            "gen_mamba_b32.csv.gz", "gen_llama_prompt3k.csv.gz", "infer_llama_compiled.csv.gz", "train_vit_amp.csv.gz",
            "train_clip.csv.gz", "sample_dit.csv.gz", "detect_maskrcnn.csv.gz", "train_lora.csv.gz", "train_gnn.csv.gz",
            "train_lstm.csv.gz", "train_convnext.csv.gz", "gen_llama_serving.csv.gz", "score_llama_varying.csv.gz",
            "gen_gemma2_b24.csv.gz", "train_bert_mlm.csv.gz", "rl_loop.csv.gz", "gen_whisper_b16.csv.gz",
            "train_dlrm.csv.gz", "train_gpt2_compiled.csv.gz", "train_moe.csv.gz", "train_t5.csv.gz",
            "decode_images.csv.gz", "train_ctc.csv.gz", "gen_llama_b96.csv.gz", "gen_llama_b32_fenced.csv.gz",
            "detect_maskrcnn_fenced.csv.gz",
            "snapshots/gen_llama_b8.pickle.gz"})
    void everyShippedTraceReplaysThroughVmmkitWithTheTracesOwnPeak(String name) throws IOException {
        AllocationTrace trace = TraceFiles.read(Path.of("traces").resolve(name), OptionalInt.empty()).getFirst();

        ReplayReport report = replay(trace);

        assertEquals(trace.allocs(), report.allocs());
        assertEquals(trace.peakLiveBytes(), report.peakLiveBytes());
        assertTrue(report.peakReservedBytes() >= report.peakLiveBytes());
    }

    private static ReplayReport replay(AllocationTrace trace) {
        try (VmmBackend backend = new VmmBackend(HostDriver.open(), VmmConfig.from(Map.of()));
             ReplayTarget target = backend.newTarget()) {
            return new Replayer(trace).replay(target);
        }
    }

    private static Path shipped(String name) {
        return TestTraces.shipped("snapshots/" + name);
    }

    private static JsonNode json(String name) throws IOException {
        return new ObjectMapper().readTree(shipped(name + ".json").toFile());
    }
}
