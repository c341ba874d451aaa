"""``tp.backends.cudnn``: PyTorch's cuDNN flags, kept for scripts that set them. tensorplay
does not use cuDNN (IREE generates its own kernels), so they have no effect and
``is_available()`` is False."""

from __future__ import annotations

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version"]

#: settable, no effect (PyTorch's defaults)
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: tensorplay runs no cuDNN kernels."""
    return False


def version() -> None:
    """None, as PyTorch gives where cuDNN is not available."""
