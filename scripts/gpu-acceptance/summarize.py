#!/usr/bin/env python3
"""Summary of run-all.sh: reads the result files it left in DIR, prints the comparisons, exits 1 on any FAIL.

    python3 summarize.py DIR

Expected in DIR (a missing one is a FAIL of the step that should have written it):
  steps.tsv                                  name, exit code, seconds (one line per step)
  torch-native.json torch-native2.json torch-vmmkit-run.json torch-pluggable.json
  torch-run-stats.json torch-pluggable-stats.json              (vmmkit's --stats files)
  cupy-native.json cupy-vmmkit-run.json cupy-run-stats.json
  stream-native.json stream-vmmkit-run.json stream-run-stats.json
Writes DIR/summary.json. Standard library only.
"""
import json
import os
import sys

checks = []  # (status, name, detail): status PASS | FAIL | INFO | WARN


def check(ok, name, detail=""):
    checks.append(("PASS" if ok else "FAIL", name, detail))
    return ok


def info(name, detail):
    checks.append(("INFO", name, detail))


def warn(name, detail):
    checks.append(("WARN", name, detail))


def load(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text.splitlines()[-1]) if text else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        print(f"summarize: cannot read {path}: {e}", file=sys.stderr)
        return None


def mib(x):
    return "n/a" if x is None else f"{x / 2**20:,.1f} MiB"


def ratio(a, b):
    return None if not a or not b else a / b


