#!/usr/bin/env bash
# GPU check of the llama.cpp engine (examples/llama-engine) under `vmmkit serve --driver cuda`:
#   1. builds llama.cpp with CUDA for sm_90 (H100, H200) from the npm package's source, the same
#      source as the CPU libraries the tests use: only the targets llama, ggml and llama-bench;
#   2. builds the engine's CUDA variant against it;
#   3. writes a generated llama model of about 1.9 GB (scripts/tiny-gguf.sh, f16);
#   4. runs llama-bench on that file (the native anchor: tg128, all layers on the GPU), then serves
#      the same file and settings through `vmmkit serve` and times 128-token requests over HTTP;
#   5. prints device memory as /metrics and nvidia-smi see it after each step: a first load and
#      unload (the baseline), load, a second model that makes the resource monitor evict the first,
#      a shadow reload, unload; the end must be within 64 MiB of the baseline;
#   6. time to first token and tokens/s of streamed 128-token completions (OpenAI's API, server-sent
#      events), `vmmkit serve` beside llama.cpp's own llama-server on the same file and settings
#      (built from the same source; skipped, saying so, when its build fails).
#   bash scripts/gpu/llama.sh
# Carry: .deps/llama.cpp/3.22.1/source.tar.xz (7.2 MiB; scripts/fetch-llama-cpp.sh makes it from
# the npm package), runtime/ and target/ (the jar). No network. Needs nvcc, cmake, ninja, python3
# with numpy and yaml. LLAMA_CUDA_FA=ON compiles the FlashAttention kernels too (minutes longer).
# LLAMA_CUDA_BUILD=FILE.tar.xz: unpack llama.cpp's CUDA build from FILE when it exists, else build
# and keep the build there for the next run.
# LLAMA_ANCHORS=0 leaves out llama-bench, llama-server and the in-process figures (a shorter run: the
# memory figures only).
# LLAMA_THREADS: the CPU threads of the engine, llama-bench, decode_rate and llama-server alike;
# unset, the others run 2 and the engine is left to its own default (2 with every layer on the GPU),
# and the threads it chose are printed (engine_threads).
# LLAMA_ROUNDS (1): rounds of llama-bench then one untimed answer and nine timed ones, interleaved,
# after the first figures.
# LLAMA_GPU=host runs steps 3-5 here on the CPU build and the host emulation, with a small model
# and no llama-bench (a check of the script itself).
# Prints "llama-figure: NAME VALUE" lines; exits non-zero when a request fails or memory does not
# come back.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" llama
version=3.22.1
mode="${LLAMA_GPU:-cuda}"
anchors="${LLAMA_ANCHORS:-1}"
work="$(mktemp -d /tmp/vmmkit-llama.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/engines" "$work/models"
began=$(date +%s)
elapsed() { echo "$(( $(date +%s) - began )) s"; }

