#!/usr/bin/env bash
# Pause and resume of tagged GPU memory: vmmkit against torch_memory_saver (and vLLM's sleep mode),
# same machine, same run. Run from the repository root on a machine with an NVIDIA GPU (80 GB
# class), CUDA 13 with nvcc, python3 with PyTorch, and runtime/ (scripts/build-runtime.sh),
# target/, .device/torch_memory_saver (its public source) and .device/vllm (the three files of
# vLLM's source that scripts/gpu/vllm_anchor.py names, with a PROVENANCE of their commits) carried:
#   bash scripts/gpu/pause-resume.sh
# Steps (each under a time limit; logs in $OUT/pause-resume/ when OUT is set; results.txt there
# grows after every process, so a run cut short keeps what it measured):
#   0. the native anchor: pinning 8 GiB of host memory with cudaHostAlloc, and with mmap + huge
#      pages + cudaHostRegister (faulted in by 8 threads first, and not), and the copy bandwidth of
#      each buffer (one 4 GiB copy; 256 MiB pieces on one stream; on two streams)
#   1. builds torch_memory_saver from .device/torch_memory_saver (TMS_CUDA_MAJOR=13, pip without
#      network, into the log folder; nothing is installed system-wide)
#   2. per row, one process each: torch_memory_saver (torch hook mode), then vmmkit under
#      `vmmkit run` (PyTorch's caching allocator over vmmkit, tags from python/vmmkit) at VMM_LOG=info,
#      whose exit prints where the process's first pause and resume spent their time (Java around
#      each driver call), listed before the table
#   3. two variants of 8 GiB kept: vmmkit without pinning ahead (VMM_PIN_AHEAD=off: the first pause
#      pins its own memory) and with VMM_PINNED_HOST=alloc (cuMemHostAlloc, not the default); two rows with vmmkit as PyTorch's
#      pluggable allocator, and two (TAGS_ROWS) with vmmkit serving the tags' memory pools only, no `vmmkit run`
#   4. the scenario: weights (kept) + KV cache (discarded), a CUDA graph captured over them, pause,
#      another phase allocates most of the GPU, resume: graph replay and generation bit-identical
#      (under `vmmkit run`, then without it: vmmkit serving the tags' pools only, then vmmkit as
#      PyTorch's whole allocator); then (sleep-levels) scripts/gpu/sleep_levels.py (vLLM's sleep
#      levels) by vLLM's own CuMemAllocator (built from .device/vllm, scripts/gpu/vllm_anchor.py),
#      then by vmmkit both ways; then (pluggable-capture) scripts/gpu/pluggable_capture.py, natively first
#      (torch.cuda.graph, and a synchronisation in the pause's place), then with vmmkit as PyTorch's
#      whole allocator and serving the tags only: torch.cuda.graph replays, and one captured on
#      another thread refuses a pause beside it (CUDAGraph tells vmmkit); as the whole allocator, a
#      capture through the runtime, told to vmmkit, on one thread while another pauses; then
#      scripts/gpu/compiled_graphs.py (torch.compile's graph trees) natively with both PyTorch
#      backends and every way vmmkit serves PyTorch
# Rows (ROWS; default every size, contents and layout): SIZE_GIB:keep|discard:single|mixed;
# "mixed" is many tensors of mixed sizes (64 KiB to 1 GiB) making up the size. Each process also
# measures a plain pinned copy (cudaMemcpyAsync on pinned memory, 4 GiB, best of 3), the physical
# limit of the backup bandwidth. vmmkit pauses and resumes each row twice (cycle 1 and 2);
# torch_memory_saver once (it frees its copies at each resume, so a second cycle costs it the same),
# or TMS_CYCLES times (a training loop that pauses an engine every step: from about the third cycle
# on, each create waits for the driver to take back the memory released before).
# vmmkit pins host memory for a kept tag in the background while it is allocated; its first pause is
# timed once that memory is ready (pin_wait_ms, ready_ms in the row lines say how long that took).
# Prints one line per row, cycle and implementation, then a table to paste. About 7 minutes.
# Knobs: PYTHON, ROWS, RUN_LIMIT (seconds per process, 150), TMS_CUDA_MAJOR (13), PAUSE_EXTRAS (which
# of steps 3 and 4: words of "no-pin-ahead alloc pluggable tags scenario sleep-levels pluggable-capture", all by default; 0 none; also
# "plain-handles": the rows of PLAIN_ROWS, by default 8 GiB discarded and kept, with no handle of the
# process exportable for CUDA IPC (a tag's handles are plain anyway); "create-after-release": scripts/gpu/create_after_release.c, the driver
# alone, for each of RELEASE_SIZES_GIB (8 40), RELEASE_EXPORTABLE (1 0: exportable handles and
# plain; 2: plain and GPUDirect RDMA capable), RELEASE_MODES (all of its modes) and RELEASE_PARTS (4; handles of the split modes); and
# "copy-after-release": scripts/gpu/copy_after_release.c, the driver alone: pinned copies into memory
# created right after a release, for each of COPY_SIZES_GIB (8), COPY_SHAPES (CHUNK_MIB:STREAMS, "256:2
# 256:1 1024:2") and COPY_MODES (all of its modes); "held-memory": the rows of HELD_ROWS (8 and 40 GiB
# discarded) by torch_memory_saver with HOLD_GIB (4) more device memory in use outside its tags, and by
# vmmkit without the pinned copy, so that no 4 GiB block stays cached in its process: is a resume
# slower while more of the device is in use?); "no-breakdown": vmmkit's rows of ROWS again with VMM_LOG
# unset, so that nothing times its first pause and resume inside Java (IMPL_NAME vmmkit-no-breakdown)),
# PAUSE_GAP_MS (time between each pause and its resume, as another phase would take; 0 by default),
# TMS_CALL_TIMES (1: torch_memory_saver's own driver calls of 64 MiB or more timed one by one,
# scripts/gpu/vmm_call_times.c preloaded in its processes, printed beside vmmkit's breakdowns),
# ANCHOR_AFTER (1, the default: torch_memory_saver runs again after vmmkit in each row, as
# tms-NAME-after, so that each implementation follows the other's process once; 0: before only),
# PROCESS_GAP_S (seconds of quiet before each process, 3 by default). Both are there because the
# driver's work on memory a process gave back at its exit slows the next process's releases: with
# no gap, a 40 GiB discarded pause read 26 ms in the process after the anchor's 40 GiB one and 16-17
# ms with 5 s of quiet, beside the anchor's 16-19 ms either way.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" pause-resume
limit="${RUN_LIMIT:-150}"
rows_default="8:discard:single 8:keep:single 40:discard:single 40:keep:single 8:discard:mixed 8:keep:mixed 40:discard:mixed 40:keep:mixed"
read -r -a rows <<< "${ROWS:-$rows_default}"
failed=0
results="$out/results.txt"
: > "$results"
echo "pause-resume: logs in $out"
echo "pause-resume: transparent huge pages $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown), defrag $(cat /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null || echo unknown)"

