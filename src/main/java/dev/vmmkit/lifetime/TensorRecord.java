package dev.vmmkit.lifetime;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A small fixed record of named fields (tensors or containers), such as a layer's weight and bias:
 * it acquires each field when made and releases each once when freed.
 */
public final class TensorRecord extends TensorContainer {
    private final Map<String, RefCounted> fields;

    private TensorRecord(Map<String, RefCounted> fields) {
        this.fields = fields;
    }

    /** A record of {@code name, value, name, value, ...}; acquires each value. */
    public static TensorRecord of(Object... namesAndValues) {
        if (namesAndValues.length % 2 != 0) {
            throw new IllegalArgumentException("TensorRecord.of takes name, value pairs; got " + namesAndValues.length + " arguments");
        }
        Map<String, RefCounted> fields = new LinkedHashMap<>();
        for (int i = 0; i < namesAndValues.length; i += 2) {
            if (!(namesAndValues[i] instanceof String name) || !(namesAndValues[i + 1] instanceof RefCounted value)) {
                throw new IllegalArgumentException("TensorRecord.of: argument " + i + " must be a name and the next a tensor or container");
            }
            if (fields.containsKey(name)) throw new IllegalArgumentException("TensorRecord.of: field '" + name + "' given twice");
            fields.put(name, value);
        }
        for (RefCounted value : fields.values()) ((ScopedResource) value).checkAlive("TensorRecord.of");
        fields.values().forEach(TensorContainer::acquire);
        return new TensorRecord(fields);
    }

    /** Field {@code name}, borrowed. */
    public Tensor tensor(String name) {
        return (Tensor) field(name);
    }

    /** Field {@code name} (a tensor or container), borrowed. */
    public RefCounted field(String name) {
        checkAlive("field '" + name + "'");
        RefCounted value;
        synchronized (this) {
            value = fields.get(name);
        }
        if (value == null) throw new IllegalArgumentException("record has no field '" + name + "' (fields: " + names() + ")");
        return value;
    }

    public synchronized Set<String> names() {
        return Collections.unmodifiableSet(fields.keySet());
    }

    @Override
    synchronized List<RefCounted> takeElements() {
        List<RefCounted> taken = new ArrayList<>(fields.values());
        fields.clear();
        return taken;
    }

    @Override
    String describe() {
        return "TensorRecord" + fields.keySet();
    }
}
