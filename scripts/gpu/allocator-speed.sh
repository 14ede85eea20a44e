#!/usr/bin/env bash
# Allocator speed on the GPU: vmmkit against the CUDA runtime's cudaMallocAsync and PyTorch's caching
# allocator. Run from the repository root on a machine with an NVIDIA GPU, CUDA 13 and python3 with
# PyTorch, with runtime/ (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/allocator-speed.sh [TRACE...]
# TRACE defaults to every trace in .device/traces/ (BERT first), else the repository's traces/*.csv.gz.
# Steps (logs and JSON in $OUT/allocator-speed/ when OUT is set), about 1-2 minutes in all:
#   1. aot        trains runtime/vmmkit.aot for this machine's paths when missing (first-call time)
#   2. replay     each trace with --backend vmm --driver cuda and --backend cuda-malloc-async, same run:
#                 fragmentation ratio, wall us/op, driver calls and handles, modelled driver us/op; and
#                 vmmkit again with the first replay's peak as --peak-hint (what a second run under
#                 `vmmkit run` gets from its peak profile); with SLACKS="1.1 1.3", vmmkit again at each
#                 VMM_RESERVE_SLACK (memory traded for time)
#   3. pair       bench_pair.c: one cudaMalloc+cudaFree pair of 4 KiB natively and under `vmmkit run`,
#                 and the first call (JVM start)
#   4. torch      torch.empty+del pair: PyTorch's caching allocator vs vmmkit as pluggable allocator
# Prints a table of numbers; exits non-zero if a step failed. Knobs: PYTHON (python3), VMM_CUDART
# (path of libcudart when not found), DRIVER (cuda; host replays on the emulation, skipping 2b-4,
# to test this script without a GPU), SLACKS (budget slacks to replay vmmkit at, after step 2b).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" allocator-speed
driver="${DRIVER:-cuda}"
failed=0
summary=()
echo "allocator-speed: logs in $out"

traces_or_default allocator-speed "$@"

# Runs one step under a time limit, keeping its output in $out/<name>.log.
step() {
  local name="$1" limit="$2"; shift 2
  echo; echo "=== $name: $*"
  timeout "$limit" "$@" > >(tee "$out/$name.log") 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { failed=1; echo "=== $name FAILED (exit $rc)"; }
  return $rc
}

us() { # us FILE: wall microseconds per operation from a replay's JSON
  "$py" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["wall_ns_per_op"]/1000, 2))' "$1" 2>/dev/null || echo "?"
}

json() { # json FILE KEY.PATH: one figure from a JSON file
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d if not isinstance(d,float) else round(d,3))' "$1" "$2" 2>/dev/null || echo "?"
}

# libcudart for the cuda-malloc-async backend: the loader's, CUDA's, or PyTorch's wheel's.
if [ -z "${VMM_CUDART:-}" ]; then
  for c in $(ldconfig -p 2>/dev/null | awk '/libcudart\.so/ {print $NF}') /usr/local/cuda/lib64/libcudart.so* \
           $("$py" -c 'import glob,site; [print(p) for s in site.getsitepackages() for p in glob.glob(s+"/nvidia/cu*/lib/libcudart.so*")]' 2>/dev/null); do
    [ -f "$c" ] && { export VMM_CUDART="$c"; break; }
  done
fi
echo "libcudart: ${VMM_CUDART:-not found}"

# 1. AOT cache for runtime/ at this checkout's path.
ensure_aot_cache allocator-speed