use_vmmkit_build pause-resume

# Runs one process: NAME, then the command's words; its output goes to $out/NAME.log, its result
# lines to results.txt at once.
run() {
  local name="$1"; shift
  [ "${PROCESS_GAP_S:-3}" != 0 ] && sleep "${PROCESS_GAP_S:-3}"
  echo; echo "=== $name: $*"
  timeout "$limit" "$@" > >(tee "$out/$name.log") 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && [[ "$name" == tms-* ]] && grep -q '^row ' "$out/$name.log"; then
    # torch_memory_saver's newer sources crash at the process's exit (tms_torch_free, "only support
    # interesting region") after printing every row: the anchor's figures stand, and it is said.
    echo "=== $name: the anchor exited $rc after its rows (its figures are kept)"
  elif [ $rc -ne 0 ]; then failed=1; echo "=== $name FAILED (exit $rc)"; fi
  grep -E '^(row|pinned|pinning|copy|unpin|scenario|capture|compiled|sleep) ' "$out/$name.log" >> "$results"
  return 0
}

# 0. The native anchor: pinning and copying host memory, no allocator in between.
run pinning "$py" scripts/gpu/pinning.py

# 1. torch_memory_saver from source.
build_tms pause-resume
[ $have_tms = 1 ] || failed=1

