#!/usr/bin/env bash
# torch_memory_saver's API served by vmmkit (python/compat), on a GPU, beside torch_memory_saver
# itself in the same call. Run from the repository root with runtime/ (scripts/build-runtime.sh),
# target/ and .device/torch_memory_saver (its public source) carried:
#   bash scripts/gpu/tms-compat.sh
# Steps (logs in $OUT/tms-compat/ when OUT is set):
#   1. builds torch_memory_saver from source (lib/common.sh's build_tms)
#   2. torch_memory_saver's own example programs (its test/examples: simple, rl_example, cuda_graph,
#      and training_engine with TMS_INIT_ENABLE=1 and TMS_INIT_ENABLE_CPU_BACKUP=1), unchanged, in its
#      preload mode: first by torch_memory_saver (its library preloaded), then by vmmkit (`vmmkit run`,
#      python/compat first on PYTHONPATH); each program checks itself (addresses, freed memory,
#      contents) and exits 0 when it passed; training_engine also with the shim preloaded by the
#      program's parent (vmmkit-preload: no `vmmkit run`, no VMMKIT_* or JAVA_HOME: the shim finds
#      the checkout's runtime/ itself), as an RL framework starts its trainer
#   3. tms_trainer.py: a training process paused whole between steps (TMS_INIT_ENABLE), natively
#      without pauses (the reference), by torch_memory_saver and by vmmkit: pause and resume times,
#      memory released, state and losses against the reference
# Prints "example NAME IMPL passed|FAILED" and "trainer IMPL ..." lines; exits non-zero if any failed.
# Knobs: PYTHON, EXAMPLES (the example names), RUN_LIMIT (seconds per process, 300), WIDTH/DEPTH (the
# trainer's model: 8192 x 12 layers, about 12 GiB with AdamW's state).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" tms-compat
use_vmmkit_build tms-compat
limit="${RUN_LIMIT:-300}"
failed=0
results="$out/results.txt"
: > "$results"

build_tms tms-compat
[ $have_tms = 1 ] || failed=1
examples_dir=.device/torch_memory_saver/test/examples
# preload_library SITE: the library torch_memory_saver's users preload, as its package at SITE names it.
preload_library() {
  PYTHONPATH="$1" "$py" -c 'from torch_memory_saver.utils import get_binary_path_from_package as p
print(p("torch_memory_saver_hook_mode_preload"))'
}
tms_preload=""
if [ $have_tms = 1 ]; then
  tms_preload="$(preload_library "$tms_site" 2>> "$out/tms-build.log")"
  [ -f "$tms_preload" ] || { echo "tms-compat: torch_memory_saver's preload library not found"; failed=1; have_tms=0; }
fi

# impl_run NAME IMPL ENV... -- COMMAND...: one process by IMPL (tms: its library preloaded; vmmkit:
# `vmmkit run` with python/compat on the path; native: neither), its output in $out/NAME-IMPL.log.
impl_run() {
  local name="$1" impl="$2"; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local log="$out/$name-$impl.log"
  echo; echo "=== $name by $impl"
  case "$impl" in
    tms) timeout "$limit" env "${envs[@]}" IMPL=tms PYTHONPATH="$tms_site:$root/$examples_dir" LD_PRELOAD="$tms_preload" "$@" > "$log" 2>&1 ;;
    vmmkit) timeout "$limit" env "${envs[@]}" IMPL=vmmkit PYTHONPATH="$root/python/compat:$root/$examples_dir" \
              ./vmmkit run --driver cuda --stats "$out/$name-vmmkit.stats.json" -- "$@" > "$log" 2>&1 ;;
    # As an RL framework starts its trainer: the shim preloaded by the parent (the path
    # torch_memory_saver.utils gives), no `vmmkit run` and none of its settings.
    vmmkit-preload) timeout "$limit" env -u VMMKIT_JAR -u VMMKIT_JAVA_HOME -u VMMKIT_AOT_CACHE -u JAVA_HOME "${envs[@]}" \
              IMPL=vmmkit PYTHONPATH="$root/python/compat:$root/$examples_dir" \
              LD_PRELOAD="$(preload_library "$root/python/compat")" "$@" > "$log" 2>&1 ;;
    native) timeout "$limit" env "${envs[@]}" IMPL=native "$@" > "$log" 2>&1 ;;
  esac
  local rc=$?
  tail -5 "$log"
  return $rc
}

# 2. The anchor's own examples, each by the anchor and by vmmkit.
for example in ${EXAMPLES:-simple rl_example cuda_graph training_engine}; do
  envs=(PYTHONUNBUFFERED=1)
  [ "$example" = training_engine ] && envs+=(TMS_INIT_ENABLE=1 TMS_INIT_ENABLE_CPU_BACKUP=1)
  impls="tms vmmkit"
  [ "$example" = training_engine ] && impls="$impls vmmkit-preload"
  for impl in $impls; do
    [ "$impl" = tms ] && [ $have_tms = 0 ] && continue
    if impl_run "$example" "$impl" "${envs[@]}" -- "$py" "$examples_dir/$example.py" preload; then
      echo "example $example $impl passed" | tee -a "$results"
    else
      echo "example $example $impl FAILED" | tee -a "$results"; failed=1
    fi
  done
done

# 3. A trainer paused whole between steps.
trainer_envs=(PYTHONUNBUFFERED=1 TMS_INIT_ENABLE=1 TMS_INIT_ENABLE_CPU_BACKUP=1 WIDTH="${WIDTH:-8192}" DEPTH="${DEPTH:-12}")
for impl in native tms vmmkit; do
  [ "$impl" = tms ] && [ $have_tms = 0 ] && continue
  if ! impl_run trainer "$impl" "${trainer_envs[@]}" -- "$py" scripts/gpu/tms_trainer.py; then
    echo "trainer $impl FAILED" | tee -a "$results"; failed=1
  fi
  grep '^trainer ' "$out/trainer-$impl.log" | sed "s/^trainer /trainer $impl /" >> "$results"
done
reference="$(grep '^trainer native losses' "$results" | cut -d' ' -f4-)"
for impl in tms vmmkit; do
  losses="$(grep "^trainer $impl losses" "$results" | cut -d' ' -f4-)"
  [ -z "$losses" ] && continue
  if [ "$losses" = "$reference" ]; then echo "trainer $impl losses_equal_reference True" | tee -a "$results"
  else echo "trainer $impl losses_equal_reference False" | tee -a "$results"; failed=1; fi
done

echo; echo "=== results"; cat "$results"
exit $failed
