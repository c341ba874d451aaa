"""Tensor types of the tp dialect: a shape and an element dtype.

A dimension is an ``int`` when static, a sympy expression over size symbols when symbolic
(``s0``, ``s0*4``, ``floor(s1/2)``: computed at run time from the inputs' sizes, see
:mod:`.symbolic`), or ``None`` when known only at run time without an expression. The last
two print as ``?`` in MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import DType, from_numpy_dtype

__all__ = ["TensorType", "Dim", "type_of_array", "is_static"]

Dim = Any  # int | None | sympy.Expr


def is_static(dim: Dim) -> bool:
    return isinstance(dim, (int, np.integer))


@dataclass(frozen=True)
class TensorType:
    """The type of a tp value: ``tensor<2x?xf32>``."""

    shape: tuple[Dim, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def has_static_shape(self) -> bool:
        return all(is_static(d) for d in self.shape)

    def numel(self) -> Dim:
        n: Any = 1
        for d in self.shape:
            if d is None:
                return None
            n = n * d
        return n

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype)

    def with_shape(self, shape: tuple[Dim, ...]) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def mlir(self) -> str:
        dims = "".join(f"{d}x" if is_static(d) else "?x" for d in self.shape)
        return f"tensor<{dims}{self.dtype.mlir}>"

    def __str__(self) -> str:
        return self.mlir()


def type_of_array(array: np.ndarray) -> TensorType:
    return TensorType(tuple(int(d) for d in array.shape), from_numpy_dtype(array.dtype))
