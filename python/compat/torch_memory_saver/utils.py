"""Where torch_memory_saver's users find the library they preload: here, vmmkit's shim."""

from vmmkit import _shim


def get_binary_path():
    """The shim this process has loaded, else ``VMMKIT_SHIM``, else this checkout's build."""
    return _shim.loaded_shim_path() or _shim.checkout_shim_path()


def get_binary_path_from_package(name=None):
    """torch_memory_saver's library for a hook mode (``name``); with vmmkit one shim serves every mode."""
    return get_binary_path()
