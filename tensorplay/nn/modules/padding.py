"""Padding layers: constant (zeros), reflection, replication and circular padding of the last
1, 2 or 3 dims, through ``F.pad``."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


def _amounts(name: str, padding: Any, dims: int) -> tuple[int, ...]:
    """An int for every side, or ``2 * dims`` ints (the last dim's left and right first)."""
    if isinstance(padding, bool):
        raise TypeError(f"{name}: padding must be an int or a tuple of {2 * dims} ints, not bool")
    if isinstance(padding, int):
        return (padding,) * (2 * dims)
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * dims and all(
            isinstance(p, int) and not isinstance(p, bool) for p in padding):
        return tuple(padding)
    raise ValueError(f"{name}: padding must be an int or a tuple of {2 * dims} ints, got "
                     f"{padding!r}")


class _Pad(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _amounts(type(self).__name__, padding, self._dims)

    def forward(self, input: Any) -> Any:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Any) -> Any:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """Pads the last dim with ``value``: ``padding`` is an int or ``(left, right)``."""

    _dims = 1


class ConstantPad2d(_ConstantPad):
    """Pads the last two dims with ``value``: ``padding`` is an int or
    ``(left, right, top, bottom)``."""

    _dims = 2


class ConstantPad3d(_ConstantPad):
    """Pads the last three dims with ``value``: ``padding`` is an int or
    ``(left, right, top, bottom, front, back)``."""

    _dims = 3


class _ZeroPad(_ConstantPad):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad):
    """Pads the last dim with zeros: ``padding`` is an int or ``(left, right)``."""

    _dims = 1


class ZeroPad2d(_ZeroPad):
    """Pads the last two dims with zeros: ``padding`` is an int or
    ``(left, right, top, bottom)``."""

    _dims = 2


class ZeroPad3d(_ZeroPad):
    """Pads the last three dims with zeros."""

    _dims = 3


class ReflectionPad1d(_Pad):
    """Mirrors ``(N, C, W)`` or ``(C, W)`` inputs at their edges (the edge itself not repeated)."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_Pad):
    """Mirrors ``(N, C, H, W)`` or ``(C, H, W)`` inputs at their edges (the edge itself not repeated)."""

    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_Pad):
    """Mirrors ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs at their edges."""

    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_Pad):
    """Repeats the edge elements of ``(N, C, W)`` or ``(C, W)`` inputs."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_Pad):
    """Repeats the edge elements of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_Pad):
    """Repeats the edge elements of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _dims, _mode = 3, "replicate"


class CircularPad1d(_Pad):
    """Wraps ``(N, C, W)`` or ``(C, W)`` inputs around."""

    _dims, _mode = 1, "circular"


class CircularPad2d(_Pad):
    """Wraps ``(N, C, H, W)`` or ``(C, H, W)`` inputs around."""

    _dims, _mode = 2, "circular"


class CircularPad3d(_Pad):
    """Wraps ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs around."""

    _dims, _mode = 3, "circular"
