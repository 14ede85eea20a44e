#!/usr/bin/env bash
# The cold path on the GPU: what a program pays when it starts, native against `vmmkit run`, and
# where vmmkit's microseconds go. Run from the repository root on a machine with an NVIDIA GPU,
# CUDA 13 and gcc, carrying runtime/ (scripts/build-runtime.sh; its AOT cache runtime/vmmkit.aot is
# trained here when missing or made for another path) and target/:
#   bash scripts/gpu/cold-path.sh
# Builds src/test/c/bench_cold.c and bench_pair.c against libcudart, then (native first, each step in
# a fresh process under a time limit; logs in $OUT/cold-path/ when OUT is set):
#   1. first   the first cudaMalloc of each of SIZES_GIB (1 4 16) GiB, after a 4 KiB warm-up pair that
#              starts the runtime (and vmmkit's JVM): native; under
#              `vmmkit run --driver cuda --profile off` (a first run: no peak profile); and the same
#              with VMM_WARM_UP=0 (no start-up warm-up: what it saves). vmmkit runs at VMM_LOG=info,
#              which prints the breakdown of the first large allocation (Java before, between and
#              after each driver call, and each call's time); the median run's breakdown is printed;
#              and once more at the default log level, where nothing is timed inside the call
#   2. pair    cudaMalloc + cudaFree of the same size in a loop, median, at 4 KiB, 2 MiB and 64 MiB
#              (PAIR_SIZES, bytes), native and vmmkit, with the blocks vmmkit rotates over (handles
#              created) and the device synchronisations its fence made per pair; and the same pair
#              through the PyTorch allocator entry points on stream 0 (freed on a stream: no device
#              synchronisation, no fence thread), which tells the fence's share
#   beside     (src/test/c/bench_sync_beside.c, no vmmkit) cudaGetDevice alone and while another thread
#              synchronises the device in a loop, one synchronisation, and a cache line's transfer
#              between two cores: what the fence thread's work can cost the allocating thread
#   driver     (scripts/gpu/first_vmm.c, no vmmkit) a process's first cuMemAlloc against its first
#              cuMemCreate + reserve + map + setAccess, each timed, then a second one; and the same
#              after one 2 MiB VMM allocation made first, with the address 1 GiB-aligned, and with
#              exportable handles (as vmmkit makes them for CUDA IPC), and inside one 256 GiB
#              reservation (as vmmkit reserves per region), while 8 other threads spin, as two halves
#              created by two threads at once, and where a 2 MiB page was mapped and unmapped before;
#              then each is unmapped and released, timed;
#              and the same first allocation from Java (`vmmkit driver-bench --first`, after each of
#              JAVA_FIRST_BEFORE: nothing linked small settled synced manager; empty for none), the raw calls in a JVM
#   3. grow    the first classic grow: cudaMalloc 512 MiB, then cudaMalloc 1 GiB + cudaMemcpy D2D +
#              cudaFree of the old one, timed whole
#   4. bert    `vmmkit replay` of traces/bert_infer.csv.gz: cudaMallocAsync first, then vmmkit by
#              default and with the trace's peak as its hint (a second run's peak profile), wall us/op,
#              each with where vmmkit's driver time went by kind of call (VMM_LOG=info); once for
#              each of BERT_WARMUPS (the replays' --warmup runs before the measured one, "1" by
#              default; "1 5" also shows what the JIT's compilation left in the measured run)
# Prints one line per figure ("cold-path | test | native | vmmkit | ratio | notes") and exits
# non-zero if a step failed. About 2-3 minutes. Figures are printed, not asserted. Knobs: STEPS
# (default "first pair beside driver grow bert"; "pair beside" alone takes under a minute), SIZES_GIB,
# PAIR_SIZES, FENCE_POLLS (gaps in ns after each fence synchronisation to try on the pair, none by default),
# FIRST_IDLE_MS (idle spells in ms between step 1's warm-up and its timed cudaMalloc, each a row, native
# and vmmkit; none by default), FIRST_BUSY_MS (the same with the driver kept busy: a
# cudaDeviceSynchronize every 100 us; none by default), DRIVER_IDLE_MS (the same for first_vmm's modes),
# FIRST_COUNTERS=1 (step 1's native and default-log runs also print what the kernel counted around
# the timed call: the thread's minor faults and context switches, the machine's TLB shootdowns, the
# process's threads and how many ran just after; off by default), FIRST_VARIANTS (JVM options for the shim, e.g. -Dvmmkit.cuda.exportable=false, each measured on
# step 1 as a variant of its own; none by default; at VMM_LOG=VARIANT_LOG, info by default, set it
# empty for no breakdown timing), DRIVER_MODES (first_vmm's modes, all by default),
# DRIVER_UNDER_VMMKIT (first_vmm's modes run again under `vmmkit run`, with and without the start-up
# warm-up; none by default),
# REPS (3:
# steps 1 and 3 repeated, median printed), DRIVER (cuda; host runs everything on
# the emulation and the stand-in runtime in target/test-native, to test this script without a GPU;
# use small SIZES_GIB there, e.g. "0.25 0.5").
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" cold-path
driver="${DRIVER:-cuda}"
sizes_gib="${SIZES_GIB:-1 4 16}"
pair_sizes="${PAIR_SIZES:-4096 2097152 67108864}"
steps=" ${STEPS:-first pair beside driver grow bert} "
step() { [[ "$steps" == *" $1 "* ]]; }
reps="${REPS:-3}"
rows=()
breakdowns=()
echo "cold-path: logs in $out"
rm -f "$out/failed-steps"
ensure_aot_cache cold-path

