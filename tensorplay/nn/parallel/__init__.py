"""``tensorplay.nn.parallel``: ``DistributedDataParallel`` (docs/distributed.md)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
