#!/usr/bin/env bash
# GPU figures of `vmmkit serve`'s worker isolation, with the echo example engine (cuda backend):
#  1. anchor: --isolation in-process: median latency of one HTTP client (keep-alive) and requests/s
#     with 8 clients;
#  2. --isolation worker: the same figures, and the isolation's cost per generate (the difference
#     of the medians); how long each worker took to be ready (the host logs it; model load excluded);
#  3. a worker killed with SIGKILL: the request after it loads the model again, and the device
#     memory the host reports returns to what it was before the model loaded.
#   bash scripts/gpu/engine-workers.sh                    # on the GPU machine (--driver cuda)
#   ENGINE_DRIVER=host bash scripts/gpu/engine-workers.sh # here, on the host emulation (cpu backend)
# Needs runtime/bin/java or a JDK 25 (through ./vmmkit), target/ built (vmmkit.jar and
# target/test-native/engines/echo), python3. Prints lines starting "engine-workers:"; exits non-zero
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

def median_us(port, model, count=3000):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for _ in range(300):
        request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, answer = request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
        samples.append(time.perf_counter() - t0)
        if status != 200:
            failures.append(f"generate {model}: {status} {answer}")
            break
    conn.close()
    return statistics.median(samples) * 1e6

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

results = {}
for mode in ("in-process", "worker"):
    proc, port, log_path = serve(mode)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for model in ("m1", "m2"):
            t0 = time.perf_counter()
            status, answer = request(conn, "POST", "/api/generate", {"model": model, "prompt": "hello", "stream": False})
            if status != 200:
                failures.append(f"{mode}: first generate {model}: {status} {answer}")
            print(f"engine-workers: {mode}: first request to {model} (start + load) {1000 * (time.perf_counter() - t0):.0f} ms")
        p50 = median_us(port, "m1")
        rps = throughput(port)
        results[mode] = (p50, rps)
        print(f"engine-workers: {mode}: p50 one client {p50:.0f} us, 8 clients {rps:.0f} requests/s")
        if mode == "worker":
            before = used_bytes(port)
            status, answer = request(conn, "POST", "/api/generate", {"model": "m3", "prompt": "hello", "stream": False})
            loaded = used_bytes(port)
            _, models = request(conn, "GET", "/api/models")
            pid = next(m["worker_pid"] for m in models if m["name"] == "m3")
            os.kill(pid, 9)
            deadline, after = time.time() + 20, loaded
            while time.time() < deadline:
                after = used_bytes(port)
                if after <= before:
                    break
                time.sleep(0.1)
            status, answer = request(conn, "POST", "/api/generate", {"model": "m3", "prompt": "hello", "stream": False})
            if status != 200:
                failures.append(f"m3 after its worker was killed: {status} {answer}")
            print(f"engine-workers: worker killed: device {before >> 20} MiB before m3, {loaded >> 20} MiB loaded, "
                  f"{after >> 20} MiB after the kill ({'back' if after <= before else 'NOT back'}); next request HTTP {status}")
            if after > before:
                failures.append("device memory did not come back after the worker was killed")
        conn.close()
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    if mode == "worker":
        starts = [int(m) for m in re.findall(r"ready in (\d+) ms", open(log_path).read())]
        if starts:
            print(f"engine-workers: worker start to ready: median {statistics.median(starts):.0f} ms, "
                  f"min {min(starts)}, max {max(starts)} ({len(starts)} starts)")

if len(results) == 2:
    (p_in, r_in), (p_w, r_w) = results["in-process"], results["worker"]
    print(f"engine-workers: isolation cost per generate (p50): {p_w - p_in:.0f} us; requests/s with 8 clients "
          f"{r_in:.0f} in process, {r_w:.0f} with workers")
for failure in failures:
    print("FAIL:", failure)
print("engine-workers:", "OK" if not failures else f"{len(failures)} failure(s)", "; logs in", out)
sys.exit(0 if not failures else 1)
PY
