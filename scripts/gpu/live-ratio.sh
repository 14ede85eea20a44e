#!/usr/bin/env bash
# What a real program holds under `vmmkit run` with PyTorch's cache off (each tensor's free a
# cudaFree, waiting for the fence's device synchronisation), against its peak of live bytes: each
# workload of workloads.py (or jax_workloads.py, for jax_* names) runs natively first (the cache off
# too), then under vmmkit once per variant of JVM options. Prints one line a run: exit status, the program's own seconds and, for
# vmmkit, the stats' fragmentation ratio, peak live and reserved bytes, device synchronisations and
# requests that gave up waiting for cudaFree's memory.
# Usage (repository root, runtime/ and target/ built):
#   bash scripts/gpu/live-ratio.sh [WORKLOAD...]       (default: train_gpt2 unet_train, the training loops)
#   LIVE_VARIANTS="-Dvmmkit.freeLists.promoteOnHit=false|default" bash scripts/gpu/live-ratio.sh train_gpt2
# LIVE_VARIANTS: '|'-separated JVM options, one run each, "default" for none (the default: one run,
# default); LIVE_REPEATS=N (1) runs the variants N times in turn, since a live run's ratio moves from
# run to run with the device's timing (docs/cold-path.md, "Mask R-CNN's live runs"); LIVE_TIMEOUT=S
# (240; ConvNeXt's native run has taken over 120) bounds each run; DRIVER (cuda; host runs vmmkit on
# the emulation, to try the script without a GPU, with PYTHON a stand-in for the workloads);
# LIVE_TRACE=1 records each vmmkit run's trace (`--trace`, WORKLOAD-N.csv.gz in the output folder,
# each cudaFree completed when the device had finished the work before it) and replays it on the
# host driver at once, printing the replay's figures beside the live ones (docs/replay.md,
# "cudaFree's completions").
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" live-ratio
use_vmmkit_build live-ratio
ensure_aot_cache live-ratio >/dev/null 2>&1
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(train_gpt2 unet_train)
IFS='|' read -r -a variants <<< "${LIVE_VARIANTS:-default}"
limit="${LIVE_TIMEOUT:-240}"

seconds_of() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['seconds'])" "$1" 2>/dev/null || echo "?"; }

for w in "${workloads[@]}"; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$limit" "$py" "$(workload_script "$w")" "$w" > "$out/$w-native.out" 2> "$out/$w-native.err"
  echo "live-ratio | $w | native | exit $? | $(seconds_of "$out/$w-native.out") s"
  n=0
  for rep in $(seq "${LIVE_REPEATS:-1}"); do for v in "${variants[@]}"; do
    n=$((n + 1))
    [ "$v" = default ] && v=""
    stats="$out/$w-vmmkit-$n.json"
    trace=()
    [ "${LIVE_TRACE:-0}" = 1 ] && trace=(--trace "$out/$w-$n.csv.gz")
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 VMMKIT_JVM_OPTS="$v" timeout "$limit" ./vmmkit run --driver "${DRIVER:-cuda}" --profile off \
      --stats "$stats" "${trace[@]}" -- "$py" "$(workload_script "$w")" "$w" > "$out/$w-vmmkit-$n.out" 2> "$out/$w-vmmkit-$n.err"
    rc=$?
    figures="$(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
dev = d['devices'][0]
print('ratio %.4f | peak live %d | peak reserved %d | device syncs %s | waits given up %s' % (d['fragmentation_ratio'],
      d['peak_live_bytes'], d['peak_reserved_bytes'], dev['driver_calls'].get('device_synchronize', 0),
      dev.get('free_waits_given_up', '?')))" "$stats" 2>/dev/null || echo "no stats")"
    echo "live-ratio | $w | vmmkit ${v:-(default)} | exit $rc | $(seconds_of "$out/$w-vmmkit-$n.out") s | $figures"
    if [ "${LIVE_TRACE:-0}" = 1 ] && [ -s "$out/$w-$n.csv.gz" ]; then
      ./vmmkit replay --driver host --warmup 0 --json "$out/$w-$n-replay.json" "$out/$w-$n.csv.gz" > "$out/$w-$n-replay.out" 2>&1
      echo "live-ratio | $w | host replay of run $n | exit $? | $(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('ratio %.4f | peak reserved %d | waits given up %s' % (d['fragmentation_ratio'], d['peak_reserved_bytes'],
      d.get('waits_given_up', '?')))" "$out/$w-$n-replay.json" 2>/dev/null || echo "no report")"
    fi
  done; done
done
