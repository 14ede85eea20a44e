package dev.vmmkit.tools;

import dev.vmmkit.ProcessResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The {@code ./vmmkit} launcher, run as a user runs it, always in a copy (never in this tree, whose
 * build is running these tests). Finding Java is checked with fake JDKs (scripts answering
 * {@code -version} and saying how they were called) in a folder that stands for /usr/lib/jvm
 * ({@code VMMKIT_JVM_ROOT}); {@code test} and a failing build with a fake Maven wrapper; the build
 * on first use with the real one.
 */
class LauncherTest {
    private static final Path TREE = Path.of("").toAbsolutePath();
    /** Not copied: build outputs, the repository, the tests' own sources (the copy builds with -DskipTests). */
    private static final Set<String> NOT_COPIED = Set.of("target", ".git", "runtime", "node_modules", ".device");

    @TempDir
    Path dir;


    /** The launcher and the one script it sources: enough for everything before a build. */
    private Path launcherOnly() throws IOException {
        Path copy = Files.createDirectories(dir.resolve("launcher"));
        Files.createDirectories(copy.resolve("scripts"));
        Files.copy(TREE.resolve("vmmkit"), copy.resolve("vmmkit"), StandardCopyOption.COPY_ATTRIBUTES);
        Files.copy(TREE.resolve("scripts/java-home.sh"), copy.resolve("scripts/java-home.sh"));
        return copy;
    }

    /** A fake JDK: {@code java -version} says {@code version}; any other call prints {@code NAME ran: ARGS}. */
    private Path fakeJdk(Path parent, String name, String version) throws IOException {
        Path bin = Files.createDirectories(parent.resolve(name).resolve("bin"));
        script(bin.resolve("java"), """
                if [ "$1" = -version ]; then echo 'openjdk version "%s" 2025-01-01' >&2; exit 0; fi
                echo "%s ran: $*"
                """.formatted(version, name));
        script(bin.resolve("javac"), "exit 0\n");
        return parent.resolve(name);
    }

