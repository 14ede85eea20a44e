"""Cost of one torch.empty + del pair on the GPU, through PyTorch's caching allocator or through
vmmkit as PyTorch's pluggable allocator; and the time of the first allocation (which starts
vmmkit's JVM when pluggable), and of a plain Python loop in the same process. Prints one JSON line.
Usage: python3 torch_pair.py caching|vmmkit SHIM_PATH [SIZE] [PAIRS]"""
import json
import sys
import time

import torch

mode = sys.argv[1]
shim = sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 200000

if mode == "vmmkit":
    allocator = torch.cuda.memory.CUDAPluggableAllocator(shim, "vmmkit_torch_alloc", "vmmkit_torch_free")
    torch.cuda.memory.change_current_allocator(allocator)
torch.cuda.init()

start = time.perf_counter()
first = torch.empty(size, dtype=torch.uint8, device="cuda")
first_call_ms = (time.perf_counter() - start) * 1e3
del first

for _ in range(20000):  # warm up (JIT on the vmmkit side)
    t = torch.empty(size, dtype=torch.uint8, device="cuda")
    del t
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(pairs):
    t = torch.empty(size, dtype=torch.uint8, device="cuda")
    del t
torch.cuda.synchronize()
pair_ns = (time.perf_counter() - start) / pairs * 1e9

# Plain Python, no CUDA call: whether the process itself runs slower (e.g. with a JVM inside it).
start = time.perf_counter()
for i in range(pairs):
    d = {"a": i}
python_ns = (time.perf_counter() - start) / pairs * 1e9
print(json.dumps({"mode": mode, "size": size, "first_call_ms": round(first_call_ms, 1), "pair_ns": round(pair_ns, 1),
                  "python_loop_ns": round(python_ns, 1)}))
