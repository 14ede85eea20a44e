#!/usr/bin/env python3
"""Writes a synthetic PyTorch memory snapshot: the pickle torch.cuda.memory._dump_snapshot writes
(a dict with 'segments' and 'device_traces'), from a small simulated caching allocator, with no GPU
and no PyTorch. Prints the figures a reader must find as one JSON line: per device, the peak of
bytes reserved and of live bytes over the trace the snapshot keeps, and how many allocations were
made before its first entry.

  synthetic-snapshot.py OUT [--entries N] [--devices D] [--keep K] [--expandable] [--seed S]

OUT ending in .gz is gzipped. --keep K keeps only the last K entries of each device trace, as
PyTorch's ring buffer (max_entries) does. The tests' snapshots in src/test/resources/snapshots/ and
the big one of scripts/bench-snapshot.sh come from here."""
import argparse, gzip, json, pickle, random

MiB = 1 << 20
SEGMENT = 2 * MiB


def simulate(device, entries, expandable, rng, frames):
    """Runs a caching allocator over random requests; returns the trace and, after each entry, the
    reserved and live bytes, and the allocator's state at the end."""
    trace, reserved_after, live_after = [], [], []
    free_segments = []          # [address, total] of cached segments
    segment_of = {}             # block address -> (segment address, total, block size, stream)
    next_address = 0x7f0000000000 + device * (1 << 40)
    live = {}                   # address -> (size, stream)
    reserved = live_bytes = 0
    streams = [0, 0, 0, 94_000_000 + device]
    t = 0

    def emit(action, addr, size, stream):
        nonlocal t
        t += 1
        trace.append({'action': action, 'addr': addr, 'size': size, 'stream': stream, 'time_us': t,
                      'frames': frames[t % len(frames)], 'compile_context': 'N/A', 'user_metadata': ''})
        reserved_after.append(reserved)
        live_after.append(live_bytes)

    while len(trace) < entries:
        r = rng.random()
        if live and (r < 0.45 or len(live) > 400):
            addr = rng.choice(list(live))
            size, stream = live.pop(addr)
            live_bytes -= size
            emit('free_requested', addr, size, stream)
            emit('free_completed', addr, size, stream)
            seg_addr, total, _, _ = segment_of.pop(addr)
            free_segments.append([seg_addr, total])
        elif r < 0.47 and free_segments:
            # empty_cache: give every cached segment back.
            for seg_addr, total in free_segments:
                reserved -= total
                emit('segment_unmap' if expandable else 'segment_free', seg_addr, total, 0)
            free_segments.clear()
        else:
            size = rng.choice([512, 4096, 65536, 1 * MiB, 3 * MiB, 12 * MiB, 40 * MiB]) * rng.randint(1, 4)
            size = (size + 511) // 512 * 512
            stream = rng.choice(streams)
            fits = [s for s in free_segments if s[1] >= size]
            if fits:
                seg = min(fits, key=lambda s: s[1])
                free_segments.remove(seg)
                seg_addr, total = seg
            else:
                total = (size + SEGMENT - 1) // SEGMENT * SEGMENT
                seg_addr = next_address
                next_address += total + SEGMENT
                reserved += total
                emit('segment_map' if expandable else 'segment_alloc', seg_addr, total, stream)
            live[seg_addr] = (size, stream)
            live_bytes += size
            segment_of[seg_addr] = (seg_addr, total, size, stream)
            emit('alloc', seg_addr, size, stream)
    return trace, reserved_after, live_after, free_segments, segment_of, live


def segments_at_end(device, free_segments, segment_of, live, expandable, frames):
    segments = []
    for seg_addr, total, size, stream in segment_of.values():
        blocks = [{'address': seg_addr, 'size': size, 'requested_size': size, 'state': 'active_allocated',
                   'frames': frames[0]}]
        if total > size:
            blocks.append({'address': seg_addr + size, 'size': total - size, 'requested_size': 0,
                           'state': 'inactive', 'frames': []})
        segments.append(segment(device, seg_addr, total, size, stream, blocks, expandable, frames))
    for seg_addr, total in free_segments:
        blocks = [{'address': seg_addr, 'size': total, 'requested_size': 0, 'state': 'inactive', 'frames': []}]
        segments.append(segment(device, seg_addr, total, 0, 0, blocks, expandable, frames))
    return segments


def segment(device, address, total, allocated, stream, blocks, expandable, frames):
    return {'device': device, 'address': address, 'total_size': total, 'allocated_size': allocated,
            'active_size': allocated, 'requested_size': allocated, 'stream': stream, 'segment_type': 'large',
            'segment_pool_id': (0, 0), 'is_expandable': expandable, 'frames': frames[1], 'blocks': blocks}


def main():
    p = argparse.ArgumentParser()
    p.add_argument('out')
    p.add_argument('--entries', type=int, default=2000)
    p.add_argument('--devices', type=int, default=1)
    p.add_argument('--keep', type=int, default=0)
    p.add_argument('--expandable', action='store_true')
    p.add_argument('--seed', type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    # Frames are shared between entries, as PyTorch's symbolizer shares them.
    frames = [[{'filename': f'model_{i}.py', 'line': 10 * i + j, 'name': f'forward_{j}'} for j in range(3)]
              for i in range(16)]
    snapshot = {'segments': [], 'device_traces': [],
                'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': {'expandable_segments': a.expandable}}}
    figures = []
    for device in range(a.devices):
        trace, reserved_after, live_after, free_segments, segment_of, live = simulate(
            device, a.entries, a.expandable, rng, frames)
        first = max(0, len(trace) - a.keep) if a.keep else 0
        kept = trace[first:]
        before = reserved_after[first - 1] if first > 0 else 0
        live_before = live_after[first - 1] if first > 0 else 0
        # Allocations live when the kept trace begins: the replay starts with them.
        live_at_start = set()
        for e in trace[:first]:
            if e['action'] == 'alloc': live_at_start.add(e['addr'])
            elif e['action'] == 'free_completed': live_at_start.discard(e['addr'])
        snapshot['device_traces'].append(kept)
        snapshot['segments'] += segments_at_end(device, free_segments, segment_of, live, a.expandable, frames)
        figures.append({'device': device, 'entries': len(kept),
                        'reserved_peak_bytes': max([before] + reserved_after[first:]),
                        'live_peak_bytes': max([live_before] + live_after[first:]),
                        'allocations_before_trace': len(live_at_start),
                        'reserved_at_end': reserved_after[-1]})
    opener = gzip.open if a.out.endswith('.gz') else open
    with opener(a.out, 'wb') as f:
        pickle.dump(snapshot, f)
    print(json.dumps(figures))


main()
