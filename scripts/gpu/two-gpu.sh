#!/usr/bin/env bash
# Two-GPU acceptance of vmmkit: cross-device copies, peer access, torch.multiprocessing IPC and a
# DDP training over NCCL, each natively and under `vmmkit run` with PyTorch's cache on and off
# (PYTORCH_NO_CUDA_MEMORY_CACHING=1: vmmkit serves every tensor), DDP with NCCL's buffers from
# cudaMalloc too (NCCL_CUMEM_ENABLE=0), JAX, CuPy and numba on both devices, and memory tags over
# both devices. From the repository root:
#
#   bash scripts/gpu/two-gpu.sh                 # on a machine with 2 GPUs (exit 77 when fewer)
#   bash scripts/gpu/two-gpu.sh --driver host   # no GPU: the same vmmkit paths on the host emulation
#                                               # (the stand-in runtime's peer/IPC/device scenarios)
#
# Needs runtime/ (or a JDK 25), target/vmmkit.jar and target/native/ (and target/test-native/ for
# --driver host). Logs and result files go to $OUT (default /tmp/vmmkit-two-gpu). Prints one line per
# step and a summary; exits non-zero when a step failed. NVLink multicast stays off (NCCL NVLS,
# symmetric memory, NVSHMEM), as the GPU machines require.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
here="$root/scripts/gpu"
cd "$root"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
driver=cuda
if [ "${1:-}" = "--driver" ]; then driver="${2:-}"; shift 2; fi
case "$driver" in cuda|host) ;; *) echo "two-gpu: --driver must be cuda or host" >&2; exit 2 ;; esac
out="${OUT:-/tmp/vmmkit-two-gpu}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
py="${PYTHON:-python3}"
vmmkit="${VMMKIT:-./vmmkit}"
failed=0
summary=()
# The whole run stays inside this many seconds (a command on the GPU machine may run 10 minutes;
# the run took about 2 minutes on two H200s): a step that would start later is reported as not run,
# and counts as a failure.
deadline=$(( $(date +%s) + ${TWO_GPU_BUDGET_S:-480} ))
informational=0

# step NAME TIMEOUT_S CMD...: runs CMD under timeout (cut to the time left), output to the terminal
# and $out/NAME.log. With informational=1 a failure is reported but does not fail the run.
step() {
  local name="$1" limit="$2"; shift 2
  local left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 10 ]; then
    summary+=("$name: NOT RUN (time budget spent)"); failed=1; echo "=== $name: NOT RUN (time budget spent)"; return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo; echo "=== $name (timeout ${limit}s): $*"
  local start rc
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" > >(tee "$out/$name.log") 2>&1
  rc=$?
  local verdict="PASS"
  if [ "$rc" -ne 0 ]; then
    verdict="FAIL (exit $rc)"
    if [ "$informational" = 1 ]; then verdict="$verdict, for information"; else failed=1; fi
  fi
  local line="$name: $verdict in $(( $(date +%s) - start ))s"
  echo "=== $line"
  summary+=("$line")
}

# The per-device lines of a vmmkit stats file.
devices_of() {
  "$py" -c 'import json,sys
s=json.load(open(sys.argv[1]))
for d in s.get("devices", []):
    print("  device %d%s: allocs %d, frees %d, peak live %d B, peak reserved %d B, peers %s" % (
        d["device"], " (pid %d)" % d["pid"] if "pid" in d else "", d["allocs"], d["frees"], d["peak_live_bytes"],
        d["peak_reserved_bytes"], d["peers"]))' "$1" \
    2>/dev/null || echo "  (no stats file $1)"
}

if [ "$driver" = host ]; then
  test_program="$root/target/test-native/alloc_test"
  if [ ! -x "$test_program" ]; then echo "two-gpu: $test_program missing (run ./vmmkit test first)" >&2; exit 2; fi
  step syntax 30 bash -n "$here/two-gpu.sh"
  step python-parses 60 "$py" -c 'import ast, sys
for f in sys.argv[1:]: ast.parse(open(f).read(), f)' "$here/two_gpu_checks.py" "$here/two_gpu_ddp.py" \
    "$here/two_gpu_frameworks.py" "$here/two_gpu_tags.py"
  # Two emulated devices served by vmmkit: peer access, threads on both devices, IPC between two processes.
  step host-peer-ipc 120 env LD_LIBRARY_PATH="$root/target/test-native" $vmmkit run --driver host \
    --stats "$out/host-stats.json" -- "$test_program" peer device_threads ipc ipc_errors
  devices_of "$out/host-stats.json"