# TMS_CALL_TIMES=1: the anchor's own driver calls, each timed (scripts/gpu/vmm_call_times.c, preloaded).
tms_env=(PYTHONPATH="$tms_site")
if [ "${TMS_CALL_TIMES:-0}" = 1 ]; then
  if gcc -O2 -Wall -shared -fPIC -o "$out/vmm_call_times.so" scripts/gpu/vmm_call_times.c -ldl 2> "$out/vmm_call_times.build.log"; then
    tms_env+=(LD_PRELOAD="$out/vmm_call_times.so")
  else
    failed=1; cat "$out/vmm_call_times.build.log"
  fi
fi

bench=("$py" scripts/gpu/pause_resume.py)
# 2. One process per row and implementation, the anchor first: no row inherits another's cached memory.
for row in "${rows[@]}"; do
  name="${row//:/-}"
  [ $have_tms = 1 ] && run "tms-$name" env "${tms_env[@]}" PAUSE_CYCLES="${TMS_CYCLES:-1}" "${bench[@]}" bench tms "$row"
  run "vmmkit-$name" env PYTHONPATH="$root/python" VMM_LOG=info ./vmmkit run --driver cuda --stats "$out/vmmkit-$name.stats.json" -- \
    "${bench[@]}" bench vmmkit "$row"
  [ $have_tms = 1 ] && [ "${ANCHOR_AFTER:-1}" = 1 ] && run "tms-$name-after" env "${tms_env[@]}" PAUSE_CYCLES="${TMS_CYCLES:-1}" \
    IMPL_NAME=tms-after "${bench[@]}" bench tms "$row"
done
# 3. Variants of 8 GiB kept, and vmmkit as PyTorch's pluggable allocator.
all_extras="no-pin-ahead alloc pluggable tags scenario sleep-levels pluggable-capture"
extras="${PAUSE_EXTRAS:-$all_extras}"
[ "$extras" = 1 ] && extras="$all_extras"
extra() { [[ " $extras " == *" $1 "* ]]; }
extra no-pin-ahead && run vmmkit-no-pin-ahead env PYTHONPATH="$root/python" VMM_PIN_AHEAD=off PIN_WAIT=0 IMPL_NAME=vmmkit-no-pin-ahead \
  ./vmmkit run --driver cuda -- "${bench[@]}" bench vmmkit 8:keep:single
extra plain-handles && run vmmkit-plain-handles env PYTHONPATH="$root/python" VMM_LOG=info VMMKIT_JVM_OPTS=-Dvmmkit.cuda.exportable=false \
  IMPL_NAME=vmmkit-plain-handles ./vmmkit run --driver cuda -- "${bench[@]}" bench vmmkit ${PLAIN_ROWS:-8:discard:single 8:keep:single}
extra alloc && run vmmkit-alloc env PYTHONPATH="$root/python" VMM_PINNED_HOST=alloc IMPL_NAME=vmmkit-alloc \
  ./vmmkit run --driver cuda -- "${bench[@]}" bench vmmkit 8:keep:single 8:discard:single
extra pluggable && run vmmkit-pluggable env PYTHONPATH="$root/python" VMM_STATS_FILE="$out/pluggable.stats.json" \
  "${bench[@]}" bench vmmkit-pluggable 8:keep:single 8:discard:mixed
