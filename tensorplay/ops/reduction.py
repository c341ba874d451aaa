"""Reduction and normalization functions: sum, mean, prod, extrema and their indices,
var/std, logsumexp, all/any, norm, cumsum, cumprod, logcumsumexp, softmax, log_softmax and
layer_norm.

Each function maps PyTorch's signature onto tp reduction ops (or a short composition of
them) through :func:`tensorplay._dispatch.apply`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..amp import autocast_mode as _amp
from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import DTypeError, ShapeError
from ..dialects.tp.ops.reduction import reduction_dims
from . import elementwise
from . import shape as shape_ops
from ._helpers import as_tensor_arg, int_tuple, is_scalar, sqrt_zero_grad, tracking
from ._public import exported, public, REDUCTION, REDUCTION_DDOF


def _result_type(name: str) -> type:
    cls = collections.namedtuple(name, ("values", "indices"))
    cls.__module__ = "tensorplay.return_types"
    cls.__doc__ = f"The result of ``{name}`` along a dimension: ``values`` and their ``indices``."
    return cls


_MaxResult = _result_type("max")
_MinResult = _result_type("min")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _dims(op: str, dim: Any, *, empty_means_all: bool = True) -> tuple[int, ...] | None:
    """``dim`` given as None, an int or a sequence of ints, as the ``dims`` attribute."""
    if dim is None:
        return None
    if _is_int(dim):
        return (int(dim),)
    if isinstance(dim, (tuple, list)):
        dims = int_tuple(op, "dim", (dim,))
        return None if not dims and empty_means_all else dims
    raise TypeError(f"{op}(): argument 'dim' must be int or tuple of ints, not "
                    f"{type(dim).__name__}")


def _single_dim(op: str, dim: Any) -> int:
    if not _is_int(dim):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    return int(dim)


def _dtype(dtype: Any) -> dt.DType | None:
    return None if dtype is None else dt.as_dtype(dtype)


@public(method=True, array_function={"sum": REDUCTION})
@_amp.policy("fp32", cpu=False)
def sum(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (all dims when None); bool and integer inputs sum in int64."""
    return apply("tp.sum", as_tensor_arg(input, "sum"), dims=_dims("sum", dim), keepdim=keepdim,
                 dtype=_dtype(dtype))