else
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -lt 2 ]; then
    echo "two-gpu: SKIPPED: this machine has ${gpus:-0} GPU(s), the run needs 2"
    exit 77
  fi
  nvidia-smi topo -m 2>/dev/null | head -4
  # The driver layer on each device, export/import of POSIX descriptors and device-set access included.
  step driver-check-device-0 60 $vmmkit driver-check --driver cuda --device 0
  step driver-check-device-1 60 $vmmkit driver-check --driver cuda --device 1
  # Each check runs natively first, with the same cache setting; under vmmkit, a check that failed
  # natively is "not judged" (it cannot tell anything about vmmkit), and an expected refusal (PyTorch
  # does not share CUDA tensors with its cache off) is reported at once. The native runs are for
  # information: their failures are the machine's or PyTorch's.
  for cache in on off; do
    if [ "$cache" = on ]; then nocache=0; else nocache=1; fi
    informational=1
    step "checks-native-cache-$cache" 100 env PYTORCH_NO_CUDA_MEMORY_CACHING=$nocache "$py" "$here/two_gpu_checks.py" \
      --label "native-cache-$cache" --result "$out/checks-native-cache-$cache.json"
    informational=0
    step "checks-vmmkit-cache-$cache" 100 env PYTORCH_NO_CUDA_MEMORY_CACHING=$nocache \
      $vmmkit run --driver cuda --stats "$out/checks-vmmkit-cache-$cache-stats.json" -- \
      "$py" "$here/two_gpu_checks.py" --label "vmmkit-cache-$cache" --result "$out/checks-vmmkit-cache-$cache.json" \
      --native "$out/checks-native-cache-$cache.json"
    devices_of "$out/checks-vmmkit-cache-$cache-stats.json"
  done
  # JAX (pmap with a psum across the devices, a jit over sharded operands), CuPy (arrays on each
  # device, copied between them) and numba on both devices: the values under vmmkit must hash as the
  # native run's.
  xla_flags="--xla_gpu_deterministic_ops=true --xla_gpu_autotune_level=0"
  informational=1
  step frameworks-native 150 env XLA_FLAGS="$xla_flags" "$py" "$here/two_gpu_frameworks.py" --result "$out/frameworks-native.json"
  informational=0
  step frameworks-vmmkit 150 env XLA_FLAGS="$xla_flags" $vmmkit run --driver cuda --stats "$out/frameworks-vmmkit-stats.json" -- \
    "$py" "$here/two_gpu_frameworks.py" --result "$out/frameworks-vmmkit.json" --native "$out/frameworks-native.json"
  devices_of "$out/frameworks-vmmkit-stats.json"
  # Memory tags on both devices with cuda:0 current (vmmkit's own: nothing to run natively): a
  # region tags the thread's tensors on each device, and a pause gives both back.
  for mode in keep discard; do
    step "tags-$mode" 90 env PYTHONPATH="$root/python" $vmmkit run --driver cuda -- "$py" "$here/two_gpu_tags.py" "$mode"
  done
  step tags-keep-pluggable 90 env PYTHONPATH="$root/python" VMMKIT_JAR="$root/target/vmmkit.jar" \
    "$py" "$here/two_gpu_tags.py" keep --pluggable
  # No `vmmkit run`: vmmkit serves the tags' pools only, on both devices.
  for mode in keep discard; do
    step "tags-$mode-pools" 90 env PYTHONPATH="$root/python" VMMKIT_JAR="$root/target/vmmkit.jar"       "$py" "$here/two_gpu_tags.py" "$mode"
  done
  # A CUDA graph's memory in a tag (vmmkit.cuda_graph) on cuda:1, paused from cuda:0: serving the
  # tags only (the graph's pool made on its device), then under `vmmkit run`.
  step tags-graph-pools 90 env PYTHONPATH="$root/python" VMMKIT_JAR="$root/target/vmmkit.jar" "$py" "$here/two_gpu_tags.py" graph
  step tags-graph 90 env PYTHONPATH="$root/python" $vmmkit run --driver cuda -- "$py" "$here/two_gpu_tags.py" graph
  # torchrun, through the interpreter (the torchrun script may not be on PATH).
  torchrun=("$py" -m torch.distributed.run --standalone --nproc-per-node 2 "$here/two_gpu_ddp.py" --steps 8)
  # ddp NAME NATIVE_RESULT VARIABLE=VALUE...: the training under vmmkit with those variables, its
  # losses compared with the native run's.
  ddp() {
    local name="$1" native="$2"; shift 2
    step "ddp-vmmkit-$name" 120 env "$@" $vmmkit run --driver cuda --stats "$out/ddp-vmmkit-$name-stats.json" -- \
      "${torchrun[@]}" --result "$out/ddp-vmmkit-$name.json"
    devices_of "$out/ddp-vmmkit-$name-stats.json"
    step "ddp-losses-$name" 30 "$py" -c 'import json,sys
a=json.load(open(sys.argv[1]))["losses"]; b=json.load(open(sys.argv[2]))["losses"]
diff=max(abs(x-y) for x,y in zip(a,b)) if len(a)==len(b) else float("inf")
print("losses native ", ["%.6f" % x for x in a]); print("losses vmmkit ", ["%.6f" % x for x in b])
print("max |native - vmmkit| = %g over %d steps" % (diff, len(a))); sys.exit(0 if diff <= 1e-5 else 1)' \
      "$native" "$out/ddp-vmmkit-$name.json"
  }
  step ddp-native 120 "${torchrun[@]}" --result "$out/ddp-native.json"
  ddp cache-on "$out/ddp-native.json" PYTORCH_NO_CUDA_MEMORY_CACHING=0
  ddp cache-off "$out/ddp-native.json" PYTORCH_NO_CUDA_MEMORY_CACHING=1
  # NCCL's buffers from cudaMalloc, which vmmkit serves (by default NCCL makes them with cuMemCreate):
  # its transport between the ranks then shares vmmkit's memory through CUDA IPC.
  step ddp-native-nccl-cudamalloc 120 env NCCL_CUMEM_ENABLE=0 "${torchrun[@]}" --result "$out/ddp-native-nccl-cudamalloc.json"
  ddp nccl-cudamalloc "$out/ddp-native-nccl-cudamalloc.json" NCCL_CUMEM_ENABLE=0 PYTORCH_NO_CUDA_MEMORY_CACHING=1
fi

echo; echo "=== two-gpu summary (driver $driver, logs in $out)"
printf '%s\n' "${summary[@]}" | tee "$out/two-gpu-summary.txt"
exit $failed
