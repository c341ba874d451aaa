"""Upsampling layers, through ``F.interpolate``."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


class Upsample(Module):
    """Resamples the spatial dims to ``size`` or by ``scale_factor`` with ``mode``
    (``nearest``, ``nearest-exact``, ``linear``, ``bilinear``, ``trilinear``, ``area``)."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor: Any = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor is not None else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Any) -> Any:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with ``mode='nearest'`` for 4-D inputs."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with ``mode='bilinear'`` and ``align_corners=True`` for 4-D inputs."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
