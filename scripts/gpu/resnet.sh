#!/usr/bin/env bash
# ResNet-50 training step time, vmmkit as PyTorch's pluggable allocator against PyTorch's own, over
# interleaved rounds so machine drift does not decide the comparison. Run from the repository root
# on a machine with an NVIDIA GPU, python3 with PyTorch and torchvision, and runtime/
# (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/resnet.sh
# Each round runs native and vmmkit (odd rounds native first, even rounds vmmkit first), each in a
# fresh process (resnet_rounds.py): warm-up steps, then timed steps over a cycle of batch sizes
# (SHAPES, default 64,48,64,32: shapes that vary, as a ragged last batch or an inference server makes
# them). Once, also expandable segments. Prints one
# line per round (median of per-cycle step means, each allocator, and the ratio; and each one's host
# time per step, until the step's last launch) and the median ratio over rounds. Knobs: ROUNDS (5),
# STEPS (40), SHAPES, RUN_LIMIT (seconds per process, 120), RUN_MODE=1 (each round also runs the
# native mode under `vmmkit run`: PyTorch's own cache over vmmkit, which asks vmmkit for segments
# only, so per-tensor calls into vmmkit are out of the step). About 3-4 minutes. Exits non-zero when
# a run fails.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" resnet
use_vmmkit_build resnet
shim="$root/target/native/libvmmkit_preload.so"
limit="${RUN_LIMIT:-120}"
args=(--steps "${STEPS:-40}" --shapes "${SHAPES:-64,48,64,32}")
failed=0
echo "resnet: logs in $out"

run() {
  local name="$1"; shift
  rm -f "$out/$name.json"
  timeout "$limit" "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$out/$name.json" ]; then
    failed=1; echo "resnet: $name FAILED (exit $rc)"; tail -n 5 "$out/$name.log"; return 1
  fi
}

rn=("$py" scripts/gpu/resnet_rounds.py)
run native-first env -u PYTORCH_CUDA_ALLOC_CONF "${rn[@]}" native "${args[@]}" || {
  echo "resnet: the native run failed; nothing to compare with"; exit 1; }
run expandable env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "${rn[@]}" expandable "${args[@]}"
for r in $(seq 1 "${ROUNDS:-5}"); do
  # Even rounds run vmmkit first, so a drift of the machine over the run does not favour one side.
  native() { run "round$r-native" env -u PYTORCH_CUDA_ALLOC_CONF "${rn[@]}" native "${args[@]}"; }
  pluggable() { run "round$r-vmmkit" env -u PYTORCH_CUDA_ALLOC_CONF VMM_STATS_FILE="$out/round$r-vmmkit.stats.json" \
    "${rn[@]}" vmmkit --so "$shim" "${args[@]}"; }
  if [ $((r % 2)) = 1 ]; then native; pluggable; else pluggable; native; fi
  [ "${RUN_MODE:-0}" = 1 ] && run "round$r-vmmkit-run" env -u PYTORCH_CUDA_ALLOC_CONF ./vmmkit run --driver cuda -- \
    "${rn[@]}" native "${args[@]}"
done

"$py" - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return None
first, exp = load("native-first"), load("expandable")
print(f"resnet: ResNet-50 training, bf16 autocast, channels-last, batch sizes {first['shapes']} in turn, {first['steps']} timed steps")
print(f"resnet: first native {first['step_ms_median']:.2f} ms/step, reserved {first['max_reserved_mib']} MiB")
if exp:
    print(f"resnet: expandable segments {exp['step_ms_median']:.2f} ms/step ({exp['step_ms_median'] / first['step_ms_median']:.3f}x the first native), reserved {exp['max_reserved_mib']} MiB")
ratios, min_ratios = [], []
for r in range(1, 100):
    n, v = load(f"round{r}-native"), load(f"round{r}-vmmkit")
    if n is None and v is None:
        break
    if n is None or v is None:
        print(f"resnet: round {r} incomplete"); continue
    ratios.append(v["step_ms_median"] / n["step_ms_median"])
    min_ratios.append(v["step_ms_min"] / n["step_ms_min"])
    stats = ""
    try:
        s = json.load(open(os.path.join(out, f"round{r}-vmmkit.stats.json")))
        stats = f", vmmkit peak reserved {s['peak_reserved_bytes'] / 2**20:.0f} MiB, allocs {s['allocs']}"
    except (OSError, ValueError, KeyError):
        pass
    host = f", host {n.get('host_ms_median', 0):.2f} / {v.get('host_ms_median', 0):.2f} ms"
    under_run = load(f"round{r}-vmmkit-run")
    if under_run:
        host += (f"; native under vmmkit run {under_run['step_ms_median']:.2f} ms "
                 f"(ratio {under_run['step_ms_median'] / n['step_ms_median']:.3f}, host {under_run.get('host_ms_median', 0):.2f} ms)")
    print(f"resnet-round {r}: native {n['step_ms_median']:.2f} ms, vmmkit {v['step_ms_median']:.2f} ms, "
          f"ratio {ratios[-1]:.3f} (min-cycle ratio {min_ratios[-1]:.3f}){stats}{host}")
if ratios:
    print(f"resnet-figure: median step-time ratio vmmkit/native over {len(ratios)} rounds {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}; min-cycle ratio median {statistics.median(min_ratios):.3f})")
PY
exit $failed
