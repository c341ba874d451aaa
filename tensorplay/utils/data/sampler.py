"""Samplers: the order in which a ``DataLoader`` visits a map-style dataset's keys, and
``BatchSampler``, which groups those keys into batches.

Random samplers draw from a tensorplay ``Generator`` (numpy's PCG64): the same seed gives the
same order every run, but not the order PyTorch gives for that seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ...ops import random as _random
from ...ops.creation import tensor

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """The base of samplers: a subclass defines ``__iter__`` (the keys, one by one) and, where
    it knows it, ``__len__``."""


def _positive_int(owner: str, name: str, value: Any) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


def _bool(owner: str, name: str, value: Any, error: type = TypeError) -> bool:
    if not isinstance(value, bool):
        raise error(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")
    return value


def _fresh_seed(generator: _random.Generator | None) -> int:
    """A seed drawn from ``generator`` (the default generator when None)."""
    return int(_random.randint(0, 2 ** 63 - 1, (), generator=generator).item())


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """The keys in a random order: a permutation of ``range(len(data_source))`` per pass
    (repeated, and the last one cut, when ``num_samples`` asks for more or fewer), or with
    ``replacement=True`` ``num_samples`` keys drawn independently. Without a ``generator``,
    each pass draws a seed from the default generator (``tp.manual_seed`` makes it
    repeatable)."""

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: _random.Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = _bool("RandomSampler", "replacement", replacement)
        self._num_samples = num_samples
        self.generator = generator
        _positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        # read at each use: the dataset's size may change after the sampler is made
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = _random.Generator().manual_seed(_fresh_seed(None))
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                count = min(32, self.num_samples - start)
                yield from _random.randint(0, n, (count,), generator=generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from _random.randperm(n, generator=generator).tolist()
        yield from _random.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order (a new permutation each pass)."""

    def __init__(self, indices: Sequence[int], generator: _random.Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _random.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` keys in ``0 .. len(weights) - 1`` drawn with probabilities proportional
    to ``weights`` (with replacement by default)."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: _random.Generator | None = None) -> None:
        self.num_samples = _positive_int("WeightedRandomSampler", "num_samples", num_samples)
        self.replacement = _bool("WeightedRandomSampler", "replacement", replacement, ValueError)
        values = np.asarray(weights.detach().numpy() if isinstance(weights, Tensor) else weights, np.float64)
        if values.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                             f"shape {tuple(values.shape)}")
        self.weights = tensor(values, dtype=dt.float64)
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        draws = _random.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        return iter(draws.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """The keys of ``sampler`` in lists of ``batch_size`` (the last one shorter, or dropped
    with ``drop_last=True``).

    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        self.batch_size = _positive_int("BatchSampler", "batch_size", batch_size)
        self.drop_last = _bool("BatchSampler", "drop_last", drop_last, ValueError)
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