def steps_table(directory):
    steps = {}
    try:
        with open(os.path.join(directory, "steps.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    steps[parts[0]] = (int(parts[1]), parts[2])
    except FileNotFoundError:
        pass
    return steps


def compare_losses(ref, other, ref_name, other_name):
    a, b = ref.get("losses") or [], other.get("losses") or []
    if len(a) != len(b):
        return False, f"{other_name} has {len(b)} losses, {ref_name} has {len(a)}"
    bad = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if not bad:
        return True, f"{len(a)} losses bit-identical (last {float.fromhex(a[-1])!r})" if a else "no losses"
    i = bad[0]
    return False, (f"{len(bad)} of {len(a)} steps differ; first at step {i}: {ref_name} {a[i]} "
                   f"({float.fromhex(a[i])!r}) vs {other_name} {b[i]} ({float.fromhex(b[i])!r})")


def stats_check(stats, name, what):
    if stats is None:
        return check(False, f"{name}: vmmkit stats", f"no stats file: {what} did not finish or the JVM never started")
    served = stats.get("mode") == "vmm" and (stats.get("allocs") or 0) > 0
    return check(served, f"{name}: vmmkit served allocations",
                 f"mode {stats.get('mode')}, allocs {stats.get('allocs')}, frees {stats.get('frees')}, "
                 f"passthrough {stats.get('passthrough_calls')}, peak live {mib(stats.get('peak_live_bytes'))}, "
                 f"peak reserved {mib(stats.get('peak_reserved_bytes'))}, "
                 f"fragmentation ratio {stats.get('fragmentation_ratio')}"
                 + ("" if served else " -- interposition did not reach the program's allocations"))


def torch_section(d):
    runs = {
        "native": load(d, "torch-native.json"),
        "native-repeat": load(d, "torch-native2.json"),
        "vmmkit-run": load(d, "torch-vmmkit-run.json"),
        "pluggable": load(d, "torch-pluggable.json"),
    }
    stats = {"vmmkit-run": load(d, "torch-run-stats.json"), "pluggable": load(d, "torch-pluggable-stats.json")}
    for name, r in runs.items():
        check(r is not None, f"torch {name}: result", "written" if r else "missing: the step failed (see its log)")
    native = runs["native"]
    if native and runs["native-repeat"]:
        ok, detail = compare_losses(native, runs["native-repeat"], "native", "native-repeat")
        check(ok, "torch determinism baseline (native vs native repeat)",
              detail + ("" if ok else " -- the training is not deterministic natively, so the allocator "
                                      "comparisons below cannot be trusted"))
    for name in ("vmmkit-run", "pluggable"):
        if native and runs[name]:
            ok, detail = compare_losses(native, runs[name], "native", name)
            check(ok, f"torch losses native vs {name}", detail)
    for name in ("vmmkit-run", "pluggable"):
        if runs[name] is not None or stats[name] is not None:
            stats_check(stats[name], f"torch {name}", f"the torch {name} step")
    # Memory and time table.
    base_ms = native.get("step_ms_median") if native else None
    lines = [f"{'run':<14} {'peak_allocated':>16} {'peak_reserved':>16} {'device used peak':>18} "
             f"{'(over baseline)':>16} {'vmmkit live':>14} {'vmmkit reserved':>16} {'step ms':>9} {'vs native':>9}"]
    for name, r in runs.items():
        if not r:
            continue
        s = stats.get(name) or {}
        rel = ratio(r.get("step_ms_median"), base_ms)
        lines.append(f"{name:<14} {mib(r.get('peak_allocated')):>16} {mib(r.get('peak_reserved')):>16} "
                     f"{mib(r.get('device_used_peak')):>18} {mib(r.get('device_used_peak_over_baseline')):>16} "
                     f"{mib(s.get('peak_live_bytes')):>14} {mib(s.get('peak_reserved_bytes')):>16} "
                     f"{(r.get('step_ms_median') or 0):>9.2f} {('%.3fx' % rel) if rel else 'n/a':>9}")
    lines.append("peak_allocated/peak_reserved: PyTorch's own counters (none with a pluggable allocator); device used: "
                 "total - free from cudaMemGetInfo, max over steps; vmmkit live/reserved: vmmkit's --stats file")
    info("torch memory and step time", "\n" + "\n".join("    " + l for l in lines))
    if native:
        info("torch setup", f"torch {native.get('torch')}, transformers {native.get('transformers')}, "
                            f"{native.get('gpu')}, {native.get('params'):,} parameters, dtype {native.get('dtype')}, "
                            f"PYTORCH_CUDA_ALLOC_CONF={native.get('pytorch_cuda_alloc_conf')!r}")


def cupy_section(d):
    native, vm = load(d, "cupy-native.json"), load(d, "cupy-vmmkit-run.json")
    check(native is not None, "cupy native: result", "written" if native else "missing: the step failed")
    check(vm is not None, "cupy vmmkit-run: result", "written" if vm else "missing: the step failed")
    for name, r in (("native", native), ("vmmkit-run", vm)):
        if r is not None:
            check(bool(r.get("passes_consistent")), f"cupy {name}: timed passes agree",
                  f"pass checksums {r.get('pass_checksums')}")
    if native and vm:
        same = native.get("checksum") == vm.get("checksum") and native.get("sha256") == vm.get("sha256")
        if same:
            detail = f"checksum {native.get('checksum_float')!r}, sha256 {native.get('sha256', '')[:16]}..."
        else:
            kinds = [k for k in (native.get("per_kind_sha256") or {})
                     if (native.get("per_kind_sha256") or {}).get(k) != (vm.get("per_kind_sha256") or {}).get(k)
                     or (native.get("per_kind_sum") or {}).get(k) != (vm.get("per_kind_sum") or {}).get(k)]
            detail = (f"checksum {native.get('checksum_float')!r} vs {vm.get('checksum_float')!r}, sha256 "
                      f"{native.get('sha256', '')[:16]} vs {vm.get('sha256', '')[:16]}; op kinds that differ: {kinds}")
        check(same, "cupy results identical (native vs vmmkit-run)", detail)
        t_n, t_v = native.get("loop_s_min"), vm.get("loop_s_min")
        speed = ratio(t_n, t_v)
        info("cupy loop time", f"native {t_n} s, vmmkit-run {t_v} s ({native.get('iterations')} iterations, best of "
                               f"{native.get('repeats')}): speedup {('%.2fx' % speed) if speed else 'n/a'}; "
                               f"warm-up native {native.get('warmup_s')} s, vmmkit-run {vm.get('warmup_s')} s")
        if speed is not None and speed < 1.0:
            warn("cupy speedup", f"vmmkit-run was slower than native ({speed:.2f}x)")
    if vm is not None or load(d, "cupy-run-stats.json") is not None:
        stats_check(load(d, "cupy-run-stats.json"), "cupy vmmkit-run", "the cupy vmmkit-run step")


def stream_section(d):
    for name, fname in (("native (control)", "stream-native.json"), ("vmmkit-run", "stream-vmmkit-run.json")):
        r = load(d, fname)
        if r is None:
            check(False, f"stream safety {name}", "no result: the step failed (see its log)")
            continue
        cases = r.get("cases") or []
        detail = (f"{sum(1 for c in cases if c.get('ok'))}/{len(cases)} cases ok; cudaFree call median "
                  f"{r.get('cudaFree_ms_median')} ms, max {r.get('cudaFree_ms_max')} ms (kernel spins "
                  f"{r.get('spin_ms')} ms); cudaFreeAsync max {r.get('cudaFreeAsync_ms_max')} ms")
        if r.get("failures"):
            detail += "; failed: " + "; ".join(r["failures"])
        if r.get("warnings"):
            detail += f"; {len(r['warnings'])} case(s) without a concurrent overwrite"
        check(bool(r.get("passed")), f"stream safety {name}", detail)
        if name == "vmmkit-run":
            concurrent = sum(1 for c in cases if c.get("kind") != "control" and c.get("overwrite_while_kernel_ran"))
            info("stream safety vmmkit-run concurrency",
                 f"{concurrent} of {sum(1 for c in cases if c.get('kind') != 'control')} cases overwrote new "
                 f"buffers while the kernel still ran; new buffers placed at A's address: "
                 f"{sum(c.get('new_buffers_at_a_address') or 0 for c in cases if c.get('kind') != 'control')}")
    if load(d, "stream-vmmkit-run.json") is not None or load(d, "stream-run-stats.json") is not None:
        stats_check(load(d, "stream-run-stats.json"), "stream vmmkit-run", "the stream-safety vmmkit-run step")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    steps = steps_table(d)
    for name, (rc, secs) in steps.items():
        what = "timed out" if rc in (124, 137) else f"exit {rc}"
        check(rc == 0, f"step {name}", f"{what}, {secs} s")
    for section in (torch_section, cupy_section, stream_section):
        try:
            section(d)
        except Exception as e:  # noqa: BLE001 - a malformed file must not hide the other sections
            check(False, f"summary {section.__name__}", f"{type(e).__name__}: {e}")

    print()
    print("==================== vmmkit GPU acceptance summary ====================")
    for status, name, detail in checks:
        print(f"[{status}] {name}: {detail}")
    failed = [c for c in checks if c[0] == "FAIL"]
    print("=======================================================================")
    print(f"OVERALL: {'FAIL' if failed else 'PASS'} ({len(failed)} failed check(s), "
          f"{sum(1 for c in checks if c[0] == 'PASS')} passed)")
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"passed": not failed,
                   "checks": [{"status": s, "name": n, "detail": t} for s, n, t in checks]}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
