package dev.vmmkit.tools;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * deploy/kubernetes.yaml against the Kubernetes API's schemas (the npm package kubernetes-models,
 * installed by scripts/install-test-deps.sh), and the Dockerfile's entry point against the serve
 * command's options.
 */
class DeployManifestsTest {
    private static final Path MODULES = Path.of(".deps", "js-clients", "node_modules").toAbsolutePath();

    @Test
    void kubernetesManifestsMatchTheApiSchemas() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(MODULES.resolve("kubernetes-models")),
                "the kubernetes-models npm package is not in " + MODULES + " (scripts/install-test-deps.sh installs it; it needs npm)");
        Process node = new ProcessBuilder("node", Path.of("src/test/js/validate-k8s.mjs").toAbsolutePath().toString(),
                MODULES.toString(), "deploy/kubernetes.yaml").redirectErrorStream(true).start();
        String said = new String(node.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(node.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, node.exitValue(), said);
        for (String kind : new String[]{"Deployment", "Service", "PersistentVolumeClaim", "ServiceMonitor"}) {
            assertTrue(said.contains("valid deploy/kubernetes.yaml: " + kind), said);
        }
    }

    @Test
    void theProbesAndOptionsTheManifestsUseExist() throws Exception {
        String manifests = Files.readString(Path.of("deploy/kubernetes.yaml"));
        String dockerfile = Files.readString(Path.of("deploy/Dockerfile"));
        assertTrue(manifests.contains("path: /ready") && manifests.contains("path: /health") && manifests.contains("path: /metrics"));
        String help = new picocli.CommandLine(new ServeCommand()).getUsageMessage();
        for (String option : new String[]{"--drain-timeout", "--isolation", "--bind", "--port", "--engines", "--models"}) {
            assertTrue(help.contains(option), option + " is not an option of serve");
            assertTrue(manifests.contains(option) || dockerfile.contains(option), option);
        }
    }
}