# No `vmmkit run`: vmmkit serves the tags' memory pools only, as torch_memory_saver's torch hook mode does.
if extra tags; then
  for row in ${TAGS_ROWS:-8:keep:single 8:discard:mixed}; do
    name="${row//:/-}"
    run "vmmkit-tags-$name" env PYTHONPATH="$root/python" VMM_STATS_FILE="$out/vmmkit-tags-$name.stats.json" \
      "${bench[@]}" bench vmmkit-tags "$row"
  done
fi
if extra no-breakdown; then
  for row in "${rows[@]}"; do
    run "vmmkit-${row//:/-}-no-breakdown" env PYTHONPATH="$root/python" IMPL_NAME=vmmkit-no-breakdown \
      ./vmmkit run --driver cuda -- "${bench[@]}" bench vmmkit "$row"
  done
fi
if extra held-memory; then
  for row in ${HELD_ROWS:-8:discard:single 40:discard:single}; do
    name="${row//:/-}"
    [ $have_tms = 1 ] && run "tms-$name-held" env "${tms_env[@]}" PAUSE_CYCLES=1 HOLD_GIB="${HOLD_GIB:-4}" \
      IMPL_NAME="tms-held${HOLD_GIB:-4}" "${bench[@]}" bench tms "$row"
    run "vmmkit-$name-uncached" env PYTHONPATH="$root/python" VMM_LOG=info PINNED_BANDWIDTH=0 IMPL_NAME=vmmkit-uncached \
      ./vmmkit run --driver cuda -- "${bench[@]}" bench vmmkit "$row"
  done
fi
# The driver alone after a release (scripts/gpu/create_after_release.c): what a resume's first create pays.
if extra create-after-release; then
  echo; echo "=== create-after-release (the driver alone, no vmmkit)"
  if gcc -O2 -Wall -o "$out/create_after_release" scripts/gpu/create_after_release.c -ldl -lpthread 2> "$out/create_after_release.build.log"; then
    for gib in ${RELEASE_SIZES_GIB:-8 40}; do
      for exportable in ${RELEASE_EXPORTABLE:-1 0}; do
        for mode in ${RELEASE_MODES:-fresh again untouched small-first gap small-gap split-gap threads-gap release-threads}; do
          for parts in ${RELEASE_PARTS:-4}; do
            timeout 60 "$out/create_after_release" "$mode" $((gib << 30)) "$exportable" "$parts" 2>&1 | tee -a "$out/create-after-release.txt"
          done
        done
      done
    done
  else
    failed=1; cat "$out/create_after_release.build.log"
  fi
fi
if extra copy-after-release; then
  echo; echo "=== copy-after-release (the driver alone, no vmmkit)"
  if gcc -O2 -Wall -o "$out/copy_after_release" scripts/gpu/copy_after_release.c -ldl 2> "$out/copy_after_release.build.log"; then
    for gib in ${COPY_SIZES_GIB:-8}; do
      for shape in ${COPY_SHAPES:-256:2 256:1 1024:2}; do
        for mode in ${COPY_MODES:-reference other resume resume-gap resume-sync resume-wait}; do
          timeout 120 "$out/copy_after_release" "$mode" $((gib << 30)) "${shape%%:*}" "${shape##*:}" 2>&1 | tee -a "$out/copy-after-release.txt"
        done
      done
    done
  else
    failed=1; cat "$out/copy_after_release.build.log"
  fi
