"""What a PyTorch program's first tagged allocation costs when vmmkit serves the tags only (no
`vmmkit run`): vmmkit starts when PyTorch loads the shim, at the first region unless the program
called vmmkit.use_for_tags() earlier.

    python3 first_region.py native     # no vmmkit: the first 1 GiB tensor after CUDA is up
    python3 first_region.py region     # the first region starts vmmkit, then makes the tensor
    python3 first_region.py early      # use_for_tags() at the start, SECONDS of other work, then the region

Prints "first-region MODE ms=..." (the region's entry, the tensor and a synchronisation)."""
import os
import sys
import time

import torch

mode = sys.argv[1]
torch.ones(1, device="cuda")
torch.cuda.synchronize()
if mode != "native":
    import vmmkit
    if mode == "early":
        vmmkit.use_for_tags()
        time.sleep(float(os.environ.get("SECONDS_BEFORE", "3")))  # the program's own start-up
t0 = time.perf_counter()
if mode == "native":
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
else:
    with vmmkit.region("weights", keep_contents=True):
        a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("first-region %s ms=%.1f" % (mode, (time.perf_counter() - t0) * 1e3), flush=True)
