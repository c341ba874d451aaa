"""Devices: ``cpu`` (the host, numpy storage) and the IREE HAL devices a tensor can live on,
``cuda``, ``vulkan`` and ``hip`` (docs/devices.md)."""

from __future__ import annotations

from typing import Any

from .runtime.drivers import DEVICE_DRIVERS as _DRIVERS

__all__ = ["device", "as_device", "driver_of", "DEVICE_TYPES"]

#: device types (the runtime's table of drivers says which driver holds each one's tensors;
#: ``meta`` tensors have no data and cannot be made)
DEVICE_TYPES = tuple(_DRIVERS)


class device:  # noqa: N801 - PyTorch's spelling
    """A device such as ``tp.device("cpu")`` or ``tp.device("cuda", 0)``."""

    __slots__ = ("type", "index")

    def __init__(self, type: Any, index: int | None = None):  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"device() expects a string such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, idx = type.partition(":")
        if idx:
            if index is not None:
                raise ValueError(f"device(): index given twice in {type!r} and index={index}")
            if not idx.isdigit():
                raise ValueError(f"device(): invalid device string {type!r}")
            index = int(idx)
        if name not in _DRIVERS:
            raise ValueError(f"device(): unknown device type {name!r}; expected cpu, cuda, vulkan or hip")
        if name == "rocm":
            name = "hip"
        self.type = name
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")


def as_device(value: Any) -> device:
    if value is None:
        return CPU
    if isinstance(value, device):
        return value
    if isinstance(value, int):
        return device("cuda", value)
    return device(value)


def driver_of(target: device) -> str:
    """The IREE runtime driver holding tensors on ``target`` (a GPU device)."""
    driver = _DRIVERS[target.type]
    if driver is None:
        raise ValueError(f"tensors cannot be moved to {target}: it has no IREE runtime driver")
    if target.index not in (None, 0):
        raise ValueError(f"{target}: only device index 0 of each driver is supported (IREE's default "
                         f"device); select the GPU with CUDA_VISIBLE_DEVICES / the driver's own setting")
    return driver
