package dev.vmmkit.core;

import java.util.Arrays;

/**
 * Blocks ordered by (size, address): the size tree of the dual-tree design. A treap kept in
 * primitive arrays indexed by block id, so insert, remove and best-fit are O(log n) and allocate
 * nothing. The address order lives in {@link BlockTable}'s neighbour links.
 */
final class SizeTree {
    private static final int NONE = BlockTable.NONE;

    private final BlockTable blocks;
    private int[] left = new int[16];
    private int[] right = new int[16];
    private int[] priority = new int[16];
    private int root = NONE;
    private int count;
    private int seed = 0x9E3779B9;

    SizeTree(BlockTable blocks) {
        this.blocks = blocks;
    }

    int size() {
        return count;
    }

    boolean isEmpty() {
        return root == NONE;
    }

    void insert(int id) {
        ensureCapacity(id);
        left[id] = NONE;
        right[id] = NONE;
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        priority[id] = seed;
        root = insert(root, id);
        count++;
    }

    void remove(int id) {
        root = remove(root, id);
        count--;
    }

    /** The smallest block of at least {@code bytes} (lowest address among equals), or NONE. */
    int bestFit(long bytes) {
        int node = root;
        int best = NONE;
        while (node != NONE) {
            if (blocks.size[node] >= bytes) {
                best = node;
                node = left[node];
            } else {
                node = right[node];
            }
        }
        return best;
    }

    /** How many blocks are of {@code min} to {@code max} bytes, counting no further than {@code most}. */
    int countSized(long min, long max, int most) {
        return countSized(root, min, max, most);
    }

    private int countSized(int node, long min, long max, int most) {
        if (node == NONE || most <= 0) return 0;
        long size = blocks.size[node];
        int n = size >= min ? countSized(left[node], min, max, most) : 0;
        if (n < most && size >= min && size <= max) n++;
        if (n < most && size <= max) n += countSized(right[node], min, max, most - n);
        return n;
    }

    /** The largest block (the highest address among equals), or NONE when empty. */
    int largest() {
        int node = root;
        if (node == NONE) return NONE;
        while (right[node] != NONE) node = right[node];
        return node;
    }

    /** Writes the ids in descending (size, address) order into {@code out}; returns how many. */
    int descending(int[] out) {
        return descending(root, out, 0);
    }

    private int descending(int node, int[] out, int at) {
        if (node == NONE) return at;
        at = descending(right[node], out, at);
        out[at++] = node;
        return descending(left[node], out, at);
    }

    private boolean less(int a, int b) {
        long sa = blocks.size[a];
        long sb = blocks.size[b];
        return sa < sb || (sa == sb && blocks.address[a] < blocks.address[b]);
    }

    private int insert(int node, int id) {
        if (node == NONE) return id;
        if (less(id, node)) {
            left[node] = insert(left[node], id);
            if (priority[left[node]] > priority[node]) node = rotateRight(node);
        } else {
            right[node] = insert(right[node], id);
            if (priority[right[node]] > priority[node]) node = rotateLeft(node);
        }
        return node;
    }

    private int remove(int node, int id) {
        if (node == NONE) throw new IllegalStateException("block " + id + " is not in the size tree");
        if (node == id) {
            return merge(left[node], right[node]);
        }
        if (less(id, node)) {
            left[node] = remove(left[node], id);
        } else {
            right[node] = remove(right[node], id);
        }
        return node;
    }

    private int merge(int a, int b) {
        if (a == NONE) return b;
        if (b == NONE) return a;
        if (priority[a] > priority[b]) {
            right[a] = merge(right[a], b);
            return a;
        }
        left[b] = merge(a, left[b]);
        return b;
    }

    private int rotateRight(int node) {
        int l = left[node];
        left[node] = right[l];
        right[l] = node;
        return l;
    }

    private int rotateLeft(int node) {
        int r = right[node];
        right[node] = left[r];
        left[r] = node;
        return r;
    }

    private void ensureCapacity(int id) {
        if (id < left.length) return;
        int n = Math.max(id + 1, left.length * 2);
        left = Arrays.copyOf(left, n);
        right = Arrays.copyOf(right, n);
        priority = Arrays.copyOf(priority, n);
    }
}
