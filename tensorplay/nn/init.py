"""Weight initialization, in place and without gradient tracking, with PyTorch's
distributions and fan/gain rules (numbers come from tensorplay's generator)."""

from __future__ import annotations

import math
import warnings

from .._grad_mode import no_grad
from .._tensor import Tensor
from ..ops import creation
from ..ops import elementwise
from ..ops import random

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale of weights feeding ``nonlinearity`` (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


# PyTorch's private name, which model code calls directly
_calculate_fan_in_and_fan_out = _fan_in_and_fan_out


def _fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with samples from U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with samples from N(mean, std²)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with N(mean, std²) samples restricted to ``[a, b]`` (out-of-range
    samples are redrawn, which gives exactly the truncated distribution)."""
    if a > b:
        raise ValueError(f"trunc_normal_: expected a <= b, got a={a}, b={b}")
    with no_grad():
        shape = tuple(tensor.shape)
        values = random.normal(mean, std, shape, generator=generator, dtype="float64")
        for _ in range(1000):
            outside = elementwise.logical_or(elementwise.lt(values, a), elementwise.gt(values, b))
            if not outside.any():
                break
            fresh = random.normal(mean, std, shape, generator=generator, dtype="float64")
            values = elementwise.where(outside, fresh, values)
        else:  # the interval holds almost no mass: fall back to clamping
            values = elementwise.clamp(values, a, b)
        return tensor.copy_(values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D ``tensor`` with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(creation.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: random.Generator | None = None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: random.Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: random.Generator | None = None) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: random.Generator | None = None) -> Tensor:
    """He normal: N(0, std²) with ``std = gain / sqrt(fan)``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)

