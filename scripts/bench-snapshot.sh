#!/usr/bin/env bash
# Replays a big synthetic PyTorch memory snapshot (750,000 entries by default) with a small fixed
# heap, and prints the wall time, the peak resident memory and whether the recorded reserved peak
# is the one the generator computed. Needs python3 (the generator) and GNU time (/usr/bin/time).
# Usage: scripts/bench-snapshot.sh [ENTRIES] [HEAP]   e.g. scripts/bench-snapshot.sh 750000 256m
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
entries="${1:-750000}"
heap="${2:-256m}"
work="$(mktemp -d "${TMPDIR:-/tmp}/vmmkit-snapshot.XXXXXX")"
trap 'rm -rf "$work"' EXIT
expected="$(python3 "$root/scripts/synthetic-snapshot.py" "$work/big.pickle" --entries "$entries" --seed 7)"
echo "snapshot: $entries entries, $(du -m "$work/big.pickle" | cut -f1) MB"
"$root/vmmkit" --version >/dev/null   # builds the jar first, outside the timing
source "$root/scripts/java-home.sh"
java="$(jdk25_home)/bin/java"
/usr/bin/time -f "wall %e s, max resident %M KiB (heap -Xmx$heap)" "$java" "-Xmx$heap" --enable-native-access=ALL-UNNAMED \
  -XX:+UseSerialGC -jar "$root/target/vmmkit.jar" replay --driver host --warmup 0 --json "$work/r.json" "$work/big.pickle" 2>&1 | tail -3
python3 - "$work/r.json" "$expected" <<'PY'
import json, sys
report, expected = json.load(open(sys.argv[1])), json.loads(sys.argv[2])[0]
ok = report["recorded_reserved_peak_bytes"] == expected["reserved_peak_bytes"] and report["peak_live_bytes"] == expected["live_peak_bytes"]
print("recorded reserved peak %d, generator's %d: %s" % (report["recorded_reserved_peak_bytes"], expected["reserved_peak_bytes"], "same" if ok else "DIFFERENT"))
sys.exit(0 if ok else 1)
PY
