"""torch_memory_saver's API served by vmmkit (python/compat), under `vmmkit run` with
TMS_INIT_ENABLE=1 and TMS_INIT_ENABLE_CPU_BACKUP=1, as RL trainers start their training processes:
every allocation outside regions, another thread's included, is pausable and kept; disable() keeps
a block's allocations out; a region's backup setting is the allocation's; pause and resume by tag
reach both settings. Allocations go through the CUDA runtime (ctypes). argv[1]: the libcudart to
load. Prints "ok python-tms-compat" and exits 0, or raises."""
import ctypes
import os
import sys
import threading

import torch_memory_saver as tms
from torch_memory_saver import configure_subprocess, torch_memory_saver
from torch_memory_saver.utils import get_binary_path_from_package
import vmmkit
from device_copies import download, malloc as cuda_malloc, upload

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
MIB = 1 << 20


def malloc(size):
    return cuda_malloc(cudart, size)


def filled(size, seed):
    return bytes((i * seed + 3) % 251 for i in range(size))


def allocated(size, seed):
    rc, ptr = malloc(size)
    assert rc == 0, rc
    upload(cudart, ptr, filled(size, seed))
    return ptr


weights = allocated(3 * MIB, 7)               # outside regions: TMS_INIT_ENABLE's default tag, kept
gradients = []
worker = threading.Thread(target=lambda: gradients.append(allocated(2 * MIB, 11)))  # as autograd's thread
worker.start()
worker.join()
with torch_memory_saver.disable():
    kept_on_device = allocated(1 * MIB, 13)   # not pausable
    freed_in_disable = allocated(4 * MIB, 37)
    assert cudart.cudaFree(ctypes.c_void_p(freed_in_disable)) == 0  # cached by vmmkit until the block ends
with torch_memory_saver.region("kv_cache"):
    kv = allocated(2 * MIB, 17)               # discarded by a pause
with torch_memory_saver.region(enable_cpu_backup=False):
    scratch = allocated(1 * MIB, 19)          # the default tag name, without a backup

with vmmkit.untagged():
    freed = allocated(4 * MIB, 41)
assert cudart.cudaFree(ctypes.c_void_p(freed)) == 0
assert vmmkit.release_cached() >= 4 * MIB, "a freed block's pages stayed cached"
torch_memory_saver.pause()
assert vmmkit.release_cached() == 0, "the pause left cached memory behind"
rc, _ = malloc(4096)
assert rc == 2, rc  # cudaErrorMemoryAllocation: outside regions, into the paused default tag
with torch_memory_saver.disable():
    during = allocated(64 * 1024, 23)
assert download(cudart, kept_on_device, 1 * MIB) == filled(1 * MIB, 13)
torch_memory_saver.resume()
assert download(cudart, weights, 3 * MIB) == filled(3 * MIB, 7), "the default tag's bytes were not kept"
assert download(cudart, gradients[0], 2 * MIB) == filled(2 * MIB, 11), "another thread's bytes were not kept"
upload(cudart, kv, filled(2 * MIB, 29))  # usable again
assert download(cudart, kv, 2 * MIB) == filled(2 * MIB, 29)

# pause("default") reaches the tag with and without a backup: the discarded scratch loses its bytes.
torch_memory_saver.pause("default")
torch_memory_saver.resume("default")
assert download(cudart, weights, 3 * MIB) == filled(3 * MIB, 7)
assert download(cudart, scratch, 1 * MIB) != filled(1 * MIB, 19), "a region without a backup kept its bytes"
torch_memory_saver.pause("kv_cache")
torch_memory_saver.resume("kv_cache")
for call in (torch_memory_saver.pause, torch_memory_saver.resume):
    try:
        call("never opened")
        raise AssertionError("an unknown tag was accepted")
    except RuntimeError as e:  # vmmkit.VmmkitError
        assert "never opened" in str(e), str(e)

assert torch_memory_saver.enabled
torch_memory_saver.hook_mode = "torch"
try:
    torch_memory_saver.hook_mode = "cuda"
    raise AssertionError("a hook mode torch_memory_saver does not have was accepted")
except ValueError:
    pass
torch_memory_saver.memory_margin_bytes = 0
def mmap_region():
    with torch_memory_saver.region(enable_cpu_backup=True, cpu_backup_backend="mmap"):
        pass


for refused in (lambda: setattr(torch_memory_saver, "memory_margin_bytes", 1 << 30),
                lambda: torch_memory_saver.get_cpu_backup(None), mmap_region):
    try:
        refused()
        raise AssertionError("a call vmmkit does not serve was accepted")
    except NotImplementedError:
        pass

shim = get_binary_path_from_package("torch_memory_saver_hook_mode_preload")
assert shim.endswith("/libvmmkit_preload.so") and os.path.exists(shim), shim
before = os.environ.get("LD_PRELOAD")
with configure_subprocess():
    assert os.environ["LD_PRELOAD"] == shim and os.environ["VMM_SERVES"] == "all", os.environ["LD_PRELOAD"]
assert os.environ.get("LD_PRELOAD") == before
assert tms.torch_memory_saver is torch_memory_saver

for ptr in (weights, gradients[0], kept_on_device, kv, scratch, during):
    assert cudart.cudaFree(ctypes.c_void_p(ptr)) == 0
vmmkit.default_tag(None)
print("ok python-tms-compat")