if [ ! -f target/vmmkit.jar ]; then
  echo "cold-path: target/vmmkit.jar is missing; build it (./mvnw -DskipTests package) and carry target/" >&2
  exit 2
fi

# The test programs, against the real runtime (or the stand-in for DRIVER=host).
find_cudart cold-path "$driver"
for p in bench_cold bench_pair bench_sync_beside; do
  if ! gcc -O2 -Wall -o "$out/$p" "src/test/c/$p.c" "$cudart" -Wl,-rpath,"$cudart_dir" -ldl -lpthread 2> "$out/$p.build.log"; then
    cat "$out/$p.build.log"; echo "cold-path: cannot build $p" >&2; exit 2
  fi
done

# run NAME native|vmmkit|vmmkit-cold PROGRAM ARGS...: one process under a time limit; output in
# NAME.log, vmmkit's stats in NAME.json (vmmkit-cold: without the start-up warm-up). Prints the
# program's JSON line.
run() {
  local name="$1" how="$2"; shift 2
  local cmd=("$@")
  case "$how" in
    vmmkit-plain) cmd=(./vmmkit run --driver "$driver" --profile off --stats "$out/$name.json" -- "$@") ;;
    vmmkit) cmd=(env VMM_LOG=info ./vmmkit run --driver "$driver" --profile off --stats "$out/$name.json" -- "$@") ;;
    vmmkit-cold) cmd=(env VMM_LOG=info VMM_WARM_UP=0 ./vmmkit run --driver "$driver" --profile off --stats "$out/$name.json" -- "$@") ;;
    vmmkit-variant) cmd=(env VMM_LOG="${VARIANT_LOG-info}" VMMKIT_JVM_OPTS="$variant" ./vmmkit run --driver "$driver" --profile off --stats "$out/$name.json" -- "$@") ;;
  esac
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

creates() { # creates STATS-FILE [CALL]: vmmkit's calls of one kind (create) on device 0
  "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["driver_calls"].get(sys.argv[2], 0))' "$1" "${2:-create}" 2>/dev/null || echo "?"
}

breakdown() { # breakdown LOG: the first large allocation's breakdown vmmkit printed at exit
  grep -h 'first large allocation' "$1" 2>/dev/null | tail -1 | sed 's/^vmmkit: //'
}

median_run() { # median_run VALUE NAME-PREFIX: the run (1..REPS) whose figure is VALUE
  local r
  for r in $(seq "$reps"); do
    [ "$(field "$(grep '^{' "$out/$2-$r.log" 2>/dev/null | tail -1)" first_malloc_us)" = "$1" ] && { echo "$r"; return; }
  done
  echo 1
}

median() { # median VALUES...
  printf '%s\n' "$@" | grep -v '?' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "?"}'
}

