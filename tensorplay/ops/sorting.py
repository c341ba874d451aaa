"""Sorting functions: sort, argsort, msort, topk, kthvalue, and the binary-search pair
searchsorted and bucketize.

``sort``, ``topk`` and ``kthvalue`` are tp ops (:mod:`tensorplay.dialects.tp.ops.sorting`);
``argsort`` and ``msort`` take one result of ``tp.sort``. ``searchsorted`` and
``bucketize`` count, for each value, the boundaries below it (comparisons and a sum), which
is what a binary search over a sorted sequence finds.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import DTypeError, ShapeError
from . import elementwise
from . import reduction
from ._helpers import as_tensor_arg, is_scalar
from ._public import exported, public


def _result_type(name: str) -> type:
    cls = collections.namedtuple(name, ("values", "indices"))
    cls.__module__ = "tensorplay.return_types"
    cls.__doc__ = f"The result of ``{name}``: ``values`` and their ``indices``."
    return cls


_SortResult = _result_type("sort")
_TopkResult = _result_type("topk")
_KthvalueResult = _result_type("kthvalue")
_MedianResult = _result_type("median")
_NanmedianResult = _result_type("nanmedian")


def _int(op: str, name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(value).__name__}")
    return int(value)


def _bool(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}(): argument '{name}' must be bool, not {type(value).__name__}")
    return bool(value)


def _tensor(op: str, input: Any) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input


@public(method=True)
def sort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """``(values, indices)``: ``input`` sorted along ``dim`` (ascending unless ``descending``,
    NaN largest) and where each element came from. Always stable: equal elements keep their
    order, so ``stable=False`` gives the same result."""
    x = _tensor("sort", input)
    values, indices = apply("tp.sort", x, dim=_int("sort", "dim", dim),
                            descending=_bool("sort", "descending", descending),
                            stable=_bool("sort", "stable", stable))
    return _SortResult(values, indices)


@public(method=True)
def argsort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``input`` along ``dim`` (``sort(...).indices``)."""
    x = _tensor("argsort", input)
    return apply("tp.sort", x, dim=_int("argsort", "dim", dim),
                 descending=_bool("argsort", "descending", descending),
                 stable=_bool("argsort", "stable", stable))[1]


@public(method=True)
def msort(input: Any) -> Tensor:
    """``input`` sorted along its first dimension (``sort(input, dim=0).values``)."""
    return apply("tp.sort", _tensor("msort", input), dim=0)[0]


