"""Random tensors from a seedable host generator (``tp.manual_seed``).

Random numbers are drawn on the host with numpy's PCG64; the same seed gives the same
tensors across runs, though not the same numbers as PyTorch's generator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._capture_hooks import random_source
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ._helpers import int_tuple
from .creation import _check_device, _device_like, placed
from ._public import declare, exported, public


@public
class Generator:
    """A random number generator; ``tp.Generator().manual_seed(0)``."""

    def __init__(self, device: Any = "cpu"):
        self._seed = 67280421310721
        self._rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
        self._seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        new = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(new)
        return new

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self._rng.bit_generator.state = state
        return self


default_generator = Generator()
declare(__name__, "default_generator")


@public
def manual_seed(seed: int) -> Generator:
    """Seed the default generator; returns it."""
    return default_generator.manual_seed(seed)


@public
def seed() -> int:
    return default_generator.seed()


@public
def initial_seed() -> int:
    return default_generator.initial_seed()


@public
def get_rng_state() -> dict:
    return default_generator.get_state()


@public
def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)


def _rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


def _float_dtype(dtype: Any, op: str) -> dt.DType:
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise TypeError(f"{op}(): expected a floating-point dtype, got {d.name}")
    return d


def _make(values: np.ndarray, d: dt.DType, requires_grad: bool) -> Tensor:
    t = Tensor._wrap(values.astype(d.np_dtype))
    t.requires_grad = requires_grad
    return t


def _sizes(size: Any) -> tuple:
    """A size argument as a tuple of entries (``(2, 3)``, ``[2, 3]`` or one number)."""
    if isinstance(size, (tuple, list)):
        return tuple(size)
    return (size,)


def _varargs_size(args: tuple, kwargs: dict) -> tuple:
    """``rand(2, 3)`` / ``rand((2, 3))``: the shape."""
    size = kwargs.get("size", args)
    if isinstance(size, tuple) and len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return _sizes(size)


def _size_at(position: int) -> Any:
    def size_of(args: tuple, kwargs: dict) -> tuple | None:
        size = kwargs["size"] if "size" in kwargs else args[position] if len(args) > position else None
        return None if size is None else _sizes(size)
    return size_of


def _randint_size(args: tuple, kwargs: dict) -> tuple | None:
    size = kwargs["size"] if "size" in kwargs else args[2] if len(args) > 2 else None
    if size is None:  # randint(high, size)
        size = kwargs["high"] if "high" in kwargs else args[1] if len(args) > 1 else None
    return None if size is None else _sizes(size)


@public
@random_source(size=_varargs_size)
def rand(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples from [0, 1)."""
    d = _float_dtype(dtype, "rand")
    _check_device("rand", device)
    return placed(_make(_rng(generator).random(int_tuple("rand", "size", size)), d, requires_grad), device)


@public
@random_source(size=_varargs_size)
def randn(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    d = _float_dtype(dtype, "randn")
    _check_device("randn", device)
    return placed(_make(_rng(generator).standard_normal(int_tuple("randn", "size", size)), d, requires_grad),
                  device)


@public
@random_source(size=_randint_size)
def randint(low: int, high: int | None = None, size: Any = None, *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``; ``randint(high, size)`` starts at 0."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint(): expected randint(low=0, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint(): expected low < high, got low={low}, high={high}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    shape = int_tuple("randint", "size", (size,))
    _check_device("randint", device)
    return placed(Tensor._wrap(_rng(generator).integers(low, high, size=shape).astype(d.np_dtype)), device)


@public
def rand_like(input: Tensor, *, dtype: Any = None, generator: Generator | None = None,
              device: Any = None) -> Tensor:
    return rand(tuple(input.shape), dtype=dtype or input.dtype, generator=generator,
                device=_device_like(input, device))


@public
def randn_like(input: Tensor, *, dtype: Any = None, generator: Generator | None = None,
               device: Any = None) -> Tensor:
    return randn(tuple(input.shape), dtype=dtype or input.dtype, generator=generator,
                 device=_device_like(input, device))


@public
def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, dtype: Any = None,
                 device: Any = None) -> Tensor:
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=_device_like(input, device))


@public
@random_source
def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None) -> Tensor:
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    return Tensor._wrap(_rng(generator).permutation(n).astype(d.np_dtype))


@public
@random_source(size=_size_at(2))
def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Generator | None = None,
           dtype: Any = None) -> Tensor:
    """Normal samples with the given mean and standard deviation (numbers or tensors)."""
    m = np.asarray(mean) if isinstance(mean, Tensor) else mean
    s = np.asarray(std) if isinstance(std, Tensor) else std
    if size is None:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    else:
        shape = int_tuple("normal", "size", (size,))
    if np.any(np.asarray(s) < 0):
        raise ValueError("normal expects std >= 0.0")
    if dtype is None:
        dtype = mean.dtype if isinstance(mean, Tensor) else dt.get_default_dtype()
    d = _float_dtype(dtype, "normal")
    values = np.asarray(m, np.float64) + np.asarray(s, np.float64) * _rng(generator).standard_normal(shape)
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    return _make(values, d, False) if like is None else placed(_make(values, d, False), _device_like(like, None))


@public(top=False)
@random_source(size=_size_at(2))
def uniform(low: float, high: float, size: Any, *, generator: Generator | None = None,
            dtype: Any = None) -> Tensor:
    """Uniform samples from ``[low, high)``."""
    d = _float_dtype(dtype, "uniform")
    shape = int_tuple("uniform", "size", (size,))
    return _make(_rng(generator).uniform(low, high, shape), d, False)


@public
@random_source
def bernoulli(input: Tensor, p: float | None = None, *, generator: Generator | None = None) -> Tensor:
    """Samples of 1 with probability ``input`` (or ``p``) and 0 otherwise, in input's dtype."""
    probs = np.asarray(np.asarray(input) if p is None else np.full(tuple(input.shape), p), np.float64)
    if np.any((probs < 0) | (probs > 1)):
        raise ValueError("bernoulli expects all probabilities in [0, 1]")
    draws = _rng(generator).random(probs.shape) < probs
    return placed(Tensor._wrap(draws.astype(input.dtype.np_dtype)), _device_like(input, None))


@public
@random_source
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """Indices sampled from the rows of ``input`` (non-negative weights), as int64."""
    weights = np.asarray(np.asarray(input), np.float64)
    if weights.ndim not in (1, 2):
        raise ValueError(f"multinomial: prob_dist must be 1 or 2 dim, got {weights.ndim}")
    rows = weights.reshape(-1, weights.shape[-1])
    if np.any(rows < 0) or np.any(~np.isfinite(rows)):
        raise ValueError("multinomial: probability tensor contains either inf, nan or element < 0")
    rng = _rng(generator)
    out = np.empty((rows.shape[0], num_samples), np.int64)
    for i, row in enumerate(rows):
        total = row.sum()
        if total <= 0:
            raise ValueError("multinomial: invalid probability distribution (sum of probabilities <= 0)")
        if not replacement and num_samples > np.count_nonzero(row):
            raise ValueError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                             "without replacement")
        out[i] = rng.choice(row.shape[0], size=num_samples, replace=replacement, p=row / total)
    return placed(Tensor._wrap(out.reshape(weights.shape[:-1] + (num_samples,))), _device_like(input, None))


__all__ = exported(__name__)  # the names declared @public above