if [ "$mode" = cuda ]; then
  archive="${LLAMA_SOURCE:-.deps/llama.cpp/$version/source.tar.xz}"
  [ -f "$archive" ] || { echo "llama: no $archive (scripts/fetch-llama-cpp.sh makes it; carry it)"; exit 2; }
  mkdir -p "$work/src" "$work/include" "$work/lib"
  tar -xJf "$archive" -C "$work/src"
  echo "llama: llama.cpp (CUDA, sm_90) from $archive; build log in $out/build.log"
  # ggml's CUDA backend links cuBLAS. Where the CUDA toolkit lacks it (only the compiler is installed
  # and cuBLAS comes as a Python wheel, libcublas.so.13 with no unversioned name, which CMake's
  # FindCUDAToolkit does not find), name the library and its headers to CMake.
  cublas_args=()
  if ! ls "${CUDA_HOME:-/usr/local/cuda}"/lib64/libcublas.so >/dev/null 2>&1; then
    cublas="$(find "${CUDA_HOME:-/usr/local/cuda}/" /usr/lib/x86_64-linux-gnu \
                $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
                -name 'libcublas.so*' 2>/dev/null | sort | head -n 1)"
    [ -n "$cublas" ] || { echo "llama: no cuBLAS library found (ggml's CUDA backend needs it)"; exit 1; }
    cublas_dir="$(dirname "$cublas")"
    cublas_include="$(dirname "$cublas_dir")/include"
    echo "llama: cuBLAS from $cublas_dir (headers in $cublas_include)"
    cublas_args=(-DCUDA_cublas_LIBRARY="$cublas" -DCUDA_cublasLt_LIBRARY="$(ls "$cublas_dir"/libcublasLt.so* | head -n 1)"
                 -DCMAKE_CUDA_FLAGS="-I$cublas_include" -DCMAKE_CXX_FLAGS="-I$cublas_include")
    export LD_LIBRARY_PATH="$cublas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  prebuilt="${LLAMA_CUDA_BUILD:-}"
  if [ -n "$prebuilt" ] && [ -f "$prebuilt" ]; then
    # A build an earlier run of this script left (build/bin of the same source), to skip the compile.
    mkdir -p "$work/build" && tar -xJf "$prebuilt" -C "$work/build" \
      || { echo "llama: cannot unpack $prebuilt"; exit 1; }
    echo "llama: llama.cpp's CUDA build unpacked from $prebuilt"
  else
    # GGML_CUDA_NO_VMM: ggml's pool takes its memory with cudaMalloc, which vmmkit's shim serves.
    cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NO_VMM=ON -DGGML_CUDA_NCCL=OFF \
        -DGGML_CUDA_FA="${LLAMA_CUDA_FA:-OFF}" -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${cublas_args[@]}" >"$out/build.log" 2>&1 \
      && ninja -C "$work/build" -j"$(nproc)" llama ggml $([ "$anchors" = 1 ] && echo llama-bench) >>"$out/build.log" 2>&1 \
      || { tail -n 30 "$out/build.log"; echo "llama: the llama.cpp build failed"; exit 1; }
    echo "llama: built in $(elapsed)"
    if [ "$anchors" = 1 ]; then
      ninja -C "$work/build" -j"$(nproc)" llama-server >>"$out/build.log" 2>&1 \
        && echo "llama: llama-server built ($(elapsed))" || echo "llama: llama-server did not build (see $out/build.log); no comparison with it"
    fi
    if [ -n "$prebuilt" ]; then   # keep it for the next run (LLAMA_CUDA_BUILD names where)
      (cd "$work/build" && find bin -maxdepth 1 \( -name 'lib*.so*' -o -name llama-bench -o -name llama-server \) -print0 \
         | tar --null -T - -cf - | xz -T0 -6 > "$prebuilt") && echo "llama: build kept in $prebuilt ($(du -h "$prebuilt" | cut -f1))"
    fi
  fi
  # The build's binaries find their libraries by a run path into the folder they were built in.
  export LD_LIBRARY_PATH="$work/build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cp "$work"/src/include/llama.h "$work"/src/ggml/include/*.h "$work"/src/ggml/src/ggml-backend-impl.h "$work/include/"
  find "$work/build/bin" -maxdepth 1 -name 'lib*.so*' ! -name 'libllama-common*' ! -name 'libmtmd*' -exec cp -P {} "$work/lib/" \;
  make -s -C examples/llama-engine install BACKEND=cuda LLAMA_DIR="$work" LLAMA_LIB="$work/lib" \
      ENGINES="$work/engines" BUILD="$work/plugin" || { echo "llama: the engine's CUDA build failed"; exit 1; }
  gguf_py="$work/src/gguf-py"
  dims=(--embd 2048 --layers 16 --heads 16 --kv-heads 16 --ff 5632 --vocab 32000 --context 2048 --type f16)
  tokens=128
  driver_args=(--driver cuda)
  cpu_threads="${LLAMA_THREADS:-2}"
  # Unset, the engine picks its own (2 with every layer on the GPU: engine_options_threads), which
  # the figures then check; set, every side is told the same number.
  threads=""
  [ -n "${LLAMA_THREADS:-}" ] && { threads=", \"threads\": $cpu_threads"; threads_told="$cpu_threads"; }
  export LLAMA_THREADS="$cpu_threads"   # the Python parts below read it
