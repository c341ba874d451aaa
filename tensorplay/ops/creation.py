"""Tensor creation: from data, filled, ranges, identity, triangle coordinates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._device import as_device, driver_of
from .._dispatch import apply
from .._tensor import Tensor
from ..runtime.storage import aligned_copy, mark_shared
from ..dialects.tp import dtypes as dt
from ..dialects.tp.symbolic import SymInt
from ._helpers import int_tuple, is_scalar
from .. import _views
from ._public import exported, public


def _check_device(op: str, device: Any) -> None:
    """A clear error, before any work, for a device tensors cannot be made on."""
    if device is not None:
        target = as_device(device)
        if target.type != "cpu":
            driver_of(target)


def placed(t: Tensor, device: Any) -> Tensor:
    """``t`` (made on the host) on ``device``: uploaded when that is a GPU device."""
    if device is None:
        return t
    target = as_device(device)
    return t if target.type == "cpu" else t._moved(target)


def _finish(t: Tensor, requires_grad: bool, device: Any = None) -> Tensor:
    t = placed(t, device)
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point dtype can require gradients")
        t.requires_grad = True
    return t


def _data_array(data: Any, op: str, typed: bool = False) -> np.ndarray:
    """``data`` as a numpy array with PyTorch's dtype inference for Python data. ``typed``:
    the caller converts to a dtype it was given, so Python numbers stay as numpy reads them
    (float64, int64) and are rounded once, to that dtype (``tensor(0.1, dtype=float64)``
    is the double nearest 0.1, as in PyTorch, not 0.1 rounded to float32 first)."""
    if isinstance(data, Tensor):
        return data._concrete(f"tp.{op}(tensor)")  # a device tensor's values come to the host
    if isinstance(data, (np.ndarray, np.generic)):
        return np.asarray(data)
    try:
        array = np.asarray(data)
    except ValueError as exc:
        raise ValueError(f"{op}(): could not make a tensor from the data given ({exc})") from None
    if array.dtype == object:
        raise TypeError(f"{op}(): could not infer a dtype for data of type {type(data).__name__}; "
                        f"expected nested sequences of numbers of equal lengths")
    if typed and array.dtype.kind in "fiu":
        return array
    if array.dtype.kind == "f":
        return array.astype(dt.get_default_dtype().np_dtype)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "b":
        return array
    if array.dtype.kind in "US":
        raise TypeError(f"{op}(): new(): invalid data type 'str'")
    return array


@public
def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays, tensors).

    >>> tensor([[1, 2], [3, 4]]).dtype
    tensorplay.int64
    """
    _check_device("tensor", device)
    array = _data_array(data, "tensor", typed=dtype is not None)
    if dtype is not None:
        array = _convert(array, dt.as_dtype(dtype))
    elif array.dtype not in (d.np_dtype for d in dt.ALL_DTYPES):
        dt.from_numpy_dtype(array.dtype)  # raises a clear TypeError
    return _finish(Tensor._wrap(aligned_copy(array)), requires_grad, device)


def _convert(array: np.ndarray, dtype: dt.DType) -> np.ndarray:
    if array.dtype == dtype.np_dtype:
        return array
    if dtype.is_bool:
        return array != 0
    if array.dtype.kind == "f" and dtype.is_integer:
        return np.trunc(array).astype(dtype.np_dtype)
    return array.astype(dtype.np_dtype)


@public(aliases=("asarray",))
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, sharing memory with numpy arrays and tensors when no conversion
    is needed."""
    _check_device("as_tensor", device)
    if isinstance(data, Tensor):
        data = placed(data, device)
        return data if dtype is None else data.to(dtype)
    array = _data_array(data, "as_tensor", typed=dtype is not None)
    if dtype is not None:
        array = _convert(array, dt.as_dtype(dtype))
    dt.from_numpy_dtype(array.dtype)
    if array is data:  # the caller's own array, shared (runtime.storage.mark_shared)
        mark_shared(array)
    return placed(Tensor._wrap(array), device)


@public
def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with the numpy array ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray (got {type(array).__name__})")
    dt.from_numpy_dtype(array.dtype)
    mark_shared(array)  # the caller writes through it: no device copy of it may be kept
    return Tensor._wrap(array)


@public
def scalar_tensor(value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    return tensor(value, dtype=dtype or dt.get_default_dtype(), device=device)


def _fill(op: str, size: tuple[Any, ...], value: Any, dtype: Any, device: Any,
          requires_grad: bool) -> Tensor:
    _check_device(op, device)
    shape = int_tuple(op, "size", size)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    value = float(value) if not isinstance(value, float) else value
    return _finish(apply("tp.full", shape=shape, value=value, dtype=d), requires_grad, device)


@public
def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _fill("zeros", size, 0.0, dtype, device, requires_grad)


@public
def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _fill("ones", size, 1.0, dtype, device, requires_grad)


@public
def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor; tensorplay fills it with zeros so results are reproducible."""
    return _fill("empty", size, 0.0, dtype, device, requires_grad)


