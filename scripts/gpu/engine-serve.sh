#!/usr/bin/env bash
# GPU check of `vmmkit serve`: serves the echo example engine (cuda backend) whose device memory
# comes from vmmkit's allocator; every load writes a pattern into it and reads it back, and every
# generate reads it again. Loads models until the resource monitor evicts the least recently used
# ones, reloads the engine under its loaded models, unloads everything, and prints /metrics' device
# figures at each step.
#   bash scripts/gpu/engine-serve.sh                    # on the GPU machine (--driver cuda)
#   ENGINE_DRIVER=host bash scripts/gpu/engine-serve.sh # here, on the host emulation (cpu backend)
# Needs runtime/bin/java or a JDK 25 (through ./vmmkit), target/ built (the echo plugin comes from
# target/test-native/engines/echo, else it is built with make), python3. Logs go to $OUT if set.
# Exits non-zero when a request fails, nothing was evicted, or memory did not come back.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
cd "$root"

driver="${ENGINE_DRIVER:-cuda}"
work="$(mktemp -d /tmp/vmmkit-engine-serve.XXXXXX)"
out="${OUT:-$work}"
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT

plugins="target/test-native/engines/echo"
if [ ! -f "$plugins/cuda/libecho_engine.so" ] || [ ! -f "$plugins/cpu/libecho_engine.so" ]; then
  echo "engine-serve: building the echo engine with make"
  make -s -C examples/echo-engine >/dev/null || { echo "engine-serve: cannot build the echo engine" >&2; exit 2; }
  plugins="examples/echo-engine/build"
fi
for backend in cpu cuda; do
  mkdir -p "$work/engines/echo/$backend"
  cp "$plugins/$backend/libecho_engine.so" "$work/engines/echo/$backend/"
  cp "examples/echo-engine/manifest-$backend.json" "$work/engines/echo/$backend/manifest.json"
done

if [ "$driver" = cuda ]; then
  model_mib=4096
  # Threshold: what the GPU already uses plus room for about 2.5 models, so the monitor must evict.
  read -r used_mib total_mib < <(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits -i 0 | tr -d ',')
  threshold="$(python3 -c "print(round(min(0.95, ($used_mib + 2.5 * $model_mib + 600) / $total_mib), 3))")"
  extra=()
  echo "engine-serve: GPU 0 uses $used_mib of $total_mib MiB; models of $model_mib MiB; --vram-threshold $threshold"
else
  model_mib=64
  threshold=0.3
  extra=(--device-memory 1GiB)
fi
count=8
mkdir -p "$work/models"
for i in $(seq 1 $count); do truncate -s "${model_mib}M" "$work/models/m$i.bin"; done

python3 - "$driver" "$threshold" "$work" "$out" "$count" "${extra[@]}" <<'PY'
import os, sys, time
sys.path.insert(0, "scripts/gpu/lib")
from serve_client import ServeProcess

driver, threshold, work, out, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
extra = sys.argv[6:]
server = ServeProcess("engine-serve", ["--engines", work + "/engines", "--models", work + "/models",
                      "--driver", driver, "--vram-threshold", threshold, "--poll-interval", "200ms", "--no-watch"] + extra,
                      os.path.join(out, "engine-serve-server.log"))
call, metrics, stop = server.call, server.metrics, server.stop
failures = []

VRAM = 'vmmkit_evictions_total{reason="vram"}'
LOAD = 'vmmkit_evictions_total{reason="load"}'
OK = 'vmmkit_requests_total{status="200"}'

def mib(value):
    return int(value) >> 20

def row(step, detail):
    m = metrics()
    used, total = m["vmmkit_device_used_bytes"], m["vmmkit_device_total_bytes"]
    print(f"{step:<22} {detail:<34} device {mib(used):>7} / {mib(total):>7} MiB ({100 * used / total:5.1f} %)"
          f"  models {int(m['vmmkit_models_loaded'])}  evictions {int(m[VRAM] + m[LOAD])}",
          flush=True)
    return m

start = row("start", "")
peak = start["vmmkit_device_used_bytes"]
for i in range(1, count + 1):
    t0 = time.time()
    status, answer = call("POST", "/api/generate", {"model": f"m{i}", "prompt": "hello vmmkit", "stream": False})
    took = time.time() - t0
    if status != 200:
        failures.append(f"generate m{i}: {status} {answer}")
    time.sleep(0.8)  # a few monitor polls
    m = row(f"load+generate m{i}", f"HTTP {status} in {took:.2f} s")
    peak = max(peak, m["vmmkit_device_used_bytes"])

_, models = call("GET", "/api/models")
backends = sorted({model["gpu_backend"] for model in models})
print("loaded now:", ", ".join(f"{model['name']} ({mib(model['device_bytes'])} MiB)" for model in models))
expected_backend = "cuda" if driver == "cuda" else "cpu"
if backends != [expected_backend]:
    failures.append(f"engines ran on {backends}, expected {expected_backend}")
for model in models:  # the memory of every survivor still reads back as written
    status, answer = call("POST", "/api/generate", {"model": model["name"], "prompt": "again", "stream": False})
    if status != 200:
        failures.append(f"generate {model['name']} again: {status} {answer}")

status, answer = call("POST", "/api/engines/echo/reload")
switched = sum(len(r["models"]) for r in answer.get("reloaded", [])) if status == 200 else 0
if status != 200 or switched != len(models):
    failures.append(f"reload: {status} {answer}, expected {len(models)} models switched")
row("reload (shadow)", f"HTTP {status}, {switched} models switched")

for model in models:
    status, answer = call("DELETE", f"/api/models/{model['name']}")
    if status != 200:
        failures.append(f"unload {model['name']}: {status} {answer}")
end = row("unload all", "")

evictions = end[VRAM] + end[LOAD]
print(f"summary: peak {mib(peak)} MiB, start {mib(start['vmmkit_device_used_bytes'])} MiB, end "
      f"{mib(end['vmmkit_device_used_bytes'])} MiB, evictions {int(evictions)}, "
      f"requests 200: {int(end.get(OK, 0))}")
if evictions < 1:
    failures.append("the monitor evicted nothing")
if end["vmmkit_device_used_bytes"] > start["vmmkit_device_used_bytes"] + (64 << 20):
    failures.append("device memory did not come back after unloading")
for failure in failures:
    print("FAIL:", failure)
print("engine-serve:", "OK" if not failures else f"{len(failures)} failure(s)")
stop(0 if not failures else 1)
PY
