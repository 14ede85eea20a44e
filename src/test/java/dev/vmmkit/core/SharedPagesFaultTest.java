package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.stream.Stream;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Export and import under injected driver faults: nothing leaks, neither descriptors nor mappings. */
class SharedPagesFaultTest {
    private final HostDriver exporter = HostDriver.builder().granularity(PAGE).capacity(64 * MIB).deviceCount(2).device(0).build();
    private final HostDriver importer = HostDriver.builder().granularity(PAGE).capacity(64 * MIB).deviceCount(2).device(1).build();

    @AfterEach
    void close() {
        exporter.close();
        importer.close();
    }

    /** One handle per page (a fixed cap holds even while loading), so an allocation exports several. */
    private static VmmConfig onePagePerHandle() {
        return VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_HANDLE_CAP", Long.toString(PAGE)));
    }

    private static long openDescriptors() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    @Test
    void aFailingExportClosesTheDescriptorsItMade() throws IOException {
        FaultPlan plan = new FaultPlan();
        try (VmmManager manager = new VmmManager(new FaultInjectingDriver(exporter, plan), onePagePerHandle())) {
            long address = manager.allocate(5 * PAGE, 0);
            long before = openDescriptors();
            plan.failNth(DriverCall.EXPORT_HANDLE, 3, CudaResult.OUT_OF_MEMORY);
            assertThrows(DriverException.class, () -> manager.sharedPages().export(address));
            assertEquals(before, openDescriptors(), "the two descriptors made before the fault were closed");
            assertThrows(InvalidAddressException.class, () -> manager.sharedPages().export(address + 64));
            plan.clear();
            SharedPages.ExportedPages pages = manager.sharedPages().export(address);
            assertEquals(5, pages.fds().length);
            assertEquals(0, pages.offset());
            for (int fd : pages.fds()) Descriptors.close(fd);
        }
    }

    @Test
    void aFailingImportUndoesEverythingItDid() {
        try (VmmManager owner = new VmmManager(exporter, onePagePerHandle())) {
            long address = owner.allocate(4 * PAGE, 0);
            SharedPages.ExportedPages pages = owner.sharedPages().export(address);
            for (DriverCall call : new DriverCall[]{DriverCall.IMPORT_HANDLE, DriverCall.MAP, DriverCall.SET_ACCESS}) {
                FaultPlan plan = new FaultPlan().failNth(call, call == DriverCall.SET_ACCESS ? 1 : 3, CudaResult.UNKNOWN);
                try (VmmManager manager = new VmmManager(new FaultInjectingDriver(importer, plan), smallConfig(64 * MIB))) {
                    assertThrows(DriverException.class, () -> manager.sharedPages().mapImported(pages.fds(), pages.pageSizes()), call.key());
                    assertTrue(importer.usage().isEmpty(), call.key() + ": " + importer.usage());
                    plan.clear();
                    long va = manager.sharedPages().mapImported(pages.fds(), pages.pageSizes());
                    assertTrue(importer.isAccessible(va, 4 * PAGE));
                    assertTrue(manager.sharedPages().unmapImported(va));
                    assertTrue(importer.usage().isEmpty(), importer.usage().toString());
                }
            }
            for (int fd : pages.fds()) Descriptors.close(fd);
        }
    }
}
