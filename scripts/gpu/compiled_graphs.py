"""torch.compile's CUDA graph trees (mode="reduce-overhead") over weights in a memory tag.

  python3 compiled_graphs.py native|vmmkit|tags|run

native: no vmmkit (with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, PyTorch's own stream-ordered
backend); vmmkit: vmmkit as PyTorch's whole allocator (use_as_torch_allocator); tags: vmmkit serving
the tags only (use_for_tags), or under `vmmkit run` when run there; run: under `vmmkit run`, no tag.
The compiled function runs four times and must match eager; where weights are tagged, it runs
again after a pause and a resume of them and must be bit-identical.

Prints one line, "compiled reduce-overhead MODE BACKEND: ...", with what PyTorch raised if it
raised. Graph trees ask the allocator about its pools' live allocations, which PyTorch answers for
its own caching allocator only: with its cudaMallocAsync backend, and with any pluggable allocator
(vmmkit as the whole allocator), PyTorch raises that it does not support it. Exits 0 when the
output is right, or when PyTorch refused for that reason where it does not answer; else 1.
"""
import sys

import torch


def main():
    mode = sys.argv[1]
    vmmkit = None
    if mode in ("vmmkit", "tags"):
        import vmmkit
        if mode == "vmmkit":
            vmmkit.use_as_torch_allocator()
        else:
            vmmkit.use_for_tags()
    if vmmkit is not None:
        with vmmkit.region("weights", keep_contents=True):
            linear = torch.nn.Linear(1024, 1024).cuda()
    else:
        linear = torch.nn.Linear(1024, 1024).cuda()

    def f(x):
        return torch.relu(linear(x)) * 2 + 1

    compiled = torch.compile(f, mode="reduce-overhead")
    x = torch.randn(64, 1024, device="cuda")
    try:
        outs = [compiled(x).clone() for _ in range(4)]
        ok = all(torch.allclose(o, f(x), atol=1e-4) for o in outs)
        said = "as eager" if ok else "DIFFERENT from eager"
        if vmmkit is not None and ok:
            vmmkit.pause("weights")
            vmmkit.resume("weights")
            same = torch.equal(compiled(x), outs[-1])
            said += "; after a pause and a resume %s" % ("bit-identical" if same else "DIFFERENT")
            ok = same
    except Exception as e:
        unanswered = mode == "vmmkit" or torch.cuda.get_allocator_backend() != "native"
        ok = unanswered and "does not yet support checkPoolLiveAllocations" in str(e)
        said = "raised %s: %s%s" % (type(e).__name__, str(e).splitlines()[0][:200],
                                    " (PyTorch's own limit for this allocator)" if ok else "")
    print("compiled reduce-overhead %s %s: %s" % (mode, torch.cuda.get_allocator_backend(), said))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
