"""Dropout layers."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability ``p`` in training mode (scaling the rest by
    ``1 / (1 - p)``); the identity in eval mode."""

    def forward(self, input: Any) -> Any:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` inputs with probability ``p`` in
    training mode (scaling the rest by ``1 / (1 - p)``); the identity in eval mode."""

    def forward(self, input: Any) -> Any:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` inputs with probability ``p`` in training
    mode (scaling the rest by ``1 / (1 - p)``); the identity in eval mode. A 3-D input is
    taken as ``(N, C, L)`` (with a warning), as PyTorch does."""

    def forward(self, input: Any) -> Any:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs with
    probability ``p`` in training mode (scaling the rest by ``1 / (1 - p)``); the identity in
    eval mode."""

    def forward(self, input: Any) -> Any:
        return F.dropout3d(input, self.p, self.training, self.inplace)
