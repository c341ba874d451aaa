"""``DistributedSampler``: each of ``num_replicas`` processes visits its own share of a
map-style dataset's keys, all shares of the same length (docs/data.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import TypeVar

from ...ops import random as _random
from .sampler import Sampler

__all__ = ["DistributedSampler"]

T_co = TypeVar("T_co", covariant=True)

_NO_GROUP = ("Requires distributed package to be available: pass num_replicas and rank to "
             "DistributedSampler, or call tensorplay.distributed.init_process_group() first")


def _process_group():
    """The ``tensorplay.distributed`` module when it has a process group; RuntimeError when
    it is missing or not initialized."""
    try:
        from ... import distributed as dist
    except ImportError as err:
        raise RuntimeError(_NO_GROUP) from err
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(_NO_GROUP)
    return dist


class DistributedSampler(Sampler[T_co]):
    """The keys of ``dataset`` for replica ``rank`` of ``num_replicas``: the key list
    (``0 .. len(dataset) - 1``, or with ``shuffle`` a permutation drawn from a generator seeded
    with ``seed + epoch``, the same on every replica) is made a multiple of ``num_replicas``
    long, by repeating keys from its start or, with ``drop_last``, by cutting its tail, and
    replica ``rank`` takes every ``num_replicas``-th key from position ``rank``.
    ``num_replicas`` and ``rank`` default to the process group's world size and rank. Call
    ``set_epoch(epoch)`` before each epoch for a new order.

    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = _process_group().get_world_size()
        if rank is None:
            rank = _process_group().get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        # every replica gets the same number of keys: the dataset's size rounded down to a
        # multiple of num_replicas with drop_last, else rounded up
        self.num_samples = n // num_replicas if drop_last else -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[T_co]:
        n = len(self.dataset)
        if self.shuffle:
            generator = _random.Generator().manual_seed(self.seed + self.epoch)
            keys = _random.randperm(n, generator=generator).tolist()
        else:
            keys = list(range(n))
        # the dataset's size may have changed since the sampler was made: it must still have
        # total_size keys to cut to (drop_last) or at least one key to repeat up to total_size
        fits = n >= self.total_size if self.drop_last else (0 < n <= self.total_size or n == self.total_size)
        if not fits:
            raise RuntimeError(f"DistributedSampler: the dataset has {n} samples, which do not give the "
                               f"{self.total_size} keys the sampler was made for; make a new sampler")
        if self.total_size <= n:
            keys = keys[:self.total_size]
        else:
            # repeat the list from its start as often as the padding needs
            repeats = -(-self.total_size // n)
            keys = (keys * repeats)[:self.total_size]
        return iter(keys[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next ``__iter__`` shuffles for (with ``shuffle``, each epoch has its
        own order, the same on every replica)."""
        self.epoch = epoch
