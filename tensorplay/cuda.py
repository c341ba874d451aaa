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

__all__ = ["is_available", "device_count", "current_device", "get_device_name", "synchronize", "manual_seed",
           "manual_seed_all"]


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
