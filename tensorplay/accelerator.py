"""``tp.accelerator``: the GPU a script should use, if any (docs/devices.md).

The accelerator is the first GPU device type whose IREE backend finds a device, in the order
``cuda``, ``hip``, ``vulkan``; a software Vulkan device (Mesa's llvmpipe/lavapipe) does not
count, since it runs on the CPU and is slower than host tensors (it can still be named
explicitly: ``tensor.to("vulkan")``). Each backend is probed once per process
(``tensorplay.compiler.backends.probe``), and a probe never raises.
"""

from __future__ import annotations

from typing import Any

from ._device import as_device, device

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "set_device_index",
           "synchronize"]

#: device type -> the backend whose probe says whether it exists, in the order they are preferred
_CANDIDATES = (("cuda", "iree-cuda"), ("hip", "iree-rocm"), ("vulkan", "iree-vulkan"))


def _found() -> device | None:
    from .compiler.backends import probe

    for kind, backend in _CANDIDATES:
        caps = probe.capabilities(backend)
        if caps.available and not caps.extra.get("software_device"):
            return device(kind)
    return None


def is_available() -> bool:
    """True when a GPU device is available (see the module's doc for which count)."""
    return _found() is not None


def current_accelerator(check_available: bool = False) -> device | None:
    """The accelerator's device type (``tp.device("cuda")``, ``"hip"`` or ``"vulkan"``), or
    None when there is none. ``check_available`` is accepted for PyTorch's signature: the
    answer is always one that is available."""
    if not isinstance(check_available, bool):
        raise TypeError(f"tp.accelerator.current_accelerator(): check_available must be a bool, "
                        f"got {type(check_available).__name__}")
    return _found()


def device_count() -> int:
    """1 when an accelerator is available (only device index 0 of a driver is used), else 0."""
    return 1 if is_available() else 0


def _require(fn: str) -> device:
    found = _found()
    if found is None:
        raise RuntimeError(f"tp.accelerator.{fn}(): no accelerator is available")
    return found


def _check_index(fn: str, value: Any, acc: device) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, str, device)):
        raise TypeError(f"tp.accelerator.{fn}(): device must be an int, a string or a tp.device, "
                        f"got {type(value).__name__}")
    dev = device(acc.type, value) if isinstance(value, int) else as_device(value)
    if dev.type != acc.type:
        raise ValueError(f"tp.accelerator.{fn}(): {dev} is not the current accelerator ({acc.type})")
    if dev.index not in (None, 0):
        raise ValueError(f"tp.accelerator.{fn}(): only device index 0 is supported, got {dev}")


def current_device_index() -> int:
    """The index of the current accelerator device: always 0. RuntimeError without one."""
    _require("current_device_index")
    return 0


def set_device_index(device: Any) -> None:
    """Select the accelerator device: only index 0 exists. RuntimeError without one."""
    _check_index("set_device_index", device, _require("set_device_index"))


def synchronize(device: Any = None) -> None:
    """Wait for the accelerator's work to finish: IREE's calls here complete before they
    return, so there is nothing to wait for. RuntimeError without an accelerator."""
    _check_index("synchronize", device, _require("synchronize"))
