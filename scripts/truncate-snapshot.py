#!/usr/bin/env python3
"""Cuts a PyTorch memory snapshot as its ring buffer (max_entries) would: keeps the newest KEEP
entries of each device trace (the segments stay as they were at the end), and prints, from a pass
over the whole trace, the figures a reader must find in the cut one: per device, the peak of
reserved and of live bytes from the first kept entry on, and how many allocations were live then.

  truncate-snapshot.py SNAPSHOT.pickle[.gz] KEEP OUT.pickle[.gz] > OUT.json
"""
import gzip, json, pickle, sys

src, keep, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opener = lambda path, mode: gzip.open(path, mode) if path.endswith('.gz') else open(path, mode)
with opener(src, 'rb') as f:
    snapshot = pickle.load(f)
figures = []
for device, trace in enumerate(snapshot['device_traces']):
    first = max(0, len(trace) - keep)
    reserved = live = 0
    live_blocks = set()
    at_first = (0, 0, 0)
    reserved_peak = live_peak = 0
    for i, e in enumerate(trace):
        if i == first:
            at_first = (reserved, live, len(live_blocks))
            reserved_peak, live_peak = reserved, live
        a = e['action']
        if a in ('segment_alloc', 'segment_map'): reserved += e['size']
        elif a in ('segment_free', 'segment_unmap'): reserved -= e['size']
        elif a == 'alloc': live += e['size']; live_blocks.add(e['addr'])
        elif a == 'free_completed': live -= e['size']; live_blocks.discard(e['addr'])
        if i >= first:
            reserved_peak, live_peak = max(reserved_peak, reserved), max(live_peak, live)
    figures.append({'device': device, 'kept_entries': len(trace) - first, 'reserved_peak_bytes': reserved_peak,
                    'live_peak_bytes': live_peak, 'allocations_before_trace': at_first[2]})
    snapshot['device_traces'][device] = trace[first:]
with opener(dst, 'wb') as f:
    pickle.dump(snapshot, f)
print(json.dumps(figures[0] if len(figures) == 1 else figures))
