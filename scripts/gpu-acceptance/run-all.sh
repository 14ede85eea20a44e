#!/usr/bin/env bash
# GPU acceptance run of vmmkit with real frameworks (PyTorch + transformers, CuPy). Run on the GPU machine,
# from anywhere (it cds to the repository root), with runtime/ (or a JDK 25), target/vmmkit.jar and
# target/native/libvmmkit_preload.so present:
#
#   bash scripts/gpu-acceptance/run-all.sh
#
# Logs and result files go to $OUT when set (else a fresh /tmp/vmmkit-acceptance.XXXXXX). Steps (each under
# `timeout`; a failed step does not stop the others):
#   torch-native, torch-native2 (determinism baseline), torch-vmmkit-run (./vmmkit run ... --mode native),
#   torch-pluggable (CUDAPluggableAllocator), cupy-native, cupy-vmmkit-run, stream-native (control),
#   stream-vmmkit-run; then summarize.py compares them. Exits non-zero if any step or check failed.
# Environment knobs: PYTHON (default python3), STEP_TIMEOUT_SCALE (e.g. 2), VMMKIT (default ./vmmkit; word-split,
# e.g. VMMKIT="runtime/bin/java --enable-native-access=ALL-UNNAMED -jar target/vmmkit.jar" skips the launcher).
set -uo pipefail
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

export PYTHONUNBUFFERED=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8
py="${PYTHON:-python3}"
vmmkit="${VMMKIT:-./vmmkit}"
scale="${STEP_TIMEOUT_SCALE:-1}"
shim="$root/target/native/libvmmkit_preload.so"
jar="$root/target/vmmkit.jar"

out="${OUT:-}"
if [ -z "$out" ]; then out="$(mktemp -d "${TMPDIR:-/tmp}/vmmkit-acceptance.XXXXXX")"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
steps="$out/steps.tsv"
: > "$steps"
# Results of an earlier run in the same folder must not pass for this run's.
rm -f "$out"/torch-*.json "$out"/cupy-*.json "$out"/stream-*.json "$out"/summary.json
echo "run-all: logs and results in $out"

# The Java home the in-process JVM uses in pluggable mode (`vmmkit run` sets its own).
if [ -x "$root/runtime/bin/java" ]; then java_home="$root/runtime"; else java_home="${JAVA_HOME:-}"; fi

preflight_ok=1
for f in "$shim" "$jar"; do
  if [ ! -f "$f" ]; then echo "run-all: MISSING $f (build and carry target/)" >&2; preflight_ok=0; fi
done
if [ -z "$java_home" ] || [ ! -f "$java_home/lib/server/libjvm.so" ]; then
  echo "run-all: no Java 25 home with lib/server/libjvm.so (runtime/ or \$JAVA_HOME); pluggable mode will fail" >&2
  preflight_ok=0
fi
if [ "$preflight_ok" != 1 ]; then echo "run-all: preflight problems above; running anyway so every step reports" >&2; fi

# step NAME TIMEOUT_S CMD...: runs CMD under timeout, output to the terminal and $out/NAME.log.
step() {
  local name="$1" limit="$2"; shift 2
  limit=$(( limit * scale ))
  echo
  echo "=== $name (timeout ${limit}s): $*"
  local start rc
  start=$(date +%s)
  timeout -k 15 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  local secs=$(( $(date +%s) - start ))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "=== $name: TIMED OUT after ${secs}s (limit ${limit}s)"
  else
    echo "=== $name: exit $rc (${secs}s)"
  fi
  printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >> "$steps"
}

step environment 60 "$py" "$here/env_check.py" --root "$root"

T="$here/torch_train.py"
step torch-native 180 "$py" "$T" --mode native --result "$out/torch-native.json"
step torch-native2 180 "$py" "$T" --mode native --label native-repeat --result "$out/torch-native2.json"
step torch-vmmkit-run 180 $vmmkit run --driver cuda --stats "$out/torch-run-stats.json" -- \
  "$py" "$T" --mode native --label vmmkit-run --result "$out/torch-vmmkit-run.json"
step torch-pluggable 180 env -u LD_PRELOAD VMMKIT_JAVA_HOME="$java_home" VMMKIT_JAR="$jar" VMM_DRIVER=cuda \
  VMM_STATS_FILE="$out/torch-pluggable-stats.json" \
  "$py" "$T" --mode pluggable --so "$shim" --label pluggable --result "$out/torch-pluggable.json"

C="$here/cupy_loop.py"
step cupy-native 150 "$py" "$C" --label native --result "$out/cupy-native.json"
step cupy-vmmkit-run 150 $vmmkit run --driver cuda --stats "$out/cupy-run-stats.json" -- \
  "$py" "$C" --label vmmkit-run --result "$out/cupy-vmmkit-run.json"

S="$here/stream_safety.py"
step stream-native 120 "$py" "$S" --label native --result "$out/stream-native.json"
step stream-vmmkit-run 120 $vmmkit run --driver cuda --stats "$out/stream-run-stats.json" -- \
  "$py" "$S" --expect-nonblocking-free --label vmmkit-run --result "$out/stream-vmmkit-run.json"

echo
timeout 60 "$py" "$here/summarize.py" "$out" 2>&1 | tee "$out/summary.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then echo "run-all: the summary itself failed (exit $rc)"; fi
echo "run-all: logs and results in $out"
exit $(( rc == 0 ? 0 : 1 ))
