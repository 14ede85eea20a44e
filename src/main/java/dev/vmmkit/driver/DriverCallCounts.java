package dev.vmmkit.driver;

import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An immutable snapshot of how many calls of each kind a {@link CountingDriver} saw. Every kind is
 * present (zero when never called). {@link #minus} gives the calls made between two snapshots.
 *
 * @param byCall count per kind, unmodifiable, in {@link DriverCall} order
 */
public record DriverCallCounts(Map<DriverCall, Long> byCall) {

    /** Copies {@code byCall}; kinds it lacks count zero. */
    public DriverCallCounts {
        EnumMap<DriverCall, Long> complete = new EnumMap<>(DriverCall.class);
        for (DriverCall call : DriverCall.all()) {
            complete.put(call, byCall.getOrDefault(call, 0L));
        }
        byCall = Collections.unmodifiableMap(complete);
    }

    /** Counts from an array indexed by {@link DriverCall#ordinal()}. */
    static DriverCallCounts ofOrdinals(long[] counts) {
        EnumMap<DriverCall, Long> byCall = new EnumMap<>(DriverCall.class);
        for (DriverCall call : DriverCall.all()) {
            byCall.put(call, counts[call.ordinal()]);
        }
        return new DriverCallCounts(byCall);
    }

    /** All zero. */
    public static DriverCallCounts none() {
        return new DriverCallCounts(Map.of());
    }

    public long get(DriverCall call) {
        return byCall.get(call);
    }

    /** Calls of every kind together. */
    public long total() {
        long total = 0;
        for (long count : byCall.values()) {
            total += count;
        }
        return total;
    }

    /** Calls made since {@code earlier} was taken. */
    public DriverCallCounts minus(DriverCallCounts earlier) {
        EnumMap<DriverCall, Long> difference = new EnumMap<>(DriverCall.class);
        for (DriverCall call : DriverCall.all()) {
            difference.put(call, get(call) - earlier.get(call));
        }
        return new DriverCallCounts(difference);
    }

    /** The counts keyed by {@link DriverCall#key()} ("map", "set_access" ...), for JSON. */
    public Map<String, Long> byKey() {
        Map<String, Long> byKey = new LinkedHashMap<>();
        byCall.forEach((call, count) -> byKey.put(call.key(), count));
        return Collections.unmodifiableMap(byKey);
    }

    @Override
    public String toString() {
        return byKey().toString();
    }
}
