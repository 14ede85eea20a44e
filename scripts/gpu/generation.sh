#!/usr/bin/env bash
# Llama-style generation in PyTorch under several allocators (below), each in its own process, same
# machine, same run. Run from the repository root on a machine with an NVIDIA GPU, python3 with PyTorch, gcc, and
# runtime/ (scripts/build-runtime.sh) and target/ built:
#   bash scripts/gpu/generation.sh
# generation.py is the model (random weights, no network): a step is one generate() call, a prefill
# of the prompt and then one token at a time, the KV cache growing by torch.cat; the number of new
# tokens is chosen (in the first, native run) so that one step makes about TARGET_ALLOCS allocations.
# Configurations:
#   native       PyTorch's caching allocator
#   trivial      a minimal pluggable allocator (trivial_alloc.c, built here: per-size free lists over
#                cudaMalloc): the cost of PyTorch's pluggable-allocator path itself
#   vmmkit       vmmkit's shim as PyTorch's pluggable allocator
#   vmmkit-long  vmmkit again with STEPS_MORE (7) more timed steps and no pair loop: the difference of
#                its stats file and vmmkit's is vmmkit's cache misses and driver calls per steady step
#   vmm-run      `vmmkit run`: PyTorch's caching allocator over vmmkit's cudaMalloc
#   expandable   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   native-again the first run once more: how far two native runs differ (noise)
#   roundN-native, roundN-vmmkit  ROUNDS (3) more back-to-back pairs without the pair loops: one
#                step-time ratio per round, so machine drift does not decide the comparison
# Prints, per configuration: median step time, ratio to native, torch.empty+del pair cost (4 KiB and
# 1 MiB), peak reserved memory (max_memory_reserved; vmmkit's stats file; the trivial allocator's
# cudaMalloc bytes), device memory in use after the run (cudaMemGetInfo, less the context),
# allocations per step, vmmkit's cache hits, misses and driver calls; then where the time goes per
# allocate+free pair. Logs and JSON in $OUT/generation/ when OUT is set. About 3-4 minutes; exits
# non-zero if a run failed.
# Knobs: PYTHON (python3), TARGET_ALLOCS (32000), STEPS (timed steps per run, 7), STEPS_MORE (7),
# GEN_ARGS (more generation.py options, e.g. "--layers 16 --batch 1"), RUN_LIMIT (seconds per run, 90),
# ROUNDS (3).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" generation
limit="${RUN_LIMIT:-90}"
read -r -a extra <<< "${GEN_ARGS:-}"
failed=0
echo "generation: logs in $out"

shim="$root/target/native/libvmmkit_preload.so"
for need in target/vmmkit.jar "$shim"; do
  [ -f "$need" ] || { echo "generation: $need is missing; build it (./mvnw -DskipTests package) and carry target/" >&2; exit 2; }
done
export VMMKIT_JAR="$root/target/vmmkit.jar"
[ -x runtime/bin/java ] && export VMMKIT_JAVA_HOME="$root/runtime"
[ -f runtime/vmmkit.aot ] && export VMMKIT_AOT_CACHE="$root/runtime/vmmkit.aot"

trivial="$out/libtrivial_alloc.so"
if ! gcc -O2 -shared -fPIC -o "$trivial" scripts/gpu/trivial_alloc.c -ldl -lpthread 2> "$out/trivial.build.log"; then
  echo "generation: trivial_alloc.c did not build:"; cat "$out/trivial.build.log"; exit 1
fi

# Runs one configuration: NAME, then the command's words; its JSON goes to $out/NAME.json.
run() {
  local name="$1"; shift
  echo; echo "=== $name: $*"
  rm -f "$out/$name.json"
  timeout "$limit" "$@" --json "$out/$name.json" > >(tee "$out/$name.log") 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$out/$name.json" ]; then failed=1; echo "=== $name FAILED (exit $rc)"; return 1; fi
}

gen=("$py" scripts/gpu/generation.py)
run native env -u PYTORCH_CUDA_ALLOC_CONF "${gen[@]}" native --target-allocs "${TARGET_ALLOCS:-32000}" --steps "${STEPS:-7}" "${extra[@]}" || {
  echo "generation: the native run failed; nothing to compare with"; exit 1; }
