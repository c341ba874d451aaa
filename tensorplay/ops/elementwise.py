"""Elementwise functions: arithmetic, comparisons, logic, unary math, select and clamp.

Each function maps PyTorch's signature onto one tp op (or a short composition of them)
through :func:`tensorplay._dispatch.apply`.
"""

from __future__ import annotations

from typing import Any

from ..amp import autocast_mode as _amp
from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ._helpers import as_tensor_arg, is_scalar, tensor_operands

__all__ = [
    "add", "sub", "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide",
    "floor_divide", "remainder", "fmod", "pow", "float_power", "neg", "negative", "abs", "absolute",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "square", "sin",
    "cos", "tan", "asin", "acos", "atan", "atan2", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "sigmoid", "erf", "floor", "ceil",
    "trunc", "fix", "round", "sign", "reciprocal",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
    "less_equal", "not_equal", "equal", "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "where", "clamp", "clip",
    "isnan", "isinf", "isfinite", "relu", "allclose", "isclose", "lerp", "nan_to_num", "cast",
    "clone",
]


def _binary(op: str, a: Any, b: Any) -> Tensor:
    return apply(op, *tensor_operands(op, a, b))


def _unary(op: str, x: Any, **attrs: Any) -> Tensor:
    return apply(op, as_tensor_arg(x, op), **attrs)


def _scaled(other: Any, alpha: Any) -> Any:
    if alpha == 1:
        return other
    if is_scalar(other):
        return other * alpha
    return mul(other, alpha)


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other``."""
    return _binary("tp.add", input, _scaled(other, alpha))


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``."""
    return _binary("tp.sub", input, _scaled(other, alpha))


subtract = sub


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input``."""
    return _binary("tp.sub", other, _scaled(input, alpha))


def mul(input: Any, other: Any) -> Tensor:
    return _binary("tp.mul", input, other)


multiply = mul


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """True division, or rounded with ``rounding_mode`` ``'trunc'`` or ``'floor'``."""
    if rounding_mode is None:
        return _binary("tp.div", input, other)
    if rounding_mode == "floor":
        return _binary("tp.floor_div", input, other)
    if rounding_mode == "trunc":
        return _binary("tp.trunc_div", input, other)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                     f"{rounding_mode!r}")


divide = div


def true_divide(input: Any, other: Any) -> Tensor:
    return _binary("tp.div", input, other)


def floor_divide(input: Any, other: Any) -> Tensor:
    return _binary("tp.floor_div", input, other)


def remainder(input: Any, other: Any) -> Tensor:
    return _binary("tp.remainder", input, other)


def fmod(input: Any, other: Any) -> Tensor:
    return _binary("tp.fmod", input, other)


@_amp.policy("fp32", cpu=False)
def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001
    return _binary("tp.pow", input, exponent)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in float64."""
    a = as_tensor_arg(input, "float_power").to(dt.float64)
    b = exponent.to(dt.float64) if isinstance(exponent, Tensor) else float(exponent)
    return pow(a, b)


def maximum(input: Any, other: Any) -> Tensor:
    return _binary("tp.maximum", input, other)


def minimum(input: Any, other: Any) -> Tensor:
    return _binary("tp.minimum", input, other)


def atan2(input: Any, other: Any) -> Tensor:
    return _binary("tp.atan2", input, other)


def eq(input: Any, other: Any) -> Tensor:
    return _binary("tp.eq", input, other)


def ne(input: Any, other: Any) -> Tensor:
    return _binary("tp.ne", input, other)


def lt(input: Any, other: Any) -> Tensor:
    return _binary("tp.lt", input, other)


def le(input: Any, other: Any) -> Tensor:
    return _binary("tp.le", input, other)


def gt(input: Any, other: Any) -> Tensor:
    return _binary("tp.gt", input, other)


def ge(input: Any, other: Any) -> Tensor:
    return _binary("tp.ge", input, other)


greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements (a Python bool)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other).all())


