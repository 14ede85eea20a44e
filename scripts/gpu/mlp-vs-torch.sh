#!/usr/bin/env bash
# The lifetime layer on the GPU, against PyTorch. Run from the repository root on a machine with an
# NVIDIA GPU, CUDA 13 and python3 with PyTorch, with runtime/ (scripts/build-runtime.sh) and target/
# built:
#   bash scripts/gpu/mlp-vs-torch.sh
# Steps, each under a time limit, about 1 minute in all (logs in $OUT/mlp-vs-torch/ when OUT is set,
# else in a fresh /tmp folder):
#   1. ptxas       the hand-written PTX assembled for this GPU, when ptxas is on PATH (diagnostics only)
#   2. ops-check   every CUDA kernel against the host emulation's, one line per case (matmul through
#                  cuBLAS when libcublas is found; ops-check-ptx: the same with the PTX matmul)
#   3. mlp-cuda    `vmmkit demo mlp --driver cuda`, paranoid leak detection: loss falls, live bytes back
#                  to baseline after every step, no leak; peak live bytes
#   4. mlp-cuda-timing  the same with the default (simple) leak detection, for step time (and
#                  mlp-cuda-ptx-timing with the PTX matmul instead of cuBLAS)
#   5. mlp-host    the same run on the host emulation (its losses must match CUDA's)
#   6. compare     mlp_vs_torch.py: the same model, batch and steps in PyTorch; prints vmmkit's peak vs
#                  torch.cuda.max_memory_allocated, the step time ratio, host-vs-CUDA losses
# Exits non-zero if any step or check failed. Knobs: STEPS (30), TIMING_STEPS (200: timing runs and
# PyTorch), BATCH (256), INPUTS (128), HIDDEN (512),
# CLASSES (10), PYTHON (python3), DRIVER (cuda; host runs the vmmkit steps on the emulation, to test
# this script on a machine without a GPU).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" mlp-vs-torch
steps="${STEPS:-30}"
timing_steps="${TIMING_STEPS:-200}"  # long enough that the JIT's warm-up hardly moves the median
driver="${DRIVER:-cuda}"
shape=(--batch "${BATCH:-256}" --inputs "${INPUTS:-128}" --hidden "${HIDDEN:-512}" --classes "${CLASSES:-10}")
failed=0
last_rc=0
summary=()
echo "mlp-vs-torch: logs in $out"

# Runs one step under a time limit, showing its output and keeping it in $OUT/<name>.log.
step() {
  local name="$1" limit="$2"; shift 2
  echo
  echo "=== $name: $*"
  local start rc
  start=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  local line="$name: exit $rc ($(( $(date +%s) - start )) s)"
  last_rc=$rc
  echo "=== $line"
  summary+=("$line")
  if [ "$rc" -ne 0 ]; then failed=1; fi
}

if [ ! -f target/vmmkit.jar ]; then
  echo "mlp-vs-torch: target/vmmkit.jar is missing; build it (./mvnw -DskipTests package) and carry target/" >&2
  exit 2
fi

# 1. The PTX as this GPU's assembler sees it: a syntax or register error shows here with its line.
ptx_file="$out/kernels.ptx"
if [ -f src/main/resources/dev/vmmkit/compute/cuda/kernels.ptx ]; then
  cp src/main/resources/dev/vmmkit/compute/cuda/kernels.ptx "$ptx_file"
else
  unzip -p target/vmmkit.jar dev/vmmkit/compute/cuda/kernels.ptx > "$ptx_file"
fi
ptxas_bin="$(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null || true)"
if [ -n "$ptxas_bin" ]; then
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  step ptxas 60 "$ptxas_bin" --gpu-name "sm_${cc:-80}" -v "$ptx_file" -o "$out/kernels.cubin"
else
  echo "=== ptxas: skipped (not on PATH); the driver's JIT log will show PTX errors in ops-check"
  summary+=("ptxas: skipped (not on PATH)")
fi

# 2-5. vmmkit.
step ops-check 120 ./vmmkit demo ops-check --driver "$driver"
blas_rc=$last_rc
step ops-check-ptx 120 env VMMKIT_MATMUL=ptx ./vmmkit demo ops-check --driver "$driver"
if [ "$blas_rc" -ne 0 ] && [ "$last_rc" -eq 0 ]; then
  echo "=== note: the kernels pass with the PTX matmul but not with cuBLAS; the demo runs use VMMKIT_MATMUL=ptx"
  export VMMKIT_MATMUL=ptx
fi
step mlp-cuda 120 env VMM_LEAK_DETECTION=paranoid ./vmmkit demo mlp --driver "$driver" --steps "$steps" "${shape[@]}" \
  --json "$out/mlp-cuda.json"
step mlp-cuda-timing 120 env VMM_LEAK_DETECTION=simple ./vmmkit demo mlp --driver "$driver" --steps "$timing_steps" "${shape[@]}" \
  --json "$out/mlp-cuda-timing.json"
step mlp-cuda-ptx-timing 120 env VMM_LEAK_DETECTION=simple VMMKIT_MATMUL=ptx ./vmmkit demo mlp --driver "$driver" \
  --steps "$timing_steps" "${shape[@]}" --json "$out/mlp-cuda-ptx-timing.json"
step mlp-host 180 env VMM_LEAK_DETECTION=paranoid ./vmmkit demo mlp --driver host --steps "$steps" "${shape[@]}" \
  --json "$out/mlp-host.json"

# 6. PyTorch and the comparison.
step compare 180 "$py" scripts/gpu/mlp_vs_torch.py --out "$out" --steps "$timing_steps" "${shape[@]}"

echo
echo "=== summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit "$failed"
