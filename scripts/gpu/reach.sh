#!/usr/bin/env bash
# Reach: programs that allocate through the driver API, natively and under `vmmkit run --driver
# cuda --stats`, each pair in the same run:
#   jax-cuda-async      reach_jax.py (an MLP trained with optax), XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
#                       and XLA_PYTHON_CLIENT_PREALLOCATE=false (each buffer from the device's default pool)
#   jax-platform        the same with XLA_PYTHON_CLIENT_ALLOCATOR=platform (cuMemAlloc_v2 per buffer in
#                       JAX before 0.11, cuMemCreate per buffer since: not served)
#   jax-bfc             the same with JAX's default BFC allocator, preallocation off
#   jax-bfc-prealloc    the same with preallocation on (JAX's default)
#   jax-default         the same with no XLA_PYTHON_CLIENT_* setting: natively JAX's default (BFC,
#                       preallocated); under `vmmkit run` the settings vmmkit gives JAX (cuda_async)
#   cupy-pool           scripts/gpu-acceptance/cupy_loop.py --pool (CuPy's memory pool)
#   cupy-nopool         cupy_loop.py (cupy.cuda.set_allocator(None): every array one cudaMalloc)
#   numba               reach_numba.py (numba-cuda device arrays: cuMemAlloc/cuMemFree)
# For each: results identical to native (hashes of the outputs; a workload that fails natively is
# reported as not run, since the machine judges it, not vmmkit), vmmkit's allocs, the device's peak
# memory in use (nvidia-smi, sampled every 100 ms) beside native, the step-time ratio, and whether
# vmmkit printed its line about memory it did not serve. Then the pair cost (bench_pair.c, 4 KiB):
# cudaMalloc+cudaFree and cuMemAlloc_v2+cuMemFree_v2, native and under vmmkit run.
#
# From the repository root on the GPU machine (runtime/ and target/ built; no network needed):
#   bash scripts/gpu/reach.sh
# Logs under $OUT/reach. Prints one table row per workload and one line per pair; about 4 minutes.
# REACH_ROWS="jax-cuda-async jax-platform ..." runs those rows only (and no pairs); all by default.
# Exits non-zero when a run failed or a result differed from native.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" reach
here="$root/scripts/gpu"
vmmkit="${VMMKIT:-./vmmkit}"
export VMM_PROFILE=off PYTHONUNBUFFERED=1
# No algorithm chosen by timing: native and vmmkit runs compute the same bits.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_deterministic_ops=true --xla_gpu_autotune_level=0"
deadline=$(( $(date +%s) + ${REACH_BUDGET_S:-420} ))
failed=0
rows=("workload | identical to native | vmmkit allocs | passthrough | peak MiB native | peak MiB vmmkit | step ratio vmmkit/native | not-served line")
pairs=()

field() { "$py" -c 'import json,sys
try:
    v=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
    for k in sys.argv[2].split("."): v=v[k]
    print(v)
except Exception: print("-")' "$1" "$2"; }

# measure NAME CMD...: runs CMD (output in $out/NAME.log) while sampling the device's memory in use;
# sets peak_mib. Returns CMD's status.
measure() {
  local name="$1"; shift
  local left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 20 ]; then echo "reach: $name NOT RUN (time budget spent)"; peak_mib="-"; return 124; fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 > "$out/$name.mem" 2>/dev/null &
  local sampler=$!
  timeout -k 5 "$(( left < 150 ? left : 150 ))" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  peak_mib="$(sort -n "$out/$name.mem" 2>/dev/null | tail -1)"
  [ -n "$peak_mib" ] || peak_mib="-"
  [ "$rc" = 0 ] || { echo "reach: $name FAILED (exit $rc, see $out/$name.log)"; tail -5 "$out/$name.log"; }
  return $rc
}

# wanted NAME: true when REACH_ROWS is unset or names NAME.
wanted() { [ -z "${REACH_ROWS:-}" ] || [[ " $REACH_ROWS " == *" $1 "* ]]; }