@public
def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``; the dtype follows the value's type
    (bool, int64 or the default float dtype) unless given."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if not is_scalar(fill_value):
        raise TypeError(f"full(): fill_value must be a number, got {type(fill_value).__name__}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.scalar_dtype(fill_value)
    if not isinstance(size, (tuple, list)):
        size = (size,)
    return _fill("full", tuple(size), fill_value, d, device, requires_grad)


def _like(input: Tensor, dtype: Any) -> tuple[tuple[int, ...], Any]:
    if not isinstance(input, Tensor):
        raise TypeError(f"expected a Tensor, got {type(input).__name__}")
    return tuple(input.shape), dtype if dtype is not None else input.dtype


def _device_like(input: Tensor, device: Any) -> Any:
    """PyTorch's rule: a ``*_like`` tensor is made on ``input``'s device unless told."""
    if device is not None or not _views.has_memory(input):
        return device
    return input.device


@public
def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    shape, d = _like(input, dtype)
    device = _device_like(input, device)
    return _fill("zeros_like", shape, 0.0, d, device, requires_grad)


@public
def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    shape, d = _like(input, dtype)
    device = _device_like(input, device)
    return _fill("ones_like", shape, 1.0, d, device, requires_grad)


@public
def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    shape, d = _like(input, dtype)
    device = _device_like(input, device)
    return _fill("empty_like", shape, 0.0, d, device, requires_grad)


@public
def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    shape, d = _like(input, dtype)
    device = _device_like(input, device)
    return _fill("full_like", shape, fill_value, d, device, requires_grad)


def _number(value: Any, name: str) -> float | int:
    if isinstance(value, Tensor):
        value = value.item()
    if not is_scalar(value) and not isinstance(value, SymInt):
        raise TypeError(f"arange(): argument '{name}' must be a number, got {type(value).__name__}")
    return value


@public
def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from ``start`` (default 0) up to, not including, ``end`` by ``step``; int64
    when all three are integers, else the default float dtype."""
    _check_device("arange", device)
    if end is None:
        start, end = 0, start
    start, end, step = _number(start, "start"), _number(end, "end"), _number(step, "step")
    if dtype is None:
        all_int = all(isinstance(v, (int, np.integer, SymInt)) for v in (start, end, step))
        d = dt.int64 if all_int else dt.get_default_dtype()
    else:
        d = dt.as_dtype(dtype)
    # a symbolic size stays symbolic (the attribute holds its expression)
    start, end, step = (v if isinstance(v, SymInt) else float(v) for v in (start, end, step))
    out = apply("tp.arange", start=start, end=end, step=step, dtype=d)
    return _finish(out, requires_grad, device)


@public
def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    from .elementwise import add, cast, lt, mul, sub, where

    _check_device("linspace", device)
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace(): number of steps must be a non-negative int, got {steps!r}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    start, end = float(_number(start, "start")), float(_number(end, "end"))
    if steps == 1:
        return _finish(full((1,), start, dtype=d), requires_grad, device)
    step = (end - start) / max(steps - 1, 1)
    idx = arange(steps, dtype=dt.float64)
    # Fill from both ends, as PyTorch does, so the last value is exactly ``end``.
    low = add(mul(idx, step), start)
    high = sub(end, mul(sub(steps - 1, idx), step))
    values = where(lt(idx, steps // 2), low, high)
    return _finish(cast(values, d), requires_grad, device)


@public
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the diagonal and zeros elsewhere."""
    from .elementwise import cast, eq
    from .shape import reshape

    _check_device("eye", device)
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ValueError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    rows = reshape(arange(n), (n, 1))
    return _finish(cast(eq(rows, arange(m)), d), requires_grad, device)


def _triangle_indices(op: str, row: Any, col: Any, offset: Any, dtype: Any, device: Any, lower: bool) -> Tensor:
    _check_device(op, device)
    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    if row < 0:
        raise ValueError(f"{op}: row must be non-negative, got {row}")
    if col < 0:
        raise ValueError(f"{op}: col must be non-negative, got {col}")
    d = dt.int64 if dtype is None else dt.as_dtype(dtype)
    if d not in (dt.int64, dt.int32):
        raise TypeError(f"{op}: not implemented for dtype {d.name}; use int64 or int32")
    make = np.tril_indices if lower else np.triu_indices
    rows, cols = make(int(row), int(offset), int(col))
    pairs = np.stack([rows, cols]).astype(np.int64).reshape(2, -1)
    return placed(Tensor._wrap(pairs.astype(d.np_dtype)), device)


@public
def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The coordinates of the lower triangle (on and below diagonal ``offset``) of a
    ``row`` x ``col`` matrix: a ``[2, N]`` tensor of rows, then columns, in row-major order."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


@public
def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The coordinates of the upper triangle (on and above diagonal ``offset``) of a
    ``row`` x ``col`` matrix: a ``[2, N]`` tensor of rows, then columns, in row-major order."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


del math


__all__ = exported(__name__)  # the names declared @public above
