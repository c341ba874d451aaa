"""Datasets: map-style (``Dataset``: ``dataset[i]`` and ``len``) and iterable
(``IterableDataset``: a stream), the ready-made ones (tensors, subsets, concatenations,
chains, stacks) and ``random_split``."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ..._tensor import Tensor
from ...ops import random as _random

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class Dataset(Generic[T_co]):
    """A map from keys (usually ``0 .. len-1``) to samples. A subclass defines
    ``__getitem__`` (and usually ``__len__``, which the default samplers need); it may define
    ``__getitems__(indices)`` to return a list of samples in one call, which ``DataLoader``
    then uses for each batch. ``a + b`` is ``ConcatDataset([a, b])``.

    The generic parameter is for annotations: ``class Pairs(Dataset[tuple[Tensor, int]])``.
    """

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A stream of samples: a subclass defines ``__iter__``. With ``num_workers > 0`` every
    worker iterates its own copy, so a dataset that should not repeat its samples splits the
    work by ``get_worker_info()`` (``id``, ``num_workers``). ``a + b`` is
    ``ChainDataset([a, b])``."""

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


def _first_dim(t: Any) -> int:
    if isinstance(t, Tensor):
        return t.shape[0] if t.ndim else -1
    try:
        return len(t)
    except TypeError:
        return -1


class TensorDataset(Dataset[tuple]):
    """Samples ``(t[i] for t in tensors)`` from tensors of the same first dim.

    >>> import tensorplay as tp
    >>> ds = TensorDataset(tp.arange(6).reshape(3, 2), tp.tensor([0, 1, 0]))
    >>> len(ds), ds[1]
    (3, (tensor([2, 3]), tensor(1)))
    """

    def __init__(self, *tensors: Tensor) -> None:
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, expected a Tensor")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: argument {i} is a 0-d tensor; each tensor needs a first "
                                 f"dim to index samples by")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dims {sizes} differ")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0


class StackDataset(Dataset[T_co]):
    """Samples that combine the samples of several datasets of one length, as a tuple
    (``StackDataset(a, b)[i] == (a[i], b[i])``) or a dict
    (``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``)."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError("StackDataset: give the datasets either as positional arguments (tuple samples) or "
                             "as keywords (dict samples), not both")
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("StackDataset: at least one dataset is needed")
        lengths = [len(d) for d in datasets]
        if len(set(lengths)) > 1:
            raise ValueError(f"StackDataset: size mismatch between datasets: lengths {lengths} differ")
        self._length = lengths[0]
        self.datasets: tuple | dict = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        if isinstance(self.datasets, dict):
            columns = {k: _items(d, indices) for k, d in self.datasets.items()}
            return [{k: columns[k][i] for k in columns} for i in range(len(indices))]
        columns = [_items(d, indices) for d in self.datasets]
        return [tuple(c[i] for c in columns) for i in range(len(indices))]

    def __len__(self) -> int:
        return self._length


def _items(dataset: Any, indices: Sequence[int]) -> list:
    """``[dataset[i] for i in indices]``, through ``__getitems__`` where the dataset has it."""
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        items = getitems(list(indices))
        if len(items) != len(indices):
            raise ValueError(f"{type(dataset).__name__}.__getitems__ returned {len(items)} samples for "
                             f"{len(indices)} indices")
        return list(items)
    return [dataset[i] for i in indices]


class ConcatDataset(Dataset[T_co]):
    """The samples of several map-style datasets one after another; ``cumulative_sizes``
    holds the running totals of their lengths."""

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset (use ChainDataset to chain "
                                "iterable datasets)")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError(f"ConcatDataset: absolute value of index {idx} should not exceed dataset "
                                 f"length {len(self)}")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {len(self)}")
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets one after another (chained lazily, each
    iterated when the one before it ends)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            total += len(d)
        return total


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order: ``Subset(d, idx)[i] ==
    d[idx[i]]``."""

    dataset: Dataset[T_co]
    indices: Sequence[int]

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        return _items(self.dataset, [self.indices[i] for i in indices])

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(n: int, lengths: Sequence[int | float]) -> list[int]:
    """Fractions summing to 1 as lengths summing to ``n``: each ``floor(n * f)``, the
    remainder handed out one by one from the first split on."""
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths should not be empty")
    if all(isinstance(x, int) and not isinstance(x, bool) for x in lengths):
        if any(x < 0 for x in lengths):
            raise ValueError(f"random_split: lengths should be non-negative, got {lengths}")
        return lengths
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        out = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1: {frac}")
            out.append(math.floor(n * frac))
        for i in range(n - sum(out)):
            out[i % len(out)] += 1
        for i, length in enumerate(out):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=3)
        return out
    raise ValueError(f"random_split: lengths {lengths} should be ints summing to the dataset's length or "
                     f"fractions summing to 1")


def random_split(dataset: Dataset[T], lengths: Sequence[int | float],
                 generator: _random.Generator | None = _random.default_generator) -> list[Subset[T]]:
    """``dataset`` split at random into non-overlapping ``Subset``s of the given lengths (ints
    summing to ``len(dataset)``, or fractions summing to 1). The permutation is drawn from
    ``generator`` (the default generator when not given): the same seed gives the same split,
    though not PyTorch's split for that seed.

    >>> import tensorplay as tp
    >>> train, val = random_split(range(10), [0.8, 0.2], generator=tp.Generator().manual_seed(0))
    >>> len(train), len(val)
    (8, 2)
    """
    n = len(dataset)  # type: ignore[arg-type]
    sizes = _split_lengths(n, lengths)
    if sum(sizes) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(sizes)}) does not equal the length of the "
                         f"input dataset ({n})")
    indices = _random.randperm(sum(sizes), generator=generator).tolist()
    return [Subset(dataset, indices[end - size:end])
            for end, size in zip(itertools.accumulate(sizes), sizes)]
