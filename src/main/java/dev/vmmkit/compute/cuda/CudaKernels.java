package dev.vmmkit.compute.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.cuda.CudaModuleCalls;

/**
 * vmmkit's hand-written PTX module ({@code kernels.ptx} beside this class), JIT-compiled by the driver
 * on first use, and launches of its functions on the default stream. A failed compilation reports
 * the JIT's own error log; a failed launch names the kernel, its grid and its arguments.
 * Not final only so that a test can stand in for the launches.
 */
class CudaKernels {
    static final String RESOURCE = "kernels.ptx";
    /** Most arguments any kernel takes. */
    private static final int MAX_ARGUMENTS = 12;

    /** The kernels of the module, by their entry names. */
    enum Kernel {
        FILL("vmm_fill_f32"), COPY("vmm_copy_f32"), ADD("vmm_add_f32"), MUL("vmm_mul_f32"),
        AXPY("vmm_axpy_f32"), BROADCAST("vmm_broadcast_f32"), RELU("vmm_relu_f32"),
        RELU_BACKWARD("vmm_relu_backward_f32"), SUM_ROWS("vmm_sum_rows_f32"), MATMUL("vmm_matmul_f32"),
        SOFTMAX_XENT("vmm_softmax_xent_f32"), SOFTMAX_XENT_BACKWARD("vmm_softmax_xent_backward_f32");

        final String entry;

        Kernel(String entry) {
            this.entry = entry;
        }
    }

    /** Per-thread argument storage: one 8-byte slot per argument and the array of pointers to them. */
    private static final class Arguments {
        private static final ThreadLocal<Arguments> PER_THREAD = ThreadLocal.withInitial(Arguments::new);
        final MemorySegment slots;
        final MemorySegment pointers;
        final StringJoiner text = new StringJoiner(", ");

        private Arguments() {
            Arena arena = Arena.ofAuto();
            slots = arena.allocate(8L * MAX_ARGUMENTS, 8);
            pointers = arena.allocate(ADDRESS.byteSize() * MAX_ARGUMENTS, 8);
            for (int i = 0; i < MAX_ARGUMENTS; i++) {
                pointers.setAtIndex(ADDRESS, i, slots.asSlice(8L * i, 8));
            }
        }
    }

    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+(\\w+)\\s*\\(([^)]*)\\)");
    private static final Pattern PARAM = Pattern.compile("\\.param\\s+\\.(u64|u32|f32)\\s+\\w+");

    private final CudaModuleCalls cuda;
    private final long[] functions = new long[Kernel.values().length];
    private Map<Kernel, List<String>> signatures;
    private long module;

    CudaKernels(CudaModuleCalls cuda) {
        this.cuda = cuda;
    }

    /**
     * Launches {@code kernel} on the default stream. Each argument is a {@code Long} (a u64 or a
     * pointer), an {@code Integer} (a u32) or a {@code Float} (an f32), in the kernel's order.
     */
    void launch(Kernel kernel, int gridX, int gridY, int blockX, int blockY, Object... arguments) {
        long function = function(kernel);
        checkArguments(kernel, signature(kernel), arguments);
        Arguments args = Arguments.PER_THREAD.get();
        for (int i = 0; i < arguments.length; i++) {
            switch (arguments[i]) {
                case Long value -> args.slots.set(JAVA_LONG, 8L * i, value);
                case Integer value -> args.slots.set(JAVA_INT, 8L * i, value);
                case Float value -> args.slots.set(JAVA_FLOAT, 8L * i, value);
                default -> throw new IllegalArgumentException("kernel argument of type " + arguments[i].getClass());
            }
        }
        cuda.launch(function, gridX, gridY, blockX, blockY, args.pointers,
                () -> describe(kernel, gridX, gridY, blockX, blockY, arguments));
    }

    /**
     * Refuses arguments that do not match the entry's parameters in the PTX (count and types), which
     * the driver cannot check: a mismatch would make the kernel read garbage.
     */
    static void checkArguments(Kernel kernel, List<String> parameters, Object... arguments) {
        boolean matches = parameters.size() == arguments.length;
        for (int i = 0; matches && i < arguments.length; i++) {
            matches = switch (parameters.get(i)) {
                case "u64" -> arguments[i] instanceof Long;
                case "u32" -> arguments[i] instanceof Integer;
                case "f32" -> arguments[i] instanceof Float;
                default -> false;
            };
        }
        if (!matches) {
            List<String> given = new ArrayList<>();
            for (Object a : arguments) given.add(a.getClass().getSimpleName());
            throw new IllegalArgumentException(kernel.entry + " takes " + parameters + " but was given " + given);
        }
    }

    /** Each entry's parameter types (u64, u32, f32) as the PTX declares them. */
    static Map<Kernel, List<String>> parseSignatures(String ptx) {
        Map<String, List<String>> byName = new java.util.HashMap<>();
        Matcher entry = ENTRY.matcher(ptx);
        while (entry.find()) {
            List<String> types = new ArrayList<>();
            Matcher param = PARAM.matcher(entry.group(2));
            while (param.find()) types.add(param.group(1));
            byName.put(entry.group(1), types);
        }
        Map<Kernel, List<String>> signatures = new EnumMap<>(Kernel.class);
        for (Kernel k : Kernel.values()) {
            List<String> types = byName.get(k.entry);
            if (types == null) {
                throw new DriverException(CudaResult.NOT_FOUND, "entry " + k.entry + " is missing from " + RESOURCE,
                        "parse(" + RESOURCE + ")");
            }
            signatures.put(k, List.copyOf(types));
        }
        return signatures;
    }

    private synchronized List<String> signature(Kernel kernel) {
        if (signatures == null) signatures = parseSignatures(ptxSource());
        return signatures.get(kernel);
    }

    /** The text of a launch, for error messages: {@code cuLaunchKernel(vmm_add_f32, grid=4x1, block=256x1, args=[...])}. */
    static String describe(Kernel kernel, int gridX, int gridY, int blockX, int blockY, Object... arguments) {
        StringJoiner args = new StringJoiner(", ", "[", "]");
        for (Object argument : arguments) {
            args.add(argument instanceof Long value ? "0x" + Long.toHexString(value) : String.valueOf(argument));
        }
        return "cuLaunchKernel(" + kernel.entry + ", grid=" + gridX + "x" + gridY + ", block=" + blockX + "x" + blockY
                + ", args=" + args + ")";
    }

    /** Unloads the module if it was loaded; called by the driver's close, before its context goes. */
    synchronized void unload() {
        if (module != 0) {
            long loaded = module;
            module = 0;
            java.util.Arrays.fill(functions, 0L);
            cuda.unloadModule(loaded);
        }
    }

    /** The kernel's function handle; loads the module on first use. Cheap next to the launch. */
    private synchronized long function(Kernel kernel) {
        if (module == 0) {
            module = cuda.loadModule(ptxSource(), RESOURCE);
        }
        long function = functions[kernel.ordinal()];
        if (function == 0) {
            function = cuda.function(module, kernel.entry);
            functions[kernel.ordinal()] = function;
        }
        return function;
    }

    /** The PTX text shipped in the jar. */
    static String ptxSource() {
        try (InputStream in = CudaKernels.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new DriverException(CudaResult.NOT_FOUND, "resource " + RESOURCE + " is missing from the jar",
                        "cuModuleLoadDataEx(" + RESOURCE + ")");
            }
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw new DriverException(CudaResult.NOT_FOUND, "cannot read " + RESOURCE + ": " + e.getMessage(),
                    "cuModuleLoadDataEx(" + RESOURCE + ")");
        }
    }
}
