#!/usr/bin/env bash
# GPU figures of `vmmkit serve`'s worker isolation, with the echo example engine (cuda backend):
#  1. anchor: --isolation in-process: median latency of one HTTP client (keep-alive) and requests/s
#     with 8 clients;
#  2. --isolation worker: the same figures, and the isolation's cost per generate (the difference
#     of the medians); how long each worker took to be ready (the host logs it; model load excluded).
#     Both servers run at once and are measured in alternating turns (6 blocks of 500 requests
#     each, then 8 clients twice each), so a change in the machine's load falls on both alike;
#  3. a worker killed with SIGKILL: the request after it loads the model again, and the device
#     memory the host reports returns to what it was before the model loaded;
#  4. an engine that calls CUDA itself (the test fixture engine built here against libcudart, which
#     cudaMallocs 256 MiB in engine_load_model): its worker runs under vmmkit's shim, so /metrics
#     counts the 256 MiB for its model (served by vmmkit, else they would not be counted), the
#     host's device figure and nvidia-smi see the same growth, and an unload gives it all back.
#   bash scripts/gpu/engine-workers.sh                    # on the GPU machine (--driver cuda)
#   ENGINE_DRIVER=host bash scripts/gpu/engine-workers.sh # here, on the host emulation (cpu backend)
# Needs runtime/bin/java or a JDK 25 (through ./vmmkit), target/ built (vmmkit.jar, the shim in
# target/native and target/test-native/engines/echo), gcc, libcudart (CUDA_HOME; the stand-in in
# target/test-native on the host emulation), nvidia-smi on the GPU, python3. Prints lines starting "engine-workers:"; exits non-zero
# when a request fails or the memory does not come back. Takes about a minute.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" engine-workers

driver="${ENGINE_DRIVER:-cuda}"
seconds="${ENGINE_SECONDS:-5}"
work="$(mktemp -d /tmp/vmmkit-engine-workers.XXXXXX)"
trap 'rm -rf "$work"' EXIT
plugins="target/test-native/engines/echo"
for backend in cpu cuda; do
  [ -f "$plugins/$backend/libecho_engine.so" ] || { echo "engine-workers: $plugins/$backend/libecho_engine.so is missing (build target/ first)"; exit 2; }
  mkdir -p "$work/engines/echo/$backend"
  cp "$plugins/$backend/libecho_engine.so" "$work/engines/echo/$backend/"
  cp "examples/echo-engine/manifest-$backend.json" "$work/engines/echo/$backend/manifest.json"
done
mkdir -p "$work/models"
for name in m1 m2 m3; do truncate -s 64M "$work/models/$name.bin"; done
# The CUDA-calling engine: the fixture engine, built against the CUDA runtime (the stand-in on the host emulation).
find_cudart engine-workers "$driver"
cuda_backend=cuda
[ "$driver" = host ] && cuda_backend=cpu
mkdir -p "$work/engines/cudafix/$cuda_backend"
gcc -O2 -fPIC -shared -Iinclude -DENGINE_ABI_VERSION=1 -DFIXTURE_NAME=cudafix -DFIXTURE_CUDA \
  -o "$work/engines/cudafix/$cuda_backend/engine.so" src/test/c/engines/fixture_engine.c "$cudart" -Wl,-rpath,"$cudart_dir" \
  || { echo "engine-workers: cannot build the CUDA-calling fixture engine"; exit 2; }
cat > "$work/engines/cudafix/$cuda_backend/manifest.json" <<JSON
{"id":"cudafix","version":"1.0.0","abi_version":"1","gpu_backend":"$cuda_backend","architectures":[],
 "formats":["cf"],"binary":"engine.so","options":{"cuda_load_mib":256}}
JSON
truncate -s 4K "$work/models/c1.cf"
extra=()
[ "$driver" = host ] && extra=(--device-memory 2GiB)

"$py" - "$driver" "$work" "$out" "$seconds" "${extra[@]}" <<'PY'
import http.client, json, os, re, select, statistics, subprocess, sys, threading, time

