"""The shim's exported functions, reached with ctypes, and what their result codes mean."""

import contextlib
import ctypes
import os
import threading

SHIM = "libvmmkit_preload.so"
SUCCESS, INVALID_VALUE, MEMORY_ALLOCATION, NOT_PERMITTED, NOT_SUPPORTED, STREAM_CAPTURE_UNSUPPORTED = 0, 1, 2, 800, 801, 900

_lock = threading.Lock()
_library = None


class VmmkitError(RuntimeError):
    """A vmmkit call failed; ``code`` is the CUDA runtime error it returned."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def loaded_shim_path():
    """The path of the shim if this process has it loaded (preloaded or opened by PyTorch)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if path.endswith("/" + SHIM):
                    return path
    except OSError:
        pass
    return None


def checkout_shim_path():
    """The shim built in this source checkout (target/native), or the one VMMKIT_SHIM names."""
    named = os.environ.get("VMMKIT_SHIM")
    if named:
        return named
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, "target", "native", SHIM)


def preloaded():
    """Whether the shim comes in through LD_PRELOAD (``vmmkit run``)."""
    return SHIM in os.environ.get("LD_PRELOAD", "")


def in_process():
    """Whether vmmkit is in this process already (its functions reached, or the shim loaded)."""
    return _library is not None or loaded_shim_path() is not None


def library():
    """The shim's functions (ctypes), loaded once. Raises VmmkitError when vmmkit is not in this process."""
    global _library
    with _lock:
        if _library is not None:
            return _library
        path = loaded_shim_path()
        if path is None:
            raise VmmkitError("vmmkit is not loaded in this process: run the program under `vmmkit run`, "
                              "call vmmkit.use_as_torch_allocator() before the first CUDA allocation, or open "
                              "a vmmkit.region() with PyTorch imported (vmmkit then serves the tagged tensors)",
                              NOT_SUPPORTED)
        lib = ctypes.CDLL(path)  # the library already loaded: the same instance, same state
        for name, argtypes in (("vmmkit_region_begin", [ctypes.c_char_p, ctypes.c_int]),
                               ("vmmkit_region_end", []),
                               ("vmmkit_default_tag", [ctypes.c_char_p, ctypes.c_int]),
                               ("vmmkit_pause", [ctypes.c_char_p]),
                               ("vmmkit_pause_keeping", [ctypes.c_char_p, ctypes.c_int]),
                               ("vmmkit_resume", [ctypes.c_char_p]),
                               ("vmmkit_host_memory", [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
                               ("vmmkit_release_cached", [ctypes.POINTER(ctypes.c_size_t)]),
                               ("vmmkit_capture_begin", []),
                               ("vmmkit_capture_end", [])):
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        _library = lib
        return lib


@contextlib.contextmanager
def tag_region(name, tag, keep_contents):
    """The shim's region of ``tag`` (``name``: its encoding; None: a region of no tag) for this
    thread, begun and ended."""
    lib = library()
    check(lib.vmmkit_region_begin(name, 1 if keep_contents else 0), "region_begin", tag)
    try:
        yield
    finally:
        check(lib.vmmkit_region_end(), "region_end", None)


def check(code, what, tag):
    """Raises VmmkitError, saying what ``code`` means for the call ``what`` of ``tag``, unless it is success."""
    if code == SUCCESS:
        return
    where = what + ("" if tag is None else "(%r)" % tag)
    if code == INVALID_VALUE:
        raise VmmkitError(where + ": invalid value (an unknown tag, an empty or too long name, "
                          "or region_end with no region open)", code)
    if code == MEMORY_ALLOCATION:
        raise VmmkitError(where + ": out of device memory; the tag is consistent, call it again "
                          "once memory was given back", code)
    if code == NOT_SUPPORTED:
        raise VmmkitError(where + ": vmmkit serves no allocations in this process (monitor mode?)", code)
    if code == STREAM_CAPTURE_UNSUPPORTED:
        raise VmmkitError(where + ": refused while a CUDA graph is being captured (devices reached before "
                          "the refusal are done); call it again once the capture has ended", code)
    raise VmmkitError(where + ": failed with CUDA error %d (vmmkit said why on stderr); the tag is "
                      "consistent, call it again" % code, code)


def encode(tag):
    """The tag's name as the shim takes it (None: every tag)."""
    if tag is None:
        return None
    if not isinstance(tag, str) or not tag:
        raise ValueError("a tag is a non-empty string")
    return tag.encode("utf-8")
