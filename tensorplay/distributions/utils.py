"""Helpers shared by the distributions: broadcasting parameters, probabilities <-> logits."""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np

from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..ops.creation import tensor as _tensor
from ..ops.shape import broadcast_tensors

__all__ = ["broadcast_all", "clamp_probs", "finfo_eps", "finfo_min", "finfo_tiny", "lazy_property", "logits_to_probs",
           "probs_to_logits", "sum_rightmost"]


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Tensors and numbers broadcast to one shape; numbers take the first tensor's dtype (the
    default dtype when all are numbers)."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or tensorplay.Tensor, got "
                         + ", ".join(type(v).__name__ for v in values))
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        tensors = [_tensor(v, dtype=dt.get_default_dtype()) for v in values]
    else:
        tensors = [v if isinstance(v, Tensor) else _tensor(v, dtype=like.dtype, device=like.device) for v in values]
    if len(tensors) == 1:
        return (tensors[0],)
    return tuple(broadcast_tensors(*tensors))


# (eps, tiny, min) of the half types, whose numpy types may not have np.finfo
_HALF_FINFO = {"float16": (2.0 ** -10, 2.0 ** -14, -65504.0),
               "bfloat16": (2.0 ** -7, 2.0 ** -126, -3.3895313892515355e38)}


def _finfo(dtype: Any) -> tuple[float, float, float]:
    d = dt.as_dtype(dtype)
    if d.name in _HALF_FINFO:
        return _HALF_FINFO[d.name]
    info = np.finfo(d.np_dtype)
    return float(info.eps), float(info.tiny), float(info.min)


def finfo_eps(dtype: Any) -> float:
    """The machine epsilon of a floating dtype."""
    return _finfo(dtype)[0]


def finfo_tiny(dtype: Any) -> float:
    """The smallest positive normal number of a floating dtype."""
    return _finfo(dtype)[1]


def finfo_min(dtype: Any) -> float:
    """The most negative finite number of a floating dtype."""
    return _finfo(dtype)[2]


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped into ``[eps, 1 - eps]`` (eps of their dtype)."""
    eps = finfo_eps(probs.dtype)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds to probabilities (``is_binary``), or a softmax over the last dim."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities to log-odds (``is_binary``) or to log-probabilities, clamped first."""
    clamped = clamp_probs(probs)
    if is_binary:
        return clamped.log() - (-clamped).log1p()
    return clamped.log()


class lazy_property:
    """A property computed on first use and then stored on the instance."""

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its rightmost ``dim`` dims."""
    if dim == 0:
        return value
    return value.sum(tuple(range(-dim, 0)))