# 2. Replays, vmmkit then cudaMallocAsync, in the same run, trace by trace.
slacks=(${SLACKS:-})
header="trace | vmmkit ratio | vmmkit us/op | modelled driver us/op | setAccess handles | with profile: ratio | us/op"
for slack in "${slacks[@]}"; do header="$header | slack $slack: ratio | us/op | setAccess handles"; done
table=("$header | cudaMallocAsync ratio | cudaMallocAsync us/op")
for trace in "${traces[@]}"; do
  name="$(basename "$trace" .csv.gz)"
  step "replay-vmm-$name" 120 ./vmmkit replay "$trace" --driver "$driver" --backend vmm --json "$out/replay-vmm-$name.json"
  row="$name | $(json "$out/replay-vmm-$name.json" fragmentation_ratio) | $(us "$out/replay-vmm-$name.json") | $(json "$out/replay-vmm-$name.json" modelled_driver_us_per_op) | $(json "$out/replay-vmm-$name.json" driver_handles.set_access)"
  # A program's second run under `vmmkit run` starts with its first run's peak (the peak profile).
  peak="$(json "$out/replay-vmm-$name.json" peak_live_bytes)"
  step "replay-profile-$name" 120 ./vmmkit replay "$trace" --driver "$driver" --backend vmm --peak-hint "$peak" --json "$out/replay-profile-$name.json"
  row="$row | $(json "$out/replay-profile-$name.json" fragmentation_ratio) | $(us "$out/replay-profile-$name.json")"
  for slack in "${slacks[@]}"; do
    step "replay-slack-$slack-$name" 120 env VMM_RESERVE_SLACK="$slack" ./vmmkit replay "$trace" --driver "$driver" --backend vmm --json "$out/replay-slack-$slack-$name.json"
    row="$row | $(json "$out/replay-slack-$slack-$name.json" fragmentation_ratio) | $(us "$out/replay-slack-$slack-$name.json") | $(json "$out/replay-slack-$slack-$name.json" driver_handles.set_access)"
  done
  if [ "$driver" = cuda ]; then
    step "replay-async-$name" 120 ./vmmkit replay "$trace" --backend cuda-malloc-async --json "$out/replay-async-$name.json"
    row="$row | $(json "$out/replay-async-$name.json" fragmentation_ratio) | $(us "$out/replay-async-$name.json")"
  fi
  table+=("$row")
done
summary+=("replays [./vmmkit replay TRACE --driver $driver --backend vmm; ./vmmkit replay TRACE --backend cuda-malloc-async]:")
summary+=("${table[@]}")
if [ "$driver" = cuda ]; then
  # 3. Pair cost, native and under vmmkit run.
  cudart_dir="$(dirname "${VMM_CUDART:-/usr/local/cuda/lib64/libcudart.so}")"
  if gcc -O2 -o "$out/bench_pair" src/test/c/bench_pair.c -L"$cudart_dir" -l:"$(basename "${VMM_CUDART:-libcudart.so}")" -Wl,-rpath,"$cudart_dir" 2> "$out/bench_pair.build.log"; then
    # Native pairs cost tens of microseconds each (cudaFree synchronises): fewer samples, as cold-path.sh.
    step pair-native 60 env BENCH_PAIR_WARMUP=200 "$out/bench_pair" 4096 2000
    step pair-vmmkit 60 ./vmmkit run -- "$out/bench_pair" 4096 100000
    summary+=("pair native:  $(grep "^{" "$out/pair-native.log" | tail -1)")
    summary+=("pair vmmkit run: $(grep "^{" "$out/pair-vmmkit.log" | tail -1)")
  else
    failed=1; summary+=("pair: bench_pair.c did not build (see $out/bench_pair.build.log)")
  fi

  # 4. PyTorch: caching allocator vs vmmkit as pluggable allocator.
  shim="$root/target/native/libvmmkit_preload.so"
  export VMMKIT_JAR="$root/target/vmmkit.jar" VMMKIT_JAVA_HOME="$root/runtime"
  [ -f runtime/vmmkit.aot ] && export VMMKIT_AOT_CACHE="$root/runtime/vmmkit.aot"
  step torch-caching 90 "$py" scripts/gpu/torch_pair.py caching "$shim"
  step torch-vmmkit 90 "$py" scripts/gpu/torch_pair.py vmmkit "$shim"
  summary+=("torch caching allocator: $(grep "^{" "$out/torch-caching.log" | tail -1)")
  summary+=("torch vmmkit pluggable:  $(grep "^{" "$out/torch-vmmkit.log" | tail -1)")
fi

echo; echo "=== allocator-speed summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $failed
