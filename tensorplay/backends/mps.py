"""``tp.backends.mps``: Apple's Metal device is not one tensorplay's IREE backends run on."""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: tensorplay has no MPS device."""
    return False


def is_built() -> bool:
    """False: tensorplay has no MPS device."""
    return False