else
  [ -f target/engines/llama/cpu/libllama_engine.so ] || { echo "llama: build target/engines/llama/cpu first (scripts/fetch-llama-cpp.sh)"; exit 2; }
  cp -r target/engines/llama "$work/engines/"
  gguf_py="$(ls -d .deps/llama.cpp/*/gguf-py | tail -n 1)"
  dims=(--embd 256 --layers 4 --ff 512 --vocab 2048 --context 512)
  tokens=32
  driver_args=(--driver host --device-memory 40MiB)   # 50 %: one model (14 MiB) fits, two do not
  threads=', "threads": 1'
  threads_told=1
  export LLAMA_THREADS=1
fi
backend=$([ "$mode" = cuda ] && echo cuda || echo cpu)
# The same settings as llama-bench's: all layers on the GPU, LLAMA_THREADS CPU threads (2), no FlashAttention, a context
# just above the request's tokens (llama-bench's is prompt + generated tokens; ggml pads both to 256).
# "timing": 1 logs where each request's decoding time went (printed at the end).
cat > "$work/engines/llama/$backend/manifest.json" <<JSON
{"id": "llama", "version": "$version", "abi_version": "2", "gpu_backend": "$backend",
 "architectures": ["llama"], "formats": ["gguf"], "binary": "libllama_engine.so",
 "options": {"max_tokens": $tokens, "context_size": 256, "gpu_layers": -1, "top_k": 5, "flash_attn": "off", "timing": 1$threads}}
JSON

LLAMA_GGUF_PY="$gguf_py" bash scripts/tiny-gguf.sh "$work/models/big.gguf" "${dims[@]}" \
  || { echo "llama: cannot write the model"; exit 1; }
ln "$work/models/big.gguf" "$work/models/other.gguf"   # a second model of the same size, no more disk
model_mib=$(( $(stat -c %s "$work/models/big.gguf") >> 20 ))
echo "llama: model of $model_mib MiB written ($(elapsed))"
echo "llama-figure: model_mib $model_mib"

bench_ts=0
if [ "$mode" = cuda ] && [ "$anchors" = 1 ]; then
  "$work/build/bin/llama-bench" -m "$work/models/big.gguf" -ngl 99 -p 0 -n $tokens -r 5 -fa off -t "$cpu_threads" -o json \
      >"$out/llama-bench.json" 2>"$out/llama-bench.log" || { tail "$out/llama-bench.log"; echo "llama: llama-bench failed"; exit 1; }
  bench_ts=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['avg_ts'])" "$out/llama-bench.json")
  echo "llama-figure: llama_bench_tg${tokens}_tokens_per_s $bench_ts"
fi

