"""``tensorplay.nn.functional``: activations, normalization, linear, convolution,
pooling, embedding, dropout, attention and padding, with PyTorch's signatures."""

from __future__ import annotations

from typing import Any

from .._dispatch import apply
from .._tensor import Tensor
from ..ops import elementwise as E
from ..ops._helpers import as_tensor_arg

__all__ = ["relu", "relu_", "gelu", "silu", "leaky_relu", "sigmoid", "tanh"]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    out = E.relu(input)
    return input._assign(out) if inplace else out


def relu_(input: Tensor) -> Tensor:
    return relu(input, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (``approximate='none'``) or with the tanh approximation."""
    return apply("tp.gelu", as_tensor_arg(input, "gelu"), approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    out = apply("tp.silu", as_tensor_arg(input, "silu"))
    return input._assign(out) if inplace else out


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    out = apply("tp.leaky_relu", as_tensor_arg(input, "leaky_relu"), negative_slope=negative_slope)
    return input._assign(out) if inplace else out


def sigmoid(input: Tensor) -> Tensor:
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return E.tanh(input)


del Any