@public(method=True)
def topk(input: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    """``(values, indices)``: the ``k`` largest (smallest unless ``largest``) elements along
    ``dim``, always in order (largest first, or smallest first), NaN counting as the largest."""
    x = _tensor("topk", input)
    values, indices = apply("tp.topk", x, k=_int("topk", "k", k), dim=_int("topk", "dim", dim),
                            largest=_bool("topk", "largest", largest), sorted=_bool("topk", "sorted", sorted))
    return _TopkResult(values, indices)


@public(method=True)
def kthvalue(input: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """``(values, indices)``: the ``k``-th smallest element along ``dim`` (``k`` from 1) and
    its index."""
    x = _tensor("kthvalue", input)
    values, indices = apply("tp.kthvalue", x, k=_int("kthvalue", "k", k), dim=_int("kthvalue", "dim", dim),
                            keepdim=_bool("kthvalue", "keepdim", keepdim))
    return _KthvalueResult(values, indices)


def _counted(op: str, boundaries: Tensor, values: Tensor, right: bool, out_int32: bool) -> Tensor:
    """For each of ``values``, how many of ``boundaries`` (the last dim of a sequence whose
    leading dims match ``values``'s, or one 1-D sequence) lie before it: those not at least
    the value (``right``: not above it), as a binary search over the sorted sequence counts,
    so NaN values count every boundary and NaN boundaries (sorted last) count as below."""
    if boundaries.dtype.is_bool or values.dtype.is_bool:
        raise DTypeError(f"{op}(): not implemented for bool tensors")
    if boundaries.ndim == 1:
        seq = boundaries
        v = values.unsqueeze(-1)
    else:
        if values.ndim != boundaries.ndim or tuple(values.shape[:-1]) != tuple(boundaries.shape[:-1]):
            raise ShapeError(f"{op}(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                             f"of boundaries tensor and input value tensor must match, but we got boundaries "
                             f"tensor {list(boundaries.shape)} and input value tensor {list(values.shape)}")
        seq = boundaries.unsqueeze(-2)
        v = values.unsqueeze(-1)
    above = elementwise.gt(seq, v) if right else elementwise.ge(seq, v)
    return reduction.sum(elementwise.logical_not(above), -1, dtype=dt.int32 if out_int32 else dt.int64)


@public
def searchsorted(sorted_sequence: Any, values: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Any = None) -> Tensor:
    """Where each of ``values`` would be inserted into ``sorted_sequence`` (along its last
    dim) to keep it sorted: the first such index, or the last with ``right`` or
    ``side='right'``; ``sorter`` gives the indices that sort an unsorted sequence."""
    seq = _tensor("searchsorted", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted(): side can only be 'left' or 'right' but got '{side}'")
        if side == "left" and right:
            raise ValueError("searchsorted(): side and right can't be set to opposites, got side of left "
                             "while right was True")
        right = side == "right"
    if sorter is not None:
        sorter = _tensor("searchsorted", sorter)
        if tuple(sorter.shape) != tuple(seq.shape):
            raise ShapeError(f"searchsorted(): boundary and sorter must have the same size, but got boundary "
                             f"tensor {list(seq.shape)} and got sorter tensor {list(sorter.shape)}")
        seq = seq.gather(-1, sorter)
    if seq.ndim == 0:
        raise ShapeError("searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension")
    if is_scalar(values):
        if seq.ndim != 1:
            raise ShapeError("searchsorted(): input value can be a scalar only when boundaries tensor "
                             f"dimension is 1, but we got boundaries tensor dim({seq.ndim})")
        values = as_tensor_arg(values, "searchsorted", "values")
    v = _tensor("searchsorted", values) if not isinstance(values, Tensor) else values
    return _counted("searchsorted", seq, v, _bool("searchsorted", "right", right),
                    _bool("searchsorted", "out_int32", out_int32))


@public
def bucketize(input: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The index of the bucket each element of ``input`` falls in, given 1-D ascending
    ``boundaries``: the number of boundaries below it (``right``: at or below it)."""
    b = _tensor("bucketize", boundaries)
    if b.ndim != 1:
        raise ShapeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    x = as_tensor_arg(input, "bucketize") if is_scalar(input) else _tensor("bucketize", input)
    return _counted("bucketize", b, x, _bool("bucketize", "right", right), _bool("bucketize", "out_int32", out_int32))


def _median(op: str, input: Any, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    """The lower median along ``dim`` (of all elements when ``dim`` is None) and its index:
    the element at position ``(n - 1) // 2`` of the sorted values, counting only non-NaN
    values for ``nanmedian``; ``median`` of a row holding NaN is NaN, at the first NaN's index."""
    from . import shape as shape_ops

    x = _tensor(op, input)
    if dim is None:
        if x.numel() == 0:
            if not x.dtype.is_floating_point:
                raise ValueError(f"{op}(): the median of an empty {x.dtype.name} tensor is undefined")
            return elementwise.cast(elementwise.div(reduction.sum(x), 0.0), x.dtype)  # NaN, as PyTorch
        return _median(op, shape_ops.reshape(x, (-1,)), 0, False, skip_nan).values
    d = _int(op, "dim", dim)
    keepdim = _bool(op, "keepdim", keepdim)
    rank = x.ndim
    from ..dialects.tp.shapes import normalize_dim

    d = normalize_dim(op, d, max(rank, 1))
    if rank == 0:
        x = shape_ops.reshape(x, (1,))
    n = x.shape[d]
    if n == 0:
        raise ShapeError(f"{op}(): expected reduction dim {d} to have non-zero size")
    order = apply("tp.sort", x, dim=d, descending=False, stable=True)[1]  # NaN sorts last
    shape = list(x.shape)
    shape[d] = 1
    if x.dtype.is_floating_point:
        nans = reduction.sum(elementwise.isnan(x), d, keepdim=True)
        if skip_nan:
            k = elementwise.floor_divide(elementwise.clamp(elementwise.sub(n - 1, nans), min=0), 2)
        else:
            k = elementwise.where(elementwise.gt(nans, 0), elementwise.sub(n, nans), (n - 1) // 2)
    else:
        from .creation import full

        k = full(tuple(shape), (n - 1) // 2, dtype=dt.int64, device=x.device)
    index = apply("tp.gather", order, k, dim=d)
    values = apply("tp.gather", x, index, dim=d)
    if not keepdim or rank == 0:
        values, index = shape_ops.squeeze(values, d), shape_ops.squeeze(index, d)
    result = _MedianResult if op == "median" else _NanmedianResult
    return result(values, index)


@public(method=True)
def median(input: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The lower median of all elements (a 0-d tensor), or ``(values, indices)`` along
    ``dim``: of an even count, the smaller of the two middle values. NaN propagates."""
    return _median("median", input, dim, keepdim, skip_nan=False)


@public(method=True)
def nanmedian(input: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """:func:`median` ignoring NaN (NaN only where every value is NaN)."""
    return _median("nanmedian", input, dim, keepdim, skip_nan=True)


__all__ = exported(__name__)  # the names declared @public above