tokens="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"])' "$out/native.json")"
steps="${STEPS:-7}"
fixed=(--tokens "$tokens" --steps "$steps" "${extra[@]}")
run trivial env -u PYTORCH_CUDA_ALLOC_CONF "${gen[@]}" trivial --so "$trivial" "${fixed[@]}"
run vmmkit env -u PYTORCH_CUDA_ALLOC_CONF VMM_STATS_FILE="$out/vmmkit.stats.json" "${gen[@]}" vmmkit --so "$shim" "${fixed[@]}"
more="${STEPS_MORE:-7}"
run vmmkit-long env -u PYTORCH_CUDA_ALLOC_CONF VMM_STATS_FILE="$out/vmmkit-long.stats.json" \
  "${gen[@]}" vmmkit --so "$shim" "${fixed[@]}" --steps "$((steps + more))" --pairs 0
run vmm-run env -u PYTORCH_CUDA_ALLOC_CONF ./vmmkit run --stats "$out/vmm-run.stats.json" -- "${gen[@]}" vmm-run "${fixed[@]}"
run expandable env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "${gen[@]}" expandable "${fixed[@]}"
run native-again env -u PYTORCH_CUDA_ALLOC_CONF "${gen[@]}" native "${fixed[@]}"
# Step times on a shared machine drift by more than the 2 % in question: ROUNDS more native/vmmkit
# pairs of runs, back to back, give one ratio per round (each against its own neighbour).
for r in $(seq 1 "${ROUNDS:-3}"); do
  run "round$r-native" env -u PYTORCH_CUDA_ALLOC_CONF "${gen[@]}" native "${fixed[@]}" --pairs 0
  run "round$r-vmmkit" env -u PYTORCH_CUDA_ALLOC_CONF "${gen[@]}" vmmkit --so "$shim" "${fixed[@]}" --pairs 0
done

echo
"$py" - "$out" <<'EOF' > "$out/summary.txt" || { failed=1; echo "generation: the summary failed, or vmmkit did not serve"; }
import json, os, sys
out = sys.argv[1]
names = ["native", "trivial", "vmmkit", "vmmkit-long", "vmm-run", "expandable", "native-again"]
runs = {}
for n in names:
    try:
        runs[n] = json.load(open(os.path.join(out, n + ".json")))
    except (OSError, ValueError):
        pass
    try:  # vmmkit's own figures, written at the process's exit
        s = json.load(open(os.path.join(out, n + ".stats.json")))
        runs[n]["vmm_peak_reserved_mib"] = round(s["peak_reserved_bytes"] / 2**20, 1)
        runs[n]["vmm_allocs"] = s["allocs"]
        d = s["devices"][0]
        runs[n]["vmm_device"] = {k: d.get(k) for k in ("cache_hits", "cache_misses", "driver_calls")}
    except (OSError, ValueError, KeyError, IndexError):
        pass
not_served = [n for n in ("vmmkit", "vmmkit-long", "vmm-run")
              if n in runs and not runs[n].get("vmm_allocs")]
native = runs.get("native", {})
base = native.get("step_ms_median")
allocs = native.get("allocs_per_step")
print(f"=== generation: {native.get('layers')} layers, hidden {native.get('hidden')}, batch {native.get('batch')}, "
      f"{native.get('dtype')}, prompt {native.get('prompt')}, {native.get('tokens')} new tokens per step, "
      f"{allocs} allocations per step ({native.get('allocs_per_token')} per token)")
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
print(f"{'config':<16}{'step ms':>10}{'x native':>10}{'pair 4K ns':>12}{'pair 1M ns':>12}"
      f"{'peak reserved MiB':>19}{'device used MiB':>17}{'allocs/step':>13}{'first alloc ms':>16}")
