package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.LibC;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Two emulated devices of one machine: grants to a peer, revocation, export and import of handles. */
class HostDriverPeerTest {
    private static final long G = HostDriver.DEFAULT_GRANULARITY;

    private final HostDriver device0 = HostDriver.builder().capacity(8 * G).deviceCount(2).device(0).build();
    private final HostDriver device1 = HostDriver.builder().capacity(8 * G).deviceCount(2).device(1).build();

    @AfterEach
    void close() {
        device0.close();
        device1.close();
    }

    @Test
    void aPeerGrantLetsTheOtherDeviceReadWhatTheOwnerWrote() {
        long va = device0.reserve(4 * G, 0);
        long a = device0.create(G), b = device0.create(G);
        device0.map(va, G, a);
        device0.map(va + G, G, b);
        device0.setAccess(va, 2 * G);
        DeviceBytes owner = device0.deviceBytes(), peer = device1.deviceBytes();
        owner.fill(va, 2 * G, 42);
        assertFalse(device0.isAccessibleTo(1, va, 8));
        assertThrows(IllegalStateException.class, () -> peer.readLong(va), "no grant yet");

        device0.setAccess(va, 2 * G, DeviceSet.of(1), DeviceSet.NONE); // one call for the whole run
        assertTrue(device0.isAccessibleTo(1, va, 2 * G));
        assertEquals(-1, peer.firstMismatch(va, 2 * G, 42));
        peer.writeLong(va + G, 7);
        assertEquals(7, owner.readLong(va + G), "one memory, two devices");

        device0.setAccess(va, 2 * G, DeviceSet.NONE, DeviceSet.of(1));
        assertThrows(IllegalStateException.class, () -> peer.readLong(va), "revoked");
        assertEquals(7, owner.readLong(va + G), "the owner keeps its access");

        device0.setAccess(va, 2 * G, DeviceSet.NONE, DeviceSet.of(0));
        assertFalse(device0.isAccessible(va, 8), "nobody has access: PROT_NONE again");
        device0.unmap(va, 2 * G);
        device0.release(a);
        device0.release(b);
        device0.addressFree(va, 4 * G);
        assertTrue(device0.usage().isEmpty());
    }

    @Test
    void grantsNameDevicesOfTheMachineOnly() {
        long va = device0.reserve(G, 0);
        long h = device0.create(G);
        device0.map(va, G, h);
        DriverException unknown = assertThrows(DriverException.class,
                () -> device0.setAccess(va, G, DeviceSet.of(2), DeviceSet.NONE));
        assertEquals(CudaResult.INVALID_DEVICE, unknown.result());
        DriverException both = assertThrows(DriverException.class,
                () -> device0.setAccess(va, G, DeviceSet.of(1), DeviceSet.of(1)));
        assertEquals(CudaResult.INVALID_VALUE, both.result());
        assertFalse(device0.isAccessibleTo(0, va, G), "refused calls change nothing");
        device0.unmap(va, G);
        device0.release(h);
        device0.addressFree(va, G);
    }

    @Test
    void anExportedHandleImportedElsewhereMapsTheSamePages() {
        long h = device0.create(2 * G);
        long va = device0.reserve(2 * G, 0);
        device0.map(va, 2 * G, h);
        device0.setAccess(va, 2 * G);
        device0.deviceBytes().fill(va, 2 * G, 9);
        int fd = device0.exportHandle(h);
        long imported = device1.importHandle(fd, 2 * G);
        LibC.close(fd); // the importer holds its own descriptor
        assertEquals(8 * G, device1.memoryInfo().freeBytes(), "imported memory is the exporter's");

        device0.unmap(va, 2 * G);
        device0.release(h); // the importer's handle keeps the pages
        long otherVa = device1.reserve(2 * G, 0);
        device1.map(otherVa, 2 * G, imported);
        device1.setAccess(otherVa, 2 * G);
        assertEquals(-1, device1.deviceBytes().firstMismatch(otherVa, 2 * G, 9));
        device1.unmap(otherVa, 2 * G);
        device1.release(imported);
        device1.addressFree(otherVa, 2 * G);
        device0.addressFree(va, 2 * G);
        assertTrue(device1.usage().isEmpty() && device0.usage().isEmpty());
    }

    @Test
    void importRefusesBadDescriptorsAndSizes() {
        long h = device0.create(G);
        int fd = device0.exportHandle(h);
        assertEquals(CudaResult.INVALID_VALUE,
                assertThrows(DriverException.class, () -> device1.importHandle(fd, 2 * G)).result());
        assertEquals(CudaResult.INVALID_VALUE,
                assertThrows(DriverException.class, () -> device1.importHandle(-1, G)).result());
        assertEquals(CudaResult.INVALID_VALUE,
                assertThrows(DriverException.class, () -> device1.importHandle(fd, 3)).result());
        LibC.close(fd);
        assertEquals(CudaResult.INVALID_VALUE,
                assertThrows(DriverException.class, () -> device1.importHandle(fd, G)).result(), "closed");
        device0.release(h);
        assertEquals(CudaResult.INVALID_VALUE,
                assertThrows(DriverException.class, () -> device0.exportHandle(h)).result(), "released");
        assertTrue(device1.usage().isEmpty());
    }
}
