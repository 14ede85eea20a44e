package dev.vmmkit.trace;

import net.razorvine.pickle.Opcodes;
import net.razorvine.pickle.PickleException;
import net.razorvine.pickle.Unpickler;

import java.io.IOException;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * Unpickles a PyTorch memory snapshot in bounded memory: each trace entry (a dict with
 * {@code action}, {@code addr}, {@code size}, {@code stream}) is turned into a row of
 * {@link SnapshotEntries} as soon as the pickle has built it, and dropped, so a snapshot of a
 * million entries never holds a million dicts. Everything else (segments, blocks, the shared
 * frame lists) is unpickled as usual by the library.
 *
 * <p>The hooks sit on the opcodes that finish a dict ({@code SETITEMS}, {@code SETITEM},
 * {@code DICT}) and that fill a list ({@code APPENDS}, {@code APPEND}). A finished entry dict is
 * replaced on the unpickler's stack by a small {@link Entry} and its memo slot is emptied
 * (PyTorch makes a new dict per entry, which nothing refers to twice); when a list receives
 * entries, they go to that list's {@link SnapshotEntries} and the list is emptied again.
 */
final class SnapshotUnpickler extends Unpickler {

    /** One trace entry, between its dict and the list it goes to. */
    record Entry(byte action, long addr, long size, long stream) {
    }

    /** The entries of each device trace list, keyed by the list object (its device is its place in device_traces). */
    private final IdentityHashMap<Object, SnapshotEntries> entriesByList = new IdentityHashMap<>();
    private final Memo memo = new Memo();

    SnapshotUnpickler() {
        super.memo = this.memo;
    }

    /** The entries gathered for {@code list}, a device trace list of the unpickled snapshot; empty when it had none. */
    SnapshotEntries entriesOf(Object list) {
        SnapshotEntries entries = entriesByList.get(list);
        return entries != null ? entries : new SnapshotEntries();
    }

    @Override
    protected Object dispatch(short key) throws PickleException, IOException {
        Object result = super.dispatch(key);
        switch (key) {
            case Opcodes.SETITEMS, Opcodes.SETITEM, Opcodes.DICT -> finishDict();
            case Opcodes.APPENDS, Opcodes.APPEND -> drainList();
            default -> { }
        }
        return result;
    }

    private void finishDict() {
        if (!(stack.peek() instanceof Map<?, ?> dict)) return;
        Object action = dict.get("action");
        if (!(action instanceof String name) || !dict.containsKey("addr")) {
            memo.built(dict);
            return;
        }
        stack.pop();
        stack.add(new Entry(SnapshotEntries.actionCode(name), number(dict, "addr"), number(dict, "size"),
                number(dict, "stream")));
        memo.forget(dict);
    }

    private void drainList() {
        if (!(stack.peek() instanceof List<?> list) || list.isEmpty() || !(list.getLast() instanceof Entry)) return;
        SnapshotEntries entries = entriesByList.computeIfAbsent(list, l -> new SnapshotEntries());
        for (Object item : list) {
            if (!(item instanceof Entry entry)) throw new PickleException("a device trace holds something else than trace entries");
            entries.add(entry.action(), entry.addr(), entry.size(), entry.stream());
        }
        list.clear();
    }

    /** A whole number field of an entry; absent or None is 0 (an {@code oom} entry has no address, for one). */
    private static long number(Map<?, ?> dict, String field) {
        Object value = dict.get(field);
        if (value == null) return 0;
        if (value instanceof BigInteger big) {
            if (big.bitLength() > 64 || big.signum() < 0) throw new PickleException("trace entry field '" + field + "' is out of range: " + big);
            return big.longValue();
        }
        if (value instanceof Number n) return n.longValue();
        throw new PickleException("trace entry field '" + field + "' must be a whole number, not " + value);
    }

    /**
     * The unpickler's memo, which can forget a finished entry dict. MEMOIZE numbers objects by the
     * memo's size, so the size still counts forgotten slots.
     */
    private static final class Memo extends HashMap<Integer, Object> {
        /** Dicts memoized while still empty, by slot, until their items arrive: only the dicts being built. */
        private final IdentityHashMap<Object, Integer> openDicts = new IdentityHashMap<>();
        private int forgotten;

        @Override
        public Object put(Integer slot, Object value) {
            if (value instanceof Map<?, ?> dict && dict.isEmpty()) {
                // Empty dicts that never get items (rare) would pile up here; forgetting them only costs memory.
                if (openDicts.size() > 4096) openDicts.clear();
                openDicts.put(dict, slot);
            }
            return super.put(slot, value);
        }

        /** {@code dict} has its items and stays in the memo (a segment, a block, a frame). */
        void built(Object dict) {
            openDicts.remove(dict);
        }

        void forget(Object dict) {
            Integer slot = openDicts.remove(dict);
            if (slot != null && super.remove(slot) != null) forgotten++;
        }

        @Override
        public int size() {
            return super.size() + forgotten;
        }

        @Override
        public void clear() {
            super.clear();
            openDicts.clear();
            forgotten = 0;
        }
    }
}