def logical_and(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_and", input, other)


def logical_or(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_or", input, other)


def logical_xor(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_xor", input, other)


def logical_not(input: Any) -> Tensor:
    return _unary("tp.logical_not", input)


def bitwise_and(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_and", input, other)


def bitwise_or(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_or", input, other)


def bitwise_xor(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_xor", input, other)


def bitwise_not(input: Any) -> Tensor:
    return _unary("tp.bitwise_not", input)


def neg(input: Any) -> Tensor:
    return _unary("tp.neg", input)


negative = neg


def abs(input: Any) -> Tensor:  # noqa: A001
    return _unary("tp.abs", input)


absolute = abs


@_amp.policy("fp32", cpu=False)
def exp(input: Any) -> Tensor:
    return _unary("tp.exp", input)


def exp2(input: Any) -> Tensor:
    return _unary("tp.exp2", input)


@_amp.policy("fp32", cpu=False)
def expm1(input: Any) -> Tensor:
    return _unary("tp.expm1", input)


@_amp.policy("fp32", cpu=False)
def log(input: Any) -> Tensor:
    return _unary("tp.log", input)


@_amp.policy("fp32", cpu=False)
def log2(input: Any) -> Tensor:
    return _unary("tp.log2", input)


@_amp.policy("fp32", cpu=False)
def log10(input: Any) -> Tensor:
    return _unary("tp.log10", input)


@_amp.policy("fp32", cpu=False)
def log1p(input: Any) -> Tensor:
    return _unary("tp.log1p", input)


def sqrt(input: Any) -> Tensor:
    return _unary("tp.sqrt", input)


@_amp.policy("fp32", cpu=False)
def rsqrt(input: Any) -> Tensor:
    return _unary("tp.rsqrt", input)


def square(input: Any) -> Tensor:
    return mul(input, input)


@_amp.policy("fp32", cpu=False)
def reciprocal(input: Any) -> Tensor:
    return _unary("tp.reciprocal", input)


def sin(input: Any) -> Tensor:
    return _unary("tp.sin", input)


def cos(input: Any) -> Tensor:
    return _unary("tp.cos", input)


@_amp.policy("fp32", cpu=False)
def tan(input: Any) -> Tensor:
    return _unary("tp.tan", input)


@_amp.policy("fp32", cpu=False)
def asin(input: Any) -> Tensor:
    return _unary("tp.asin", input)


@_amp.policy("fp32", cpu=False)
def acos(input: Any) -> Tensor:
    return _unary("tp.acos", input)


def atan(input: Any) -> Tensor:
    return _unary("tp.atan", input)


arcsin, arccos, arctan = asin, acos, atan


@_amp.policy("fp32", cpu=False)
def sinh(input: Any) -> Tensor:
    return _unary("tp.sinh", input)


@_amp.policy("fp32", cpu=False)
def cosh(input: Any) -> Tensor:
    return _unary("tp.cosh", input)


def tanh(input: Any) -> Tensor:
    return _unary("tp.tanh", input)


def asinh(input: Any) -> Tensor:
    return _unary("tp.asinh", input)


def acosh(input: Any) -> Tensor:
    return _unary("tp.acosh", input)


def atanh(input: Any) -> Tensor:
    return _unary("tp.atanh", input)


arcsinh, arccosh, arctanh = asinh, acosh, atanh


def sigmoid(input: Any) -> Tensor:
    return _unary("tp.sigmoid", input)


def erf(input: Any) -> Tensor:
    return _unary("tp.erf", input)


def relu(input: Any) -> Tensor:
    return _unary("tp.relu", input)


def floor(input: Any) -> Tensor:
    return _unary("tp.floor", input)


def ceil(input: Any) -> Tensor:
    return _unary("tp.ceil", input)


def trunc(input: Any) -> Tensor:
    return _unary("tp.trunc", input)


fix = trunc


def round(input: Any, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round half to even (to ``decimals`` places)."""
    return _unary("tp.round", input, decimals=decimals)


def sign(input: Any) -> Tensor:
    return _unary("tp.sign", input)


def isnan(input: Any) -> Tensor:
    return _unary("tp.isnan", input)


def isinf(input: Any) -> Tensor:
    return _unary("tp.isinf", input)


def isfinite(input: Any) -> Tensor:
    return logical_not(logical_or(isnan(input), isinf(input)))


def cast(input: Tensor, dtype: Any) -> Tensor:
    """``input`` converted to ``dtype`` (PyTorch's conversion rules)."""
    return apply("tp.cast", input, dtype=dt.as_dtype(dtype))


def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` with its own storage."""
    return apply("tp.cast", as_tensor_arg(input, "clone"), dtype=input.dtype)


def where(condition: Any, input: Any = None, other: Any = None) -> Any:
    """``input`` where ``condition`` holds, else ``other``. With one argument, the indices
    of the nonzero elements, one tensor per dimension."""
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    cond = as_tensor_arg(condition, "where", "condition")
    if not cond.dtype.is_bool:
        raise TypeError(f"where expected condition to be a boolean tensor, but got a tensor with "
                        f"dtype {cond.dtype.name}")
    a, b = tensor_operands("where", input, other)
    return apply("tp.where", cond, a, b)


def clamp(input: Any, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Limit ``input`` to ``[min, max]``; bounds may be numbers or tensors."""
    x = as_tensor_arg(input, "clamp")
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    parts = [(x.dtype, x.ndim)] + [b for b in (min, max) if b is not None]
    target = dt.result_type(*parts)
    if target is not x.dtype:
        x = cast(x, target)
    return apply("tp.clamp", x, min=min, max=max)


clip = clamp


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (infinities compare equal)."""
    a, b = tensor_operands("isclose", input, other)
    close = eq(a, b)
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        diff = abs(sub(a, b))
        finite = logical_and(isfinite(a), isfinite(b))
        close = logical_or(close, logical_and(finite, le(diff, add(atol, mul(rtol, abs(b))))))
        if equal_nan:
            close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def lerp(input: Any, end: Any, weight: Any) -> Tensor:
    """``input + weight * (end - input)``."""
    return add(input, mul(weight, sub(end, input)))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """Replace NaN and infinities by finite numbers (the dtype's extremes by default)."""
    x = as_tensor_arg(input, "nan_to_num")
    if not x.dtype.is_floating_point:
        return clone(x)
    import ml_dtypes

    info = ml_dtypes.finfo(x.dtype.np_dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = where(isnan(x), nan, x)
    out = where(logical_and(isinf(out), gt(out, 0)), posinf, out)
    return where(logical_and(isinf(out), lt(out, 0)), neginf, out)
