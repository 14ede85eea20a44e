"""The helpers torch_memory_saver's own example programs import, so that they run on vmmkit as
written (scripts/gpu/tms-compat.sh runs them on both)."""

import torch


def get_device():
    return "cuda"


def empty_cache():
    torch.cuda.empty_cache()


def get_and_print_gpu_memory(message, gpu_id=0):
    """The device's used memory in bytes, as the driver reports it, printed with ``message``."""
    free, total = torch.cuda.mem_get_info(gpu_id)
    used = total - free
    print("GPU %d memory: %.2f GB (%s)" % (gpu_id, used / 1024 ** 3, message))
    return used
