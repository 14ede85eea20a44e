package dev.vmmkit.ipc;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.host.HostDriver;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;

/**
 * The importing process of {@link IpcTest}: opens the handle given in hex as its argument (on
 * emulated device 1), checks the pattern whose seed is the second argument, and then, for each line
 * "check" on stdin, checks it again; "close" closes the handle and ends. Prints one line per step.
 */
public final class IpcChildProcess {
    public static void main(String[] args) throws Exception {
        byte[] bytes = HexFormat.of().parseHex(args[0]);
        long seed = Long.parseLong(args[1]);
        try (HostDriver driver = HostDriver.builder().capacity(64L << 20).deviceCount(2).device(1).build();
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS);
             Arena arena = Arena.ofConfined()) {
            MemorySegment handle = arena.allocate(64);
            MemorySegment.copy(bytes, 0, handle, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, 64);
            IpcImports imports = new IpcImports();
            long pointer;
            try {
                pointer = imports.open(handle, manager.sharedPages());
            } catch (IpcException e) {
                System.out.println("error " + e.cudaError() + " " + e.getMessage());
                return;
            }
            DeviceBytes view = driver.deviceBytes();
            long size = Long.parseLong(args[2]);
            System.out.println("opened " + view.firstMismatch(pointer, size, seed));
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.equals("check")) {
                    System.out.println("checked " + view.firstMismatch(pointer, size, seed));
                } else if (line.equals("close")) {
                    System.out.println("closed " + imports.close(pointer) + " " + imports.openCount());
                    return;
                }
            }
        }
    }
}
