package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class EngineManifestTest {

    private static Path plugin(Path root, String json) throws Exception {
        Path dir = Files.createDirectories(root.resolve("llama").resolve("cuda"));
        Files.writeString(dir.resolve("libllama.so"), "not really");
        Files.writeString(dir.resolve("manifest.json"), json);
        return dir;
    }

    @Test
    void readsTheSeedsManifest(@TempDir Path root) throws Exception {
        Path dir = plugin(root, """
                {"id": "llama", "version": "1.0.0", "abi_version": "1", "gpu_backend": "cuda",
                 "architectures": ["llama", "Mistral"], "formats": ["gguf", "safetensors"], "binary": "libllama.so"}""");
        EngineManifest manifest = EngineManifest.read(dir);
        assertEquals(1, manifest.abiVersion());
        assertEquals(List.of("llama", "mistral"), manifest.architectures());
        assertEquals(dir.resolve("libllama.so"), manifest.binary());
        assertNull(manifest.optionsJson());
        assertFalse(manifest.concurrent());
        assertTrue(manifest.serves("GGUF", null));
        assertTrue(manifest.serves("gguf", "mistral"));
        assertFalse(manifest.serves("gguf", "phi"));
        assertFalse(manifest.serves("onnx", null));
    }

    @Test
    void optionsAndConcurrency(@TempDir Path root) throws Exception {
        Path dir = plugin(root, """
                {"id": "llama", "version": "2", "abi_version": 1, "gpu_backend": "cuda", "formats": ["gguf"],
                 "binary": "libllama.so", "options": {"threads": 4}, "concurrent": true}""");
        EngineManifest manifest = EngineManifest.read(dir);
        assertEquals("{\"threads\":4}", manifest.optionsJson());
        assertTrue(manifest.concurrent());
        assertTrue(manifest.serves("gguf", "anything"), "no architectures listed: any");
    }

    @Test
    void refusalsNameWhatIsWrong(@TempDir Path root) throws Exception {
        String good = """
                {"id": "llama", "version": "1", "abi_version": 1, "gpu_backend": "cuda", "formats": ["gguf"], "binary": "libllama.so"}""";
        assertRefused(root, "{", "not valid JSON");
        assertRefused(root, "[]", "not a JSON object");
        assertRefused(root, good.replace("\"id\": \"llama\", ", ""), "\"id\" is missing");
        assertRefused(root, good.replace("\"llama\"", "\"other\""), "does not match its directory");
        assertRefused(root, good.replace("\"cuda\"", "\"cpu\""), "does not match its directory");
        assertRefused(root, good.replace("\"cuda\"", "\"metal\""), "is not one of");
        assertRefused(root, good.replace("\"abi_version\": 1", "\"abi_version\": \"one\""), "whole number");
        assertRefused(root, good.replace("[\"gguf\"]", "[]"), "non-empty list");
        assertRefused(root, good.replace("libllama.so", "../libllama.so"), "must be a file name");
        assertRefused(root, good.replace("libllama.so", "lib\\u0000llama.so"), "must be a file name"); // no path holds a NUL
        assertRefused(root, good.replace("libllama.so", "missing.so"), "does not exist");
        assertRefused(root, good.replace("}", ", \"concurrent\": \"yes\"}"), "\"concurrent\"");
        assertRefused(root, good.replace("}", ", \"options\": 3}"), "\"options\"");
    }

    private static void assertRefused(Path root, String json, String reason) throws Exception {
        Path dir = plugin(root, json);
        EngineManifest.InvalidManifestException e = assertThrows(EngineManifest.InvalidManifestException.class,
                () -> EngineManifest.read(dir));
        assertTrue(e.getMessage().contains(reason), "'" + e.getMessage() + "' should say " + reason);
    }
}
