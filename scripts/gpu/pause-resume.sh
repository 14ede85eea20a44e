#!/usr/bin/env bash
# Pause and resume of tagged GPU memory: vmmkit against torch_memory_saver, same machine, same run.
# Run from the repository root on a machine with an NVIDIA GPU (80 GB class), CUDA 13 with nvcc,
# python3 with PyTorch, and runtime/ (scripts/build-runtime.sh), target/ and
# .device/torch_memory_saver (its public source) carried:
#   bash scripts/gpu/pause-resume.sh
# Steps (each under a time limit; logs in $OUT/pause-resume/ when OUT is set):
#   1. builds torch_memory_saver from .device/torch_memory_saver (TMS_CUDA_MAJOR=13, pip without
#      network, into the log folder; nothing is installed system-wide)
#   2. per row, one process each: the anchor, torch_memory_saver (torch hook mode), then vmmkit under
#      `vmmkit run` (PyTorch's caching allocator over vmmkit, tags from python/vmmkit); then two rows
#      with vmmkit as PyTorch's pluggable allocator
#   4. the scenario: weights (kept) + KV cache (discarded), a CUDA graph captured over them, pause,
#      another phase allocates most of the GPU, resume: graph replay and generation bit-identical
# Rows (ROWS, default: 8 and 40 GiB kept and discarded as one tensor, 8 GiB both ways and 40 GiB
# discarded as mixed tensors): SIZE_GIB:keep|discard:single|mixed; "mixed" is many tensors of mixed sizes (64 KiB to
# 1 GiB) making up the size. Each process also measures a plain pinned copy (cudaMemcpyAsync on
# pinned memory, 4 GiB, best of 3), the physical limit of the backup bandwidth.
# vmmkit pauses and resumes each row twice (the first cycle pins host memory; vmmkit keeps its
# pinned chunks for the next pause); torch_memory_saver once (it frees its copies at each resume, so
# a second cycle costs it the same; the table compares both vmmkit cycles with it). Prints one line
# per row, cycle and implementation, then a table to paste. About 5-7 minutes; ROWS can add
# 40:keep:mixed (about 1.5 minutes more, mostly torch_memory_saver's).
# Knobs: PYTHON, ROWS, RUN_LIMIT (seconds per process, 150), TMS_CUDA_MAJOR (13).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" pause-resume
limit="${RUN_LIMIT:-150}"
rows_default="8:discard:single 8:keep:single 40:discard:single 40:keep:single 8:discard:mixed 8:keep:mixed 40:discard:mixed"
read -r -a rows <<< "${ROWS:-$rows_default}"
failed=0
echo "pause-resume: logs in $out"

use_vmmkit_build pause-resume

# 1. torch_memory_saver from source.
tms_site="$out/tms-site"
have_tms=0
if [ -f .device/torch_memory_saver/setup.py ]; then
  echo "=== building torch_memory_saver"
  rm -rf "$out/tms-src" && cp -r .device/torch_memory_saver "$out/tms-src"
  if TMS_CUDA_MAJOR="${TMS_CUDA_MAJOR:-13}" timeout 400 "$py" -m pip install --no-build-isolation --no-deps --no-index \
      --target "$tms_site" "$out/tms-src" > "$out/tms-build.log" 2>&1; then
    have_tms=1
  else
    failed=1; echo "pause-resume: torch_memory_saver did not build:"; tail -30 "$out/tms-build.log"
  fi
else
  echo "pause-resume: no .device/torch_memory_saver (carry its source): the anchor is missing"; failed=1
fi

# Runs one process: NAME, then the command's words; its output goes to $out/NAME.log.
run() {
  local name="$1"; shift
  echo; echo "=== $name: $*"
  timeout "$limit" "$@" > >(tee "$out/$name.log") 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then failed=1; echo "=== $name FAILED (exit $rc)"; fi
  return 0
}

