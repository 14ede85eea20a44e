#!/usr/bin/env python3
"""A few deterministic DDP training steps over NCCL on two GPUs, for scripts/gpu/two-gpu.sh.

    torchrun --nproc-per-node 2 two_gpu_ddp.py --result FILE [--steps 8]

Rank 0 writes the per-step losses (the all-reduced mean) to FILE as JSON, so runs with and without
vmmkit can be compared. Everything is seeded and fp32 with deterministic algorithms: two runs on the
same machine give the same losses.
"""
import argparse
import json
import os
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--result", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048), torch.nn.GELU(),
        torch.nn.Linear(2048, 10)).cuda()
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(99 + rank)
    losses = []
    start = time.time()
    for step in range(args.steps):
        batch = 64 + 16 * (step % 3)  # varying shapes
        x = torch.randn(batch, 512, generator=data).cuda()
        y = torch.randint(0, 10, (batch,), generator=data).cuda()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    torch.cuda.synchronize()
    if rank == 0:
        result = {"losses": losses, "seconds": round(time.time() - start, 2),
                  "max_memory_allocated": torch.cuda.max_memory_allocated()}
        with open(args.result, "w") as f:
            json.dump(result, f)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