ratio() { # ratio VMMKIT NATIVE
  "$py" -c 'import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 2))' "$1" "$2" 2>/dev/null || echo "?"
}

row() { rows+=("cold-path | $1 | $2 | $3 | $(ratio "$3" "$2") | $4"); }

# first_after_spell idle|busy MS GIB BYTES: a row of the first cudaMalloc after a spell of MS ms
# (bench_cold's BENCH_COLD_IDLE_MS or BENCH_COLD_BUSY_MS), native and vmmkit without breakdown.
first_after_spell() {
  local kind="$1" ms="$2" g="$3" bytes="$4" r snat=() svmm=() env_name
  env_name="BENCH_COLD_$(echo "$kind" | tr a-z A-Z)_MS"
  for r in $(seq "$reps"); do
    snat+=("$(field "$(run "first-${g}G-$kind$ms-native-$r" native env "$env_name=$ms" "$out/bench_cold" first "$bytes")" first_malloc_us)")
    svmm+=("$(field "$(run "first-${g}G-$kind$ms-plain-$r" vmmkit-plain env "$env_name=$ms" "$out/bench_cold" first "$bytes")" first_malloc_us)")
  done
  local what="$ms ms idle"
  [ "$kind" = busy ] && what="$ms ms busy (a synchronisation every 100 us)"
  row "first cudaMalloc ${g} GiB after $what, VMM_LOG unset (us, median of $reps)" "$(median "${snat[@]}")" "$(median "${svmm[@]}")" "runs native ${snat[*]}; vmmkit ${svmm[*]}"
}

counters() { # counters JSON-LINE: bench_cold's kernel counters (BENCH_COLD_COUNTERS), or nothing
  [ -n "${FIRST_COUNTERS:-}" ] || return 0
  echo "[faults $(field "$1" minor_faults), switches $(field "$1" voluntary_switches)+$(field "$1" involuntary_switches) involuntary, TLB shootdowns $(field "$1" tlb_shootdowns), threads $(field "$1" threads) ($(field "$1" threads_running_after) running after: $(field "$1" running_names))]"
}
counters_env=()
[ -n "${FIRST_COUNTERS:-}" ] && counters_env=(env BENCH_COLD_COUNTERS=1)

# 1. First cudaMalloc of each size, native first; vmmkit with and without its start-up warm-up.
step first && for g in $sizes_gib; do
  bytes="$("$py" -c "print(int(float('$g') * (1 << 30)))")"
  nat=(); vmm=(); cold=(); handles=(); plain=(); gaps=()
  for r in $(seq "$reps"); do
    line="$(run "first-${g}G-native-$r" native "${counters_env[@]}" "$out/bench_cold" first "$bytes")"
    nat+=("$(field "$line" first_malloc_us)")
    gaps+=("native free $(field "$line" warmup_free_us) sync $(field "$line" warmup_sync_us) $(counters "$line");")
    line="$(run "first-${g}G-plain-$r" vmmkit-plain "${counters_env[@]}" "$out/bench_cold" first "$bytes")"
    plain+=("$(field "$line" first_malloc_us)")
    gaps+=("vmmkit free $(field "$line" warmup_free_us) sync $(field "$line" warmup_sync_us) $(counters "$line");")
    vmm+=("$(field "$(run "first-${g}G-vmmkit-$r" vmmkit "$out/bench_cold" first "$bytes")" first_malloc_us)")
    cold+=("$(field "$(run "first-${g}G-nowarm-$r" vmmkit-cold "$out/bench_cold" first "$bytes")" first_malloc_us)")
    handles+=("$(creates "$out/first-${g}G-vmmkit-$r.json")")
  done
  # The warm-up pair made one 4 KiB page's handle: the rest is the large request's.
  m_nat="$(median "${nat[@]}")"; m_vmm="$(median "${vmm[@]}")"; m_cold="$(median "${cold[@]}")"
  row "first cudaMalloc ${g} GiB (us, median of $reps)" "$m_nat" "$m_vmm" \
    "handles created ${handles[*]} (one is the warm-up pair's); runs ${vmm[*]}"
  row "first cudaMalloc ${g} GiB, VMM_LOG unset: no breakdown timing (us, median of $reps)" "$m_nat" "$(median "${plain[@]}")" "runs ${plain[*]}; the warm-up's cudaFree and cudaDeviceSynchronize before it (us): ${gaps[*]}"
  row "first cudaMalloc ${g} GiB, VMM_WARM_UP=0 (us, median of $reps)" "$m_nat" "$m_cold" "runs ${cold[*]}"
  r="$(median_run "$m_vmm" "first-${g}G-vmmkit")"
  breakdowns+=("${g} GiB, warm-up on (run $r, program saw $m_vmm us): $(breakdown "$out/first-${g}G-vmmkit-$r.log")")
  r="$(median_run "$m_cold" "first-${g}G-nowarm")"
  breakdowns+=("${g} GiB, VMM_WARM_UP=0 (run $r, program saw $m_cold us): $(breakdown "$out/first-${g}G-nowarm-$r.log")")
  # A spell between the warm-up and the first large cudaMalloc, native and vmmkit alike: idle, or
  # busy (a synchronisation every 100 us while the process's start-up work settles).
  for idle in ${FIRST_IDLE_MS:-}; do first_after_spell idle "$idle" "$g" "$bytes"; done
  for busy in ${FIRST_BUSY_MS:-}; do first_after_spell busy "$busy" "$g" "$bytes"; done
  v=0
  for variant in ${FIRST_VARIANTS:-}; do   # JVM options of the shim's JVM, one per variant
    v=$((v + 1)); var=()
    for r in $(seq "$reps"); do
      var+=("$(field "$(run "first-${g}G-variant$v-$r" vmmkit-variant "$out/bench_cold" first "$bytes")" first_malloc_us)")
    done
    m_var="$(median "${var[@]}")"
    row "first cudaMalloc ${g} GiB, $variant (us, median of $reps)" "$m_nat" "$m_var" "runs ${var[*]}"
    r="$(median_run "$m_var" "first-${g}G-variant$v")"
    breakdowns+=("${g} GiB, $variant (run $r, program saw $m_var us): $(breakdown "$out/first-${g}G-variant$v-$r.log")")
  done
