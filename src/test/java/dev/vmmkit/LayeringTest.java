package dev.vmmkit;

import dev.vmmkit.driver.VmmDriver;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.classfile.constantpool.Utf8Entry;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The layers of docs/architecture.md, checked on the compiled classes: every reference a class of
 * {@code dev.vmmkit.X} makes (its constant pool: types used, descriptors, signatures) may name only
 * packages of a lower layer than X's, so dependencies point down only and packages of one layer
 * stay apart. The layers are read from the document's table, so the drawing and the code cannot
 * drift apart; a few rules are also stated here, so that editing the table cannot lift them.
 */
class LayeringTest {
    private static final Path ARCHITECTURE = Path.of("docs", "architecture.md");
    /** A row of the table: {@code | 2 | `lifetime`, `trace` | ... |}. */
    private static final Pattern LAYER_ROW = Pattern.compile("^\\|\\s*(\\d+)\\s*\\|([^|]*)\\|");
    private static final Pattern PACKAGE_NAME = Pattern.compile("`([a-z]+)`");
    private static final Pattern VMMKIT_REFERENCE = Pattern.compile("dev/vmmkit/([a-z]+)/");

    /** Each main class by its internal name ({@code dev/vmmkit/core/VmmManager}). */
    private static final Map<String, ClassModel> CLASSES = new TreeMap<>();

    @BeforeAll
    static void readTheCompiledClasses() throws IOException, URISyntaxException {
        Path root = Path.of(VmmDriver.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assertTrue(Files.isDirectory(root), "the main classes are a folder here: " + root);
        try (Stream<Path> files = Files.walk(root.resolve("dev/vmmkit"))) {
            for (Path file : files.filter(f -> f.toString().endsWith(".class")).toList()) {
                ClassModel model = ClassFile.of().parse(file);
                CLASSES.put(model.thisClass().asInternalName(), model);
            }
        }
        assertTrue(CLASSES.size() > 100, "found only " + CLASSES.size() + " classes under " + root);
    }

    /** The top-level package of a class: {@code core} for {@code dev/vmmkit/core/VmmManager}. */
    private static String packageOf(String internalName) {
        Matcher m = VMMKIT_REFERENCE.matcher(internalName);
        assertTrue(m.lookingAt(), internalName + " lies outside dev.vmmkit's packages");
        return m.group(1);
    }

    /** The top-level packages each package's classes refer to, itself left out, with one example each. */
    private static Map<String, Map<String, String>> packageReferences() {
        Map<String, Map<String, String>> uses = new TreeMap<>();
        for (var entry : CLASSES.entrySet()) {
            String from = packageOf(entry.getKey());
            Map<String, String> used = uses.computeIfAbsent(from, k -> new TreeMap<>());
            for (String text : texts(entry.getValue())) {
                Matcher m = VMMKIT_REFERENCE.matcher(text);
                while (m.find()) {
                    if (!m.group(1).equals(from)) used.putIfAbsent(m.group(1), entry.getKey() + " -> " + text);
                }
            }
        }
        return uses;
    }

    /** Every string of a class's constant pool: class names, descriptors, signatures. */
    private static List<String> texts(ClassModel model) {
        List<String> texts = new ArrayList<>();
        for (PoolEntry e : model.constantPool()) {
            if (e instanceof Utf8Entry utf8) texts.add(utf8.stringValue());
        }
        return texts;
    }

    /** Layer of each package, from docs/architecture.md's table. */
    private static Map<String, Integer> layersFromTheDocument() throws IOException {
        Map<String, Integer> layers = new TreeMap<>();
        for (String line : Files.readAllLines(ARCHITECTURE)) {
            Matcher row = LAYER_ROW.matcher(line);
            if (!row.find()) continue;
            Matcher name = PACKAGE_NAME.matcher(row.group(2));
            while (name.find()) {
                Integer earlier = layers.put(name.group(1), Integer.parseInt(row.group(1)));
                assertEquals(null, earlier, name.group(1) + " is in two rows of the layer table");
            }
        }
        return layers;
    }

    @Test
    void everyPackageHasALayerInTheDocument() throws IOException {
        Set<String> packages = new TreeSet<>();
        for (String name : CLASSES.keySet()) packages.add(packageOf(name));
        assertEquals(packages, layersFromTheDocument().keySet(),
                "the packages of the code and the layer table of " + ARCHITECTURE);
    }

    @Test
    void dependenciesPointDownOnly() throws IOException {
        Map<String, Integer> layers = layersFromTheDocument();
        List<String> upward = new ArrayList<>();
        packageReferences().forEach((from, used) -> used.forEach((to, example) -> {
            if (layers.getOrDefault(to, Integer.MAX_VALUE) >= layers.getOrDefault(from, -1)) {
                upward.add(from + " (layer " + layers.get(from) + ") uses " + to + " (layer " + layers.get(to) + "): " + example);
            }
        }));
        assertEquals(List.of(), upward);
    }

    @Test
    void theAllocatorAndTheDriverNeverReachCompute() {
        Map<String, Map<String, String>> uses = packageReferences();
        assertFalse(uses.get("core").containsKey("compute"), () -> uses.get("core").get("compute"));
        for (String above : List.of("compute", "core")) {
            assertFalse(uses.get("driver").containsKey(above), () -> uses.get("driver").get(above));
        }
        assertEquals(Set.of("driver"), uses.get("compute").keySet(), "compute uses the driver only");
    }

    /** An interface that named one of its implementations would make a circle: each needs the other. */
    @Test
    void noInterfaceNamesItsImplementations() {
        Map<String, Set<String>> implementors = new HashMap<>();
        for (ClassModel model : CLASSES.values()) {
            for (String supertype : supertypes(model, new HashSet<>())) {
                implementors.computeIfAbsent(supertype, k -> new TreeSet<>()).add(model.thisClass().asInternalName());
            }
        }
        List<String> circles = new ArrayList<>();
        for (ClassModel model : CLASSES.values()) {
            if ((model.flags().flagsMask() & ClassFile.ACC_INTERFACE) == 0) continue;
            String name = model.thisClass().asInternalName();
            List<String> texts = texts(model);
            for (String implementation : implementors.getOrDefault(name, Set.of())) {
                if (implementation.startsWith(name + "$")) continue; // its own nested constant (NONE), one file
                if (texts.stream().anyMatch(t -> t.equals(implementation) || t.contains("L" + implementation + ";")
                        || t.contains("L" + implementation + "<"))) {
                    circles.add(name + " names its implementation " + implementation);
                }
            }
        }
        assertEquals(List.of(), circles);
    }

    /** The vmmkit classes and interfaces {@code model} extends or implements, directly or not. */
    private static Set<String> supertypes(ClassModel model, Set<String> found) {
        List<ClassEntry> direct = new ArrayList<>(model.interfaces());
        model.superclass().ifPresent(direct::add);
        for (ClassEntry entry : direct) {
            String name = entry.asInternalName();
            ClassModel supertype = CLASSES.get(name);
            if (supertype != null && found.add(name)) supertypes(supertype, found);
        }
        return found;
    }
}
