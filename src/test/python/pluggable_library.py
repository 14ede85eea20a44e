"""The part of PyTorch's CUDAPluggableAllocator that the Python tests' stand-in ``torch`` modules
need: the shim opened with dlopen and the allocation pair found by name, as PyTorch does."""
import ctypes


class CUDAPluggableAllocator:
    def __init__(self, path, alloc_name, free_name):
        lib = ctypes.CDLL(path)
        self.alloc = getattr(lib, alloc_name)
        self.alloc.argtypes, self.alloc.restype = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
        self.free = getattr(lib, free_name)
        self.free.argtypes, self.free.restype = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], None

    def allocator(self):
        """What torch.cuda.MemPool takes (PyTorch's _cuda_CUDAAllocator); the stand-in's pools call the pair."""
        return self