done

# 2. cudaMalloc + cudaFree pair, median, native first; then vmmkit's pair freed on stream 0.
us() { "$py" -c 'import sys; print(round(float(sys.argv[1]) / 1000, 2))' "$1" 2>/dev/null || echo "?"; }
label() { if [ "$1" -ge 1048576 ]; then echo "$(($1 >> 20)) MiB"; else echo "$(($1 >> 10)) KiB"; fi; }
step pair && for s in $pair_sizes; do
  nat="$(run "pair-$s-native" native env BENCH_PAIR_WARMUP=200 "$out/bench_pair" "$s" 2000)"
  vmm="$(run "pair-$s-vmmkit" vmmkit env BENCH_PAIR_WARMUP=20000 "$out/bench_pair" "$s" 20000)"
  nat_us="$(us "$(field "$nat" pair_median_ns)")"
  syncs="$(creates "$out/pair-$s-vmmkit.json" device_synchronize)"
  per_pair="$("$py" -c 'import sys; print(round(int(sys.argv[1]) / 60001, 3))' "$syncs" 2>/dev/null || echo "?")"
  row "cudaMalloc+cudaFree pair $(label "$s") (us, median; p99 native $(field "$nat" pair_p99_ns) ns, vmmkit $(field "$vmm" pair_p99_ns) ns)" \
    "$nat_us" "$(us "$(field "$vmm" pair_median_ns)")" "handles created $(creates "$out/pair-$s-vmmkit.json") (blocks rotated over, +1 warm-up page); device syncs $syncs ($per_pair per pair); batched $(field "$vmm" pair_batched_median_ns) ns, cpu $(field "$vmm" pair_cpu_ns) ns"
  # The fence thread's gap (DeviceWideFence.POLL_NANOS): how long after a synchronisation it starts
  # reading the lines the frees write again (each read the freeing core has to take back).
  for poll in ${FENCE_POLLS:-}; do
    pv="$(run "pair-$s-poll$poll" vmmkit env VMMKIT_JVM_OPTS="-Dvmmkit.fence.pollNanos=$poll" BENCH_PAIR_WARMUP=20000 "$out/bench_pair" "$s" 20000)"
    ps="$(creates "$out/pair-$s-poll$poll.json" device_synchronize)"
    row "the same pair, fence reading frees $poll ns after each synchronisation $(label "$s") (us, median; p99 $(field "$pv" pair_p99_ns) ns)" \
      "$nat_us" "$(us "$(field "$pv" pair_median_ns)")" "handles created $(creates "$out/pair-$s-poll$poll.json"); device syncs $ps; batched $(field "$pv" pair_batched_median_ns) ns"
  done
  str="$(run "pair-$s-stream0" vmmkit env BENCH_PAIR_WARMUP=20000 "$out/bench_pair" "$s" 20000 torch 0)"
  row "the same pair freed on stream 0 (pluggable allocator entry points; no fence) $(label "$s") (us, median; p99 $(field "$str" pair_p99_ns) ns)" \
    "$nat_us" "$(us "$(field "$str" pair_median_ns)")" "device syncs $(creates "$out/pair-$s-stream0.json" device_synchronize); native column: cudaMalloc+cudaFree"
