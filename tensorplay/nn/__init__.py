"""``tensorplay.nn``: modules and functional ops with PyTorch's names."""

from . import functional

__all__ = ["functional"]
