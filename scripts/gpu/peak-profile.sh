#!/usr/bin/env bash
# The peak profile of `vmmkit run` on a GPU: the same PyTorch program (PyTorch's cache off, so vmmkit
# sees every tensor) run three times in a fresh profile cache:
#   1. first run   no profile yet; saves its peak of live bytes per device
#   2. second run  reads that profile: its allocator's peak hint is the first run's peak
#   3. --profile off  neither reads nor writes one
# Run from the repository root on the GPU machine (runtime/ and target/ built); logs under $OUT.
# Prints one row per run (wall time, vmmkit's start in the program as VMM_LOG=info reports it (the
# profile is read beside it, on a thread of its own), peak live and reserved, ratio, the hint, vmmkit run's profile line) and one line per check; exits non-zero if a check failed. About 30 s.
# DRIVER=host runs the stand-in program target/test-native/alloc_test on the host emulation instead,
# to test this script without a GPU.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/vmmkit-gpu}/peak-profile"
rm -rf "$out"
mkdir -p "$out"
driver="${DRIVER:-cuda}"
export XDG_CACHE_HOME="$out/cache"   # a fresh profile cache: the first run has none
unset VMM_PROFILE VMM_PEAK_HINT
failed=0
check() { # NAME TEXT RESULT
  if [ "$3" = 0 ]; then echo "ok   $1: $2"; else echo "FAIL $1: $2"; failed=1; fi
}
stat_of() { # FILE PYTHON-EXPRESSION over s (the stats object)
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo "?"
}

torch_program='
import random, torch
random.seed(7)
weights = [torch.empty((random.randint(1, 64)) << 20, dtype=torch.uint8, device="cuda") for _ in range(12)]
for step in range(40):
    acts = [torch.empty(random.randint(1, 96) << 20, dtype=torch.uint8, device="cuda") for _ in range(24)]
    grads = []
    while acts:
        grads.append(torch.empty(random.randint(1, 48) << 20, dtype=torch.uint8, device="cuda"))
        del acts[-1]
        if len(grads) > 4: del grads[0]
    del grads
torch.cuda.synchronize(); print("torch program done")
'
if [ "$driver" = host ]; then
  program=("$root/target/test-native/alloc_test" basic threads)
else
  if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    echo "peak-profile: python3 cannot use torch with CUDA here"; exit 2
  fi
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  program=(python3 -c "$torch_program")
fi

rows=()
run() { # NAME [vmmkit run options...]
  local name="$1"; shift
  local t0=$(date +%s%N)
  VMM_LOG=info ./vmmkit run --driver "$driver" --stats "$out/$name.json" "$@" -- "${program[@]}" > "$out/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  check "$name-exit" "exit $rc" "$rc"
  local line; line="$(grep '^vmmkit run: peak profile' "$out/$name.log" | head -1 | sed 's/^vmmkit run: //')"
  local ready; ready="$(grep -o 'mode ready in [0-9.]* ms' "$out/$name.log" | head -1 | grep -o '[0-9.]*')"
  rows+=("$(printf '%-12s %8s %9s %12s %14s %8s %12s  %s' "$name" "$ms" "${ready:-?}" \
    "$(stat_of "$out/$name.json" "s['peak_live_bytes'] >> 20")" \
    "$(stat_of "$out/$name.json" "s['peak_reserved_bytes'] >> 20")" \
    "$(stat_of "$out/$name.json" "s['fragmentation_ratio']")" \
    "$(stat_of "$out/$name.json" "s['devices'][0]['peak_hint_bytes'] >> 20")" "${line:-no profile line}")")
}

run first
run second
run off --profile off

first_peak="$(stat_of "$out/first.json" "s['devices'][0]['peak_live_bytes']")"
check first-saved "profile $(stat_of "$out/first.json" "s['profile']")" \
  "$([ "$(stat_of "$out/first.json" "s['profile']['saved'] and not s['profile']['read']")" = True ] && echo 0 || echo 1)"
check second-used "peak hint $(stat_of "$out/second.json" "s['devices'][0]['peak_hint_bytes']") = first run's peak $first_peak" \
  "$([ "$(stat_of "$out/second.json" "s['profile']['used'] and s['devices'][0]['peak_hint_bytes'] == $first_peak")" = True ] && echo 0 || echo 1)"
check off "profile $(stat_of "$out/off.json" "s['profile']"), hint $(stat_of "$out/off.json" "s['devices'][0]['peak_hint_bytes']")" \
  "$([ "$(stat_of "$out/off.json" "s['profile'] is None and s['devices'][0]['peak_hint_bytes'] == 0")" = True ] && echo 0 || echo 1)"
echo
printf '%-12s %8s %9s %12s %14s %8s %12s  %s\n' run wall_ms ready_ms peak_live_MiB peak_reserved_MiB ratio hint_MiB "vmmkit run's profile line"
printf '%s\n' "${rows[@]}"
exit $failed