for n in names:
    r = runs.get(n)
    if r is None:
        print(f"{n:<16}  FAILED"); continue
    ratio = r["step_ms_median"] / base if base else None
    reserved = r.get("max_reserved_mib", r.get("vmm_peak_reserved_mib"))
    if n.startswith("vmmkit"):
        reserved = r.get("vmm_peak_reserved_mib")
    print(f"{n:<16}{r['step_ms_median']:>10.2f}{f(ratio, '{:.3f}'):>10}{f(r.get('pair_ns_4k')):>12}"
          f"{f(r.get('pair_ns_1m')):>12}{f(reserved):>19}{f(r.get('device_used_mib')):>17}"
          f"{f(r.get('allocs_per_step'), '{}'):>13}{f(r.get('first_alloc_ms')):>16}")
if "vmm-run" in runs and "vmm_peak_reserved_mib" in runs["vmm-run"]:
    print(f"vmm-run: vmmkit served {runs['vmm-run'].get('vmm_allocs')} allocations (PyTorch's segments), "
          f"{runs['vmm-run']['vmm_peak_reserved_mib']} MiB peak physical")
for n in ("vmmkit", "vmm-run"):
    if "vmm_device" in runs.get(n, {}):
        print(f"{n}: vmmkit's cache hits, misses and driver calls over the whole process: {runs[n]['vmm_device']}")
short, long_ = runs.get("vmmkit", {}).get("vmm_device"), runs.get("vmmkit-long", {}).get("vmm_device")
if short and long_:
    steps = runs["vmmkit-long"]["step_ms_all"].__len__() - runs["vmmkit"]["step_ms_all"].__len__()
    # vmmkit's run also made the pair loops' allocations: all cache hits, no driver call.
    calls = {k: round((long_["driver_calls"].get(k, 0) - short["driver_calls"].get(k, 0)) / steps, 1)
             for k in set(long_["driver_calls"]) | set(short["driver_calls"])}
    print(f"vmmkit per steady step ({steps} more steps): cache misses "
          f"{(long_['cache_misses'] - short['cache_misses']) / steps:.1f}, driver calls "
          f"{ {k: v for k, v in sorted(calls.items()) if v} }")
for n in not_served:
    print(f"{n}: vmmkit served no allocation (no stats file, or zero allocs): the figures above are the CUDA runtime's")
print("where the time goes, per allocate+free pair (ns):")
def per_alloc(n):  # the extra step time over native, spread over the step's allocations
    r = runs.get(n)
    if not r or not base or not allocs: return None
    return (r["step_ms_median"] - base) * 1e6 / allocs
for n in ("trivial", "vmmkit", "vmm-run", "expandable", "native-again"):
    print(f"  {n:<16} step time over native / allocations per step: {f(per_alloc(n))}")
t, v, nat = runs.get("trivial", {}), runs.get("vmmkit", {}), native
for size in ("4k", "1m"):
    k = "pair_ns_" + size
    if k in t and k in v and k in nat:
        line = (f"  pair {size}: native {nat[k]:.0f}; PyTorch's pluggable path (trivial - native) {t[k] - nat[k]:.0f}; "
                f"vmmkit (shim + FFM upcall + Java, vmmkit - trivial) {v[k] - t[k]:.0f}")
        print(line)
rounds = []
for r in range(1, 100):
    a, b = [os.path.join(out, f"round{r}-{m}.json") for m in ("native", "vmmkit")]
    if not (os.path.exists(a) and os.path.exists(b)):
        break
    na, vm = json.load(open(a)), json.load(open(b))
    rounds.append((na["step_ms_median"], vm["step_ms_median"], na["step_ms_min"], vm["step_ms_min"]))
if rounds:
    print("back-to-back rounds (native then vmmkit pluggable), step ms median / min, and vmmkit / native:")
    for i, (nm, vm, nmin, vmin) in enumerate(rounds, 1):
        print(f"  round {i}: native {nm:.1f} / {nmin:.1f}, vmmkit {vm:.1f} / {vmin:.1f}: "
              f"median ratio {vm / nm:.3f}, min ratio {vmin / nmin:.3f}")
    import statistics
    print(f"  median over rounds: median ratio {statistics.median(v / n for n, v, _, _ in rounds):.3f}, "
          f"min ratio {statistics.median(v / n for _, _, n, v in rounds):.3f}")
sys.exit(1 if not_served else 0)
EOF
cat "$out/summary.txt"
exit $failed
