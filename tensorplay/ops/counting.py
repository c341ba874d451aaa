"""Counting functions: bincount and histc.

Both add ones (or weights) into bins with ``tp.index_put`` (``accumulate``). How many bins
``bincount`` makes, and the range ``histc`` takes from the data when ``min == max``, depend
on the values, so those are read (``Tensor.tolist``): in eager mode that is a read of the
tensor, under ``tp.compile`` a graph break before the op, after which the rest of the
function is captured with the sizes read. ``histc`` with a given range reads nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import OpAttributeError, DTypeError, ShapeError
from . import creation
from . import elementwise
from . import reduction
from . import shape as shape_ops
from ._helpers import as_tensor_arg, is_scalar, scalar_tensor
from ._public import exported, public


def _int_arg(op: str, name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(value).__name__}")
    return int(value)


def _add_into(size: int, dtype: dt.DType, at: Tensor, values: Tensor, like: Tensor) -> Tensor:
    """``size`` zeros of ``dtype`` with ``values`` added at the int64 positions ``at``."""
    zeros = creation.zeros(size, dtype=dtype, device=like.device)
    return apply("tp.index_put", zeros, values, at, dims=(0,), accumulate=True)


@public(method=True)
def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Tensor:
    """How often each value ``0 .. max(input)`` occurs in the 1-D non-negative integer
    ``input`` (at least ``minlength`` bins); with ``weights``, their sums per value (float64,
    or float32 for float32 weights). The number of bins is read from the values."""
    x = as_tensor_arg(input, "bincount")
    minlength = _int_arg("bincount", "minlength", minlength)
    if not x.dtype.is_integer or x.dtype.is_bool:
        raise DTypeError(f"bincount: not implemented for dtype {x.dtype.name}; expected an integer tensor")
    if x.ndim != 1:
        raise ShapeError("bincount: bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise OpAttributeError("bincount: minlength should be >= 0")
    w = None
    if weights is not None:
        w = as_tensor_arg(weights, "bincount", "weights")
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise ShapeError("bincount: weights should be 1-d and have the same length as input")
    if x.numel() == 0:  # PyTorch gives int64 zeros here, weights or not
        return creation.zeros(minlength, dtype=dt.int64, device=x.device)
    low, high = shape_ops.stack([reduction.amin(x), reduction.amax(x)]).tolist()
    if low < 0:
        raise OpAttributeError("bincount: bincount only supports 1-d non-negative integral inputs.")
    size = max(int(high) + 1, minlength)
    at = elementwise.cast(x, dt.int64)
    if w is None:
        return _add_into(size, dt.int64, at, creation.ones(x.shape[0], dtype=dt.int64, device=x.device), x)
    out_dtype = dt.float32 if w.dtype is dt.float32 else dt.float64
    return _add_into(size, out_dtype, at, elementwise.cast(w, out_dtype), x)


@public(method=True)
def histc(input: Any, bins: int = 100, min: Any = 0, max: Any = 0) -> Tensor:
    """A histogram of the elements of ``input`` (flattened) in ``bins`` equal-width bins
    over ``[min, max]``, in ``input``'s dtype; elements outside are not counted, ``max``
    falls into the last bin. ``min == max`` takes the range from the data (widened by 1 on
    each side when that is one value too)."""
    x = as_tensor_arg(input, "histc")
    bins = _int_arg("histc", "bins", bins)
    for name, v in (("min", min), ("max", max)):
        if not is_scalar(v) or isinstance(v, (bool, np.bool_)):
            raise TypeError(f"histc(): argument '{name}' must be a number, not {type(v).__name__}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"histc: not implemented for dtype {x.dtype.name}; expected a floating-point tensor")
    if bins <= 0:
        raise OpAttributeError(f"histc: bins must be > 0, but got {bins}")
    left, right = float(min), float(max)
    flat = shape_ops.reshape_to(x, (x.numel(),), "histc")
    if left == right and x.numel() != 0:
        left, right = (float(v) for v in shape_ops.stack([reduction.amin(flat), reduction.amax(flat)]).tolist())
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise OpAttributeError(f"histc: range of [{left:g}, {right:g}] is not finite")
    if not left < right:
        raise OpAttributeError("histc: max must be larger than min")
    if x.numel() == 0:
        return creation.zeros(bins, dtype=x.dtype, device=x.device)
    # the edges in the input's dtype, and each step rounded to it, as PyTorch's kernel
    lo, hi = scalar_tensor(left, x.dtype), scalar_tensor(right, x.dtype)
    inside = elementwise.logical_and(elementwise.ge(flat, lo), elementwise.le(flat, hi))
    scaled = elementwise.div(elementwise.mul(elementwise.sub(flat, lo), bins), elementwise.sub(hi, lo))
    zero = scalar_tensor(0, x.dtype)
    at = elementwise.minimum(elementwise.cast(elementwise.where(inside, scaled, zero), dt.int64), bins - 1)
    return _add_into(bins, x.dtype, at, elementwise.cast(inside, x.dtype), x)


__all__ = exported(__name__)  # the names declared @public above
