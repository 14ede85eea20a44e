#!/usr/bin/env bash
# Records PyTorch memory snapshots of programs nobody tuned for vmmkit (record_snapshots.py: BERT
# training, GPT-2 generation, a CNN), with and without expandable segments and one truncated by
# the ring buffer, then replays each through vmmkit on the host emulation, as a user without a GPU
# would. Run from the repository root on a machine with an NVIDIA GPU, python3 with PyTorch and
# transformers, and runtime/ (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/record-snapshots.sh
# Prints one line per snapshot: PyTorch's own max_memory_reserved() (the native anchor, from the
# recording program), the reserved peak vmmkit reads from the snapshot (the same unless truncated),
# and vmmkit's peak reserved for the same requests. Snapshots (NAME.pickle.gz), their CSV traces
# (NAME.csv.gz, from vmmkit trace convert), the programs' figures (figures.txt) and the replays'
# JSON in $OUT/record-snapshots/ when OUT is set. About 2-3 minutes.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" record-snapshots
[ -f target/vmmkit.jar ] || { echo "record-snapshots: target/vmmkit.jar is missing; build it and carry target/" >&2; exit 2; }
failed=0
: > "$out/figures.txt"
record() {   # NAME PROGRAM [ENV...] [-- ARGS]
  local name="$1" program="$2"; shift 2
  local envs=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift && args=("$@")
  if ! env "${envs[@]}" timeout 240 "$py" scripts/gpu/record_snapshots.py "$program" "$out/$name.pickle" "${args[@]}" \
      > "$out/$name.log" 2>&1; then
    echo "record-snapshots: $name failed:"; tail -5 "$out/$name.log"; failed=1; return
  fi
  gzip -f "$out/$name.pickle"
  echo "$name $(tail -1 "$out/$name.log")" >> "$out/figures.txt"
}
record train-bert train-bert
record train-bert-expandable train-bert PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
record generate-gpt2 generate-gpt2
record generate-gpt2-expandable generate-gpt2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
record train-cnn train-cnn
record train-bert-truncated train-bert -- --max-entries 20000

printf '%-26s %16s %16s %16s %10s %s\n' snapshot torch_max_reserved snapshot_reserved vmmkit_reserved vmmkit/torch truncated
while read -r name program _ reserved _ allocated; do
  ./vmmkit trace convert "$out/$name.pickle.gz" "$out/$name.csv.gz" > /dev/null 2>> "$out/$name.log" || failed=1
  if ! ./vmmkit replay --driver host --json "$out/$name.json" "$out/$name.pickle.gz" > "$out/$name.replay.txt" 2>&1; then
    echo "record-snapshots: replay of $name failed:"; tail -3 "$out/$name.replay.txt"; failed=1; continue
  fi
  "$py" - "$out/$name.json" "$name" "$reserved" <<'PY'
import json, sys
r, name, torch_reserved = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
print("%-26s %16d %16d %16d %10.3f %s" % (name, torch_reserved, r["recorded_reserved_peak_bytes"],
      r["peak_reserved_bytes"], r["peak_reserved_bytes"] / torch_reserved, r["trace_truncated"]))
PY
done < "$out/figures.txt"
./vmmkit replay --driver host --html "$out/train-bert.html" "$out/train-bert.pickle.gz" > /dev/null 2>&1 || failed=1
ls -la "$out"/*.pickle.gz "$out"/*.csv.gz
exit $failed
