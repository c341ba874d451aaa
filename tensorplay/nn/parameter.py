"""``nn.Parameter`` and ``nn.Buffer``: tensors that a Module registers on assignment."""

from __future__ import annotations

from typing import Any

from .. import _views
from .._tensor import Tensor

__all__ = ["Parameter", "Buffer"]


def _adopt(target: Tensor, data: Any) -> None:
    """Make ``target`` stand for the same value as ``data`` (shared, not copied)."""
    if data is None:
        from ..ops.creation import empty

        data = empty(0)
    elif not isinstance(data, Tensor):
        from ..ops.creation import tensor

        data = tensor(data)
    target._init_meta()
    _views.adopt(target, data)
    target._static_dims = data._static_dims


class Parameter(Tensor):
    """A tensor that is a learnable weight of a Module: assigning one to a Module attribute
    registers it, so it appears in ``parameters()`` and ``state_dict()``.

    It shares the value of ``data``; ``requires_grad`` defaults to True.
    """

    def __init__(self, data: Any = None, requires_grad: bool = True):
        _adopt(self, data)
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        self.requires_grad = bool(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor that is state but not a weight (running statistics, masks): assigning one
    to a Module attribute registers it as a buffer, ``persistent`` ones in ``state_dict()``."""

    def __init__(self, data: Any = None, *, persistent: bool = True):
        _adopt(self, data)
        self.persistent = bool(persistent)