if [ "$mode" = cuda ] && [ "$anchors" = 1 ]; then
  # Where the gap between llama-bench and the served rate goes: a plain decode loop with
  # llama-bench's settings, then the engine's (its context, the prompt, the most likely token read
  # from the logits), then each of the engine's other choices, then the engine's settings with
  # vmmkit serving the loop's CUDA memory (`vmmkit run`). Nothing of vmmkit's host in any of them.
  if make -s -C examples/llama-engine decode-rate BACKEND=cuda LLAMA_DIR="$work" LLAMA_LIB="$work/lib" BUILD="$work/plugin"; then
    rate="$work/plugin/cuda/decode_rate"
    model="$work/models/big.gguf"
    engine=(--tokens $tokens --prompt "hello world" --ctx 256 --batch 256 --threads "$cpu_threads")
    decode_rate() {   # decode_rate LABEL COMMAND...: one "llama-figure: decode_rate_LABEL" line
      local label="$1"; shift
      local line
      line=$("$@" 2>>"$out/decode-rate.log" | grep '^decode_rate:')
      echo "llama-figure: decode_rate_$label ${line#decode_rate: tokens_per_s }"
    }
    bench=(--tokens $tokens --pick random --ctx $tokens --threads "$cpu_threads")
    decode_rate bench_settings "$rate" "$model" "${bench[@]}"
    decode_rate engine_settings_random_pick "$rate" "$model" "${engine[@]}" --pick random
    decode_rate engine_settings_touch_logits "$rate" "$model" "${engine[@]}" --pick touch
    decode_rate engine_settings_greedy_scan "$rate" "$model" "${engine[@]}" --pick greedy
    decode_rate engine_settings "$rate" "$model" "${engine[@]}" --pick engine
    # The engine's settings with llama-bench's batch (the two differ in batch and prompt alone).
    decode_rate engine_settings_batch_128 "$rate" "$model" "${engine[@]}" --pick engine --batch 128
    decode_rate engine_settings_fa_auto "$rate" "$model" "${engine[@]}" --pick engine --fa auto
    decode_rate engine_settings_no_cuda_graphs env GGML_CUDA_DISABLE_GRAPHS=1 "$rate" "$model" "${engine[@]}" --pick engine
    # 15 runs each: a process under vmmkit carries a JVM whose start-up work overlaps the first runs.
    decode_rate engine_settings_15_runs "$rate" "$model" "${engine[@]}" --pick engine --reps 15
    decode_rate engine_settings_under_vmmkit ./vmmkit run --driver cuda -- "$rate" "$model" "${engine[@]}" --pick engine --reps 15
    decode_rate engine_settings_under_vmmkit_monitor ./vmmkit run --driver cuda --mode monitor -- "$rate" "$model" "${engine[@]}" --pick engine --reps 15
    decode_rate bench_settings_under_vmmkit ./vmmkit run --driver cuda -- "$rate" "$model" "${bench[@]}"
  else
    echo "llama: decode_rate did not build; no split of the gap"
  fi
fi

python3 - "$mode" "$work" "$out" "$tokens" "$bench_ts" "$model_mib" "${driver_args[@]}" <<'PY'
import http.client, json, os, socket, subprocess, sys, time
sys.path.insert(0, "scripts/gpu/lib")
from serve_client import ServeProcess

mode, work, out, tokens, bench_ts, model_mib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
driver_args = sys.argv[7:]
cuda = mode == "cuda"

def smi():
    """GPU 0's used memory in MiB, as nvidia-smi reports it (None off a GPU)."""
    if not cuda:
        return None
    text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True).stdout
    return int(text.split(",")[0])

if cuda:
    total_mib = int(subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                                   capture_output=True, text=True).stdout.strip())
    # Room for the host's context and one model (weights, KV cache, compute buffers), not two.
    threshold = round(min(0.95, (smi() + 1024 + 1.5 * (model_mib + 600)) / total_mib), 3)
else:
    threshold = 0.5
server = ServeProcess("llama", ["--engines", work + "/engines", "--models", work + "/models", "--vram-threshold", str(threshold),
                                 "--poll-interval", "200ms", "--no-watch"] + driver_args, os.path.join(out, "serve.log"), 120)
call, metrics, stop = server.call, server.metrics, server.stop
failures = []

def row(step):
    m = metrics()
    models = {k.split('model="')[1].split('"')[0]: int(v) >> 20 for k, v in m.items() if k.startswith("vmmkit_model_device_bytes{")}
    gpu = smi()
    print(f"{step:<34} /metrics device used {int(m['vmmkit_device_used_bytes']) >> 20:>7} MiB, per model {models}"
          + ("" if gpu is None else f"   nvidia-smi {gpu:>7} MiB"), flush=True)
    return m, gpu

eval_rates = []   # Ollama's "eval rate" of each answer: tokens after the first / eval_duration

