"""``tp.utils``: utilities with ``torch.utils``'s names (``tp.utils.data``: datasets, samplers
and ``DataLoader``; ``tp.utils.checkpoint``: activation checkpointing)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
