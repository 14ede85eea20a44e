package dev.vmmkit.driver;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Map;

/**
 * Where vmmkit's native shim ({@code libvmmkit_preload.so}, built from {@code src/main/c}) is:
 * {@code VMMKIT_PRELOAD} when set, else {@code native/} in the folder that holds vmmkit's jar (or
 * its classes folder, in a build): {@code target/native/}. {@code vmmkit run} preloads it into a
 * program, the engine host into its workers.
 */
public final class NativeShim {
    /** The file name the build gives it. */
    public static final String FILE = "libvmmkit_preload.so";
    /** The setting that points at another build of it. */
    public static final String SETTING = "VMMKIT_PRELOAD";

    private NativeShim() {
    }

    /** Its path under {@code env} (it may not exist: the caller checks). */
    public static Path path(Map<String, String> env) {
        String chosen = env.get(SETTING);
        if (chosen != null && !chosen.isBlank()) return Path.of(chosen).toAbsolutePath();
        return installation().resolve("native").resolve(FILE);
    }

    /** Where vmmkit's classes were loaded from: target/vmmkit.jar, or target/classes in a build. */
    public static Path codeSource() {
        try {
            return Path.of(NativeShim.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toAbsolutePath();
        } catch (URISyntaxException e) {
            throw new IllegalStateException("vmmkit's own classes have no file location: " + e.getMessage(), e);
        }
    }

    /** The folder holding the jar (or classes folder) and native/: target/. */
    private static Path installation() {
        Path parent = codeSource().getParent();
        return parent != null ? parent : Path.of("/");
    }

    /** {@code LD_PRELOAD} with the shim first and any other copy of it dropped (a host run under the shim passes its own on). */
    public static String preloadList(Path shim, String current) {
        StringBuilder list = new StringBuilder(shim.toString());
        if (current != null) {
            for (String entry : current.split("[: ]")) {
                if (!entry.isBlank() && !Path.of(entry).getFileName().toString().equals(FILE)) list.append(':').append(entry);
            }
        }
        return list.toString();
    }
}
