"""Pixel shuffle layers: channels traded for resolution and back."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """``(*, C·r², H, W)`` → ``(*, C, H·r, W·r)`` with ``r = upscale_factor``."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Any) -> Any:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H·r, W·r)`` → ``(*, C·r², H, W)`` with ``r = downscale_factor``."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Any) -> Any:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
