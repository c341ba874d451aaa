"""Helpers shared by the op families' reference implementations."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..types import TensorType

__all__ = ["upcast", "promote_operands"]


def upcast(array: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """``array`` converted to the dtype arithmetic on ``dtype`` runs in
    (:attr:`~tensorplay.dialects.tp.dtypes.DType.computes_in`)."""
    target = dtype.computes_in.np_dtype
    return array if array.dtype == target else array.astype(target)


def promote_operands(types: list[TensorType | None]) -> dt.DType:
    """PyTorch's result dtype over tensor operands (0-d tensors rank below the others)."""
    return dt.result_type(*[(t.dtype, t.rank) for t in types if t is not None])