fi
# 4. The scenario.
extra scenario && run scenario env PYTHONPATH="$root/python" ./vmmkit run --driver cuda -- "${bench[@]}" scenario
# The same without `vmmkit run`: vmmkit serves the tags' pools, PyTorch the rest and the graph's memory.
extra scenario && run scenario-tags env PYTHONPATH="$root/python" "${bench[@]}" scenario
# vmmkit as PyTorch's whole allocator: the graph's memory is CUDA's (its own nodes).
extra scenario && run scenario-pluggable env PYTHONPATH="$root/python" "${bench[@]}" scenario pluggable
# vLLM's two sleep levels (a kept tag discarded at one pause with keep_contents=False, kept at the next):
# first by vLLM's own sleep-mode allocator, built from .device/vllm (its PROVENANCE names the commits).
if extra sleep-levels; then
  if [ -f .device/vllm/csrc/cumem_allocator.cpp ]; then
    if "$py" scripts/gpu/vllm_anchor.py .device/vllm "$out/vllm-anchor" > "$out/vllm-build.log" 2>&1; then
      run sleep-levels-vllm "$py" scripts/gpu/sleep_levels.py --vllm "$out/vllm-anchor" 4 8
    else
      failed=1; echo "pause-resume: vLLM's cumem allocator did not build:"; tail -30 "$out/vllm-build.log"
    fi
  else
    echo "pause-resume: no .device/vllm (carry vLLM's cumem allocator source): the sleep levels' anchor is missing"; failed=1
  fi
fi
extra sleep-levels && run sleep-levels env PYTHONPATH="$root/python" "$py" scripts/gpu/sleep_levels.py 4 8
extra sleep-levels && run sleep-levels-run env PYTHONPATH="$root/python" ./vmmkit run --driver cuda -- "$py" scripts/gpu/sleep_levels.py 4 8
# CUDA graphs beside a pause, where PyTorch loads the shim; natively first, a device synchronisation
# in the pause's place (what the pause would do without being told).
if extra pluggable-capture; then
  run pluggable-capture-native "$py" scripts/gpu/pluggable_capture.py native
  run pluggable-capture env PYTHONPATH="$root/python" "$py" scripts/gpu/pluggable_capture.py vmmkit
  run pluggable-capture-tags env PYTHONPATH="$root/python" "$py" scripts/gpu/pluggable_capture.py tags
  # vmmkit.cuda_graph: a graph's memory in a tag, paused with it (the whole allocator refuses it).
  run tagged-graph-tags env PYTHONPATH="$root/python" "$py" scripts/gpu/pluggable_capture.py tagged-graph
  run tagged-graph-run env PYTHONPATH="$root/python" ./vmmkit run --driver cuda -- "$py" scripts/gpu/pluggable_capture.py tagged-graph
  run tagged-graph-whole env PYTHONPATH="$root/python" TAGGED_GRAPH_WHOLE=1 "$py" scripts/gpu/pluggable_capture.py tagged-graph
  # torch.compile's graph trees: natively with both PyTorch backends, then every way vmmkit serves
  # PyTorch (the whole allocator fails as PyTorch's own cudaMallocAsync backend does).
  run compiled-native "$py" scripts/gpu/compiled_graphs.py native
  run compiled-native-async env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$py" scripts/gpu/compiled_graphs.py native
  run compiled-vmmkit env PYTHONPATH="$root/python" "$py" scripts/gpu/compiled_graphs.py vmmkit
  run compiled-tags env PYTHONPATH="$root/python" "$py" scripts/gpu/compiled_graphs.py tags
  run compiled-run env PYTHONPATH="$root/python" ./vmmkit run --driver cuda -- "$py" scripts/gpu/compiled_graphs.py tags
fi

echo
echo "=== pause-resume: where each vmmkit row process's first pause and resume went (VMM_LOG=info)"
for f in "$out"/vmmkit-*.log; do
  grep -h 'first pause\|first resume\|first large allocation' "$f" | sed "s|^vmmkit: |$(basename "$f" .log): |"
done

if [ "${TMS_CALL_TIMES:-0}" = 1 ]; then
  echo
  echo "=== pause-resume: the anchor's driver calls of 64 MiB or more, in order (us)"
  for f in "$out"/tms-*.log; do
    echo "$(basename "$f" .log): $(grep -h '^vmm-call ' "$f" | sed 's/^vmm-call //; s/bytes=\([0-9]*\)/\1/' \
      | awk '{printf "%s %.0fM %s | ", $1, $2 / 1048576, $3}')"
  done
fi

