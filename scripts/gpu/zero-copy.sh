#!/usr/bin/env bash
# Zero-copy resizing on the GPU. Run from the repository root on a machine with an NVIDIA GPU,
# CUDA 13 and gcc, with runtime/ (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/zero-copy.sh
# Builds src/test/c/resize_test.c against libcudart, then (each step under a time limit; logs in
# $OUT/zero-copy/ when OUT is set, else in a fresh /tmp folder):
#   1. grow    a GROW_MIB (2048) buffer to twice its size, REPS times each way:
#              vmmkit_realloc under `vmmkit run` (default adaptive handle cap, VMM_HANDLE_CAP=2G and
#              2M: growing maps new handles, and each costs map+setAccess whatever its size),
#              against cudaMalloc + cudaMemcpy D2D + cudaFree and cudaMallocAsync + copy, both native
#   2. pattern the seed's pattern (cudaMalloc bigger, cudaMemcpy the whole old buffer, cudaFree old)
#              at SIZES (64 512 2048 MiB): native, under `vmmkit run`, and under `vmmkit run` with
#              VMM_ZERO_COPY=1 (default handle cap, and VMM_HANDLE_CAP=2G: the cost model remaps only
#              buffers held in few handles); zero_copy stats per run
#   3. checks  `resize_test pattern` with VMM_ZERO_COPY=1 and `resize_test realloc`, bit for bit
# Every timed program also checks its data bit for bit once (on the GPU, through a host copy).
# Prints a table (times in microseconds: median and best of REPS, the whole resize, synchronised) and
# the realloc-vs-copy speedup; exits non-zero if any step or check failed. Times are printed, not
# asserted. Knobs: GROW_MIB, SIZES, REPS (5), DRIVER (cuda; host runs everything on the emulation and
# the stand-in runtime in target/test-native, to test this script on a machine without a GPU).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" zero-copy
driver="${DRIVER:-cuda}"
grow_mib="${GROW_MIB:-2048}"
sizes="${SIZES:-64 512 2048}"
reps="${REPS:-5}"
failed=0
rows=()
echo "zero-copy: logs in $out"

if [ ! -f target/vmmkit.jar ]; then
  echo "zero-copy: target/vmmkit.jar is missing; build it (./mvnw -DskipTests package) and carry target/" >&2
  exit 2
fi

# The test program, against the real runtime (or the stand-in for DRIVER=host).
find_cudart zero-copy "$driver"
prog="$out/resize_test"
if ! gcc -O2 -Wall -o "$prog" src/test/c/resize_test.c "$cudart" -Wl,-rpath,"$cudart_dir" -ldl 2> "$out/build.log"; then
  cat "$out/build.log"; echo "zero-copy: cannot build resize_test" >&2; exit 2
fi

# Runs one program under a time limit; keeps its output in $out/NAME.log and its stats in NAME.json.
# Arguments: NAME, then "native" or "vmmkit [ENV=VALUE...]" then --, then the program's arguments.
run() {
  local name="$1" how="$2"; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local file="$out/$(printf '%s' "$name" | tr -c 'A-Za-z0-9.=-' '_')"
  local cmd
  if [ "$how" = native ]; then
    cmd=(env "${envs[@]}" "$prog" "$@")
  else
    cmd=(env "${envs[@]}" ./vmmkit run --driver "$driver" --stats "$file.json" -- "$prog" "$@")
  fi
  echo "=== $name: ${cmd[*]}"
  timeout 120 "${cmd[@]}" > "$file.log" 2>&1
  local rc=$?
  cat "$file.log"
  if [ "$rc" -ne 0 ]; then echo "=== $name: exit $rc"; failed=1; fi
  local figures
  local median best first
  read -r median best first < <(awk '/^bench /{print $4, $5, $6}' "$file.log" | tail -1)
  local zc="-"
  if [ -f "$file.json" ]; then
    zc="$(python3 -c 'import json,sys; z=json.load(open(sys.argv[1]))["zero_copy"]; print("%d remaps, %d fell back" % (z["remaps"], z["copies_fallen_back"]))' "$file.json" 2>/dev/null || echo "?")"
  fi
  rows+=("$(printf '%-44s %6s %11s %11s %11s   %s' "$name" "${MIB:-}" "${median:-}" "${best:-}" "${first:-}" "$zc")")
  [ "$rc" -eq 0 ]
}

