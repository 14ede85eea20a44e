#!/usr/bin/env bash
# The cold path on the GPU: what a program pays when it starts, native against `vmmkit run`. Run from
# the repository root on a machine with an NVIDIA GPU, CUDA 13 and gcc, with runtime/
# (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/cold-path.sh
# Builds src/test/c/bench_cold.c and bench_pair.c against libcudart, then (native first, each step in
# a fresh process under a time limit; logs in $OUT/cold-path/ when OUT is set):
#   1. first   the first cudaMalloc of each of SIZES_GIB (1 4 16) GiB, after a 4 KiB warm-up pair that
#              starts the runtime (and vmmkit's JVM): native, and under
#              `vmmkit run --driver cuda --profile off` (a first run: no peak profile), with the handles
#              vmmkit created (its stats file)
#   2. pair    cudaMalloc + cudaFree of the same size in a loop, median, at 2 MiB and 64 MiB (PAIR_SIZES,
#              bytes), native and vmmkit; cudaFree waits for a device synchronisation in both
#   3. grow    the first classic grow: cudaMalloc 512 MiB, then cudaMalloc 1 GiB + cudaMemcpy D2D +
#              cudaFree of the old one, timed whole
# Prints one line per figure ("cold-path | test | native | vmmkit | ratio | handles") and exits
# non-zero if a step failed. About 1-2 minutes. Figures are printed, not asserted. Knobs: SIZES_GIB,
# PAIR_SIZES, REPS (3: step 1 and 3 repeated, median printed), DRIVER (cuda; host runs everything on
# the emulation and the stand-in runtime in target/test-native, to test this script without a GPU;
# use small SIZES_GIB there, e.g. "0.25 0.5").
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" cold-path
driver="${DRIVER:-cuda}"
sizes_gib="${SIZES_GIB:-1 4 16}"
pair_sizes="${PAIR_SIZES:-2097152 67108864}"
reps="${REPS:-3}"
rows=()
echo "cold-path: logs in $out"
rm -f "$out/failed-steps"

if [ ! -f target/vmmkit.jar ]; then
  echo "cold-path: target/vmmkit.jar is missing; build it (./mvnw -DskipTests package) and carry target/" >&2
  exit 2
fi

# The test programs, against the real runtime (or the stand-in for DRIVER=host).
find_cudart cold-path "$driver"
for p in bench_cold bench_pair; do
  if ! gcc -O2 -Wall -o "$out/$p" "src/test/c/$p.c" "$cudart" -Wl,-rpath,"$cudart_dir" -ldl 2> "$out/$p.build.log"; then
    cat "$out/$p.build.log"; echo "cold-path: cannot build $p" >&2; exit 2
  fi
done

# run NAME native|vmmkit PROGRAM ARGS...: one process under a time limit; output in NAME.log, vmmkit's
# stats in NAME.json. Prints the program's JSON line.
run() {
  local name="$1" how="$2"; shift 2
  local cmd=("$@")
  [ "$how" = vmmkit ] && cmd=(./vmmkit run --driver "$driver" --profile off --stats "$out/$name.json" -- "$@")
  timeout 180 "${cmd[@]}" > "$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "$name" >> "$out/failed-steps"; echo "=== $name FAILED (exit $rc): ${cmd[*]}" >&2; tail -5 "$out/$name.log" >&2
  fi
  grep '^{' "$out/$name.log" | tail -1
}

field() { # field JSON-LINE KEY
  "$py" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2" 2>/dev/null || echo "?"
}

creates() { # creates STATS-FILE: handles vmmkit created on device 0
  "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["driver_calls"].get("create", 0))' "$1" 2>/dev/null || echo "?"
}

median() { # median VALUES...
  printf '%s\n' "$@" | grep -v '?' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "?"}'
}

ratio() { # ratio VMMKIT NATIVE
  "$py" -c 'import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 2))' "$1" "$2" 2>/dev/null || echo "?"
}

row() { rows+=("cold-path | $1 | $2 | $3 | $(ratio "$3" "$2") | $4"); }

# 1. First cudaMalloc of each size, native first.
for g in $sizes_gib; do
  bytes="$("$py" -c "print(int(float('$g') * (1 << 30)))")"
  nat=(); vmm=(); handles=()
  for r in $(seq "$reps"); do
    nat+=("$(field "$(run "first-${g}G-native-$r" native "$out/bench_cold" first "$bytes")" first_malloc_us)")
    vmm+=("$(field "$(run "first-${g}G-vmmkit-$r" vmmkit "$out/bench_cold" first "$bytes")" first_malloc_us)")
    handles+=("$(creates "$out/first-${g}G-vmmkit-$r.json")")
  done
  # The warm-up pair made one 4 KiB page's handle: the rest is the large request's.
  row "first cudaMalloc ${g} GiB (us, median of $reps)" "$(median "${nat[@]}")" "$(median "${vmm[@]}")" \
    "handles created ${handles[*]} (one is the warm-up's)"
done

# 2. cudaMalloc + cudaFree pair, median, native first.
for s in $pair_sizes; do
  nat="$(run "pair-$s-native" native env BENCH_PAIR_WARMUP=200 "$out/bench_pair" "$s" 2000)"
  vmm="$(run "pair-$s-vmmkit" vmmkit env BENCH_PAIR_WARMUP=20000 "$out/bench_pair" "$s" 20000)"
  nat_us="$("$py" -c 'import sys; print(round(float(sys.argv[1]) / 1000, 2))' "$(field "$nat" pair_median_ns)" 2>/dev/null || echo "?")"
  vmm_us="$("$py" -c 'import sys; print(round(float(sys.argv[1]) / 1000, 2))' "$(field "$vmm" pair_median_ns)" 2>/dev/null || echo "?")"
  row "cudaMalloc+cudaFree pair $((s >> 20)) MiB (us, median; p99 native $(field "$nat" pair_p99_ns) ns, vmmkit $(field "$vmm" pair_p99_ns) ns)" \
    "$nat_us" "$vmm_us" "handles created $(creates "$out/pair-$s-vmmkit.json")"
done

# 3. The first classic grow, 512 MiB -> 1 GiB, native first.
nat=(); vmm=(); handles=()
for r in $(seq "$reps"); do
  nat+=("$(field "$(run "grow-native-$r" native "$out/bench_cold" grow $((512 << 20)) $((1 << 30)))" grow_us)")
  vmm+=("$(field "$(run "grow-vmmkit-$r" vmmkit "$out/bench_cold" grow $((512 << 20)) $((1 << 30)))" grow_us)")
  handles+=("$(creates "$out/grow-vmmkit-$r.json")")
done
row "first grow 512 MiB -> 1 GiB, malloc+copy+free (us, median of $reps)" "$(median "${nat[@]}")" "$(median "${vmm[@]}")" \
  "handles created ${handles[*]}"

echo
echo "cold-path | test | native | vmmkit | vmmkit/native | vmmkit handles"
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
if [ -s "$out/failed-steps" ]; then echo "cold-path: failed steps: $(tr '\n' ' ' < "$out/failed-steps")"; exit 1; fi
