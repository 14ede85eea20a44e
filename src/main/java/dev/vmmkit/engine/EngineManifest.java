package dev.vmmkit.engine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One plugin's {@code manifest.json}, read from {@code engines/{id}/{gpu_backend}/}.
 *
 * @param id            engine id; equals the directory above the manifest's
 * @param version       the plugin's version; the binary's engine_get_info() must report the same
 * @param abiVersion    ABI version the plugin declares (a number or a string of one)
 * @param gpuBackend    {@code cuda} or {@code cpu}; equals the manifest's directory
 * @param architectures model architectures it serves (lower case; empty: any)
 * @param formats       model file formats (extensions, lower case) it serves
 * @param binary        the shared library, a file name in the manifest's directory
 * @param optionsJson   the "options" object as JSON text, or null
 * @param concurrent    true when the engine may be called from several threads at once
 */
public record EngineManifest(String id, String version, int abiVersion, String gpuBackend,
                             List<String> architectures, List<String> formats, Path binary,
                             String optionsJson, boolean concurrent) {

    public static final String FILE_NAME = "manifest.json";
    public static final List<String> BACKENDS = List.of("cuda", "cpu");
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A manifest that cannot be used; the message says why. */
    public static final class InvalidManifestException extends Exception {
        InvalidManifestException(String message) {
            super(message);
        }
    }

    /**
     * Reads and checks {@code dir/manifest.json}, where {@code dir} is {@code engines/{id}/{backend}}.
     *
     * @throws InvalidManifestException naming what is wrong: unreadable, not JSON, a key missing or
     *                                  of the wrong type, id or backend not matching the directories,
     *                                  or a binary that is not there
     */
    public static EngineManifest read(Path dir) throws InvalidManifestException {
        Path file = dir.resolve(FILE_NAME);
        JsonNode root;
        try {
            root = JSON.readTree(Files.readString(file));
        } catch (JsonProcessingException e) {
            throw new InvalidManifestException(FILE_NAME + " is not valid JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new InvalidManifestException("cannot read " + file + ": " + e);
        }
        if (root == null || !root.isObject()) throw new InvalidManifestException(FILE_NAME + " is not a JSON object");
        String id = text(root, "id");
        String version = text(root, "version");
        int abi = abiVersion(root);
        String backend = text(root, "gpu_backend").toLowerCase(Locale.ROOT);
        List<String> formats = strings(root, "formats", true);
        List<String> architectures = strings(root, "architectures", false);
        String binaryName = text(root, "binary");
        if (!BACKENDS.contains(backend)) {
            throw new InvalidManifestException("gpu_backend '" + backend + "' is not one of " + BACKENDS);
        }
        Path parent = dir.toAbsolutePath().getParent();
        if (parent == null || !parent.getFileName().toString().equals(id)) {
            throw new InvalidManifestException("id '" + id + "' does not match its directory " + dir);
        }
        if (!dir.getFileName().toString().equals(backend)) {
            throw new InvalidManifestException("gpu_backend '" + backend + "' does not match its directory " + dir);
        }
        if (binaryName.contains("/") || binaryName.contains("\0") || binaryName.equals("..") || binaryName.equals(".")) {
            throw new InvalidManifestException("binary '" + binaryName.replace("\0", "\\0") + "' must be a file name in " + dir);
        }
        Path binary = dir.resolve(binaryName);
        if (!Files.isRegularFile(binary)) {
            throw new InvalidManifestException("binary " + binary + " does not exist");
        }
        JsonNode options = root.get("options");
        if (options != null && !options.isObject()) throw new InvalidManifestException("\"options\" must be an object");
        JsonNode concurrent = root.get("concurrent");
        if (concurrent != null && !concurrent.isBoolean()) throw new InvalidManifestException("\"concurrent\" must be true or false");
        return new EngineManifest(id, version, abi, backend, architectures, formats, binary,
                options == null ? null : options.toString(), concurrent != null && concurrent.booleanValue());
    }

    /** True when this engine serves {@code format}, and {@code architecture} when one is given. */
    public boolean serves(String format, String architecture) {
        if (!formats.contains(format.toLowerCase(Locale.ROOT))) return false;
        return architecture == null || architectures.isEmpty()
                || architectures.contains(architecture.toLowerCase(Locale.ROOT));
    }

    private static String text(JsonNode root, String key) throws InvalidManifestException {
        JsonNode node = root.get(key);
        if (node == null) throw new InvalidManifestException("\"" + key + "\" is missing");
        if (!node.isTextual() || node.asText().isBlank()) {
            throw new InvalidManifestException("\"" + key + "\" must be a non-empty string");
        }
        return node.asText();
    }

    private static int abiVersion(JsonNode root) throws InvalidManifestException {
        JsonNode node = root.get("abi_version");
        if (node == null) throw new InvalidManifestException("\"abi_version\" is missing");
        if (node.isInt()) return node.intValue();
        if (node.isTextual() && node.asText().matches("\\d{1,9}")) return Integer.parseInt(node.asText());
        throw new InvalidManifestException("\"abi_version\" must be a whole number, not " + node);
    }

    private static List<String> strings(JsonNode root, String key, boolean required) throws InvalidManifestException {
        JsonNode node = root.get(key);
        if (node == null && !required) return List.of();
        if (node == null) throw new InvalidManifestException("\"" + key + "\" is missing");
        if (!node.isArray() || (required && node.isEmpty())) {
            throw new InvalidManifestException("\"" + key + "\" must be a " + (required ? "non-empty " : "") + "list of strings");
        }
        List<String> values = new ArrayList<>();
        for (JsonNode item : node) {
            if (!item.isTextual()) throw new InvalidManifestException("\"" + key + "\" must hold strings only");
            values.add(item.asText().toLowerCase(Locale.ROOT));
        }
        return List.copyOf(values);
    }
}
