"""torch_memory_saver's Python API, served by vmmkit: programs written for torch_memory_saver (SGLang,
slime, verl's and other RL trainers' colocated engines) pause and resume their memory through vmmkit
unchanged. Put this folder on ``PYTHONPATH`` ahead of any installed torch_memory_saver (the
repository's ``python`` folder is found by itself) and run the program under ``vmmkit run``, or let
it load vmmkit as torch_memory_saver's users load its library (``configure_subprocess``,
``utils.get_binary_path_from_package``: the shim's path).

What maps to what:

- ``torch_memory_saver.region(tag, enable_cpu_backup)`` is ``vmmkit.region``. torch_memory_saver
  keeps the backup setting per allocation, vmmkit per tag, so a tag's allocations that keep their
  bytes carry the tag ``TAG+cpu_backup`` and the rest ``TAG``; a pause or resume of ``TAG`` reaches
  both.
- ``TMS_INIT_ENABLE=1`` (every allocation of the process pausable from the start, as RL trainers
  set it for their training processes) is vmmkit's default tag, set when this module is imported:
  ``default``, or ``default+cpu_backup`` with ``TMS_INIT_ENABLE_CPU_BACKUP=1``.
- ``disable()`` is ``vmmkit.untagged()`` with a PyTorch memory pool of its own, dropped at its end as
  torch_memory_saver drops it, and the memory freed in it then goes back to the device
  (``vmmkit.release_cached``).
- ``pause`` and ``resume`` are vmmkit's (errors are ``vmmkit.VmmkitError``, a ``RuntimeError``). A
  pause also gives back the device memory vmmkit caches (``vmmkit.release_cached``, PyTorch's cache
  left as it is): under torch_memory_saver a free returns memory to the device at once, and its
  users free memory (``torch.cuda.empty_cache()``) before a pause for the other process to take.
- ``cuda_graph`` is ``vmmkit.cuda_graph``.
- ``hook_mode`` takes torch_memory_saver's two values; how vmmkit serves PyTorch follows from how it
  was loaded (``vmmkit run`` or preloaded: every allocation; otherwise the tags' memory pools).
- Not served (they raise ``NotImplementedError``): ``get_cpu_backup`` (a kept tag's copy is
  vmmkit's own while paused), a ``cpu_backup_backend`` other than ``"pinned"`` and a nonzero
  ``memory_margin_bytes``.
"""

import contextlib
import os
import sys

try:
    import vmmkit
except ImportError:  # this folder alone on PYTHONPATH: the module lives two folders up
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    import vmmkit
from vmmkit import _shim

from . import utils

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

_DEFAULT_TAG = "default"
_BACKUP_SUFFIX = "+cpu_backup"
_HOOK_MODES = ("preload", "torch")


def _vmmkit_tag(tag, enable_cpu_backup):
    """The vmmkit tag of torch_memory_saver's ``tag`` with or without a CPU backup."""
    return tag + _BACKUP_SUFFIX if enable_cpu_backup else tag


def _release_cached():
    """What the program freed goes back to the device, as under torch_memory_saver (PyTorch's own
    cache left as it is); nothing to do while vmmkit is not in the process."""
    if _shim.in_process():
        vmmkit.release_cached(empty_torch_cache=False)


class TorchMemorySaver:
    """torch_memory_saver's singleton object, over vmmkit's memory tags."""

    def __init__(self):
        self._hook_mode = "preload"
        self._tags = set()  # vmmkit tags this object opened regions of (or set as the default)

    @contextlib.contextmanager
    def region(self, tag=_DEFAULT_TAG, enable_cpu_backup=False, cpu_backup_backend="pinned"):
        if cpu_backup_backend != "pinned":  # vmmkit's copies are in pinned host memory
            raise NotImplementedError("vmmkit keeps contents in pinned host memory only, not %r" % cpu_backup_backend)
        name = _vmmkit_tag(tag, enable_cpu_backup)
        with vmmkit.region(name, keep_contents=enable_cpu_backup):
            self._tags.add(name)
            yield

    @contextlib.contextmanager
    def cuda_graph(self, cuda_graph, pool=None, stream=None, capture_error_mode="global", tag=_DEFAULT_TAG,
                   enable_cpu_backup=False):
        name = _vmmkit_tag(tag, enable_cpu_backup)
        with vmmkit.cuda_graph(cuda_graph, tag=name, keep_contents=enable_cpu_backup, pool=pool, stream=stream,
                               capture_error_mode=capture_error_mode):
            self._tags.add(name)
            yield

    @contextlib.contextmanager
    def disable(self):
        torch = sys.modules.get("torch")
        pool = torch.cuda.MemPool() if torch is not None and hasattr(torch.cuda, "MemPool") else None
        with vmmkit.untagged(pool):
            yield
        del pool  # PyTorch frees the pool's cached segments once its tensors are gone
        _release_cached()

    def pause(self, tag=None):
        for name in self._names(tag, "pause"):
            vmmkit.pause(name)
        _release_cached()

    def resume(self, tag=None):
        for name in self._names(tag, "resume"):
            vmmkit.resume(name)

    def _names(self, tag, call):
        """The vmmkit tags a call of ``tag`` reaches: every tag for None (one call), else the tag's
        without and with a backup that were used, those without first (a pause releases the
        discarded memory while the kept is still being copied)."""
        if tag is None:
            return [None]
        names = [n for n in (_vmmkit_tag(tag, False), _vmmkit_tag(tag, True)) if n in self._tags]
        if not names:
            raise vmmkit.VmmkitError("%s(%r): no region of that tag was opened" % (call, tag), _shim.INVALID_VALUE)
        return names

    @property
    def enabled(self):
        return True

    @property
    def hook_mode(self):
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, mode):
        if mode not in _HOOK_MODES:
            raise ValueError("hook_mode must be one of %s, not %r" % (", ".join(_HOOK_MODES), mode))
        self._hook_mode = mode  # vmmkit serves PyTorch the way it was loaded (module docstring)

    @property
    def memory_margin_bytes(self):
        raise NotImplementedError("memory_margin_bytes can only be set")

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value):
        if value:
            raise NotImplementedError("vmmkit keeps no free-memory margin for tagged allocations (memory_margin_bytes=%r)"
                                      % value)

    def get_cpu_backup(self, x):
        raise NotImplementedError("vmmkit does not hand out a paused tag's CPU copy; resume the tag to read the tensor")

    def _init_from_environment(self):
        """torch_memory_saver's TMS_INIT_ENABLE: every allocation made outside regions from now on is
        pausable, as vmmkit's default tag."""
        if os.environ.get("TMS_INIT_ENABLE") != "1":
            return
        backup = os.environ.get("TMS_INIT_ENABLE_CPU_BACKUP") == "1"
        name = _vmmkit_tag(_DEFAULT_TAG, backup)
        vmmkit.default_tag(name, keep_contents=backup)
        self._tags.add(name)


torch_memory_saver = TorchMemorySaver()
torch_memory_saver._init_from_environment()


@contextlib.contextmanager
def configure_subprocess():
    """Child processes started in this block run with vmmkit preloaded, serving all their memory (as
    torch_memory_saver's children run with its library preloaded)."""
    saved = {key: os.environ.get(key) for key in ("LD_PRELOAD", "VMM_SERVES")}
    os.environ["LD_PRELOAD"] = utils.get_binary_path()
    os.environ["VMM_SERVES"] = "all"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
