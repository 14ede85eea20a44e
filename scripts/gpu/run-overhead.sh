#!/usr/bin/env bash
# What `vmmkit run` costs a PyTorch program whose own caching allocator serves almost every tensor:
# the torch.empty+del pair (scripts/gpu/torch_pair.py, PyTorch's caching allocator) and a plain
# Python loop, in one process each, under:
#   plain          no vmmkit
#   preload-only   the shim preloaded in monitor mode without stats or trace: no JVM starts
#   monitor-jvm    `vmmkit run --mode monitor --stats`: the JVM starts, every call passes through
#   vmm            `vmmkit run`: vmmkit serves PyTorch's segments
#   plain-again    no vmmkit, once more (noise)
# Run from the repository root on the GPU machine (runtime/, target/ built); logs under $OUT/run-overhead.
# Prints one line per configuration; about 1 minute. Exits non-zero if a run failed.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/vmmkit-gpu}/run-overhead"
mkdir -p "$out"
py="${PYTHON:-python3}"
shim="$root/target/native/libvmmkit_preload.so"
export VMM_PROFILE=off
failed=0
pair=("$py" scripts/gpu/torch_pair.py caching "$shim" 4096 200000)

one() { # NAME COMMAND...
  local name="$1"; shift
  if timeout 120 "$@" > "$out/$name.log" 2>&1; then
    printf '%-14s %s\n' "$name" "$(grep '^{' "$out/$name.log" | tail -1)"
  else
    printf '%-14s FAILED (see %s)\n' "$name" "$out/$name.log"; failed=1
  fi
}

one plain "${pair[@]}"
one preload-only env LD_PRELOAD="$shim" VMM_MODE=monitor "${pair[@]}"
one monitor-jvm ./vmmkit run --mode monitor --stats "$out/monitor.stats.json" -- "${pair[@]}"
one vmm ./vmmkit run --stats "$out/vmm.stats.json" -- "${pair[@]}"
one plain-again "${pair[@]}"
exit $failed
