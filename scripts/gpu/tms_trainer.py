"""A training process that gives its GPU memory back between steps, as an RL trainer colocated
with an inference engine does (slime, verl), written against torch_memory_saver's API: started with
TMS_INIT_ENABLE=1 and TMS_INIT_ENABLE_CPU_BACKUP=1 (every allocation pausable, its bytes kept), it
trains a model with AdamW (gradients made on autograd's own thread), empties PyTorch's cache,
pauses everything, lets another phase allocate most of the freed memory inside disable(), resumes
and trains on. Run by torch_memory_saver itself and by vmmkit (python/compat under `vmmkit run`);
with IMPL=native it trains without pausing, the reference.

Prints one line per figure ("trainer NAME VALUE") and "trainer ok": the parameters and optimizer
state after the resume equal those before the pause bit for bit, and the losses after it equal
the reference's (deterministic kernels)."""
import hashlib
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

IMPL = os.environ.get("IMPL", "native")
if IMPL != "native":
    from torch_memory_saver import torch_memory_saver
GIB = 1 << 30


def fingerprint(model, optimizer):
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                digest.update(value.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def step(model, optimizer, batch):
    optimizer.zero_grad(set_to_none=True)
    loss = model(batch).float().pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    width, depth = int(os.environ.get("WIDTH", "8192")), int(os.environ.get("DEPTH", "12"))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(256, width, device="cuda")
    losses = [step(model, optimizer, batch) for _ in range(3)]
    torch.cuda.synchronize()
    before = fingerprint(model, optimizer)
    free_before, total = torch.cuda.mem_get_info()
    print("trainer held_gib %.2f" % ((total - free_before) / GIB))
    if IMPL != "native":
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        torch_memory_saver.pause()
        torch.cuda.synchronize()
        pause_s = time.perf_counter() - t0
        free_paused, _ = torch.cuda.mem_get_info()
        print("trainer pause_ms %.1f" % (pause_s * 1e3))
        print("trainer released_gib %.2f" % ((free_paused - free_before) / GIB))
        # Another phase takes most of what the pause gave back (an inference engine would).
        with torch_memory_saver.disable():
            other = torch.empty(int(free_paused * 0.8), dtype=torch.uint8, device="cuda")
            other.fill_(7)
            torch.cuda.synchronize()
            print("trainer other_phase_gib %.2f" % (other.numel() / GIB))
            del other
        t0 = time.perf_counter()
        torch_memory_saver.resume()
        torch.cuda.synchronize()
        print("trainer resume_ms %.1f" % ((time.perf_counter() - t0) * 1e3))
        after = fingerprint(model, optimizer)
        print("trainer state_identical %s" % (after == before))
        assert after == before, "the parameters or optimizer state changed across the pause"
    t0 = time.perf_counter()
    losses += [step(model, optimizer, batch) for _ in range(3)]
    torch.cuda.synchronize()
    print("trainer steps_after_ms %.1f" % ((time.perf_counter() - t0) * 1e3))
    print("trainer losses %s" % " ".join("%.9e" % x for x in losses))
    print("trainer ok")


if __name__ == "__main__":
    main()
