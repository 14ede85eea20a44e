package dev.vmmkit.core;

import java.util.Map;

/**
 * Settings of one {@link VmmManager}. Every field can come from the environment (seed 2.1), e.g.
 * {@code VMM_CHUNK_SIZE=8M}; {@link #fromEnvironment()} reads them.
 *
 * @param addressSpaceBytes    virtual address space reserved per region on first use (0 = sized from device memory)
 * @param chunkBytes           size of each physical handle, a multiple of the granularity (0 = granularity)
 * @param smallLimitBytes      requests up to this size are packed into the small-request region
 * @param alignmentBytes       alignment of every returned address (power of two, at least 256 as cudaMalloc gives)
 * @param reserveSlack         physical memory may grow to this multiple of peak live bytes before free pages are reclaimed
 * @param maxCachedBytes       handles cached in the pool above this are released (a release threshold)
 * @param fragRatio            free pages are not moved to a request when a page is smaller than this share of it (0 = always move)
 * @param handleCapBytes       largest physical handle the slow path creates, a multiple of chunkBytes (0 = adaptive:
 *                             {@link HandleSizer}; equal to chunkBytes = one handle per page)
 * @param peakHintBytes        a peak of live bytes known in advance (an earlier run's), so the physical budget is
 *                             right from the start (0 = none)
 */
