package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The models directory: a model is a file {@code NAME.EXT} whose format is its extension, with an
 * optional {@code NAME.json} beside it giving {@code {"architecture": "..."}}.
 */
final class ModelDirectory {
    /** Names are plain file names: no path separators, no leading dot, so no way out of the directory. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One model file. @param architecture from NAME.json, or null */
    record ModelFile(String name, Path path, String format, String architecture) {
    }

    private final Path dir;

    ModelDirectory(Path dir) {
        this.dir = dir;
    }

    /** Checks a model name from a request. @throws RequestFailure 400 for a name that is not a plain file name */
    static String checkName(String name) {
        if (name == null || !NAME.matcher(name).matches() || name.contains("..")) {
            throw RequestFailure.badRequest("model name " + (name == null ? "is missing" : "'" + name + "' is not valid")
                    + " (letters, digits, '_', '-', '.'; no path)");
        }
        return name;
    }

    /**
     * The model files called {@code name}, one per format, sorted by format.
     *
     * @throws RequestFailure 404 when there is none, 400 when NAME.json is malformed
     */
    List<ModelFile> find(String name) {
        checkName(name);
        String architecture = architecture(name);
        List<ModelFile> files;
        try (Stream<Path> all = Files.list(dir)) {
            files = all.filter(Files::isRegularFile)
                    .map(p -> p.getFileName().toString())
                    .filter(f -> f.startsWith(name + ".") && f.indexOf('.', name.length() + 1) < 0)
                    .map(f -> f.substring(name.length() + 1))
                    .filter(ext -> !ext.isEmpty() && !ext.equalsIgnoreCase("json"))
                    .sorted()
                    .map(ext -> new ModelFile(name, dir.resolve(name + "." + ext), ext.toLowerCase(Locale.ROOT), architecture))
                    .toList();
        } catch (IOException e) {
            throw RequestFailure.notFound("cannot list the models directory " + dir + ": " + e.getMessage());
        }
        if (files.isEmpty()) throw RequestFailure.notFound("unknown model '" + name + "' (no file " + name + ".EXT in " + dir + ")");
        return files;
    }

    /** Every model name in the folder with its formats' files (names that fail {@link #checkName} left out). */
    java.util.SortedMap<String, List<String>> all() {
        java.util.SortedMap<String, List<String>> names = new java.util.TreeMap<>();
        try (Stream<Path> all = Files.list(dir)) {
            for (Path p : all.filter(Files::isRegularFile).toList()) {
                String file = p.getFileName().toString();
                int dot = file.indexOf('.');
                if (dot <= 0 || file.indexOf('.', dot + 1) >= 0) continue;
                String ext = file.substring(dot + 1).toLowerCase(Locale.ROOT);
                if (ext.isEmpty() || ext.equals("json")) continue;
                try {
                    checkName(file.substring(0, dot));
                } catch (RequestFailure notAName) {
                    continue;
                }
                names.computeIfAbsent(file.substring(0, dot), n -> new java.util.ArrayList<>()).add(ext);
            }
        } catch (IOException e) {
            return names;
        }
        return names;
    }

    private String architecture(String name) {
        Path meta = dir.resolve(name + ".json");
        if (!Files.isRegularFile(meta)) return null;
        try {
            JsonNode root = JSON.readTree(Files.readString(meta));
            JsonNode architecture = root == null ? null : root.get("architecture");
            if (architecture == null) return null;
            if (!architecture.isTextual()) throw RequestFailure.badRequest(meta + ": \"architecture\" must be a string");
            return architecture.asText();
        } catch (IOException e) {
            throw RequestFailure.badRequest(meta + " is not valid JSON: " + e.getMessage());
        }
    }
}
