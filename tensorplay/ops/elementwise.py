"""Elementwise functions: arithmetic, comparisons, logic, unary math, select and clamp.

Each function maps PyTorch's signature onto one tp op (or a short composition of them)
through :func:`tensorplay._dispatch.apply`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..amp import autocast_mode as _amp
from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp.registry import lookup
from ._helpers import as_tensor_arg, is_scalar, tensor_operands
from ._public import exported, public


def _binary(op: str, a: Any, b: Any) -> Tensor:
    return apply(op, *tensor_operands(op, a, b))


def _unary(op: str, x: Any, **attrs: Any) -> Tensor:
    return apply(op, as_tensor_arg(x, op), **attrs)


def _binary_function(name: str) -> Callable[[Any, Any], Tensor]:
    """``name(input, other)``: the binary tp op ``tp.<name>`` as PyTorch's function of that
    name, documented by the op's docstring (the whole frontend of such an op)."""
    op = "tp." + name

    def function(input: Any, other: Any) -> Tensor:
        return _binary(op, input, other)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = type(lookup(op)).__doc__
    return function


def _scaled(other: Any, alpha: Any) -> Any:
    if alpha == 1:
        return other
    if is_scalar(other):
        return other * alpha
    return mul(other, alpha)


@public(method=True, inplace=True, ufunc="add")
def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other``."""
    return _binary("tp.add", input, _scaled(other, alpha))


@public(method=True, inplace=True, aliases=("subtract",), ufunc="subtract")
def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``."""
    return _binary("tp.sub", input, _scaled(other, alpha))


@public
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input``."""
    return _binary("tp.sub", other, _scaled(input, alpha))


@public(method=True, inplace=True, aliases=("multiply",), ufunc="multiply")
def mul(input: Any, other: Any) -> Tensor:
    return _binary("tp.mul", input, other)


@public(method=True, inplace=True, aliases=("divide",), ufunc=("divide", "true_divide"))
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


@public(method=True)
def true_divide(input: Any, other: Any) -> Tensor:
    return _binary("tp.div", input, other)


@public(method=True, ufunc="floor_divide")
def floor_divide(input: Any, other: Any) -> Tensor:
    return _binary("tp.floor_div", input, other)


@public(method=True, ufunc="remainder")
def remainder(input: Any, other: Any) -> Tensor:
    return _binary("tp.remainder", input, other)


@public(method=True, ufunc="fmod")
def fmod(input: Any, other: Any) -> Tensor:
    return _binary("tp.fmod", input, other)


@public(method=True, inplace=True, ufunc="power")
@_amp.policy("fp32", cpu=False)
def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001
    return _binary("tp.pow", input, exponent)


@public
def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in float64."""
    a = as_tensor_arg(input, "float_power").to(dt.float64)
    b = exponent.to(dt.float64) if isinstance(exponent, Tensor) else float(exponent)
    return pow(a, b)


@public(method=True, ufunc="maximum")
def maximum(input: Any, other: Any) -> Tensor:
    return _binary("tp.maximum", input, other)


@public(method=True, ufunc="minimum")
def minimum(input: Any, other: Any) -> Tensor:
    return _binary("tp.minimum", input, other)


@public(method=True, ufunc="arctan2")
def atan2(input: Any, other: Any) -> Tensor:
    return _binary("tp.atan2", input, other)


copysign = public(method=True, inplace=True, ufunc="copysign")(_binary_function("copysign"))


@public(method=True, ufunc="equal")
def eq(input: Any, other: Any) -> Tensor:
    return _binary("tp.eq", input, other)


@public(method=True, aliases=("not_equal",), ufunc="not_equal")
def ne(input: Any, other: Any) -> Tensor:
    return _binary("tp.ne", input, other)


@public(method=True, aliases=("less",), ufunc="less")
def lt(input: Any, other: Any) -> Tensor:
    return _binary("tp.lt", input, other)


@public(method=True, aliases=("less_equal",), ufunc="less_equal")
def le(input: Any, other: Any) -> Tensor:
    return _binary("tp.le", input, other)


@public(method=True, aliases=("greater",), ufunc="greater")
def gt(input: Any, other: Any) -> Tensor:
    return _binary("tp.gt", input, other)


@public(method=True, aliases=("greater_equal",), ufunc="greater_equal")
def ge(input: Any, other: Any) -> Tensor:
    return _binary("tp.ge", input, other)


@public(method=True)
def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and elements (a Python bool)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other).all())


