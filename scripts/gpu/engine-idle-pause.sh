#!/usr/bin/env bash
# GPU figures of `vmmkit serve --idle-policy pause`: two models that do not fit under the device
# threshold together, requests alternating between them, engines in workers under vmmkit's shim.
# The models are the test fixture engine built here against libcudart, each taking SIZE_MIB (default
# 8192) with its own cudaMalloc in engine_load_model (served and tagged by the worker's allocator).
#  1. anchor, --idle-policy evict: the monitor evicts the idle model, so each request to it starts a
#     worker and loads the model again: the time of those requests;
#  2. --idle-policy pause: the monitor pauses the idle model instead; each request to it resumes it:
#     the request's time, the pause's and resume's times (/api/models), the host's device figure and
#     nvidia-smi before and after each pause (they must drop by about SIZE_MIB), the host memory kept,
#     and that the model file was loaded once per model (no reload: the worker pid stays).
#   bash scripts/gpu/engine-idle-pause.sh                    # on the GPU machine (--driver cuda)
#   ENGINE_DRIVER=host SIZE_MIB=192 bash scripts/gpu/engine-idle-pause.sh   # here, on the host emulation
# Needs target/ built (vmmkit.jar, the shim in target/native), runtime/ or a JDK 25, gcc, libcudart
# (CUDA_HOME; the stand-in in target/test-native on the emulation), nvidia-smi on the GPU, python3.
# Prints lines starting "engine-idle-pause:"; exits non-zero when a request fails, a pause does not
# give the memory back, or a paused model was loaded again. Takes one to two minutes.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" engine-idle-pause

driver="${ENGINE_DRIVER:-cuda}"
size_mib="${SIZE_MIB:-8192}"
cycles="${CYCLES:-3}"
work="$(mktemp -d /tmp/vmmkit-engine-idle-pause.XXXXXX)"
trap 'rm -rf "$work"' EXIT
use_vmmkit_build engine-idle-pause
find_cudart engine-idle-pause "$driver"
backend=cuda
[ "$driver" = host ] && backend=cpu
mkdir -p "$work/engines/cudafix/$backend" "$work/models"
gcc -O2 -fPIC -shared -Iinclude -DENGINE_ABI_VERSION=1 -DFIXTURE_NAME=cudafix -DFIXTURE_CUDA \
  -o "$work/engines/cudafix/$backend/engine.so" src/test/c/engines/fixture_engine.c "$cudart" -Wl,-rpath,"$cudart_dir" \
  || { echo "engine-idle-pause: cannot build the CUDA-calling fixture engine"; exit 2; }
cat > "$work/engines/cudafix/$backend/manifest.json" <<JSON
{"id":"cudafix","version":"1.0.0","abi_version":"1","gpu_backend":"$backend","architectures":[],
 "formats":["cf"],"binary":"engine.so","options":{"cuda_load_mib":$size_mib,"load_log":"$work/loads.log"}}
JSON
truncate -s 4K "$work/models/c1.cf" "$work/models/c2.cf"

"$py" - "$driver" "$work" "$out" "$size_mib" "$cycles" <<'PY'
import http.client, json, os, re, select, subprocess, sys, time

driver, work, out, size_mib, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
mib = 1 << 20
failures = []