public record VmmConfig(
        long addressSpaceBytes,
        long chunkBytes,
        long smallLimitBytes,
        long alignmentBytes,
        double reserveSlack,
        long maxCachedBytes,
        double fragRatio,
        long handleCapBytes,
        long peakHintBytes) {

    public static final VmmConfig DEFAULTS = new VmmConfig(0, 0, 1L << 20, 512, 1.02, Long.MAX_VALUE, 0.0, 0, 0);

    /** Settings without a handle cap or a peak hint (both 0: adaptive, none). */
    public VmmConfig(long addressSpaceBytes, long chunkBytes, long smallLimitBytes, long alignmentBytes,
                     double reserveSlack, long maxCachedBytes, double fragRatio) {
        this(addressSpaceBytes, chunkBytes, smallLimitBytes, alignmentBytes, reserveSlack, maxCachedBytes, fragRatio, 0, 0);
    }

    public VmmConfig {
        if (addressSpaceBytes < 0) throw new IllegalArgumentException("addressSpaceBytes < 0: " + addressSpaceBytes);
        if (chunkBytes < 0) throw new IllegalArgumentException("chunkBytes < 0: " + chunkBytes);
        if (smallLimitBytes < 0) throw new IllegalArgumentException("smallLimitBytes < 0: " + smallLimitBytes);
        if (alignmentBytes < 256 || Long.bitCount(alignmentBytes) != 1) {
            throw new IllegalArgumentException("alignmentBytes must be a power of two >= 256: " + alignmentBytes);
        }
        if (!(reserveSlack >= 1.0)) throw new IllegalArgumentException("reserveSlack must be >= 1.0: " + reserveSlack);
        if (maxCachedBytes < 0) throw new IllegalArgumentException("maxCachedBytes < 0: " + maxCachedBytes);
        if (!(fragRatio >= 0.0 && fragRatio <= 1.0)) throw new IllegalArgumentException("fragRatio must be in [0,1]: " + fragRatio);
        if (handleCapBytes < 0) throw new IllegalArgumentException("handleCapBytes < 0: " + handleCapBytes);
        if (peakHintBytes < 0) throw new IllegalArgumentException("peakHintBytes < 0: " + peakHintBytes);
    }

    /** Defaults overridden by VMM_* environment variables. */
    public static VmmConfig fromEnvironment() {
        return from(System.getenv());
    }

    /** Defaults overridden by the VMM_* keys of {@code env}; a malformed value is an IllegalArgumentException naming the key. */
    public static VmmConfig from(Map<String, String> env) {
        VmmConfig d = DEFAULTS;
        try {
            return fromParsed(env, d);
        } catch (IllegalArgumentException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("VMM_")) throw e;
            // A well-formed value out of range: the constructor names the field; name the key too.
            String key = KEY_OF_FIELD.entrySet().stream()
                    .filter(k -> e.getMessage() != null && e.getMessage().startsWith(k.getKey()))
                    .map(Map.Entry::getValue).findFirst().orElse("VMM_*");
            throw new IllegalArgumentException(key + "=" + env.get(key) + ": " + e.getMessage(), e);
        }
    }

    /** The smallest chunk size that is a multiple of every CUDA device's allocation granularity (2 MiB). */
    public static final long MIN_CHUNK_BYTES = 2L << 20;
    /** The smallest VMM_VA_SIZE accepted from the environment; see {@link #problems}. */
    public static final long MIN_ADDRESS_SPACE_BYTES = 1L << 30;

    /**
     * Every problem with the VMM_* allocator settings of {@code env}, one line each, naming the
     * variable, its value and the rule; empty when they are all good. Stricter than {@link #from},
     * which programs and tests may give any well-formed value:
     * <ul>
     * <li>{@code VMM_CHUNK_SIZE} is 0 (the device's granularity) or a power of two of at least 2 MiB:
     *     a region finds a chunk's page slot by shifting an address offset, and rounds to chunks
     *     with a mask, which both need a power of two; every CUDA device's granularity (2 MiB)
     *     divides it, so the driver accepts it. Today's values 3M or 6M would fail every allocation.</li>
     * <li>{@code VMM_VA_SIZE} is 0 (twice the device's memory) or at least 1 GiB. It is the address
     *     space each region reserves; address space costs no memory (a 1 TiB reservation succeeds), but
     *     a region too small for the program fills up, and each extra one is another reservation whose
     *     free pages the others can use only by unmapping (a 1K value gave ratio 1.60 with 98 of them).</li>
     * </ul>
     */
    public static java.util.List<String> problems(Map<String, String> env) {
        java.util.List<String> problems = new java.util.ArrayList<>();
        for (String key : KEY_OF_FIELD.values().stream().sorted().toList()) {
            String value = env.get(key);
            if (value == null || value.isBlank()) continue;
            try {
                VmmConfig one = from(Map.of(key, value));
                if (key.equals("VMM_CHUNK_SIZE") && one.chunkBytes != 0
                        && (Long.bitCount(one.chunkBytes) != 1 || one.chunkBytes < MIN_CHUNK_BYTES)) {
                    problems.add(key + "=" + value + ": must be a power of two of at least 2 MiB (2M, 4M, 8M, ...), "
                            + "or 0 for the device's granularity: vmmkit finds a chunk's page by shifting addresses, and "
                            + "CUDA maps memory in multiples of 2 MiB");
                }
                if (key.equals("VMM_VA_SIZE") && one.addressSpaceBytes != 0 && one.addressSpaceBytes < MIN_ADDRESS_SPACE_BYTES) {
                    problems.add(key + "=" + value + ": must be at least 1G (or 0 for twice the device's memory): "
                            + "each region reserves this much address space, which costs no memory, and a smaller "
                            + "region fills up and splits the allocator into many reservations");
                }
            } catch (IllegalArgumentException e) {
                problems.add(e.getMessage());
            }
        }
        return problems;
    }

    private static final Map<String, String> KEY_OF_FIELD = Map.of(
            "addressSpaceBytes", "VMM_VA_SIZE",
            "chunkBytes", "VMM_CHUNK_SIZE",
            "smallLimitBytes", "VMM_SMALL_LIMIT",
            "alignmentBytes", "VMM_ALIGNMENT",
            "reserveSlack", "VMM_RESERVE_SLACK",
            "maxCachedBytes", "VMM_MAX_CACHED",
            "fragRatio", "VMM_FRAG_RATIO",
            "handleCapBytes", "VMM_HANDLE_CAP",
            "peakHintBytes", "VMM_PEAK_HINT");

    private static VmmConfig fromParsed(Map<String, String> env, VmmConfig d) {
        return new VmmConfig(
                bytes(env, "VMM_VA_SIZE", d.addressSpaceBytes),
                bytes(env, "VMM_CHUNK_SIZE", d.chunkBytes),
                bytes(env, "VMM_SMALL_LIMIT", d.smallLimitBytes),
                bytes(env, "VMM_ALIGNMENT", d.alignmentBytes),
                number(env, "VMM_RESERVE_SLACK", d.reserveSlack),
                bytes(env, "VMM_MAX_CACHED", d.maxCachedBytes),
                number(env, "VMM_FRAG_RATIO", d.fragRatio),
                bytes(env, "VMM_HANDLE_CAP", d.handleCapBytes),
                bytes(env, "VMM_PEAK_HINT", d.peakHintBytes));
    }

    public VmmConfig withHandleCapBytes(long cap) {
        return new VmmConfig(addressSpaceBytes, chunkBytes, smallLimitBytes, alignmentBytes, reserveSlack, maxCachedBytes,
                fragRatio, cap, peakHintBytes);
    }

    public VmmConfig withPeakHintBytes(long hint) {
        return new VmmConfig(addressSpaceBytes, chunkBytes, smallLimitBytes, alignmentBytes, reserveSlack, maxCachedBytes,
                fragRatio, handleCapBytes, hint);
    }

    public VmmConfig withChunkBytes(long chunk) {
        return new VmmConfig(addressSpaceBytes, chunk, smallLimitBytes, alignmentBytes, reserveSlack, maxCachedBytes, fragRatio, handleCapBytes, peakHintBytes);
    }

    public VmmConfig withAddressSpaceBytes(long bytes) {
        return new VmmConfig(bytes, chunkBytes, smallLimitBytes, alignmentBytes, reserveSlack, maxCachedBytes, fragRatio, handleCapBytes, peakHintBytes);
    }

    public VmmConfig withReserveSlack(double slack) {
        return new VmmConfig(addressSpaceBytes, chunkBytes, smallLimitBytes, alignmentBytes, slack, maxCachedBytes, fragRatio, handleCapBytes, peakHintBytes);
    }

    public VmmConfig withMaxCachedBytes(long bytes) {
        return new VmmConfig(addressSpaceBytes, chunkBytes, smallLimitBytes, alignmentBytes, reserveSlack, bytes, fragRatio, handleCapBytes, peakHintBytes);
    }

    private static long bytes(Map<String, String> env, String key, long fallback) {
        String v = env.get(key);
        if (v == null || v.isBlank()) return fallback;
        try {
            return ByteSize.parse(v);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(key + "=" + v + ": " + e.getMessage(), e);
        }
    }

    private static double number(Map<String, String> env, String key, double fallback) {
        String v = env.get(key);
        if (v == null || v.isBlank()) return fallback;
        try {
            return Double.parseDouble(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + "=" + v + ": not a number", e);
        }
    }
}