    private static void script(Path file, String body) throws IOException {
        Files.writeString(file, "#!/usr/bin/env bash\n" + body);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    /** Runs {@code copy/vmmkit ARGS}; JAVA_HOME and the JDK folder only as given (null: unset). */
    private ProcessResult launch(Path copy, String javaHome, Path jvmRoot, String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(copy.resolve("vmmkit").toString()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).directory(dir.toFile())
                .redirectOutput(dir.resolve("stdout.txt").toFile())
                .redirectError(dir.resolve("stderr.txt").toFile());
        Map<String, String> env = builder.environment();
        // Nothing of this build's Maven run leaks into the launcher's own.
        env.keySet().removeIf(key -> key.startsWith("MAVEN_") && !key.equals("MAVEN_OPTS") || key.startsWith("VMMKIT_"));
        env.remove("JAVA_HOME");
        if (javaHome != null) env.put("JAVA_HOME", javaHome);
        env.put("VMMKIT_JVM_ROOT", jvmRoot.toString());
        Process process = builder.start();
        if (!process.waitFor(8, TimeUnit.MINUTES)) {
            process.destroyForcibly().waitFor();
            throw new AssertionError("./vmmkit " + String.join(" ", args) + " did not finish:\n" + Files.readString(dir.resolve("stderr.txt")));
        }
        return new ProcessResult(process.exitValue(), Files.readString(dir.resolve("stdout.txt")),
                Files.readString(dir.resolve("stderr.txt")));
    }

    @Test
    void withoutJava25ItSaysWhereItLookedAndWhatToDo() throws Exception {
        Path copy = launcherOnly();
        Path jvms = Files.createDirectories(dir.resolve("jvm"));
        Path java17 = fakeJdk(jvms, "java-17-openjdk-amd64", "17.0.15");
        Files.createDirectories(jvms.resolve("temurin-25-jre-amd64").resolve("bin")); // a runtime without javac
        for (String javaHome : new String[]{java17.toString(), null}) {
            ProcessResult result = launch(copy, javaHome, jvms, "--help");
            assertEquals(2, result.exitCode(), result::toString);
            assertEquals("", result.stdout(), "nothing ran: " + result);
            assertTrue(result.stderr().startsWith("vmmkit: no Java 25 found: JAVA_HOME ("
                    + (javaHome == null ? "not set" : javaHome) + ") is not a JDK 25, and " + jvms + " holds no "), result::toString);
            assertTrue(result.stderr().contains("Install a JDK 25"), result::toString);
        }
    }

    @Test
    void aJdk25FromJavaHomeComesFirstThenOneFromTheJdkFolder() throws Exception {
        Path copy = launcherOnly();
        Path jvms = Files.createDirectories(dir.resolve("jvm"));
        fakeJdk(jvms, "temurin-25-jdk-amd64", "25.0.1");
        Path own = fakeJdk(dir, "my-jdk", "25.0.2");
        Path java17 = fakeJdk(dir, "old-jdk", "17.0.15");

        ProcessResult fromJavaHome = launch(copy, own.toString(), jvms, "replay", "--help");
        assertEquals(0, fromJavaHome.exitCode(), fromJavaHome::toString);
        assertEquals("my-jdk ran: --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -jar "
                + copy.resolve("target/vmmkit.jar") + " replay --help\n", fromJavaHome.stdout());

        for (String javaHome : new String[]{java17.toString(), null}) {
            ProcessResult fromFolder = launch(copy, javaHome, jvms, "--version");
            assertEquals(0, fromFolder.exitCode(), fromFolder::toString);
            assertTrue(fromFolder.stdout().startsWith("temurin-25-jdk-amd64 ran: "), fromFolder::toString);
        }
    }

    /**
     * The CLI's JVM starts with an AOT cache by the rule of every JVM of vmmkit's: the one trained
     * for its runtime when there is one, else the build's beside the jar; the JVM's own logging of
     * a cache that does not match is off (it would only say the cache was skipped).
     */
    @Test
    void theCliStartsWithItsRuntimesAotCacheElseTheBuildsBesideTheJar() throws Exception {
        Path copy = launcherOnly();
        Path jvms = Files.createDirectories(dir.resolve("jvm"));
        Path jdk = fakeJdk(dir, "my-jdk", "25.0.2");
        Path besideJar = Files.createDirectories(copy.resolve("target")).resolve("vmmkit.aot");
        Files.writeString(besideJar, "");
        String jar = " -jar " + copy.resolve("target/vmmkit.jar") + " --version\n";

        ProcessResult build = launch(copy, jdk.toString(), jvms, "--version");
        assertEquals("my-jdk ran: --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -XX:AOTCache=" + besideJar
                + " -Xlog:aot=off -Xlog:cds=off" + jar, build.stdout(), build::toString);

        Path runtimes = Files.writeString(jdk.resolve("vmmkit.aot"), "");
        ProcessResult runtime = launch(copy, jdk.toString(), jvms, "--version");
        assertEquals("my-jdk ran: --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -XX:AOTCache=" + runtimes
                + " -Xlog:aot=off -Xlog:cds=off" + jar, runtime.stdout(), runtime::toString);
    }

    /** A Maven wrapper that says how it was called, with which JAVA_HOME, and exits with {@code status}. */
    private static void fakeMavenWrapper(Path copy, int status) throws IOException {
        script(copy.resolve("mvnw"), """
                echo "mvnw ran in $PWD with JAVA_HOME=$JAVA_HOME: $*"
                echo "[ERROR] a compilation error for the test" >&2
                exit %d
                """.formatted(status));
    }

    @Test
    void testRunsTheInstallStepThenMavenVerifyWithTheArgumentsGiven() throws Exception {
        Path copy = launcherOnly();
        Path jdk = fakeJdk(dir, "my-jdk", "25.0.2");
        fakeMavenWrapper(copy, 3);
        script(copy.resolve("scripts/install-test-deps.sh"), "echo install-test-deps ran\n");

        ProcessResult result = launch(copy, jdk.toString(), Files.createDirectories(dir.resolve("jvm")), "test", "-Dtest=Foo");
        assertEquals(3, result.exitCode(), "the suite's exit status is the launcher's: " + result);
        assertEquals("install-test-deps ran\nmvnw ran in " + copy + " with JAVA_HOME=" + jdk + ": -B verify -Dtest=Foo\n",
                result.stdout());
    }

    /** The launcher with a pom and a fake Maven wrapper ending with {@code status}: a tree it can (pretend to) build. */
    private Path buildableCopy(int status) throws IOException {
        Path copy = launcherOnly();
        fakeMavenWrapper(copy, status);
        Files.writeString(copy.resolve("pom.xml"), "<project/>\n");
        return copy;
    }

    @Test
    void aFailedBuildSaysSoAndRunsNothing() throws Exception {
        Path copy = buildableCopy(1);
        Path jdk = fakeJdk(dir, "my-jdk", "25.0.2");

        ProcessResult result = launch(copy, jdk.toString(), Files.createDirectories(dir.resolve("jvm")), "--version");
        assertEquals(1, result.exitCode(), result::toString);
        assertFalse(result.stdout().contains("my-jdk ran"), "the CLI must not start without a jar: " + result);
        assertTrue(result.stderr().contains("[ERROR] a compilation error for the test"), "Maven's errors are shown: " + result);
        assertTrue(result.stderr().contains("vmmkit: the build failed (its errors are above)"), result::toString);
        assertTrue(result.stderr().contains("cd " + copy + " && ./mvnw -B -DskipTests package"), result::toString);
    }

    @Test
    void aJarOlderThanTheSourcesIsRebuiltAndANewerOneIsNot() throws Exception {
        Path copy = buildableCopy(0);
        Path jdk = fakeJdk(dir, "my-jdk", "25.0.2");
        Path source = Files.createDirectories(copy.resolve("src/main/java")).resolve("A.java");
        Files.writeString(source, "class A {}\n");
        Path jar = Files.createDirectories(copy.resolve("target")).resolve("vmmkit.jar");
        Files.writeString(jar, "");
        Path jvms = Files.createDirectories(dir.resolve("jvm"));

        Files.setLastModifiedTime(jar, FileTime.fromMillis(System.currentTimeMillis() - 60_000));
        ProcessResult stale = launch(copy, jdk.toString(), jvms, "--version");
        assertEquals(0, stale.exitCode(), stale::toString);
        assertTrue(stale.stderr().contains("mvnw ran in " + copy + " with JAVA_HOME=" + jdk
                + ": -B -q -DskipTests package\n"), "the build's output goes to stderr: " + stale);
        assertTrue(stale.stdout().startsWith("my-jdk ran: "), stale::toString);

        FileTime older = FileTime.fromMillis(System.currentTimeMillis() - 120_000);
        for (Path p = source; !p.equals(copy); p = p.getParent()) Files.setLastModifiedTime(p, older); // folders too
        Files.setLastModifiedTime(copy.resolve("pom.xml"), older);
        ProcessResult fresh = launch(copy, jdk.toString(), jvms, "--version");
        assertTrue(fresh.stdout().startsWith("my-jdk ran: "), fresh::toString);
        assertFalse(fresh.stderr().contains("mvnw ran"), "no build: " + fresh);
    }

    /** The real thing: a copy of this tree without a jar builds it with Maven on first use, then runs it. */
    @Test
    void aFreshCopyBuildsOnFirstUseAndRunsTheCli() throws Exception {
        Path copy = dir.resolve("tree");
        copyTree(TREE, copy);
        Path jvms = Files.createDirectories(dir.resolve("jvm"));

        ProcessResult first = launch(copy, System.getProperty("java.home"), jvms, "--version");
        assertEquals(0, first.exitCode(), first::toString);
        assertTrue(first.stdout().startsWith("vmmkit "), first::toString);
        assertTrue(first.stderr().contains("vmmkit: building target/vmmkit.jar"), first::toString);
        Path jar = copy.resolve("target/vmmkit.jar");
        FileTime built = Files.getLastModifiedTime(jar);

        ProcessResult second = launch(copy, System.getProperty("java.home"), jvms, "--version");
        assertEquals(first.stdout(), second.stdout(), second::toString);
        assertFalse(second.stderr().contains("building"), "built once: " + second);
        assertEquals(built, Files.getLastModifiedTime(jar));
    }

    /** Copies the tree's sources (tests' Java sources left out: the launcher builds with -DskipTests). */
    private static void copyTree(Path from, Path to) throws IOException {
        Path testJava = from.resolve("src/test/java");
        Files.walkFileTree(from, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path d, BasicFileAttributes attrs) throws IOException {
                if (!d.equals(from) && (NOT_COPIED.contains(d.getFileName().toString()) || d.equals(testJava))) {
                    return FileVisitResult.SKIP_SUBTREE;
                }
                Files.createDirectories(to.resolve(from.relativize(d)));
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path f, BasicFileAttributes attrs) throws IOException {
                if (attrs.isRegularFile()) {
                    Files.copy(f, to.resolve(from.relativize(f)), StandardCopyOption.COPY_ATTRIBUTES);
                }
                return FileVisitResult.CONTINUE;
            }
        });
    }
}