echo; echo "##### 1. growing a $grow_mib MiB buffer to $((2 * grow_mib)) MiB"
MIB=$grow_mib
run "grow: cudaMalloc+cudaMemcpy+cudaFree" native -- bench copy "$grow_mib" "$reps"
run "grow: cudaMallocAsync+copy+cudaFreeAsync" native -- bench async "$grow_mib" "$reps"
run "grow: vmmkit_realloc" vmmkit -- bench realloc "$grow_mib" "$reps"
run "grow: vmmkit_realloc, VMM_HANDLE_CAP=2G" vmmkit VMM_HANDLE_CAP=2G -- bench realloc "$grow_mib" "$reps"
run "grow: vmmkit_realloc, VMM_HANDLE_CAP=2M" vmmkit VMM_HANDLE_CAP=2M -- bench realloc "$grow_mib" "$reps"

echo; echo "##### 2. the seed's pattern (malloc bigger, copy the whole old buffer, free old)"
for mib in $sizes; do
  MIB=$mib
  run "pattern $mib: native" native -- bench pattern "$mib" "$reps"
  run "pattern $mib: vmmkit" vmmkit -- bench pattern "$mib" "$reps"
  run "pattern $mib: vmmkit, VMM_ZERO_COPY=1" vmmkit VMM_ZERO_COPY=1 -- bench pattern "$mib" "$reps"
  run "pattern $mib: vmmkit, ZERO_COPY, HANDLE_CAP=2G" vmmkit VMM_ZERO_COPY=1 VMM_HANDLE_CAP=2G -- bench pattern "$mib" "$reps"
done

echo; echo "##### 3. bit-for-bit checks"
MIB=""
run "check: pattern 64 512 (+ async, default kind)" vmmkit VMM_ZERO_COPY=1 VMM_HANDLE_CAP=2G -- pattern 64 512
run "check: vmmkit_realloc semantics" vmmkit -- realloc

echo
echo "##### zero-copy results ($driver): microseconds per resize: median and best of $reps, and the first (no cached memory yet)"
printf '%-44s %6s %11s %11s %11s   %s\n' "case" "MiB" "median_us" "best_us" "first_us" "zero_copy"
printf '%s\n' "${rows[@]}" | tee "$out/table.txt"
copy_us="$(awk '/^bench copy /{print $6}' "$out/$(printf '%s' "grow: cudaMalloc+cudaMemcpy+cudaFree" | tr -c 'A-Za-z0-9.=-' '_').log" 2>/dev/null)"
for name in "grow: vmmkit_realloc" "grow: vmmkit_realloc, VMM_HANDLE_CAP=2G" "grow: vmmkit_realloc, VMM_HANDLE_CAP=2M"; do
  r="$(awk '/^bench realloc /{print $6}' "$out/$(printf '%s' "$name" | tr -c 'A-Za-z0-9.=-' '_').log" 2>/dev/null)"
  if [ -n "$copy_us" ] && [ -n "$r" ]; then
    python3 -c 'import sys; c,r=float(sys.argv[1]),float(sys.argv[2]); print("%s: first resize %.1fx the speed of cudaMalloc+copy+free (goal: 10x)" % (sys.argv[3], c / r if r > 0 else float("inf")))' "$copy_us" "$r" "$name" | tee -a "$out/table.txt"
  fi
done
if [ "$failed" -ne 0 ]; then echo "zero-copy: FAILED (see the logs above)"; exit 1; fi
echo "zero-copy: all steps passed"
