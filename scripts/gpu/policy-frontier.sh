#!/usr/bin/env bash
# The large-region policy's ratio/speed frontier on the GPU: each trace replayed by vmmkit with
# default settings, with the trace's true peak as VMM_PEAK_HINT, with VMM_RESERVE_SLACK=1.03 and
# with one handle per page (VMM_HANDLE_CAP=2M), then by cudaMallocAsync, all in one run. Run from
# the repository root on a machine with an NVIDIA GPU and CUDA 13, with runtime/ and target/ built:
#   bash scripts/gpu/policy-frontier.sh [TRACE...]
# TRACE defaults to every trace in .device/traces/ (BERT first), else the repository's traces/*.csv.gz.
# Prints one row per trace and setting: fragmentation ratio, wall us/op, modelled driver us/op, and
# the handles mapped and unmapped (unmapped = pages moved or trimmed); logs and JSON in
# $OUT/policy-frontier/ when OUT is set. About 10 s a trace. Exits non-zero if a replay failed, or
# if the default's ratio on the BERT trace passes 1.05. DRIVER=host replays on the emulation (no
# cudaMallocAsync rows), to test this script without a GPU.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" policy-frontier
driver="${DRIVER:-cuda}"
failed=0
echo "policy-frontier: logs in $out"

traces_or_default policy-frontier "$@"

# fig FILE: ratio, wall us/op, modelled us/op, handles mapped, handles unmapped from a replay's JSON
fig() {
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); h=d["driver_handles"]
print("%.3f | %.2f | %.2f | %d | %d" % (d["fragmentation_ratio"], d["wall_ns_per_op"]/1000,
      d["modelled_driver_us_per_op"], h["map"], h["unmap"]))' "$1" 2>/dev/null || echo "? | ? | ? | ? | ?"
}

# replay NAME ARGS...: one replay under a time limit, its JSON in $out/NAME.json
replay() {
  local name="$1"; shift
  if ! timeout 120 "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1; then
    failed=1; echo "policy-frontier: $name FAILED (see $out/$name.log)" >&2; return 1
  fi
}

rows=("trace | settings | ratio | wall us/op | modelled driver us/op | handles mapped | handles unmapped")
for trace in "${traces[@]}"; do
  name="$(basename "$trace" .csv.gz)"
  if replay "$name-default" ./vmmkit replay "$trace" --driver "$driver" --warmup 0; then
    rows+=("$name | default | $(fig "$out/$name-default.json")")
    peak="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_live_bytes"])' "$out/$name-default.json")"
    if [ "$name" = bert_infer ]; then
      ratio="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["fragmentation_ratio"])' "$out/$name-default.json")"
      "$py" -c "import sys; sys.exit(0 if $ratio <= 1.05 else 1)" || { failed=1; echo "policy-frontier: BERT ratio $ratio > 1.05" >&2; }
    fi
    replay "$name-hint" ./vmmkit replay "$trace" --driver "$driver" --warmup 0 --peak-hint "$peak" \
      && rows+=("$name | --peak-hint $peak (true peak) | $(fig "$out/$name-hint.json")")
  fi
  VMM_RESERVE_SLACK=1.03 replay "$name-slack103" ./vmmkit replay "$trace" --driver "$driver" --warmup 0 \
    && rows+=("$name | VMM_RESERVE_SLACK=1.03 | $(fig "$out/$name-slack103.json")")
  VMM_HANDLE_CAP=2M replay "$name-cap2m" ./vmmkit replay "$trace" --driver "$driver" --warmup 0 \
    && rows+=("$name | VMM_HANDLE_CAP=2M | $(fig "$out/$name-cap2m.json")")
  if [ "$driver" = cuda ]; then
    replay "$name-async" ./vmmkit replay "$trace" --backend cuda-malloc-async --warmup 0 \
      && rows+=("$name | cudaMallocAsync | $(fig "$out/$name-async.json")")
  fi
done

echo; echo "=== policy-frontier [./vmmkit replay TRACE --driver $driver --warmup 0, settings as shown]"
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
exit $failed
