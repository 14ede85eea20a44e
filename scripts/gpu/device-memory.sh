#!/usr/bin/env bash
# --device-memory on a GPU: a cap on the physical memory vmmkit holds. Run from the repository root
# on the GPU machine, runtime/ (scripts/build-runtime.sh), target/ and .device/traces/ carried:
#   bash scripts/gpu/device-memory.sh [TRACE]        (default: the BERT trace)
# Steps (logs in $OUT/device-memory/), about 1 minute:
#   1. anchor        the trace replayed through cudaMallocAsync (the native allocator), no cap
#   2. uncapped      the trace through vmmkit on CUDA, no cap: its peak reserved bytes
#   3. capped-fits   the same with --device-memory 1.5 times that peak: same figures, exit 0
#   4. capped-short  the same with --device-memory half the peak live bytes: exit 1, out of memory
#   5. run-cap       vmmkit run --device-memory 256M: PyTorch gets 64 MiB tensors, then a 512 MiB
#                    one fails with torch's OutOfMemoryError (the cap, not the GPU, is full)
# Prints one line per check ("ok"/"FAIL") and a figures line; exits non-zero if a check failed.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" device-memory
traces_or_default device-memory "$@"
trace="${traces[0]}"
failed=0
check() { # NAME TEXT RESULT(0 = ok)
  if [ "$3" = 0 ]; then echo "ok   $1: $2"; else echo "FAIL $1: $2"; failed=1; fi
}
field() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); d=d[next(iter(d))] if sys.argv[2] not in d else d; print(d[sys.argv[2]])" "$1" "$2" 2>/dev/null; }
replay() { # NAME ARGS...: replays $trace, JSON in $out/NAME.json, log in $out/NAME.log; sets rc
  local name="$1"; shift
  rm -f "$out/$name.json"
  timeout 180 ./vmmkit replay --warmup 0 --json "$out/$name.json" "$@" "$trace" > "$out/$name.log" 2>&1
  rc=$?
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# 1. The native anchor first.
replay anchor --backend cuda-malloc-async --driver cuda
check anchor "cudaMallocAsync replay, exit $rc, peak reserved $(field "$out/anchor.json" peak_reserved_bytes)" $rc

# 2. vmmkit, the whole device.
replay uncapped --driver cuda
peak_reserved="$(field "$out/uncapped.json" peak_reserved_bytes)"
peak_live="$(field "$out/uncapped.json" peak_live_bytes)"
check uncapped "exit $rc, peak live $peak_live, peak reserved $peak_reserved" $rc
[ -n "$peak_reserved" ] && [ -n "$peak_live" ] || { echo "device-memory: no figures from the uncapped replay"; exit 1; }

# 3. A cap above what the replay needs changes nothing.
fits=$(( peak_reserved * 3 / 2 ))
replay capped-fits --driver cuda --device-memory "$fits"
capped_reserved="$(field "$out/capped-fits.json" peak_reserved_bytes)"
check capped-fits "--device-memory $fits: exit $rc, peak reserved $capped_reserved (uncapped $peak_reserved)" \
  "$([ $rc = 0 ] && [ "$capped_reserved" -le "$fits" ] && echo 0 || echo 1)"

# 4. A cap below the peak of live bytes cannot fit: out of memory, exit 1.
short=$(( peak_live / 2 ))
replay capped-short --driver cuda --device-memory "$short"
check capped-short "--device-memory $short: exit $rc, $(grep -m1 -io 'out of.*memory.*' "$out/capped-short.log" | cut -c1-160)" \
  "$([ $rc = 1 ] && grep -qi 'out of.*memory' "$out/capped-short.log" && echo 0 || echo 1)"

# 5. The preloaded library under vmmkit run: the cap is VMM_DEVICE_MEMORY.
if "$py" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout 180 ./vmmkit run --driver cuda --device-memory 256M --profile off -- "$py" -c '
import torch
held = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)]
print("two 64 MiB tensors fit")
try:
    big = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    print("a 512 MiB tensor fit: the cap was not applied")
except torch.OutOfMemoryError as e:
    print("a 512 MiB tensor: OutOfMemoryError")
' > "$out/run-cap.log" 2>&1
  rc=$?
  check run-cap "exit $rc; $(grep -c 'fit\|OutOfMemoryError' "$out/run-cap.log") lines: $(tr '\n' ';' < "$out/run-cap.log" | cut -c1-200)" \
    "$([ $rc = 0 ] && grep -q 'two 64 MiB tensors fit' "$out/run-cap.log" && grep -q '512 MiB tensor: OutOfMemoryError' "$out/run-cap.log" && echo 0 || echo 1)"
else
  echo "skip run-cap: python3 cannot use torch with CUDA here"
fi

echo "figures: device-memory trace=$(basename "$trace") anchor_peak_reserved=$(field "$out/anchor.json" peak_reserved_bytes) vmm_peak_reserved=$peak_reserved capped_fits=$capped_reserved cap_fits=$fits cap_short=$short"
exit $failed