def generate(model, prompt="hello world"):
    t0 = time.perf_counter()
    status, answer = call("POST", "/api/generate", {"model": model, "prompt": prompt, "stream": False})
    took = time.perf_counter() - t0
    if status != 200:
        failures.append(f"generate {model}: {status} {answer}")
        return None, took
    if answer.get("eval_duration", 0) > 0 and answer.get("eval_count", 0) > 1:
        eval_rates.append((answer["eval_count"] - 1) / (answer["eval_duration"] / 1e9))
    return [t["id"] for t in answer["tokens"]], took

def streamed(base, body, runs=5):
    """Median time to first token (ms) and tokens/s of streamed completions at base (http://host:port)."""
    host, port = base.split("//")[1].split(":")
    firsts, rates = [], []
    for _ in range(runs + 1):
        conn = http.client.HTTPConnection(host, int(port), timeout=300)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        first, count = None, 0
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: {"):
                continue
            choice = json.loads(line[6:]).get("choices", [{}])
            if choice and choice[0].get("text"):
                count += 1
                if first is None:
                    first = time.perf_counter() - t0
        took = time.perf_counter() - t0
        conn.close()
        if first is not None:
            firsts.append(first * 1000)
            rates.append(count / took)
    firsts, rates = sorted(firsts[1:]), sorted(rates[1:])   # the first run warms up
    return (firsts[len(firsts) // 2], rates[len(rates) // 2], count) if firsts else (None, None, 0)

stream_body = {"prompt": "hello world", "max_tokens": tokens, "temperature": 0, "stream": True}

def wait_gone(name, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        _, models = call("GET", "/api/models")
        if all(m["name"] != name for m in models):
            return True
        time.sleep(0.1)
    return False

m_start, gpu_start = row("start")
# One load and unload first: the CUDA runtime's context and cuBLAS's handles stay once made, a
# model must not. What is in use after it is the baseline the end is compared with.
generate("other")
call("DELETE", "/api/models/other")
m_base, gpu_base = row("baseline (after a load and unload)")
first, took = generate("big")
print(f"llama: first request (load + {tokens} tokens) {took:.2f} s", flush=True)
# Three requests first, untimed: the host's and the worker's JVMs compile the answer path during the
# first ones, beside llama.cpp's threads.
runs = []
for turn in range(3 + 9):
    if turn == 3:
        eval_rates.clear()
    ids, took = generate("big")
    if ids is not None:
        if ids != first:
            failures.append("the same prompt gave other tokens")
        if turn >= 3:
            runs.append(len(ids) / took)
if runs:
    served = sorted(runs)[len(runs) // 2]
    print(f"llama-figure: served_tg{tokens}_tokens_per_s {served:.1f} (median of {len(runs)}, HTTP round trip included, {len(first)} tokens each)")
    if bench_ts:
        print(f"llama-figure: overhead_vs_llama_bench_percent {100 * (bench_ts / served - 1):.2f}")
if eval_rates:
    # Generation alone, as llama-bench's tg test (no prompt) and Ollama's "eval rate" count it: the
    # answer's eval_duration runs from its first token to its last, measured by the host.
    rate = sorted(eval_rates)[len(eval_rates) // 2]
    print(f"llama-figure: served_eval_rate_tokens_per_s {rate:.1f} (median of {len(eval_rates)}; Ollama's eval_count - 1 over eval_duration, the same answers)")
    if bench_ts:
        print(f"llama-figure: eval_rate_overhead_vs_llama_bench_percent {100 * (bench_ts / rate - 1):.2f}")
# Interleaved rounds (LLAMA_ROUNDS, 1 = none): llama-bench, then nine answers, again and again, so
# the two are compared under the same drift of the machine (one process to the next moves a few %).
rounds = int(os.environ.get("LLAMA_ROUNDS", "1"))
bench_bin = os.path.join(work, "build", "bin", "llama-bench")
if cuda and bench_ts and rounds > 1 and os.path.exists(bench_bin):
    ratios = []
    for r in range(1, rounds + 1):
        done = subprocess.run([bench_bin, "-m", os.path.join(work, "models", "big.gguf"), "-ngl", "99", "-p", "0", "-n", str(tokens),
                               "-r", "5", "-fa", "off", "-t", os.environ["LLAMA_THREADS"], "-o", "json"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print("llama: llama-bench failed in round", r, done.stderr[-300:])
            break
        round_bench = json.loads(done.stdout)[0]["avg_ts"]
        # One answer untimed first, as llama-bench runs an untimed warm-up before its repetitions:
        # the worker idled while llama-bench ran, and the first answers after that ran slower
        # (docs/engine.md).
        generate("big")
        eval_rates.clear()
        round_served = []
        for _ in range(9):
            ids, took = generate("big")
            if ids is not None:
                round_served.append(len(ids) / took)
        if not eval_rates:
            break
        round_eval = sorted(eval_rates)[len(eval_rates) // 2]
        ratios.append(round_bench / round_eval)
        print(f"llama-figure: round {r}: llama_bench {round_bench:.1f}, served eval rate {round_eval:.1f}, "
              f"whole answers {sorted(round_served)[len(round_served) // 2]:.1f} tokens/s: eval rate {100 * (round_bench / round_eval - 1):.2f} % below")
    if ratios:
        ratios.sort()
        print(f"llama-figure: interleaved_eval_rate_overhead_vs_llama_bench_percent {100 * (ratios[len(ratios) // 2] - 1):.2f} "
              f"(median of {len(ratios)} rounds; each round's {', '.join(f'{100 * (x - 1):.2f}' for x in ratios)})")
vmmkit_stream = streamed(server.base, dict(stream_body, model="big"))
if vmmkit_stream[0] is not None:
    print(f"llama-figure: vmmkit_streamed_ttft_ms {vmmkit_stream[0]:.2f}")
    print(f"llama-figure: vmmkit_streamed_tokens_per_s {vmmkit_stream[1]:.1f} ({vmmkit_stream[2]} tokens)")
else:
    failures.append("no streamed tokens from vmmkit serve")
m_loaded, gpu_loaded = row("loaded big")
if gpu_loaded is not None:
    print(f"llama-figure: nvidia_smi_model_mib {gpu_loaded - gpu_start}")
big_bytes = sum(v for k, v in m_loaded.items() if k.startswith('vmmkit_model_device_bytes{model="big"'))
print(f"llama-figure: metrics_model_device_mib {int(big_bytes) >> 20}")

generate("other")
evicted = wait_gone("big")
if not evicted:
    failures.append("the monitor did not evict big after other loaded")
m_evicted, gpu_evicted = row("other loaded, big evicted" if evicted else "other loaded, big NOT evicted")

status, answer = call("POST", "/api/engines/llama/reload")
if status != 200:
    failures.append(f"reload: {status} {answer}")
ids, _ = generate("other")
row("reloaded (shadow), other serves")
if ids is not None and ids != first:
    failures.append("after the reload the same prompt gave other tokens")
status, _ = call("DELETE", "/api/models/other")
_, gpu_end = row("unloaded other")
if status != 200:
    failures.append("unload other failed")
m_end = metrics()
print(f"llama-figure: metrics_device_used_mib_baseline_end {int(m_base['vmmkit_device_used_bytes']) >> 20} {int(m_end['vmmkit_device_used_bytes']) >> 20}")
if cuda:
    print(f"llama-figure: nvidia_smi_mib_start_baseline_end {gpu_start} {gpu_base} {gpu_end}")
    if gpu_end - gpu_base > 64:
        failures.append(f"device memory did not come back: {gpu_base} MiB at the baseline, {gpu_end} MiB at the end")
elif m_end["vmmkit_device_used_bytes"] > m_base["vmmkit_device_used_bytes"]:
    failures.append("device memory did not come back to the baseline")
llama_server = os.path.join(work, "build", "bin", "llama-server")
if cuda and os.path.exists(llama_server) and vmmkit_stream[0] is not None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The settings vmmkit's engine uses: all layers on the GPU, LLAMA_THREADS threads, no FlashAttention, context 256, one slot.
    native = subprocess.Popen([llama_server, "-m", os.path.join(work, "models", "big.gguf"), "-ngl", "99", "-t", os.environ["LLAMA_THREADS"], "-fa", "off",
                               "-c", "256", "-np", "1", "--host", "127.0.0.1", "--port", str(port)],
                              stdout=open(os.path.join(out, "llama-server.log"), "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    up = False
    for _ in range(600):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            up = conn.getresponse().status == 200
            conn.close()
        except OSError:
            pass
        if up or native.poll() is not None:
            break
        time.sleep(0.1)
    if up:
        ttft, rate, count = streamed(base, stream_body)
        print(f"llama-figure: llama_server_streamed_ttft_ms {ttft:.2f}")
        print(f"llama-figure: llama_server_streamed_tokens_per_s {rate:.1f} ({count} tokens)")
        print(f"llama-figure: vmmkit_vs_llama_server_ttft_percent {100 * (vmmkit_stream[0] / ttft - 1):.2f}")
        print(f"llama-figure: vmmkit_vs_llama_server_tokens_per_s_percent {100 * (vmmkit_stream[1] / rate - 1):.2f}")
    else:
        print(f"llama: llama-server did not come up (log in {out}/llama-server.log); no comparison")
    native.terminate()
    native.wait(30)
if cuda and os.environ.get("LLAMA_ANCHORS", "1") == "1":
    # The same figures with the engine in the host's own process: what the worker isolation costs.
    inproc = ServeProcess("llama-in-process", ["--engines", work + "/engines", "--models", work + "/models", "--isolation", "in-process",
                                                "--no-watch"] + driver_args, os.path.join(out, "serve-in-process.log"), 120)
    inproc.call("POST", "/api/generate", {"model": "big", "prompt": "hello world", "stream": False})   # load
    rates = []
    for turn in range(3 + 9):   # as for the worker: three untimed first
        t0 = time.perf_counter()
        status, answer = inproc.call("POST", "/api/generate", {"model": "big", "prompt": "hello world", "stream": False})
        if status == 200 and turn >= 3:
            rates.append(len(answer["tokens"]) / (time.perf_counter() - t0))
    if rates:
        print(f"llama-figure: in_process_served_tg{tokens}_tokens_per_s {sorted(rates)[len(rates) // 2]:.1f}")
    ttft, rate, count = streamed(inproc.base, dict(stream_body, model="big"))
    if ttft is not None:
        print(f"llama-figure: in_process_streamed_ttft_ms {ttft:.2f}")
        print(f"llama-figure: in_process_streamed_tokens_per_s {rate:.1f} ({count} tokens)")
    inproc.end()
for failure in failures:
    print("FAIL:", failure)
print("llama:", "OK" if not failures else f"{len(failures)} failure(s)")
stop(0 if not failures else 1)
PY
rc=$?
# The threads each loaded model runs, as the engine chose them or was told.
threads_used="$(grep -h 'llama: loaded ' "$out"/serve*.log 2>/dev/null | grep -o '[0-9]* threads' | sort | uniq -c | awk '{printf "%s%s x %s threads", (NR > 1 ? "; " : ""), $1, $2}')"
told="${threads_told:-none, so the engine default}"
echo "llama-figure: engine_threads ${threads_used:-?} (models loaded; the threads option: $told)"
# The engine's own account of each request (its "timing" option): the device's wait per token against
# the loop's other work, to set beside decode_rate's "per token" split above.
for log in serve serve-in-process; do
  [ -f "$out/$log.log" ] || continue
  echo "llama: the engine's timing of each request ($log.log):"
  grep -ho 'llama: timing: .*' "$out/$log.log" | tail -12 | sed 's/^/  /'
done
echo "llama: done in $(elapsed)"
exit $rc