@public(method=True, ufunc="logical_and")
def logical_and(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_and", input, other)


@public(method=True, ufunc="logical_or")
def logical_or(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_or", input, other)


@public(method=True, ufunc="logical_xor")
def logical_xor(input: Any, other: Any) -> Tensor:
    return _binary("tp.logical_xor", input, other)


@public(method=True, ufunc="logical_not")
def logical_not(input: Any) -> Tensor:
    return _unary("tp.logical_not", input)


@public(method=True, ufunc="bitwise_and")
def bitwise_and(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_and", input, other)


@public(method=True, ufunc="bitwise_or")
def bitwise_or(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_or", input, other)


@public(method=True, ufunc="bitwise_xor")
def bitwise_xor(input: Any, other: Any) -> Tensor:
    return _binary("tp.bitwise_xor", input, other)


@public(method=True, ufunc="invert")
def bitwise_not(input: Any) -> Tensor:
    return _unary("tp.bitwise_not", input)


@public(method=True, inplace=True, aliases=("negative",), ufunc="negative")
def neg(input: Any) -> Tensor:
    return _unary("tp.neg", input)


@public(method=True, aliases=("absolute",), ufunc="absolute", array_function="abs")
def abs(input: Any) -> Tensor:  # noqa: A001
    return _unary("tp.abs", input)


@public(method=True, inplace=True, ufunc="exp", array_function="exp")
@_amp.policy("fp32", cpu=False)
def exp(input: Any) -> Tensor:
    return _unary("tp.exp", input)


@public(method=True, ufunc="exp2")
def exp2(input: Any) -> Tensor:
    return _unary("tp.exp2", input)


@public(method=True, ufunc="expm1")
@_amp.policy("fp32", cpu=False)
def expm1(input: Any) -> Tensor:
    return _unary("tp.expm1", input)


@public(method=True, ufunc="log")
@_amp.policy("fp32", cpu=False)
def log(input: Any) -> Tensor:
    return _unary("tp.log", input)


@public(method=True, ufunc="log2")
@_amp.policy("fp32", cpu=False)
def log2(input: Any) -> Tensor:
    return _unary("tp.log2", input)


@public(method=True, ufunc="log10")
@_amp.policy("fp32", cpu=False)
def log10(input: Any) -> Tensor:
    return _unary("tp.log10", input)


@public(method=True, ufunc="log1p")
@_amp.policy("fp32", cpu=False)
def log1p(input: Any) -> Tensor:
    return _unary("tp.log1p", input)


@public(method=True, inplace=True, ufunc="sqrt")
def sqrt(input: Any) -> Tensor:
    return _unary("tp.sqrt", input)


@public(method=True)
@_amp.policy("fp32", cpu=False)
def rsqrt(input: Any) -> Tensor:
    return _unary("tp.rsqrt", input)


@public(method=True, ufunc="square")
def square(input: Any) -> Tensor:
    return mul(input, input)


@public(method=True)
@_amp.policy("fp32", cpu=False)
def reciprocal(input: Any) -> Tensor:
    return _unary("tp.reciprocal", input)


@public(method=True, ufunc="sin")
def sin(input: Any) -> Tensor:
    return _unary("tp.sin", input)


@public(method=True, ufunc="cos")
def cos(input: Any) -> Tensor:
    return _unary("tp.cos", input)


@public(method=True, ufunc="tan")
@_amp.policy("fp32", cpu=False)
def tan(input: Any) -> Tensor:
    return _unary("tp.tan", input)


@public(method=True, aliases=("arcsin",), ufunc="arcsin")
@_amp.policy("fp32", cpu=False)
def asin(input: Any) -> Tensor:
    return _unary("tp.asin", input)


@public(method=True, aliases=("arccos",), ufunc="arccos")
@_amp.policy("fp32", cpu=False)
def acos(input: Any) -> Tensor:
    return _unary("tp.acos", input)


@public(method=True, aliases=("arctan",), ufunc="arctan")
def atan(input: Any) -> Tensor:
    return _unary("tp.atan", input)


@public(method=True, ufunc="sinh")
@_amp.policy("fp32", cpu=False)
def sinh(input: Any) -> Tensor:
    return _unary("tp.sinh", input)


@public(method=True, ufunc="cosh")
@_amp.policy("fp32", cpu=False)
def cosh(input: Any) -> Tensor:
    return _unary("tp.cosh", input)


@public(method=True, inplace=True, ufunc="tanh", array_function="tanh")
def tanh(input: Any) -> Tensor:
    return _unary("tp.tanh", input)


@public(method=True, aliases=("arcsinh",), ufunc="arcsinh")
def asinh(input: Any) -> Tensor:
    return _unary("tp.asinh", input)


@public(method=True, aliases=("arccosh",), ufunc="arccosh")
def acosh(input: Any) -> Tensor:
    return _unary("tp.acosh", input)


@public(method=True, aliases=("arctanh",), ufunc="arctanh")
def atanh(input: Any) -> Tensor:
    return _unary("tp.atanh", input)


@public(method=True, inplace=True)
def sigmoid(input: Any) -> Tensor:
    return _unary("tp.sigmoid", input)


@public(method=True)
def erf(input: Any) -> Tensor:
    return _unary("tp.erf", input)


@public(method=True, inplace=True)
def relu(input: Any) -> Tensor:
    return _unary("tp.relu", input)


@public(method=True, ufunc="floor")
def floor(input: Any) -> Tensor:
    return _unary("tp.floor", input)


@public(method=True, ufunc="ceil")
def ceil(input: Any) -> Tensor:
    return _unary("tp.ceil", input)


@public(method=True, aliases=("fix",), ufunc="trunc")
def trunc(input: Any) -> Tensor:
    return _unary("tp.trunc", input)


@public(method=True, ufunc="rint",
        array_function={"round": lambda a, decimals=0, out=None: ((a,), {"decimals": decimals})})
def round(input: Any, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round half to even (to ``decimals`` places)."""
    return _unary("tp.round", input, decimals=decimals)


@public(method=True, ufunc="sign")
def sign(input: Any) -> Tensor:
    return _unary("tp.sign", input)


@public(method=True, ufunc="isnan")
def isnan(input: Any) -> Tensor:
    return _unary("tp.isnan", input)


@public(method=True, ufunc="isinf")
def isinf(input: Any) -> Tensor:
    return _unary("tp.isinf", input)


@public(method=True, ufunc="isfinite")
def isfinite(input: Any) -> Tensor:
    return logical_not(logical_or(isnan(input), isinf(input)))


@public(top=False)
def cast(input: Tensor, dtype: Any) -> Tensor:
    """``input`` converted to ``dtype`` (PyTorch's conversion rules)."""
    return apply("tp.cast", input, dtype=dt.as_dtype(dtype))


@public
def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` with its own storage."""
    return apply("tp.cast", as_tensor_arg(input, "clone"), dtype=input.dtype)


@public(array_function={"where": lambda c, x=None, y=None: ((c,) if x is None else (c, x, y), {})})
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


@public(method=True, inplace=True, aliases=("clip",),
        array_function={"clip": lambda a, a_min=None, a_max=None, **k: ((a, a_min, a_max), {})})
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


@public(method=True)
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


@public(method=True)
def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


@public(method=True, inplace=True)
def lerp(input: Any, end: Any, weight: Any) -> Tensor:
    """``input + weight * (end - input)``."""
    return add(input, mul(weight, sub(end, input)))


@public(method=True)
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


@public(method=True, inplace=True)
def clamp_min(input: Any, min: Any) -> Tensor:  # noqa: A002
    """``clamp(input, min=min)``."""
    return clamp(input, min=min)


@public(method=True, inplace=True)
def clamp_max(input: Any, max: Any) -> Tensor:  # noqa: A002
    """``clamp(input, max=max)``."""
    return clamp(input, max=max)


def _addc(op: str, input: Any, tensor1: Any, tensor2: Any, value: Any, combine: Any) -> Tensor:
    """``input + value * combine(tensor1, tensor2)`` in the promoted dtype, computed as one
    expression in ``computes_in`` (float32 for the half types, so the product may exceed
    their range) and rounded once."""
    if not is_scalar(value):
        raise TypeError(f"{op}(): argument 'value' must be a number, not {type(value).__name__}")
    operands = [as_tensor_arg(t, op, name) for t, name in ((input, "input"), (tensor1, "tensor1"),
                                                           (tensor2, "tensor2"))]
    target = dt.result_type(*[(t.dtype, t.ndim) for t in operands])
    if not target.is_floating_point and isinstance(value, float):
        value = int(value)  # an integer result takes the value's integer part
    work = target.computes_in
    x, t1, t2 = (cast(t, work) if t.dtype is not work else t for t in operands)
    out = add(x, mul(combine(t1, t2), value))
    return cast(out, target) if out.dtype is not target else out


@public(method=True, inplace=True)
def addcmul(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 * tensor2``."""
    return _addc("addcmul", input, tensor1, tensor2, value, mul)


@public(method=True, inplace=True)
def addcdiv(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (``tensor1 / tensor2`` is true division)."""
    t1 = as_tensor_arg(tensor1, "addcdiv", "tensor1")
    t2 = as_tensor_arg(tensor2, "addcdiv", "tensor2")
    if not (t1.dtype.is_floating_point or t2.dtype.is_floating_point):
        raise TypeError(f"addcdiv(): integer division is not supported: tensor1 ({t1.dtype.name}) and "
                        f"tensor2 ({t2.dtype.name}) are both integer tensors; use addcmul with the "
                        f"reciprocal or a floating-point tensor")
    return _addc("addcdiv", input, t1, t2, value, div)


# erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function",
# GPU Computing Gems, 2011) as a starting point, then two Newton steps on erf(x) = y, which
# bring it to the precision of the dtype's erf. All of it is tp ops, so it compiles and
# differentiates (the derivative of the converged steps is 1 / erf'(x)).
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients: tuple[float, ...], w: Tensor) -> Tensor:
    p = add(mul(w, coefficients[0]), coefficients[1])
    for c in coefficients[2:]:
        p = add(mul(p, w), c)
    return p


@public(method=True, inplace=True)
@_amp.policy("fp32", cpu=False)
def erfinv(input: Any) -> Tensor:
    """The inverse of :func:`erf` on ``[-1, 1]`` (±inf at ±1, NaN outside); integer and
    bool inputs give the default float dtype."""
    y = as_tensor_arg(input, "erfinv")
    out_dtype = y.dtype if y.dtype.is_floating_point else dt.get_default_dtype()
    work = out_dtype.computes_in
    y = cast(y, work) if y.dtype is not work else y
    w = neg(log(mul(sub(1.0, y), add(1.0, y))))
    central = _horner(_ERFINV_CENTRAL, sub(w, 2.5))
    tail = _horner(_ERFINV_TAIL, sub(sqrt(maximum(w, 5.0)), 3.0))
    x = mul(where(lt(w, 5.0), central, tail), y)
    two_over_sqrt_pi = 1.1283791670955126
    for _ in range(2):
        x = sub(x, div(sub(erf(x), y), mul(exp(neg(mul(x, x))), two_over_sqrt_pi)))
    ay = abs(y)
    x = where(eq(ay, 1.0), mul(sign(y), float("inf")), x)
    x = where(gt(ay, 1.0), float("nan"), x)
    return cast(x, out_dtype) if x.dtype is not out_dtype else x


def _shift_operands(op: str, input: Any, other: Any) -> tuple[Tensor, Tensor, int]:
    a, b = tensor_operands(op, input, other)
    target = dt.result_type((a.dtype, a.ndim), (b.dtype, b.ndim))
    if target.is_floating_point or target.is_bool:
        raise TypeError(f"{op}(): shifts need integer tensors, got {a.dtype.name} and {b.dtype.name}")
    a = cast(a, target) if a.dtype is not target else a
    b = cast(b, target) if b.dtype is not target else b
    return a, b, target.itemsize * 8


def _shift_steps(s: Tensor, width: int):
    """``2 ** s`` (``0 <= s < width``) as factors ``2 ** 2**i`` picked by the bits of ``s``:
    each factor fits the dtype, and their product wraps as the shift does."""
    i = 0
    while (1 << i) < width:
        yield cast(where(ne(bitwise_and(s, 1 << i), 0), 1 << (1 << i), 1), s.dtype)
        i += 1


@public(method=True, inplace=True)
def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    """``input << other`` on integers: bits shifted out are lost (the dtype wraps); a shift
    by a negative amount or by the bit width or more gives 0."""
    a, s, width = _shift_operands("bitwise_left_shift", input, other)
    valid = logical_and(ge(s, 0), lt(s, width))
    sc = where(valid, s, 0)
    out = a
    for factor in _shift_steps(sc, width):
        out = mul(out, factor)
    return where(valid, out, 0)


@public(method=True, inplace=True)
def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    """``input >> other`` on integers, arithmetic (the sign fills in); a shift by a negative
    amount or by the bit width or more gives -1 for negative values and 0 otherwise."""
    a, s, width = _shift_operands("bitwise_right_shift", input, other)
    valid = logical_and(ge(s, 0), lt(s, width))
    sc = where(valid, s, 0)
    out = a
    for factor in _shift_steps(sc, width):
        out = floor_divide(out, factor)
    return where(valid, out, cast(where(lt(a, 0), -1, 0), a.dtype))


__all__ = exported(__name__)  # the names declared @public above
