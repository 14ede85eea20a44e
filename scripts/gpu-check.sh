#!/usr/bin/env bash
# The one batched check to run on the GPU machine, from the repository root, with runtime/ and
# target/ carried (build them here first: bash scripts/build-runtime.sh):
#   bash scripts/gpu-check.sh
# Prints each step's output; when $OUT is set, also writes one log per step there plus summary.txt.
# Exits non-zero if any step failed.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$root"

out="${OUT:-}"
if [ -n "$out" ]; then mkdir -p "$out"; fi
summary=()
failed=0

# Runs one step, showing its output and keeping a copy in $OUT/<name>.log.
step() {
  local name="$1"; shift
  echo
  echo "=== $name: $*"
  local start rc
  start=$(date +%s)
  if [ -n "$out" ]; then
    "$@" 2>&1 | tee "$out/$name.log"
    rc=${PIPESTATUS[0]}
  else
    "$@" 2>&1
    rc=$?
  fi
  local line="$name: exit $rc ($(( $(date +%s) - start )) s)"
  echo "=== $line"
  summary+=("$line")
  if [ "$rc" -ne 0 ]; then failed=1; fi
}

skip() {
  echo
  echo "=== $1: skipped ($2)"
  summary+=("$1: skipped ($2)")
}

if [ ! -x runtime/bin/java ] && ! command -v java >/dev/null 2>&1; then
  echo "gpu-check: no runtime/bin/java and no java on PATH; run scripts/build-runtime.sh and carry runtime/" >&2
  exit 2
fi
if [ ! -f target/vmmkit.jar ]; then
  echo "gpu-check: target/vmmkit.jar is missing; build it and carry target/" >&2
  exit 2
fi

step gpus bash -c 'nvidia-smi -L && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv'
step java bash -c 'if [ -x runtime/bin/java ]; then runtime/bin/java -version; fi; ./vmmkit --version'

# driver-check comes from the conformance branch; older builds do not have it.
if ./vmmkit help driver-check >/dev/null 2>&1; then
  step driver-check ./vmmkit driver-check --driver cuda
else
  skip driver-check "this build has no driver-check command"
fi

step driver-bench ./vmmkit driver-bench --driver cuda

# Trace replays through the allocator on the GPU, at three chunk sizes (the ratio/speed trade-off,
# docs/allocator.md), then once with --verify. Traces are carried in .device/traces/.
for trace in .device/traces/*.csv.gz; do
  [ -f "$trace" ] || continue
  name="$(basename "$trace" .csv.gz)"
  for chunk in 2M 4M 8M; do
    json=/dev/null; [ -n "$out" ] && json="$out/replay-$name-$chunk.json"
    step "replay-$name-$chunk" ./vmmkit replay --driver cuda --chunk-size "$chunk" --json "$json" "$trace"
  done
  step "replay-$name-verify" ./vmmkit replay --driver cuda --warmup 0 --verify "$trace"
done

# An intercepted cudaMalloc+cudaFree pair against the real runtime, natively and under vmmkit.
if command -v gcc >/dev/null && [ -f /usr/local/cuda/lib64/libcudart.so ]; then
  gcc -O2 -o /tmp/vmmkit_bench_pair src/test/c/bench_pair.c -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64
  for size in 4096 2097152; do
    step "pair-$size-native" /tmp/vmmkit_bench_pair "$size" 4000
    step "pair-$size-vmmkit" ./vmmkit run --driver cuda -- /tmp/vmmkit_bench_pair "$size" 4000
  done
else
  skip pair "no gcc or libcudart"
fi

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
if [ -n "$out" ]; then printf '%s\n' "${summary[@]}" > "$out/summary.txt"; fi
exit "$failed"
