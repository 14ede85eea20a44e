#!/usr/bin/env bash
# vmmkit run on a GPU, as a user meets it: a PyTorch program's stats file and HTML report, a bad
# setting refused before the program starts, SIGTERM forwarded to the program (its own exit code
# comes back, nothing is orphaned) and a program killed by a signal leaving "complete": false.
# Run from the repository root on the GPU machine (runtime/ and target/ built); logs under $OUT.
# Prints one line per check and exits non-zero if one failed. About 30 s.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/vmmkit-gpu}/cli-run"
mkdir -p "$out"
driver="${VMMKIT_CLI_DRIVER:-cuda}"   # host: try the script without a GPU (needs no torch for the signal checks)
failed=0
check() { # NAME CONDITION-TEXT RESULT
  if [ "$3" = 0 ]; then echo "ok   $1: $2"; else echo "FAIL $1: $2"; failed=1; fi
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" "$1" "$2" 2>/dev/null; }

torch_program='
import sys, torch
xs = [torch.empty(int(s), dtype=torch.uint8, device="cuda") for s in (1 << 20, 3 << 20, 40 << 20, 512, 7 << 20)]
for step in range(200):
    t = torch.empty((step % 17 + 1) << 20, dtype=torch.uint8, device="cuda"); del t
del xs; torch.cuda.synchronize(); print("torch program done")
'

# 1. A PyTorch program: stats file complete, HTML report written.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  rm -f "$out/stats.json" "$out/report.html"
  ./vmmkit run --driver "$driver" --stats "$out/stats.json" --html "$out/report.html" -- python3 -c "$torch_program" \
    > "$out/torch.log" 2>&1
  rc=$?
  check torch-exit "exit $rc" $rc
  check torch-stats "complete=$(field "$out/stats.json" complete) allocs=$(field "$out/stats.json" allocs) ratio=$(field "$out/stats.json" fragmentation_ratio)" \
    "$([ "$(field "$out/stats.json" complete)" = True ] && [ "$(field "$out/stats.json" allocs)" -gt 0 ] && echo 0 || echo 1)"
  check torch-html "report $(stat -c %s "$out/report.html" 2>/dev/null || echo 0) bytes" "$([ -s "$out/report.html" ] && echo 0 || echo 1)"
else
  echo "skip torch: python3 cannot use torch with CUDA here"
fi

# 2. A bad setting: refused before the program starts, exit 2, one line.
rm -f "$out/started"
VMM_CHUNK_SIZE=3M ./vmmkit run --driver "$driver" -- touch "$out/started" > "$out/bad-setting.log" 2>&1
rc=$?
check bad-setting "exit $rc, $(head -1 "$out/bad-setting.log")" "$([ $rc = 2 ] && [ ! -e "$out/started" ] && echo 0 || echo 1)"

# 3. SIGTERM to the launcher reaches the program, which exits 42 after cleaning up; no orphan.
rm -f "$out/pid" "$out/stats-term.json"
./vmmkit run --driver "$driver" --stats "$out/stats-term.json" -- python3 -c "
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))
open('$out/pid.tmp', 'w').write(str(os.getpid())); os.rename('$out/pid.tmp', '$out/pid')
time.sleep(60)" > "$out/sigterm.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do [ -s "$out/pid" ] && break; sleep 0.1; done
program="$(cat "$out/pid" 2>/dev/null || echo 0)"
t0=$(date +%s%N)
kill -TERM "$launcher"
wait "$launcher"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
alive=no; kill -0 "$program" 2>/dev/null && alive=yes
check sigterm "launcher exit $rc (program's own 42) in $ms ms, program still alive: $alive" \
  "$([ $rc = 42 ] && [ $alive = no ] && echo 0 || echo 1)"
check sigterm-stats "stats file written: complete=$(field "$out/stats-term.json" complete)" \
  "$([ -s "$out/stats-term.json" ] && echo 0 || echo 1)"

# 4. A program killed by SIGKILL: exit 137, stats file present and marked incomplete if vmmkit had started.
./vmmkit run --driver "$driver" --stats "$out/stats-kill.json" -- sh -c 'kill -KILL $$' > "$out/sigkill.log" 2>&1
rc=$?
check sigkill "exit $rc (128+9), stats complete=$(field "$out/stats-kill.json" complete)" \
  "$([ $rc = 137 ] && [ -s "$out/stats-kill.json" ] && echo 0 || echo 1)"

exit $failed