done

# beside: what a device synchronisation loop on another thread costs this one (no vmmkit).
if step beside; then
  b="$(run beside native "$out/bench_sync_beside" 200000)"
  rows+=("cold-path | cudaGetDevice (ns, median) alone, and beside a thread synchronising the device in a loop | $(field "$b" get_device_ns) | $(field "$b" get_device_beside_ns) | $(ratio "$(field "$b" get_device_beside_ns)" "$(field "$b" get_device_ns)") | one cudaDeviceSynchronize $(field "$b" sync_ns) ns; one cache line between two cores $(field "$b" line_transfer_ns) ns")
fi

# 2b. The driver alone (scripts/gpu/first_vmm.c, no vmmkit): a process's first cuMemAlloc against
# its first cuMemCreate + reserve + map + setAccess of the same size, each call timed, the first and
# a second allocation, and the same after one small VMM allocation made first (what a start-up
# warm-up on the device could do). The lines are printed as they come, one per allocation.
if step driver && [ "$driver" = cuda ]; then
  if gcc -O2 -Wall -o "$out/first_vmm" scripts/gpu/first_vmm.c -ldl -lpthread 2> "$out/first_vmm.build.log"; then
    for g in $sizes_gib; do
      bytes="$("$py" -c "print(int(float('$g') * (1 << 30)))")"
      for r in $(seq "$reps"); do
        for mode in ${DRIVER_MODES:-native vmm vmm-warm vmm-kept vmm-sync vmm-sync-relaxed vmm-sync-thread vmm-aligned vmm-export vmm-big-va vmm-spin vmm-split vmm-pt-warm}; do
          timeout 60 "$out/first_vmm" "$mode" "$bytes" 2>&1 | sed "s/^/cold-path driver ${g}G run $r: /" | tee -a "$out/driver.txt"
          for idle in ${DRIVER_IDLE_MS:-}; do
            FIRST_VMM_IDLE_MS="$idle" timeout 60 "$out/first_vmm" "$mode" "$bytes" 2>&1 \
              | sed "s/^/cold-path driver ${g}G run $r idle $idle ms: /" | tee -a "$out/driver.txt"
          done
        done
        # The same C calls inside a process where vmmkit runs: its 4 KiB cuMemAlloc is vmmkit's (the
        # JVM, its threads and the device's regions come up inside it), the timed VMM calls go
        # straight to the driver. Beside vmm-kept (a 2 MiB allocation left mapped) natively, this
        # tells whether vmmkit's process slows the driver's calls or vmmkit's way of making them does.
        for mode in ${DRIVER_UNDER_VMMKIT:-}; do
          for warm in 1 0; do
            VMM_WARM_UP="$warm" timeout 120 ./vmmkit run --driver cuda --profile off -- "$out/first_vmm" "$mode" "$bytes" 2>&1 \
              | grep '^{' | sed "s/^/cold-path driver ${g}G run $r under vmmkit (VMM_WARM_UP=$warm): /" | tee -a "$out/driver.txt"
          done
        done
        # The same first allocation made from Java on the driver alone (no allocator, none of
        # vmmkit's threads), after each of driver-bench's --first-before steps.
        for before in ${JAVA_FIRST_BEFORE-nothing linked small settled synced manager}; do
          timeout 60 ./vmmkit driver-bench --driver cuda --first "$bytes" --first-before "$before" 2>&1 \
            | sed "s/^/cold-path driver ${g}G run $r: /" | tee -a "$out/driver.txt"
        done
      done
    done
  else
    cat "$out/first_vmm.build.log"; echo "driver" >> "$out/failed-steps"
  fi
