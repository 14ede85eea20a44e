package dev.vmmkit.core;

/**
 * Prices the two ways of moving a buffer's contents to another address: remapping its physical
 * handles there, or copying its bytes. A remap costs driver calls for every handle involved
 * (unmapping the destination's, mapping and granting access to the source's) whatever their size;
 * a copy costs bytes over bandwidth plus a launch. So a remap pays off for buffers held in few,
 * large handles and loses for buffers stitched from many small ones.
 *
 * <p>The per-handle latencies depend on the handle's size (setAccess over one 2 GiB handle takes
 * about 81 us, over one 2 MiB handle about 17 us), so each is given at a few sizes and interpolated
 * on a log scale between them. The defaults for CUDA are the medians measured on an H200
 * ({@code ../shared/GPU-FACTS.md}); {@code vmmkit driver-bench} measures them on another device and
 * {@link #withPerHandleMicros} takes its figures.
 */
public final class ResizeCostModel {
    /** Handle sizes the per-handle latencies are given at. */
    private static final long[] SIZES = {2L << 20, 64L << 20, 512L << 20, 2L << 30};

    /** Medians from an H200, CUDA 13 (GPU-FACTS.md), in microseconds per handle at {@link #SIZES}. */
    public static final ResizeCostModel CUDA = new ResizeCostModel(
            new double[]{0.5, 0.5, 0.6, 0.7},
            new double[]{16.5, 34.2, 46.0, 80.8},
            new double[]{11.8, 19.0, 23.3, 35.9},
            (2L << 30) / 1132.3, 5.0);

    /**
     * The host emulation: map, mprotect and munmap of a memfd cost a few microseconds each, and a
     * "device" copy is a memory copy at a few GB/s, so remapping wins there for any whole page.
     */
    public static final ResizeCostModel HOST = new ResizeCostModel(
            new double[]{3, 3, 3, 3},
            new double[]{3, 3, 3, 3},
            new double[]{4, 4, 4, 4},
            4_000, 1.0);

    private final double[] mapMicros;
    private final double[] setAccessMicros;
    private final double[] unmapMicros;
    private final double copyBytesPerMicro;
    private final double copyLaunchMicros;

    /**
     * @param mapMicros         latency of one map, per handle, at 2 MiB, 64 MiB, 512 MiB and 2 GiB
     * @param setAccessMicros   setAccess over a range, per handle in it, at the same sizes
     * @param unmapMicros       unmap of a range, per handle in it, at the same sizes
     * @param copyBytesPerMicro device-to-device copy bandwidth
     * @param copyLaunchMicros  fixed cost of one copy
     */
    public ResizeCostModel(double[] mapMicros, double[] setAccessMicros, double[] unmapMicros,
                           double copyBytesPerMicro, double copyLaunchMicros) {
        this.mapMicros = checked("mapMicros", mapMicros);
        this.setAccessMicros = checked("setAccessMicros", setAccessMicros);
        this.unmapMicros = checked("unmapMicros", unmapMicros);
        if (!(copyBytesPerMicro > 0)) throw new IllegalArgumentException("copyBytesPerMicro must be > 0: " + copyBytesPerMicro);
        if (!(copyLaunchMicros >= 0)) throw new IllegalArgumentException("copyLaunchMicros must be >= 0: " + copyLaunchMicros);
        this.copyBytesPerMicro = copyBytesPerMicro;
        this.copyLaunchMicros = copyLaunchMicros;
    }

    /** The defaults for the driver named {@code driverName} ("cuda" or "host"). */
    public static ResizeCostModel forDriver(String driverName) {
        return "host".equals(driverName) ? HOST : CUDA;
    }

    /**
     * This model with map, setAccess and unmap measured on one handle size (e.g. by
     * {@code vmmkit driver-bench}); the measured figure replaces the interpolated one at every size,
     * scaled by the default curve's shape.
     */
    public ResizeCostModel withPerHandleMicros(long handleBytes, double map, double setAccess, double unmap) {
        return new ResizeCostModel(rescaled(mapMicros, handleBytes, map), rescaled(setAccessMicros, handleBytes, setAccess),
                rescaled(unmapMicros, handleBytes, unmap), copyBytesPerMicro, copyLaunchMicros);
    }

    /**
     * Microseconds to remap: {@code unmappedHandles} destination handles of {@code unmappedHandleBytes}
     * each are unmapped, {@code mappedHandles} source handles of {@code mappedHandleBytes} each are
     * mapped and given access.
     */
    public double remapMicros(int unmappedHandles, long unmappedHandleBytes, int mappedHandles, long mappedHandleBytes) {
        return unmappedHandles * at(unmapMicros, unmappedHandleBytes)
                + mappedHandles * (at(mapMicros, mappedHandleBytes) + at(setAccessMicros, mappedHandleBytes));
    }

    /** Microseconds to copy {@code bytes} device to device. */
    public double copyMicros(long bytes) {
        return copyLaunchMicros + bytes / copyBytesPerMicro;
    }

    /** True when remapping the handles costs less than copying {@code bytes}. */
    public boolean remapIsCheaper(int unmappedHandles, long unmappedHandleBytes, int mappedHandles,
                                  long mappedHandleBytes, long bytes) {
        return remapMicros(unmappedHandles, unmappedHandleBytes, mappedHandles, mappedHandleBytes) < copyMicros(bytes);
    }

    /** Log-linear interpolation in {@code micros} (given at {@link #SIZES}); flat beyond both ends. */
    static double at(double[] micros, long handleBytes) {
        if (handleBytes <= SIZES[0]) return micros[0];
        for (int i = 1; i < SIZES.length; i++) {
            if (handleBytes <= SIZES[i]) {
                double t = (Math.log(handleBytes) - Math.log(SIZES[i - 1])) / (Math.log(SIZES[i]) - Math.log(SIZES[i - 1]));
                return micros[i - 1] + t * (micros[i] - micros[i - 1]);
            }
        }
        return micros[SIZES.length - 1];
    }

    private static double[] rescaled(double[] curve, long handleBytes, double measured) {
        if (!(measured >= 0)) throw new IllegalArgumentException("a measured latency must be >= 0: " + measured);
        double atSize = at(curve, handleBytes);
        double[] out = new double[curve.length];
        for (int i = 0; i < curve.length; i++) out[i] = atSize == 0 ? measured : curve[i] * measured / atSize;
        return out;
    }

    private static double[] checked(String name, double[] micros) {
        if (micros.length != SIZES.length) {
            throw new IllegalArgumentException(name + " needs " + SIZES.length + " values (2M, 64M, 512M, 2G), got " + micros.length);
        }
        for (double v : micros) {
            if (!(v >= 0)) throw new IllegalArgumentException(name + " has a negative or NaN latency: " + v);
        }
        return micros.clone();
    }
}
