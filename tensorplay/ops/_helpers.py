"""Argument handling shared by the frontend functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialects.tp import dtypes as dt
from ..dialects.tp.symbolic import SymInt
from .._tensor import Tensor

__all__ = ["is_scalar", "scalar_tensor", "size_tensor", "tensor_operands", "as_tensor_arg", "int_tuple"]


def is_scalar(value: Any) -> bool:
    """A Python or numpy number (not a tensor or array)."""
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def scalar_tensor(value: Any, dtype: dt.DType, op: str = "") -> Tensor:
    """A 0-d tensor holding the Python number ``value`` as ``dtype``."""
    if dtype.is_integer and not isinstance(value, (bool, np.bool_)):
        info = np.iinfo(dtype.np_dtype)
        if not (info.min <= value <= info.max):
            raise RuntimeError(f"{op}: value {value} cannot be converted to type {dtype.name} "
                               f"without overflow")
    if dtype.is_integer and isinstance(value, (float, np.floating)):
        value = int(value)
    return Tensor._wrap(np.array(value, dtype=dtype.np_dtype))


def size_tensor(size: SymInt, dtype: dt.DType) -> Tensor:
    """A 0-d tensor holding a symbolic size (computed when the program runs)."""
    from .._dispatch import apply

    return apply("tp.full", shape=(), value=size, dtype=dtype)


def as_tensor_arg(value: Any, op: str, name: str = "input") -> Tensor:
    """``value`` as a Tensor: numpy arrays and nested lists are converted, scalars become 0-d."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor._wrap(value)
    if is_scalar(value):
        return scalar_tensor(value, dt.scalar_dtype(value), op)
    raise TypeError(f"{op}(): argument '{name}' must be a Tensor or a number, "
                    f"not {type(value).__name__}")


def tensor_operands(op: str, *args: Any) -> list[Tensor]:
    """Tensors for ``args``, with Python numbers made 0-d tensors of PyTorch's result dtype
    so the tp op's own promotion gives what PyTorch gives."""
    parts: list[Any] = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            parts.append((a.dtype, a.ndim))
        elif isinstance(a, np.ndarray):
            parts.append((dt.from_numpy_dtype(a.dtype), a.ndim))
        elif is_scalar(a):
            parts.append(a)
        elif isinstance(a, SymInt):
            parts.append(1)  # promotes like the Python int it stands for
        else:
            raise TypeError(f"{op}(): unsupported operand type {type(a).__name__} "
                            f"(argument {i}); expected a Tensor or a number")
    result = dt.result_type(*parts)
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, np.ndarray):
            out.append(Tensor._wrap(a))
        elif isinstance(a, SymInt):
            out.append(size_tensor(a, result))
        else:
            out.append(scalar_tensor(a, result, op))
    return out


def int_tuple(op: str, name: str, args: Sequence[Any]) -> tuple[int, ...]:
    """Sizes or dims given as ``f(2, 3)``, ``f((2, 3))`` or ``f([2, 3])`` as a tuple of ints
    (symbolic sizes from a capture stay :class:`SymInt`)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)) or (
            len(args) == 1 and isinstance(args[0], Tensor) and args[0].ndim == 1):
        args = tuple(args[0])
    out = []
    for v in args:
        if isinstance(v, Tensor):
            v = v.item()
        if isinstance(v, SymInt):
            out.append(v)
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{name}' must be a sequence of ints, but found "
                            f"element of type {type(v).__name__}")
        out.append(int(v))
    return tuple(out)


def tracking(*tensors: Any) -> bool:
    """Whether autograd records ops on these tensors now (grad mode on, one requires grad):
    frontends whose PyTorch derivative differs from their composition's at kinks and zeros
    build the PyTorch-exact form only then."""
    from .._grad_mode import is_grad_enabled

    return is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors)


def sqrt_zero_grad(v: Tensor) -> Tensor:
    """``sqrt(v)`` whose gradient is 0 where ``v`` is 0 (PyTorch's norm and std backward),
    not the 0 * inf = NaN of the plain composition; the plain sqrt when nothing is recorded."""
    from . import creation
    from . import elementwise

    if not tracking(v):
        return elementwise.sqrt(v)
    zero = elementwise.eq(v, 0)
    return elementwise.where(zero, elementwise.mul(v, 0), elementwise.sqrt(elementwise.where(zero, creation.ones((), dtype=v.dtype), v)))
