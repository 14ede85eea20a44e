"""vLLM's sleep-mode allocator (`CuMemAllocator`) without the rest of vLLM, as the anchor for
vmmkit's tags.

`build(source, into)` (or `python3 scripts/gpu/vllm_anchor.py SOURCE INTO`) compiles vLLM's
`cumem_allocator` extension (its C++ file, a plain Python extension on the CUDA driver API) into
INTO/vllm/ and copies its `cumem.py` beside it. `load(into)`
then imports `vllm.device_allocator.cumem` from there. The four things `cumem.py` imports from the
rest of vLLM are stood in for here, each as vLLM does it on a CUDA machine: a logger, pinned memory
available, a loaded library's path from /proc/self/maps, and `cudaMemcpy` (kind default) through
the CUDA runtime PyTorch loaded. SOURCE holds vLLM's files (csrc/cumem_allocator.cpp,
csrc/cumem_allocator_compat.h, vllm/device_allocator/cumem.py); its PROVENANCE names the commits.
"""
import ctypes
import dataclasses
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import types


def build(source, into):
    package = os.path.join(into, "vllm")
    os.makedirs(os.path.join(package, "device_allocator"), exist_ok=True)
    shutil.copy(os.path.join(source, "vllm", "device_allocator", "cumem.py"),
                os.path.join(package, "device_allocator", "cumem.py"))
    from torch.utils.cpp_extension import CUDA_HOME
    cuda = CUDA_HOME or "/usr/local/cuda"
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-std=c++17",
                    "-I" + sysconfig.get_paths()["include"], "-I" + os.path.join(cuda, "include"),
                    os.path.join(source, "csrc", "cumem_allocator.cpp"),
                    "-o", os.path.join(package, "cumem_allocator.so"),
                    "-L" + os.path.join(cuda, "lib64", "stubs"), "-lcuda"], check=True)


def find_loaded_library(name):
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(name):
                return path
    return None


class CudaRTLibrary:
    def __init__(self):
        import torch
        torch.cuda.init()
        self.lib = ctypes.CDLL(find_loaded_library("libcudart"))
        self.lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def cudaMemcpy(self, dst, src, count):
        rc = self.lib.cudaMemcpy(dst, src, count, 4)  # cudaMemcpyDefault
        if rc != 0:
            raise RuntimeError("cudaMemcpy failed: %d" % rc)


@dataclasses.dataclass
class AllocationData:
    handle: tuple
    tag: str
    cpu_backup_tensor: object = None


def _module(name, path=None, **attributes):
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [path]
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def load(into):
    """vLLM's CuMemAllocator class, from what build() left in INTO."""
    package = os.path.join(into, "vllm")
    _module("vllm", package)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.utils", package)
    _module("vllm.utils.platform_utils", is_pin_memory_available=lambda: True)
    _module("vllm.utils.system_utils", find_loaded_library=find_loaded_library)
    _module("vllm.distributed", package)
    _module("vllm.distributed.device_communicators", package)
    _module("vllm.distributed.device_communicators.cuda_wrapper", CudaRTLibrary=CudaRTLibrary)
    _module("vllm.device_allocator", os.path.join(package, "device_allocator"),
            AllocationData=AllocationData, HandleType=tuple)
    from vllm.device_allocator.cumem import CuMemAllocator, cumem_available
    if not cumem_available:
        raise RuntimeError("vLLM's cumem_allocator did not load from " + package)
    return CuMemAllocator


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2])  # SOURCE INTO
