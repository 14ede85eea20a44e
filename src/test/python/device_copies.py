"""Device memory through a CUDA runtime loaded with ctypes (the stand-in's in tests): allocations,
and copies between host bytes and device memory, shared by the Python tests."""
import ctypes

H2D, D2H = 1, 2


def malloc(cudart, size):
    """cudaMalloc: (its result code, the pointer)."""
    ptr = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
    return rc, ptr.value


def upload(cudart, ptr, data):
    assert cudart.cudaMemcpy(ctypes.c_void_p(ptr), data, ctypes.c_size_t(len(data)), H2D) == 0


def download(cudart, ptr, size):
    out = ctypes.create_string_buffer(size)
    assert cudart.cudaMemcpy(out, ctypes.c_void_p(ptr), ctypes.c_size_t(size), D2H) == 0
    return out.raw