echo
echo "=== pause-resume: results (ms; GiB/s; free GiB before / paused / after)"
cat "$results"
"$py" - "$results" <<'PY'
import sys
rows, pinned = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "pinned":
        kv = dict(x.split("=") for x in f[2:]); pinned[f[1]] = kv
    elif f[0] == "row":
        kv = dict(x.split("=") for x in f[5:]); rows[(f[1], f[2], f[3], f[4], kv["cycle"])] = kv
        kv["pin"] = pinned.get(f[1], {})  # the pinned copy of the same process (the latest one of that name)
print()
print("| tag size | contents | layout | cycle | tensors | tms pause ms | tms resume ms | vmmkit pause ms | vmmkit resume ms | tms backup / restore GiB/s | vmmkit backup / restore GiB/s | pinned d2h / h2d GiB/s, best (first) | vmmkit share of pinned | released GiB (vmmkit / tms) | vmmkit pinned ahead: ready ms (waited) | intact | tms after: pause / resume ms | as fast (tms before / after) |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
keys = sorted({k[1:] for k in rows if k[0] == "vmmkit"}, key=lambda k: (k[2], float(k[0]), k[1], k[3]))
for size, contents, layout, cycle in keys:
    v = rows.get(("vmmkit", size, contents, layout, cycle))
    t = rows.get(("tms", size, contents, layout, cycle)) or rows.get(("tms", size, contents, layout, "1"))
    p = v["pin"] if v else {}
    share = "-"
    if v and v["kept_backup_gibps"] != "-" and p:
        share = "%.0f%% / %.0f%%" % (100 * float(v["kept_backup_gibps"]) / float(p["d2h_gibps"]),
                                     100 * float(v["restore_gibps"]) / float(p["h2d_gibps"]))
    a = rows.get(("tms-after", size, contents, layout, cycle)) or rows.get(("tms-after", size, contents, layout, "1"))
    as_fast = lambda r: "-" if not (v and r) else (
        "yes" if float(v["pause_ms"]) <= float(r["pause_ms"]) and float(v["resume_ms"]) <= float(r["resume_ms"]) else "no")
    g = lambda r, k: r.get(k, "-") if r else "-"
    ready = "%s (%s)" % (g(v, "ready_ms"), g(v, "pin_wait_ms")) if contents == "keep" and cycle == "1" else "-"
    print("| %s GiB | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s (%s / %s) | %s | %s / %s | %s | %s | %s / %s | %s / %s |" % (
        size, contents, layout, cycle, g(v, "tensors"), g(t, "pause_ms"), g(t, "resume_ms"), g(v, "pause_ms"), g(v, "resume_ms"),
        g(t, "kept_backup_gibps"), g(t, "restore_gibps"), g(v, "kept_backup_gibps"), g(v, "restore_gibps"),
        p.get("d2h_gibps", "-"), p.get("h2d_gibps", "-"), p.get("d2h_first_gibps", "-"), p.get("h2d_first_gibps", "-"), share, g(v, "released"), g(t, "released"), ready,
        g(v, "intact") + ("" if not t else "/" + g(t, "intact")), g(a, "pause_ms"), g(a, "resume_ms"), as_fast(t), as_fast(a)))
print()
for k, kv in rows.items():
    if k[0] not in ("vmmkit", "tms", "tms-after"):
        v = kv
        t = rows.get(("tms",) + k[1:4] + ("1",))
        a = rows.get(("tms-after",) + k[1:4] + ("1",))
        print("%s row %s GiB %s %s cycle %s: pause %s ms, resume %s ms, backup / restore %s / %s GiB/s, intact %s; "
              "as fast as tms before / after: %s / %s" % (
            k[0], k[1], k[2], k[3], k[4], kv["pause_ms"], kv["resume_ms"], kv["kept_backup_gibps"], kv["restore_gibps"], kv["intact"],
            as_fast(t), as_fast(a)))
PY
grep -h "intact=no\|identical=no" "$out"/*.log && failed=1
exit $failed