fi

# 3. The first classic grow, 512 MiB -> 1 GiB, native first.
if step grow; then
  nat=(); vmm=(); handles=()
  for r in $(seq "$reps"); do
    nat+=("$(field "$(run "grow-native-$r" native "$out/bench_cold" grow $((512 << 20)) $((1 << 30)))" grow_us)")
    vmm+=("$(field "$(run "grow-vmmkit-$r" vmmkit "$out/bench_cold" grow $((512 << 20)) $((1 << 30)))" grow_us)")
    handles+=("$(creates "$out/grow-vmmkit-$r.json")")
  done
  row "first grow 512 MiB -> 1 GiB, malloc+copy+free (us, median of $reps)" "$(median "${nat[@]}")" "$(median "${vmm[@]}")" \
    "handles created ${handles[*]}"
fi

# 4. BERT replay on the driver: cudaMallocAsync first, then vmmkit by default and with a peak profile.
bert=traces/bert_infer.csv.gz
bert_us() { "$py" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["wall_ns_per_op"]/1000, 2))' "$1" 2>/dev/null || echo "?"; }
replay() { # replay NAME ARGS...: one replay under a time limit, its JSON in NAME.json
  local name="$1"; shift
  VMM_LOG=info timeout 180 ./vmmkit replay "$bert" --json "$out/$name.json" "$@" > "$out/$name.log" 2>&1 \
    || { echo "$name" >> "$out/failed-steps"; echo "=== $name FAILED" >&2; tail -5 "$out/$name.log" >&2; }
}
driver_time() { grep -h 'in the driver' "$out/$1.log" 2>/dev/null | tail -1 | sed 's/^vmmkit replay: //'; }
if step bert && [ -f "$bert" ]; then
  peak=0
  for warmups in ${BERT_WARMUPS:-1}; do
    sfx=""; [ "$warmups" = 1 ] || sfx="-w$warmups"
    async_us="?"
    if [ "$driver" = cuda ]; then
      export VMM_CUDART="${VMM_CUDART:-$cudart}" # the runtime the cudaMallocAsync backend opens
      replay "bert-async$sfx" --backend cuda-malloc-async --warmup "$warmups"
      async_us="$(bert_us "$out/bert-async$sfx.json")"
    fi
    replay "bert-vmmkit$sfx" --driver "$driver" --backend vmm --warmup "$warmups"
    [ "$peak" = 0 ] && peak="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_live_bytes"])' "$out/bert-vmmkit$sfx.json" 2>/dev/null || echo 0)"
    replay "bert-profile$sfx" --driver "$driver" --backend vmm --peak-hint "$peak" --warmup "$warmups"
    rows+=("cold-path | BERT replay, wall us/op (native column: cudaMallocAsync) | $async_us | $(bert_us "$out/bert-vmmkit$sfx.json") | $(ratio "$(bert_us "$out/bert-vmmkit$sfx.json")" "$async_us") | default, --warmup $warmups")
    rows+=("cold-path | BERT replay with its peak profile, wall us/op | $async_us | $(bert_us "$out/bert-profile$sfx.json") | $(ratio "$(bert_us "$out/bert-profile$sfx.json")" "$async_us") | --peak-hint $peak --warmup $warmups")
    breakdowns+=("BERT default, --warmup $warmups: $(driver_time "bert-vmmkit$sfx")")
    breakdowns+=("BERT with profile, --warmup $warmups: $(driver_time "bert-profile$sfx")")
  done
fi

echo
echo "cold-path | test | native | vmmkit | vmmkit/native | notes"
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
echo
echo "cold-path: where vmmkit's time went"
printf '  %s\n' "${breakdowns[@]}" | tee -a "$out/summary.txt"
if [ -s "$out/failed-steps" ]; then echo "cold-path: failed steps: $(tr '\n' ' ' < "$out/failed-steps")"; exit 1; fi