@public(method=True, array_function={"mean": REDUCTION})
def mean(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Mean over ``dim`` (all dims when None) of a floating-point tensor."""
    return apply("tp.mean", as_tensor_arg(input, "mean"), dims=_dims("mean", dim), keepdim=keepdim,
                 dtype=_dtype(dtype))


@public(method=True, array_function={"prod": REDUCTION})
@_amp.policy("fp32")
def prod(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Product over one ``dim`` (all elements when None); bool and integers multiply in int64."""
    dims = None if dim is None else (_single_dim("prod", dim),)
    return apply("tp.prod", as_tensor_arg(input, "prod"), dims=dims, keepdim=keepdim,
                 dtype=_dtype(dtype))


@public(method=True, array_function={"max": REDUCTION, "amax": REDUCTION})
def amax(input: Any, dim: Any = (), keepdim: bool = False) -> Tensor:
    """Largest value over ``dim`` (all dims when empty); NaN propagates."""
    return apply("tp.amax", as_tensor_arg(input, "amax"), dims=_dims("amax", dim), keepdim=keepdim)


@public(method=True, array_function={"min": REDUCTION, "amin": REDUCTION})
def amin(input: Any, dim: Any = (), keepdim: bool = False) -> Tensor:
    """Smallest value over ``dim`` (all dims when empty); NaN propagates."""
    return apply("tp.amin", as_tensor_arg(input, "amin"), dims=_dims("amin", dim), keepdim=keepdim)


def _extremum(op: str, input: Any, dim: Any, keepdim: bool, other: Any) -> Any:
    if other is None and isinstance(dim, (Tensor, np.ndarray)):
        other = dim
    if other is not None:
        return elementwise.maximum(input, other) if op == "max" else elementwise.minimum(input, other)
    x = as_tensor_arg(input, op)
    reduce_op, arg_op, result = (("tp.amax", "tp.argmax", _MaxResult) if op == "max"
                                 else ("tp.amin", "tp.argmin", _MinResult))
    if dim is None:
        return apply(reduce_op, x)
    d = _single_dim(op, dim)
    if not tracking(x):
        return result(apply(reduce_op, x, dims=(d,), keepdim=keepdim), apply(arg_op, x, dim=d, keepdim=keepdim))
    # the gradient goes to the element the index names, as PyTorch's max(dim)
    index = apply(arg_op, x, dim=d, keepdim=keepdim)
    at = index if keepdim or x.ndim == 0 else shape_ops.unsqueeze(index, d)
    values = apply("tp.gather", x, at, dim=d) if x.ndim else x
    return result(values if keepdim or x.ndim == 0 else shape_ops.squeeze(values, d), index)


@public(method=True)
def max(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        other: Any = None) -> Any:
    """The largest element (0-d); with ``dim``, ``(values, indices)`` along it (first index
    on ties); with a tensor second argument, the elementwise maximum."""
    return _extremum("max", input, dim, keepdim, other)


@public(method=True)
def min(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        other: Any = None) -> Any:
    """The smallest element (0-d); with ``dim``, ``(values, indices)`` along it (first index
    on ties); with a tensor second argument, the elementwise minimum."""
    return _extremum("min", input, dim, keepdim, other)


def _arg_extremum(op: str, input: Any, dim: Any, keepdim: bool) -> Tensor:
    x = as_tensor_arg(input, op)
    if x.dtype.is_bool:
        raise DTypeError(f"{op}(): does not support bool input")
    d = None if dim is None else _single_dim(op, dim)
    return apply(f"tp.{op}", x, dim=d, keepdim=keepdim)


@public(method=True, array_function={"argmax": REDUCTION})
def argmax(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element along ``dim``, or in the flattened tensor when None."""
    return _arg_extremum("argmax", input, dim, keepdim)


@public(method=True, array_function={"argmin": REDUCTION})
def argmin(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element along ``dim``, or in the flattened tensor when None."""
    return _arg_extremum("argmin", input, dim, keepdim)


def _correction(op: str, unbiased: Any, correction: Any) -> float:
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}(): pass either 'unbiased' or 'correction', not both")
    if correction is None:
        return 0.0 if unbiased is False else 1.0
    if not is_scalar(correction) or isinstance(correction, (bool, np.bool_)):
        raise TypeError(f"{op}(): argument 'correction' must be a number, not "
                        f"{type(correction).__name__}")
    return float(correction)


def _var(op: str, input: Any, dim: Any, unbiased: Any, keepdim: bool, correction: Any) -> Tensor:
    if isinstance(dim, (bool, np.bool_)):  # var(x, True): the legacy 'unbiased' form
        dim, unbiased = None, bool(dim)
    return apply("tp.var", as_tensor_arg(input, op), dims=_dims(op, dim), keepdim=keepdim,
                 correction=_correction(op, unbiased, correction))


@public(method=True, array_function={"var": REDUCTION_DDOF})
def var(input: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Variance over ``dim``, dividing by ``N - correction`` (``unbiased=False``: by N)."""
    return _var("var", input, dim, unbiased, keepdim, correction)


@public(method=True, array_function={"std": REDUCTION_DDOF})
def std(input: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    """Standard deviation: the square root of :func:`var` (rounded once for half types)."""
    x = as_tensor_arg(input, "std")
    work = x.dtype.computes_in
    if work is not x.dtype:
        out = elementwise.sqrt(_var("std", elementwise.cast(x, work), dim, unbiased, keepdim, correction))
        return elementwise.cast(out, x.dtype)
    return sqrt_zero_grad(_var("std", x, dim, unbiased, keepdim, correction))


@public(method=True)
@_amp.policy("fp32", cpu=False)
def logsumexp(input: Any, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input)))`` over ``dim``, without overflow for large inputs."""
    return apply("tp.logsumexp", as_tensor_arg(input, "logsumexp"), dims=_dims("logsumexp", dim),
                 keepdim=keepdim)


@public(method=True, array_function={"all": REDUCTION})
def all(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether every element over ``dim`` (all when None) is nonzero."""
    return apply("tp.all", as_tensor_arg(input, "all"),
                 dims=_dims("all", dim, empty_means_all=False), keepdim=keepdim)


@public(method=True, array_function={"any": REDUCTION})
def any(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether some element over ``dim`` (all when None) is nonzero."""
    return apply("tp.any", as_tensor_arg(input, "any"),
                 dims=_dims("any", dim, empty_means_all=False), keepdim=keepdim)


@public(method=True)
@_amp.policy("fp32", cpu=False)
def softmax(input: Any, dim: int, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; ``dtype`` converts the input first."""
    return apply("tp.softmax", as_tensor_arg(input, "softmax"), dim=_single_dim("softmax", dim),
                 dtype=_dtype(dtype))


@public(method=True)
@_amp.policy("fp32", cpu=False)
def log_softmax(input: Any, dim: int, dtype: Any = None) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``; ``dtype`` converts the input first."""
    return apply("tp.log_softmax", as_tensor_arg(input, "log_softmax"),
                 dim=_single_dim("log_softmax", dim), dtype=_dtype(dtype))


@public(method=True, array_function={"cumsum": lambda a, axis=None, dtype=None, out=None: (
        (a.reshape(-1) if axis is None else a, 0 if axis is None else axis), {})})
@_amp.policy("fp32", cpu=False)
def cumsum(input: Any, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sum along ``dim``; bool and integer inputs sum in int64."""
    return apply("tp.cumsum", as_tensor_arg(input, "cumsum"), dim=_single_dim("cumsum", dim),
                 dtype=_dtype(dtype))


@public(method=True)
@_amp.policy("fp32", cpu=False)
def cumprod(input: Any, dim: int, *, dtype: Any = None) -> Tensor:
    """Running product along ``dim``; bool and integer inputs multiply in int64."""
    return apply("tp.cumprod", as_tensor_arg(input, "cumprod"), dim=_single_dim("cumprod", dim),
                 dtype=_dtype(dtype))


@public(method=True)
def logcumsumexp(input: Any, dim: int) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, computed without overflow or underflow."""
    return apply("tp.logcumsumexp", as_tensor_arg(input, "logcumsumexp"),
                 dim=_single_dim("logcumsumexp", dim))


def _check_nonempty_norm(x: Tensor, dims: tuple[int, ...] | None, p: float) -> None:
    reduced = reduction_dims("norm", dims, x.ndim)
    # only sizes known now to be 0 are checked; dynamic sizes are checked when they run
    if dims is None and 0 in [d for d in x.shape if _is_int(d)]:
        raise ShapeError(f"norm: cannot compute the {p} norm on an empty tensor because the "
                         f"operation does not have an identity")
    for d in reduced:
        if _is_int(x.shape[d]) and x.shape[d] == 0:
            raise ShapeError(f"norm: cannot compute the {p} norm on the dimension {d} because "
                             f"this dimension is empty and the operation does not have an identity")


def _vector_norm(x: Tensor, p: float, dims: tuple[int, ...] | None, keepdim: bool) -> Tensor:
    if p == math.inf or p == -math.inf:
        _check_nonempty_norm(x, dims, p)
        return (amax if p > 0 else amin)(elementwise.abs(x), dims or (), keepdim)
    if p == 0:
        return sum(elementwise.cast(elementwise.ne(x, 0), x.dtype), dims, keepdim)
    if p == 1:
        return sum(elementwise.abs(x), dims, keepdim)
    if p == 2:
        return elementwise.sqrt(sum(elementwise.mul(x, x), dims, keepdim))
    return elementwise.pow(sum(elementwise.pow(elementwise.abs(x), p), dims, keepdim), 1.0 / p)


@public(method=True)
def norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Tensor:
    """Vector p-norm over ``dim`` (all elements when None): ``p`` is a number, ``inf``,
    ``-inf`` or ``'fro'`` (the 2-norm over at most two dims)."""
    x = as_tensor_arg(input, "norm")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"norm: Expected a floating point tensor as input. Got {x.dtype.name}")
    dims = _dims("norm", dim)
    if dtype is not None:
        target = dt.as_dtype(dtype)
        if not target.is_floating_point or dt.promote_types(x.dtype, target) is not target:
            raise DTypeError(f"norm: the dtype of the input ({x.dtype.name}) should be convertible "
                             f"without narrowing to the specified dtype ({target.name})")
        x = elementwise.cast(x, target)
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(f"norm: order {p!r} is not supported; use a number, inf, -inf or "
                             f"'fro' (the nuclear norm needs a singular value decomposition)")
        if dims is not None and len(dims) > 2:
            raise ShapeError(f"norm: the Frobenius norm takes at most 2 dims, got {list(dims)}")
        p = 2.0
    elif not is_scalar(p) or isinstance(p, (bool, np.bool_)):
        raise TypeError(f"norm(): argument 'p' must be a number or 'fro', not {type(p).__name__}")
    work = x.dtype.computes_in
    if work is not x.dtype:  # half types accumulate in float32 and round once, as PyTorch does
        return elementwise.cast(_vector_norm(elementwise.cast(x, work), float(p), dims, keepdim), x.dtype)
    return _vector_norm(x, float(p), dims, keepdim)


@public(functional=True)
@_amp.policy("fp32", cpu=False)
def layer_norm(input: Any, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims, then apply ``weight`` and
    ``bias`` elementwise when given."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"layer_norm(): argument 'normalized_shape' must be tuple of ints, not "
                        f"{type(normalized_shape).__name__}")
    shape = int_tuple("layer_norm", "normalized_shape", (normalized_shape,))
    w = None if weight is None else as_tensor_arg(weight, "layer_norm", "weight")
    b = None if bias is None else as_tensor_arg(bias, "layer_norm", "bias")
    return apply("tp.layer_norm", as_tensor_arg(input, "layer_norm"), w, b,
                 normalized_shape=shape, eps=eps)


__all__ = exported(__name__)  # the names declared @public above
