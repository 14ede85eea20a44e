"""A PyTorch program's first tensor: 1 GiB right after torch.cuda.init(), with a synchronisation (the
first allocation a program that loads its weights makes). Prints one JSON line, in ms."""
import json
import time

t0 = time.perf_counter()
import torch  # noqa: E402

t1 = time.perf_counter()
torch.cuda.init()
t2 = time.perf_counter()
first = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
t3 = time.perf_counter()
second = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
t4 = time.perf_counter()


def ms(a, b):
    return round((b - a) * 1e3, 2)


print(json.dumps({"import_ms": ms(t0, t1), "init_ms": ms(t1, t2), "first_tensor_ms": ms(t2, t3),
                  "second_tensor_ms": ms(t3, t4)}))