def smi(field):
    if driver != "cuda":
        return None
    try:
        text = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=30).stdout
        return int(text.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None

# One model fits under the threshold, two do not: the threshold sits half a model above one
# model's use (a worker's CUDA context is about 0.5 GiB). On the emulation the device is sized so.
if driver == "cuda":
    total, used0 = smi("memory.total"), smi("memory.used")
    if total is None:
        print("engine-idle-pause: nvidia-smi gave no figures"); sys.exit(2)
    threshold = min(0.99, (used0 + 2 * 600 + 1.5 * size_mib) / total)
    extra = ["--vram-threshold", f"{threshold:.4f}"]
else:
    used0 = 0
    extra = ["--device-memory", f"{int(size_mib * 1.6)}MiB", "--vram-threshold", "0.8"]

def serve(policy):
    log_path = os.path.join(out, f"serve-{policy}.log")
    cmd = ["./vmmkit", "serve", "--engines", work + "/engines", "--models", work + "/models", "--port", "0",
           "--driver", driver, "--isolation", "worker", "--no-watch", "--poll-interval", "200ms",
           "--idle-policy", policy] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("listening on http://127.0.0.1:"):
        print(f"engine-idle-pause: the {policy} server did not start: {line or '(no output)'}; log {log_path}")
        proc.kill(); sys.exit(1)
    return proc, int(line.rsplit(":", 1)[1])

def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text

def generate(port, model):
    t0 = time.perf_counter()
    status, answer = call(port, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
    ms = 1000 * (time.perf_counter() - t0)
    if status != 200:
        failures.append(f"generate {model}: {status} {answer}")
    return ms

def models(port):
    return {m["name"]: m for m in call(port, "GET", "/api/models")[1]}

def used(port):
    return int(re.search(r"^vmmkit_device_used_bytes (\d+)$", call(port, "GET", "/metrics")[1], re.M).group(1))

def until(port, test, what, seconds=120):
    """Polls /api/models until test(models) holds (the monitor acts every 200 ms)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        now = models(port)
        if test(now):
            return now
        time.sleep(0.05)
    failures.append(f"timed out waiting for {what}: {json.dumps(models(port))}")
    return models(port)

def loads():
    try:
        return [os.path.basename(l.strip()) for l in open(os.path.join(work, "loads.log"))]
    except OSError:
        return []

for policy in ("evict", "pause"):
    open(os.path.join(work, "loads.log"), "w").close()
    proc, port = serve(policy)
    try:
        first = {m: generate(port, m) for m in ("c1", "c2")}
        print(f"engine-idle-pause: {policy}: first requests (worker start + load of {size_mib} MiB): "
              f"c1 {first['c1']:.0f} ms, c2 {first['c2']:.0f} ms")
        wakes = []
        for cycle in range(cycles):
            for model, other in (("c1", "c2"), ("c2", "c1")):
                # wait for the monitor to act on the idle model
                if policy == "evict":
                    until(port, lambda ms: model not in ms, f"{model} evicted")
                else:
                    state = until(port, lambda ms: ms.get(model, {}).get("status") == "paused", f"{model} paused")
                    # one model running, one paused: the device holds one model (and both workers' contexts), not two
                    host_mib, smi_mib = used(port) >> 20, smi("memory.used")
                    m = state.get(model, {})
                    smi_text = "" if smi_mib is None else f", nvidia-smi {smi_mib} MiB ({used0} MiB before the server)"
                    print(f"engine-idle-pause: pause {model}: {m.get('last_pause_ms', 0):.1f} ms, "
                          f"{m.get('paused_bytes', 0) >> 20} MiB given back, {m.get('host_backup_bytes', 0) >> 20} MiB kept; "
                          f"device used with one model paused: host figure {host_mib} MiB{smi_text}")
                    if m.get("paused_bytes", 0) < size_mib * mib:
                        failures.append(f"pause of {model} gave back {m.get('paused_bytes', 0)} bytes, less than the model's")
                    if smi_mib is not None and smi_mib - used0 > 1.5 * size_mib + 2 * 1024:
                        failures.append(f"nvidia-smi sees {smi_mib - used0} MiB in use with one {size_mib} MiB model paused")
                ms = generate(port, model)
                wakes.append(ms)
                detail = ""
                if policy == "pause":
                    detail = f" (resume {models(port).get(model, {}).get('last_resume_ms', 0):.1f} ms in the worker)"
                print(f"engine-idle-pause: {policy}: cycle {cycle + 1}: request to idle {model} {ms:.0f} ms{detail}")
        wakes.sort()
        print(f"engine-idle-pause: {policy}: request to the idle model: median {wakes[len(wakes) // 2]:.0f} ms, "
              f"min {wakes[0]:.0f}, max {wakes[-1]:.0f} ({len(wakes)} requests); model loads {len(loads())}")
        if policy == "pause" and len(loads()) != 2:
            failures.append(f"with pause the model files were loaded {len(loads())} times, not twice: {loads()}")
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()

for failure in failures:
    print("FAIL:", failure)
print("engine-idle-pause:", "OK" if not failures else f"{len(failures)} failure(s)", "; logs in", out)
sys.exit(0 if not failures else 1)
PY
