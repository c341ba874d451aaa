"""``tp.cuda``: what scripts ask about the CUDA device (docs/devices.md).

A CUDA device exists when IREE's ``cuda`` runtime driver finds one: the answer is the
``iree-cuda`` backend's availability probe (``tensorplay.compiler.backends.probe``), taken once
per process and never raising, so ``is_available()`` is cheap and safe where there is no
driver. Only device index 0 is used (docs/devices.md), so ``device_count()`` is 0 or 1.
"""

from __future__ import annotations

import numbers
from typing import Any

from ._device import as_device, device

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name",
           "get_device_capability", "get_device_properties", "is_bf16_supported", "synchronize", "manual_seed", "manual_seed_all",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "empty_cache"]


def _capabilities(backend: str) -> Any:
    from .compiler.backends import probe

    return probe.capabilities(backend)


def is_available() -> bool:
    """True when IREE's ``cuda`` driver has a device (and the IREE packages are installed)."""
    return bool(_capabilities("iree-cuda").available)


def device_count() -> int:
    """The CUDA devices tensors can be placed on: 1 when one exists (index 0, IREE's default
    device; pick the GPU with ``CUDA_VISIBLE_DEVICES``), else 0."""
    return 1 if is_available() else 0


def _require(fn: str) -> None:
    caps = _capabilities("iree-cuda")
    if not caps.available:
        raise RuntimeError(f"tp.cuda.{fn}(): no CUDA device: {caps.reason or 'the iree-cuda backend is unavailable'}")


def _check_device(fn: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, (str, int, device)) or isinstance(value, bool):
        raise TypeError(f"tp.cuda.{fn}(): device must be an int, a string or a tp.device, got {type(value).__name__}")
    dev = as_device(value)
    if dev.type != "cuda":
        raise ValueError(f"tp.cuda.{fn}(): expected a cuda device, got {dev}")
    if dev.index not in (None, 0):
        raise ValueError(f"tp.cuda.{fn}(): only cuda device 0 is supported (IREE's default device); "
                         "select the GPU with CUDA_VISIBLE_DEVICES")


def current_device() -> int:
    """The index of the current CUDA device: always 0. RuntimeError without a CUDA device."""
    _require("current_device")
    return 0


def get_device_name(device: Any = None) -> str:
    """The name IREE's ``cuda`` driver gives the device. RuntimeError without a CUDA device."""
    _check_device("get_device_name", device)
    _require("get_device_name")
    names = _capabilities("iree-cuda").extra.get("devices") or []
    return str(names[0]) if names and names[0] is not None else "cuda"


def synchronize(device: Any = None) -> None:
    """Wait for the device's work to finish. IREE's calls here complete before they return,
    so there is nothing to wait for; RuntimeError without a CUDA device, as in PyTorch."""
    _check_device("synchronize", device)
    _require("synchronize")


def _check_seed(fn: str, seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"tp.cuda.{fn}(): seed must be an int, got {type(seed).__name__}")
    return int(seed)


def manual_seed(seed: int) -> None:
    """Accepted for PyTorch scripts; random numbers for device tensors are drawn by the host
    generator (seed it with ``tp.manual_seed``), so there is no device generator to seed."""
    _check_seed("manual_seed", seed)


def manual_seed_all(seed: int) -> None:
    """As :func:`manual_seed`, for every device."""
    _check_seed("manual_seed_all", seed)


def set_device(device: Any) -> None:
    """Select the CUDA device: only index 0 (IREE's default device) exists, so this checks
    the choice. ValueError for another index, RuntimeError without a CUDA device."""
    if device is None:
        raise TypeError("tp.cuda.set_device(): device must be an int, a string or a tp.device, got None")
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return  # PyTorch: a negative index leaves the device unchanged
    _check_device("set_device", device)
    _require("set_device")


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """The device's CUDA compute capability ``(major, minor)``, read from the CUDA driver.
    RuntimeError without a CUDA device."""
    _check_device("get_device_capability", device)
    _require("get_device_capability")
    capability = _capabilities("iree-cuda").extra.get("compute_capability")
    if capability is None:
        from .compiler.backends.probe import _cuda_compute_capability

        capability = _cuda_compute_capability()
    if capability is None:
        raise RuntimeError("tp.cuda.get_device_capability(): the CUDA driver did not report the device's "
                           "compute capability")
    return int(capability[0]), int(capability[1])


class _DeviceProperties:
    """What ``get_device_properties`` reports: ``name``, ``major``, ``minor``,
    ``total_memory`` (bytes) and ``multi_processor_count``."""

    def __init__(self, name: str, major: int, minor: int, total_memory: int, multi_processor_count: int):
        self.name = name
        self.major = major
        self.minor = minor
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def _driver_device_properties() -> tuple[str, int, int] | None:
    """(name, total memory in bytes, multiprocessor count) of device 0, read from the CUDA
    driver library; None where it cannot be read."""
    import ctypes

    from .compiler.backends.probe import cuda_driver_device

    found = cuda_driver_device()
    if found is None:
        return None
    cuda, dev = found
    count, total = ctypes.c_int(), ctypes.c_size_t()
    name = ctypes.create_string_buffer(256)
    # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    if (cuda.cuDeviceGetName(name, len(name), dev) != 0
            or cuda.cuDeviceTotalMem_v2(ctypes.byref(total), dev) != 0
            or cuda.cuDeviceGetAttribute(ctypes.byref(count), 16, dev) != 0):
        return None
    return name.value.decode(errors="replace"), int(total.value), int(count.value)


def get_device_properties(device: Any = None) -> _DeviceProperties:
    """The device's name, compute capability (``major``, ``minor``), ``total_memory`` in bytes
    and ``multi_processor_count``, read from the CUDA driver. RuntimeError without a CUDA
    device."""
    _check_device("get_device_properties", device)
    _require("get_device_properties")
    major, minor = get_device_capability()
    found = _driver_device_properties()
    if found is None:
        raise RuntimeError("tp.cuda.get_device_properties(): the CUDA driver did not report the device's "
                           "properties")
    name, total, count = found
    return _DeviceProperties(name, major, minor, total, count)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True when a CUDA device exists and computes in bfloat16: compute capability 8.0 or
    newer, or any device when ``including_emulation`` (IREE computes bfloat16 arithmetic in
    float32 where the device lacks it). False without a CUDA device."""
    if not is_available():
        return False
    if including_emulation:
        return True
    try:
        return get_device_capability()[0] >= 8
    except RuntimeError:
        return False


# IREE's runtime reports no allocator statistics for its devices, so the memory figures are
# 0 and the cache functions do nothing (docs/devices.md).

def memory_allocated(device: Any = None) -> int:
    """0: IREE gives no count of the bytes its device buffers hold."""
    _check_device("memory_allocated", device)
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """0: IREE gives no peak figure for its device buffers."""
    _check_device("max_memory_allocated", device)
    return 0


def memory_reserved(device: Any = None) -> int:
    """0: IREE gives no figure for the memory its allocator holds."""
    _check_device("memory_reserved", device)
    return 0


def max_memory_reserved(device: Any = None) -> int:
    """0: IREE gives no peak figure for the memory its allocator holds."""
    _check_device("max_memory_reserved", device)
    return 0


def reset_peak_memory_stats(device: Any = None) -> None:
    """Does nothing: there are no peak figures to reset (see :func:`max_memory_allocated`)."""
    _check_device("reset_peak_memory_stats", device)


def empty_cache() -> None:
    """Does nothing: device buffers go back to IREE's allocator when their tensors are freed."""
