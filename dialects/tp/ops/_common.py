"""Helpers shared by the op families' reference implementations."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..types import TensorType

__all__ = ["compute_np_dtype", "upcast", "promote_operands"]


def compute_np_dtype(dtype: dt.DType) -> np.dtype:
    """The numpy dtype the reference computes in: half types widen to float32, as
    PyTorch's CPU kernels do, and the result is rounded back once."""
    if dtype is dt.float16 or dtype is dt.bfloat16:
        return np.dtype(np.float32)
    return dtype.np_dtype


def upcast(array: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """``array`` converted to the compute dtype of ``dtype``."""
    target = compute_np_dtype(dtype)
    return array if array.dtype == target else array.astype(target)


def promote_operands(types: list[TensorType | None]) -> dt.DType:
    """PyTorch's result dtype over tensor operands (0-d tensors rank below the others)."""
    return dt.result_type(*[(t.dtype, t.rank) for t in types if t is not None])