# compare NAME HASH_KEY TIME_KEY [VAR=VALUE...] -- CMD...: native, then vmmkit run (same settings); one table row.
compare() {
  local name="$1" hash="$2" time="$3"; shift 3
  wanted "$name" || return 0
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if ! measure "$name-native" env "${envs[@]}" "$@"; then
    # A check that fails natively is the machine's, not vmmkit's: no vmmkit run, and the row says why.
    rows+=("$name | not run: fails natively ($(grep -h -v '^\s*$' "$out/$name-native.log" | tail -1 | cut -c1-120))")
    return 0
  fi
  local native_peak="$peak_mib"
  measure "$name-vmmkit" env "${envs[@]}" $vmmkit run --driver cuda --stats "$out/$name.stats.json" -- "$@" || failed=1
  local vmm_peak="$peak_mib"
  local a b same ratio line
  a="$(field "$out/$name-native.log" "$hash")"; b="$(field "$out/$name-vmmkit.log" "$hash")"
  if [ "$a" != "-" ] && [ "$a" = "$b" ]; then same="yes"; else same="NO ($a vs $b)"; failed=1; fi
  ratio="$("$py" -c 'import sys
try: print("%.3f" % (float(sys.argv[2]) / float(sys.argv[1])))
except Exception: print("-")' "$(field "$out/$name-native.log" "$time")" "$(field "$out/$name-vmmkit.log" "$time")")"
  line="$(grep -h "^vmmkit: .*\(did not come from vmmkit\|XLA_PYTHON_CLIENT_ALLOCATOR=\)" "$out/$name-vmmkit.log" | head -1)"
  rows+=("$name | $same | $(field "$out/$name.stats.json" allocs) | $(field "$out/$name.stats.json" passthrough_calls) | $native_peak | $vmm_peak | $ratio | ${line:-none}")
}

# 1. Frameworks.
if "$py" -c "import jax, optax; assert jax.default_backend() == 'gpu'" 2>/dev/null; then
  compare jax-cuda-async params_sha256 step_ms_median XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async \
    XLA_PYTHON_CLIENT_PREALLOCATE=false -- "$py" "$here/reach_jax.py"
  compare jax-platform params_sha256 step_ms_median XLA_PYTHON_CLIENT_ALLOCATOR=platform -- "$py" "$here/reach_jax.py"
  # BFC named explicitly: vmmkit run would otherwise give the program cuda_async (FrameworkSettings).
  compare jax-bfc params_sha256 step_ms_median XLA_PYTHON_CLIENT_ALLOCATOR=bfc XLA_PYTHON_CLIENT_PREALLOCATE=false \
    -- "$py" "$here/reach_jax.py"
  compare jax-bfc-prealloc params_sha256 step_ms_median XLA_PYTHON_CLIENT_ALLOCATOR=bfc XLA_PYTHON_CLIENT_PREALLOCATE=true \
    -- "$py" "$here/reach_jax.py"
  compare jax-default params_sha256 step_ms_median -- "$py" "$here/reach_jax.py"
else
  rows+=("jax | skipped: jax with a GPU backend, or optax, missing")
fi
if "$py" -c "import cupy" 2>/dev/null; then
  cupy=("$py" scripts/gpu-acceptance/cupy_loop.py --iterations 150 --repeats 2)
  compare cupy-pool sha256 loop_s_min -- "${cupy[@]}" --pool
  compare cupy-nopool sha256 loop_s_min -- "${cupy[@]}"
else
  rows+=("cupy | skipped: cupy missing")
fi
if "$py" -c "from numba import cuda; assert cuda.is_available()" 2>/dev/null; then
  compare numba sha256 iteration_ms_median NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0 -- "$py" "$here/reach_numba.py"
else
  rows+=("numba | skipped: numba-cuda missing")
fi

# 2. Pair cost: the runtime's and the driver's allocation pair, native and under vmmkit run.
cudart_dir="$(dirname "${VMM_CUDART:-/usr/local/cuda/lib64/libcudart.so}")"
if [ -n "${REACH_ROWS:-}" ]; then
  pairs+=("pairs: not run (REACH_ROWS)")
elif gcc -O2 -o "$out/bench_pair" src/test/c/bench_pair.c -L"$cudart_dir" -l:"$(basename "${VMM_CUDART:-libcudart.so}")" \
     -Wl,-rpath,"$cudart_dir" -ldl 2> "$out/bench_pair.build.log"; then
  for api in cuda driver; do
    measure "pair-$api-native" "$out/bench_pair" 4096 100000 "$api" || failed=1
    measure "pair-$api-vmmkit" $vmmkit run --driver cuda --stats "$out/pair-$api.stats.json" -- "$out/bench_pair" 4096 100000 "$api" || failed=1
    pairs+=("pair $api native: $(grep -h '^{' "$out/pair-$api-native.log" | tail -1)")
    pairs+=("pair $api vmmkit run: $(grep -h '^{' "$out/pair-$api-vmmkit.log" | tail -1) allocs $(field "$out/pair-$api.stats.json" allocs)")
  done
else
  failed=1; pairs+=("pair: bench_pair.c did not build (see $out/bench_pair.build.log)")
fi

echo; echo "=== reach (logs in $out; $(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null))"
printf '%s\n' "${rows[@]}" "${pairs[@]}" | tee "$out/reach-summary.txt"
exit $failed
