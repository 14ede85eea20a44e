#!/usr/bin/env python3
"""Preflight of run-all.sh: prints the GPU, Python, torch/transformers/CuPy versions and the vmmkit files.

    python3 env_check.py [--root REPO]

Exits 1 when something the acceptance run needs is missing (the other steps still run and report).
"""
import argparse
import os
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    args = p.parse_args()
    ok = True
    print("python", sys.version.split()[0], sys.executable)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        print("nvidia-smi:", (smi.stdout or smi.stderr).strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        print("nvidia-smi: unavailable:", e)
    try:
        import torch
        print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
        ok &= torch.cuda.is_available()
    except Exception as e:  # noqa: BLE001
        print("MISSING torch:", e)
        ok = False
    try:
        import transformers
        print("transformers", transformers.__version__)
    except Exception as e:  # noqa: BLE001
        print("MISSING transformers:", e)
        ok = False
    try:
        import cupy
        print("cupy", cupy.__version__)
    except Exception as e:  # noqa: BLE001
        print("MISSING cupy:", e)
        ok = False
    for rel in ("target/vmmkit.jar", "target/native/libvmmkit_preload.so", "vmmkit"):
        path = os.path.join(args.root, rel)
        exists = os.path.exists(path)
        print(("found   " if exists else "MISSING ") + path)
        ok &= exists
    java = os.path.join(args.root, "runtime", "bin", "java")
    if os.path.exists(java):
        try:
            v = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
            print("runtime/bin/java:", (v.stderr or v.stdout).strip().splitlines()[0])
        except (OSError, subprocess.TimeoutExpired, IndexError) as e:
            print("runtime/bin/java -version failed:", e)
    else:
        print("no runtime/ (a JDK 25 from JAVA_HOME is needed instead)")
    for var in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF", "CUPY_ACCELERATORS", "CUDA_VISIBLE_DEVICES"):
        if os.environ.get(var):
            print(f"note: {var}={os.environ[var]}")
    print("environment:", "OK" if ok else "INCOMPLETE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