driver, work, out, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
extra = sys.argv[5:]
failures = []

def serve(mode):
    log_path = os.path.join(out, f"serve-{mode}.log")
    log = open(log_path, "w")
    cmd = ["./vmmkit", "serve", "--engines", work + "/engines", "--models", work + "/models", "--port", "0",
           "--driver", driver, "--isolation", mode, "--no-watch", "--poll-interval", "60s"] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("listening on http://127.0.0.1:"):
        print(f"engine-workers: the {mode} server did not start: {line or '(no output)'}; log {log_path}")
        proc.kill()
        sys.exit(1)
    return proc, int(line.rsplit(":", 1)[1]), log_path

def request(conn, method, path, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    text = response.read().decode()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text

def used_bytes(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    _, text = request(conn, "GET", "/metrics")
    conn.close()
    return int(re.search(r"^vmmkit_device_used_bytes (\d+)$", text, re.M).group(1))

def round_trips(port, model, count):
    """Seconds per request of one keep-alive client, count requests."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, answer = request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
        samples.append(time.perf_counter() - t0)
        if status != 200:
            failures.append(f"generate {model}: {status} {answer}")
            break
    conn.close()
    return samples

def medians_us(ports, model, rounds=6, count=500):
    """Median round trip per server (name -> port), both up at once, in alternating blocks, so a change in
    the machine's load falls on both alike."""
    for port in ports.values():
        round_trips(port, model, 300)
    samples = {name: [] for name in ports}
    for _ in range(rounds):
        for name, port in ports.items():
            samples[name] += round_trips(port, model, count)
    return {name: statistics.median(s) * 1e6 for name, s in samples.items()}

def throughput(port):
    stop = time.time() + seconds
    counts, failed = [0] * 8, [0]
    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        model = "m1" if i % 2 == 0 else "m2"
        while time.time() < stop:
            status, _ = request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
            counts[i] += 1
            if status != 200:
                failed[0] += 1
        conn.close()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    if failed[0]:
        failures.append(f"{failed[0]} failed requests with 8 clients")
    return sum(counts) / seconds

def used_back_to(port, before, loaded):
    """The device bytes in use once they are back at before (a worker's exit is seen within moments), or after 20 s."""
    deadline, after = time.time() + 20, loaded
    while time.time() < deadline:
        after = used_bytes(port)
        if after <= before:
            break
        time.sleep(0.1)
    return after

def smi_used_mib():
    if driver != "cuda":
        return None
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=30).stdout
        return int(text.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None

def model_bytes(port, model):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    _, text = request(conn, "GET", "/metrics")
    conn.close()
    found = re.search(r'^vmmkit_model_device_bytes\{model="' + model + r'"[^}]*\} (\d+)$', text, re.M)
    return int(found.group(1)) if found else -1

def cuda_calling_engine(conn, port):
    """The fixture engine's own cudaMalloc of 256 MiB: served by the worker's vmmkit allocator and counted."""
    mib = 1 << 20
    before, smi_before = used_bytes(port), smi_used_mib()
    status, answer = request(conn, "POST", "/api/generate", {"model": "c1", "prompt": "hello", "stream": False})
    if status != 200:
        failures.append(f"the CUDA-calling engine: {status} {answer}")
        return
    loaded, smi_loaded, counted = used_bytes(port), smi_used_mib(), model_bytes(port, "c1")
    expected = 256 * mib + 4096 + 4096  # its cudaMalloc, and weights + scratch through alloc_device
    smi = "" if smi_before is None else f", nvidia-smi +{smi_loaded - smi_before} MiB"
    print(f"engine-workers: CUDA-calling engine: /metrics counts {counted / mib:.2f} MiB for its model "
          f"(expected {expected / mib:.2f}: 256 MiB by its own cudaMalloc), device used +{(loaded - before) >> 20} MiB{smi}")
    if counted != expected:
        failures.append(f"the engine's own cudaMalloc was not counted for its model ({counted} bytes, expected {expected})")
    if smi_before is not None and abs((loaded - before) / mib - (smi_loaded - smi_before)) > 64:
        failures.append("the host's device figure and nvidia-smi disagree about the CUDA-calling engine")
    request(conn, "DELETE", "/api/models/c1")
    after = used_back_to(port, before, loaded)
    smi_after = smi_used_mib()
    smi = "" if smi_after is None else f", nvidia-smi {smi_after - smi_before:+d} MiB against before"
    print(f"engine-workers: CUDA-calling engine unloaded: device used {(after - before) >> 20:+d} MiB against before{smi}")
    # The driver's used figure moves by less than a page with its own bookkeeping (one run ended
    # a few hundred KiB above the start, printed as +0 MiB); a page or more is memory left behind.
    if after - before >= 2 * mib:
        failures.append("device memory did not come back after the CUDA-calling engine was unloaded")

# Both servers run at once: the medians and requests/s are taken in alternating turns.
servers = {}
try:
    for mode in ("in-process", "worker"):
        servers[mode] = serve(mode)
        proc, port, log_path = servers[mode]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for model in ("m1", "m2"):
            t0 = time.perf_counter()
            status, answer = request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
            if status != 200:
                failures.append(f"{mode}: first generate {model}: {status} {answer}")
            print(f"engine-workers: {mode}: first request to {model} (start + load) {1000 * (time.perf_counter() - t0):.0f} ms")
        conn.close()
    ports = {mode: port for mode, (_, port, _) in servers.items()}
    p50 = medians_us(ports, "m1")
    rps = {mode: [] for mode in ports}
    for _ in range(2):
        for mode, port in ports.items():
            rps[mode].append(throughput(port))
    for mode in ports:
        print(f"engine-workers: {mode}: p50 one client {p50[mode]:.0f} us, 8 clients {statistics.mean(rps[mode]):.0f} requests/s "
              f"(runs {', '.join(f'{r:.0f}' for r in rps[mode])})")
    print(f"engine-workers: isolation cost per generate (p50): {p50['worker'] - p50['in-process']:.0f} us; requests/s with 8 clients "
          f"{statistics.mean(rps['in-process']):.0f} in process, {statistics.mean(rps['worker']):.0f} with workers")

    _, port, _ = servers["worker"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    before = used_bytes(port)
    status, answer = request(conn, "POST", "/api/generate", {"model": "m3", "prompt": "hello", "stream": False})
    loaded = used_bytes(port)
    _, models = request(conn, "GET", "/api/models")
    pid = next(m["worker_pid"] for m in models if m["name"] == "m3")
    os.kill(pid, 9)
    after = used_back_to(port, before, loaded)
    status, answer = request(conn, "POST", "/api/generate", {"model": "m3", "prompt": "hello", "stream": False})
    if status != 200:
        failures.append(f"m3 after its worker was killed: {status} {answer}")
    print(f"engine-workers: worker killed: device {before >> 20} MiB before m3, {loaded >> 20} MiB loaded, "
          f"{after >> 20} MiB after the kill ({'back' if after <= before else 'NOT back'}); next request HTTP {status}")
    if after > before:
        failures.append("device memory did not come back after the worker was killed")
    cuda_calling_engine(conn, port)
    conn.close()
finally:
    for proc, _, _ in servers.values():
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
if "worker" in servers:
    starts = [int(m) for m in re.findall(r"ready in (\d+) ms", open(servers["worker"][2]).read())]
    if starts:
        print(f"engine-workers: worker start to ready: median {statistics.median(starts):.0f} ms, "
              f"min {min(starts)}, max {max(starts)} ({len(starts)} starts)")

for failure in failures:
    print("FAIL:", failure)
print("engine-workers:", "OK" if not failures else f"{len(failures)} failure(s)", "; logs in", out)
sys.exit(0 if not failures else 1)
PY