bench=("$py" scripts/gpu/pause_resume.py)
# One process per row and implementation, the anchor first: no row inherits another's cached memory.
for row in "${rows[@]}"; do
  name="${row//:/-}"
  [ $have_tms = 1 ] && run "tms-$name" env PYTHONPATH="$tms_site" PAUSE_CYCLES=1 "${bench[@]}" bench tms "$row"
  run "vmmkit-$name" env PYTHONPATH="$root/python" ./vmmkit run --driver cuda --stats "$out/vmmkit-$name.stats.json" -- \
    "${bench[@]}" bench vmmkit "$row"
done
# vmmkit as PyTorch's pluggable allocator.
run vmmkit-pluggable env PYTHONPATH="$root/python" VMM_STATS_FILE="$out/pluggable.stats.json" \
  "${bench[@]}" bench vmmkit-pluggable 8:keep:single 8:discard:mixed
# The scenario.
run scenario env PYTHONPATH="$root/python" ./vmmkit run --driver cuda -- "${bench[@]}" scenario

echo
echo "=== pause-resume: results (ms; GiB/s; free GiB before / paused / after)"
cat "$out"/tms-*.log "$out"/vmmkit-*.log "$out"/scenario.log 2>/dev/null \
  | grep -E '^(row|pinned|scenario) ' | tee "$out/results.txt"
"$py" - "$out/results.txt" <<'PY'
import re, sys
rows, pinned = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "pinned":
        kv = dict(x.split("=") for x in f[2:]); pinned[f[1]] = kv
    elif f[0] == "row":
        kv = dict(x.split("=") for x in f[5:]); rows[(f[1], f[2], f[3], f[4], kv["cycle"])] = kv
        kv["pin"] = pinned.get(f[1], {})  # the pinned copy of the same process
print()
print("| tag size | contents | layout | cycle | tensors | tms pause ms | tms resume ms | vmmkit pause ms | vmmkit resume ms | tms backup / restore GiB/s | vmmkit backup / restore GiB/s | pinned d2h / h2d GiB/s | vmmkit share of pinned | released GiB (vmmkit / tms) | intact | as fast |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
keys = sorted({k[1:] for k in rows}, key=lambda k: (k[2], float(k[0]), k[1], k[3]))
for size, contents, layout, cycle in keys:
    v = rows.get(("vmmkit", size, contents, layout, cycle))
    t = rows.get(("tms", size, contents, layout, cycle)) or rows.get(("tms", size, contents, layout, "1"))
    p = v["pin"] if v else {}
    share = "-"
    if v and v["kept_backup_gibps"] != "-" and p:
        share = "%.0f%% / %.0f%%" % (100 * float(v["kept_backup_gibps"]) / float(p["d2h_gibps"]),
                                     100 * float(v["restore_gibps"]) / float(p["h2d_gibps"]))
    fast = "-"
    if v and t:
        fast = "yes" if float(v["pause_ms"]) <= float(t["pause_ms"]) and float(v["resume_ms"]) <= float(t["resume_ms"]) else "no"
    g = lambda r, k: r[k] if r else "-"
    print("| %s GiB | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s | %s | %s / %s | %s | %s |" % (
        size, contents, layout, cycle, g(v, "tensors"), g(t, "pause_ms"), g(t, "resume_ms"), g(v, "pause_ms"), g(v, "resume_ms"),
        g(t, "kept_backup_gibps"), g(t, "restore_gibps"), g(v, "kept_backup_gibps"), g(v, "restore_gibps"),
        p.get("d2h_gibps", "-"), p.get("h2d_gibps", "-"), share, g(v, "released"), g(t, "released"),
        g(v, "intact") + ("" if not t else "/" + g(t, "intact")), fast))
for k, kv in rows.items():
    if k[0] == "vmmkit-pluggable":
        print("pluggable allocator row %s GiB %s %s cycle %s: pause %s ms, resume %s ms, intact %s" % (k[1], k[2], k[3], k[4], kv["pause_ms"], kv["resume_ms"], kv["intact"]))
PY
grep -h "intact=no\|identical=no" "$out"/*.log && failed=1
exit $failed
