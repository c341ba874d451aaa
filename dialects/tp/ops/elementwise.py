"""Elementwise ops: arithmetic, comparisons, logic, unary math, activations, select, cast.

Binary and ternary ops broadcast their operands (numpy/PyTorch rules) and promote dtypes
with PyTorch's rules: a 0-d tensor only changes the result dtype when it brings a higher
category (bool < integer < floating). Frontends turn Python scalars into 0-d constants of
the promoted dtype, so promotion in the IR never needs to know about Python numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, OpError
from . import _grad
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import broadcast_shapes
from ..types import TensorType, type_of_array
from ._common import promote_operands, upcast

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# float32 erf in two pieces joined at |x| = 1 (coefficients from relative-error minimax fits in
# float64, rounded to float32; both denominators monic):
#   |x| < 1:  erf(x) = x + x PA(x^2) / QA(x^2), the correction term holding erf(x)/x - 1
#   |x| >= 1: erf(x) = sign(x) (1 - erfc(|x|)), erfc(x) = exp(-x^2) PB(x) / QB(x) for x up to
#             3.92, where erf rounds to 1 in float32 (larger |x| are clamped there)
# Against the correctly rounded erf at every 8th float32 in [0, 4.5]: at most 1 ulp off, 6% of
# them by 1 ulp.
_ERF32_SPLIT = np.float32(1.0)
_ERF32_CLAMP = np.float32(3.92)
_ERF32_PA = tuple(np.float32(v) for v in (
    3.4079325199127197, -8.786147117614746, -0.3875052332878113, -0.03562803566455841))
_ERF32_QA = tuple(np.float32(v) for v in (26.54583740234375, 9.335137367248535))
_ERF32_PB = tuple(np.float32(v) for v in (1.8717966079711914, 1.5557894706726074, 0.5647552609443665))
_ERF32_QB = tuple(np.float32(v) for v in (1.8650219440460205, 3.69765567779541, 2.774306297302246))


def _horner32(coefficients: tuple, z: np.ndarray, monic: bool = False) -> np.ndarray:
    """sum(c[k] z**k) (plus z**len(c) when ``monic``) in float32, in one new array."""
    if monic:
        out = np.add(z, coefficients[-1])
        rest = coefficients[-2::-1]
    else:
        out = np.multiply(z, coefficients[-1])
        out += coefficients[-2]
        rest = coefficients[-3::-1]
    for c in rest:
        out *= z
        out += c
    return out


def _erf32_pieces(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a float32 array with ndim >= 1: ``(near, erfc_far, is_near)``: erf(|x|) for
    |x| < 1, erfc(|x|) for |x| >= 1 (each valid only on its side) and the mask of the first
    side."""
    ax = np.abs(a)
    xa = np.clip(ax, np.float32(0.0), _ERF32_SPLIT)
    t = np.multiply(xa, xa)
    near = _horner32(_ERF32_PA, t)
    near /= _horner32(_ERF32_QA, t, monic=True)
    near *= xa
    near += xa
    xl = np.clip(ax, _ERF32_SPLIT, _ERF32_CLAMP, out=t)
    far = _horner32(_ERF32_PB, xl)
    far /= _horner32(_ERF32_QB, xl, monic=True)
    np.multiply(xl, xl, out=xl)
    np.negative(xl, out=xl)
    far *= np.exp(xl, out=xl)
    return near, far, ax < _ERF32_SPLIT


def _erf32_into(x: np.ndarray, out: np.ndarray) -> None:
    """erf of the 1-d float32 array ``x``, written to ``out``."""
    near, far, is_near = _erf32_pieces(x)
    np.subtract(np.float32(1.0), far, out=far)
    _select(is_near, near, far, out=out)
    # erf is odd: x's sign bit onto the result, which is >= 0 (or NaN) so far
    out.view(np.uint32)[...] |= x.view(np.uint32) & np.uint32(0x80000000)


# Multi-step float32 formulas run over chunks of this many elements: their temporaries stay
# small (cache-sized, and reused by the allocator instead of being mapped afresh per call)
_CHUNK = 1 << 17


def _by_chunks(step, a: np.ndarray) -> np.ndarray:
    """A new float32 array of ``a``'s shape with ``step(x, out)`` applied to 1-d chunks."""
    out = np.empty(a.shape, np.float32)
    flat, flat_out = a.reshape(-1), out.reshape(-1)
    for i in range(0, flat.size, _CHUNK):
        step(flat[i:i + _CHUNK], flat_out[i:i + _CHUNK])
    return out


def _erf_float32(a: np.ndarray) -> np.ndarray:
    """erf of a float32 array in float32 arithmetic (a new array; ``a`` is not written).
    NaN stays NaN, ±inf give ±1, -0.0 gives -0.0, subnormals keep their precision."""
    return _by_chunks(_erf32_into, a)


def _gelu32_into(x: np.ndarray, out: np.ndarray) -> None:
    """0.5 x (1 + erf(x / sqrt(2))) of the 1-d float32 array ``x``, written to ``out``."""
    _erf32_into(np.multiply(x, np.float32(1.0 / math.sqrt(2.0))), out)
    out += np.float32(1.0)
    out *= np.float32(0.5)  # (before the product with x, which may be near the overflow)
    out *= x


def _erf_single(x: np.ndarray) -> np.ndarray:
    """erf of a float32 or narrower input, computed in float32 (:func:`_erf_float32`); the
    result has the input's dtype."""
    a = np.asarray(x)
    out = np.asarray(_erf_float32(a if a.dtype == np.float32 else a.astype(np.float32)))
    return out if a.dtype == np.float32 else out.astype(a.dtype)


def erf(x: np.ndarray) -> np.ndarray:
    """Error function, vectorized (numpy has none): float64 inputs to a relative error below
    1e-14, narrower ones to float32 precision (:func:`_erf_single`, much less work).

    float64: |x| <= 2.5 sums the Maclaurin series (its cancellation costs under two digits
    there); beyond, erf = 1 - erfc with erfc from its continued fraction, evaluated bottom-up.
    """
    if np.asarray(x).dtype != np.float64:
        return _erf_single(x)
    a = np.asarray(x, dtype=np.float64)
    out = np.empty_like(a)
    small = np.abs(a) <= 2.5
    xs = a[small]
    x2 = xs * xs
    term, total = xs.copy(), xs.copy()
    for n in range(1, 45):
        term = term * (-x2) / n
        total = total + term / (2 * n + 1)
    out[small] = total * _TWO_OVER_SQRT_PI
    big = ~small & ~np.isnan(a)
    xl = np.abs(a[big])
    acc = np.zeros_like(xl)
    for k in range(60, 0, -1):
        acc = (k / 2.0) / (xl + acc)
    erfc = np.exp(-xl * xl) / math.sqrt(math.pi) / (xl + acc)
    out[big] = np.sign(a[big]) * (1.0 - erfc)
    out[np.isnan(a)] = np.nan
    return out.astype(np.asarray(x).dtype)


_COMMON: dict[tuple, dt.DType] = {}  # Elementwise.reference's common dtypes


class Elementwise(Op):
    """Family base: results broadcast over all operands."""

    family = "elementwise"
    #: how the result dtype follows the promoted operand dtype:
    #: "same", "bool" (comparisons), "float" (ints and bool become the default float dtype)
    result_kind: ClassVar[str] = "same"
    allow_bool: ClassVar[bool] = True
    allow_int: ClassVar[bool] = True
    allow_float: ClassVar[bool] = True

    def common_dtype(self, types: list[TensorType | None]) -> dt.DType:
        """The dtype the operands are converted to (PyTorch's common dtype): the promoted
        operand dtype, or the default float dtype for ``result_kind == "float"`` ops over
        integers and bool. It is the result dtype of all but the comparisons; arithmetic on
        it runs in its :attr:`~tensorplay.dialects.tp.dtypes.DType.computes_in`."""
        promoted = promote_operands(types)
        if self.result_kind == "float" and not promoted.is_floating_point:
            return dt.get_default_dtype()
        return promoted

    def check_dtype(self, promoted: dt.DType) -> None:
        ok = ((promoted.is_bool and self.allow_bool) or (promoted.is_integer and self.allow_int)
              or (promoted.is_floating_point and self.allow_float))
        if not ok:
            raise self.error(DTypeError, f"not implemented for dtype {promoted.name}")

    def infer(self, types, attrs):
        shape = broadcast_shapes(self.name, *[t.shape for t in types if t is not None])
        promoted = promote_operands(types)
        self.check_dtype(promoted)
        common = self.common_dtype(types)
        out = dt.bool_ if self.result_kind == "bool" else common
        return (TensorType(shape, out),)

    def reference(self, arrays, attrs):
        # the common dtype depends on each operand's dtype, whether it is 0-d, and the default
        # float dtype only: remembered per op for those (eager code repeats the same few)
        key = (self.name, dt.get_default_dtype(), *[None if a is None else (a.dtype, a.ndim == 0) for a in arrays])
        common = _COMMON.get(key)
        if common is None:
            common = self.common_dtype([None if a is None else type_of_array(a) for a in arrays])
            if len(_COMMON) < 4096:
                _COMMON[key] = common
        return self.compute(*[None if a is None else upcast(a, common) for a in arrays], **attrs)

    def compute(self, *arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        raise NotImplementedError


_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _select(cond: np.ndarray, a: np.ndarray, b: np.ndarray,
            out: np.ndarray | None = None) -> np.ndarray:
    """``np.where(cond, a, b)`` (into ``out``, of the broadcast shape, when given); large
    operands of one dtype select with bit operations on their unsigned-integer views
    (b ^ ((a ^ b) & mask)), which copies every bit pattern as np.where does, without its
    per-element branch (slow where the mask is unpredictable)."""
    a, b, cond = np.asarray(a), np.asarray(b), np.asarray(cond)
    u = _UINT_OF_SIZE.get(a.dtype.itemsize)
    if (u is None or a.dtype != b.dtype or a.dtype.kind not in "biuf" or cond.dtype != np.bool_
            or max(a.size, b.size, cond.size) < 4096):
        if out is None:
            return np.where(cond, a, b)
        out[...] = np.where(cond, a, b)
        return out
    ai, bi = a.view(u), b.view(u)
    mask = cond.view(np.uint8).astype(u)
    np.negative(mask, out=mask)  # 1 -> all bits set
    shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    if out is None:
        out = np.empty(shape, a.dtype)
    bits = out.view(u)
    np.bitwise_xor(ai, bi, out=bits)
    bits &= mask
    bits ^= bi
    return out


def _binary(*, lhs: str = "lhs", rhs: str = "rhs") -> tuple[Operand, Operand]:
    return (Operand(lhs), Operand(rhs))


class BinaryArith(Elementwise):
    operands = _binary()


class Unary(Elementwise):
    operands = (Operand("input"),)


class UnaryFloat(Unary):
    """Unary math whose integer and bool inputs compute in the default float dtype."""

    result_kind = "float"


class Comparison(Elementwise):
    operands = _binary()
    result_kind = "bool"
    differentiable = False


class Logical(Elementwise):
    result_kind = "bool"
    differentiable = False


# --- binary arithmetic -------------------------------------------------------------------

@register
class Add(BinaryArith):
    """Elementwise sum ``lhs + rhs``."""

    name = "tp.add"

    def vjp(self, ctx: RuleContext, grads):
        return grads[0], grads[0]

    def compute(self, a, b):
        return np.logical_or(a, b) if a.dtype == np.bool_ else np.add(a, b)


@register
class Sub(BinaryArith):
    """Elementwise difference ``lhs - rhs``."""

    name = "tp.sub"
    allow_bool = False

    def vjp(self, ctx: RuleContext, grads):
        return grads[0], -grads[0] if ctx.needs(1) else None

    def check_dtype(self, promoted):
        if promoted.is_bool:
            raise self.error(DTypeError, "subtraction of bool tensors is not supported; use "
                                         "logical_xor or bitwise_xor instead")

    def compute(self, a, b):
        return np.subtract(a, b)


@register
class Mul(BinaryArith):
    """Elementwise product ``lhs * rhs``."""

    name = "tp.mul"

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        return (g * ctx.input(1) if ctx.needs(0) else None, g * ctx.input(0) if ctx.needs(1) else None)

    def compute(self, a, b):
        return np.logical_and(a, b) if a.dtype == np.bool_ else np.multiply(a, b)


@register
class Div(BinaryArith):
    """True division ``lhs / rhs``; integer operands divide in the default float dtype."""

    name = "tp.div"
    result_kind = "float"

    def vjp(self, ctx: RuleContext, grads):
        g, b = grads[0], ctx.input(1)
        return (g / b if ctx.needs(0) else None, -g * ctx.output() / b if ctx.needs(1) else None)

    def compute(self, a, b):
        return np.true_divide(a, b)


def _check_int_divisor(op: Op, b: np.ndarray) -> None:
    if b.dtype.kind in "iub" and np.any(b == 0):
        raise op.error(OpError, "integer division by zero")


@register
class FloorDiv(BinaryArith):
    """Division rounded toward negative infinity (``lhs // rhs``)."""

    name = "tp.floor_div"
    vjp = _grad.zero_vjp  # (as PyTorch's div(rounding_mode=))
    allow_bool = False

    def compute(self, a, b):
        _check_int_divisor(self, b)
        return np.floor_divide(a, b)


@register
class TruncDiv(BinaryArith):
    """Division rounded toward zero (``div(..., rounding_mode='trunc')``)."""

    name = "tp.trunc_div"
    vjp = _grad.zero_vjp  # (as PyTorch's div(rounding_mode=))
    allow_bool = False

    def compute(self, a, b):
        if a.dtype.kind in "iu":
            _check_int_divisor(self, b)
            q = np.abs(a) // np.abs(b)
            return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
        return np.trunc(np.true_divide(a, b))


@register
class Remainder(BinaryArith):
    """Python-style remainder ``lhs % rhs``: the result has the sign of ``rhs``."""

    name = "tp.remainder"
    allow_bool = False

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        if not ctx.needs(1):
            return g, None
        return g, -g * (ctx.input(0) / ctx.input(1)).floor()

    def compute(self, a, b):
        _check_int_divisor(self, b)
        return np.remainder(a, b)


@register
class Pow(BinaryArith):
    """Elementwise power ``lhs ** rhs``."""

    name = "tp.pow"
    allow_bool = False
    operands = _binary(lhs="base", rhs="exponent")

    def vjp(self, ctx: RuleContext, grads):
        g, a, b = grads[0], ctx.input(0), ctx.input(1)
        ga = gb = None
        if ctx.needs(0):  # b * a ** (b - 1), 0 where b == 0 (as PyTorch)
            ga = _grad.where(ctx, b == 0, 0.0, g * b * a ** (b - 1))
        if ctx.needs(1):  # a ** b * log(a), 0 where a == 0 and b >= 0
            gb = _grad.where(ctx, (a == 0) & (b >= 0), 0.0, g * ctx.output() * a.log())
        return ga, gb

    def check_dtype(self, promoted):
        if promoted.is_bool:
            raise self.error(DTypeError, "not implemented for dtype bool")

    def compute(self, a, b):
        if a.dtype.kind in "iu" and np.any(b < 0):
            raise self.error(OpError, "Integers to negative integer powers are not allowed")
        return np.power(a, b)


@register
class Maximum(BinaryArith):
    """Elementwise maximum; NaN wins, as in PyTorch."""

    name = "tp.maximum"

    def vjp(self, ctx: RuleContext, grads):  # ties share the gradient, as PyTorch
        g, a, b = grads[0], ctx.input(0), ctx.input(1)
        half = _grad.mask(a == b, g) * 0.5
        return (g * (_grad.mask(a > b, g) + half) if ctx.needs(0) else None,
                g * (_grad.mask(a < b, g) + half) if ctx.needs(1) else None)

    def compute(self, a, b):
        return np.maximum(a, b)


@register
class Minimum(BinaryArith):
    """Elementwise minimum; NaN wins, as in PyTorch."""

    name = "tp.minimum"

    def vjp(self, ctx: RuleContext, grads):
        g, a, b = grads[0], ctx.input(0), ctx.input(1)
        half = _grad.mask(a == b, g) * 0.5
        return (g * (_grad.mask(a < b, g) + half) if ctx.needs(0) else None,
                g * (_grad.mask(a > b, g) + half) if ctx.needs(1) else None)

    def compute(self, a, b):
        return np.minimum(a, b)


@register
class Atan2(BinaryArith):
    """Elementwise arc tangent of ``lhs / rhs`` using the signs of both for the quadrant."""

    name = "tp.atan2"
    result_kind = "float"

    def vjp(self, ctx: RuleContext, grads):
        g, a, b = grads[0], ctx.input(0), ctx.input(1)
        d = g / (a * a + b * b)
        return (d * b if ctx.needs(0) else None, -d * a if ctx.needs(1) else None)

    def compute(self, a, b):
        return np.arctan2(a, b)


@register
class CopySign(BinaryArith):
    """Elementwise magnitude of the first operand with the sign bit of the second (the signs of
    -0.0 and NaN count)."""

    name = "tp.copysign"
    result_kind = "float"

    def vjp(self, ctx, grads):
        g, a, b = grads[0], ctx.input(0), ctx.input(1)
        ga = gb = None
        if ctx.needs(0):  # +-1 (the result over lhs), 0 where lhs is 0, as PyTorch
            ga = _grad.where(ctx, a == 0, 0.0, g * (ctx.output() / a))
        if ctx.needs(1):  # the sign bit is piecewise constant
            gb = ctx.zeros(tuple(b.shape), g.dtype, g)
        return ga, gb

    def compute(self, a, b):
        return np.copysign(a, b)


class Bitwise(BinaryArith):
    allow_float = False
    differentiable = False


@register
class BitwiseAnd(Bitwise):
    """Bitwise AND of integer or bool tensors (``&``)."""

    name = "tp.bitwise_and"

    def compute(self, a, b):
        return np.bitwise_and(a, b)


@register
class BitwiseOr(Bitwise):
    """Bitwise OR of integer or bool tensors (``|``)."""

    name = "tp.bitwise_or"

    def compute(self, a, b):
        return np.bitwise_or(a, b)


@register
class BitwiseXor(Bitwise):
    """Bitwise XOR of integer or bool tensors (``^``)."""

    name = "tp.bitwise_xor"

    def compute(self, a, b):
        return np.bitwise_xor(a, b)


# --- comparisons and logic ---------------------------------------------------------------

@register
class Eq(Comparison):
    """Elementwise ``lhs == rhs`` as bool."""

    name = "tp.eq"

    def compute(self, a, b):
        return np.equal(a, b)


@register
class Ne(Comparison):
    """Elementwise ``lhs != rhs`` as bool."""

    name = "tp.ne"

    def compute(self, a, b):
        return np.not_equal(a, b)


@register
class Lt(Comparison):
    """Elementwise ``lhs < rhs`` as bool."""

    name = "tp.lt"

    def compute(self, a, b):
        return np.less(a, b)


@register
class Le(Comparison):
    """Elementwise ``lhs <= rhs`` as bool."""

    name = "tp.le"

    def compute(self, a, b):
        return np.less_equal(a, b)


@register
class Gt(Comparison):
    """Elementwise ``lhs > rhs`` as bool."""

    name = "tp.gt"

    def compute(self, a, b):
        return np.greater(a, b)


@register
class Ge(Comparison):
    """Elementwise ``lhs >= rhs`` as bool."""

    name = "tp.ge"

    def compute(self, a, b):
        return np.greater_equal(a, b)


@register
class LogicalAnd(Logical):
    """Elementwise logical AND: nonzero is true; the result is bool."""

    name = "tp.logical_and"
    operands = _binary()

    def compute(self, a, b):
        return np.logical_and(a, b)


@register
class LogicalOr(Logical):
    """Elementwise logical OR: nonzero is true; the result is bool."""

    name = "tp.logical_or"
    operands = _binary()

    def compute(self, a, b):
        return np.logical_or(a, b)


@register
class LogicalXor(Logical):
    """Elementwise logical XOR: nonzero is true; the result is bool."""

    name = "tp.logical_xor"
    operands = _binary()

    def compute(self, a, b):
        return np.logical_xor(a, b)


@register
class LogicalNot(Logical):
    """Elementwise logical NOT: true where the input is zero."""

    name = "tp.logical_not"
    operands = (Operand("input"),)

    def compute(self, a):
        return np.logical_not(a)


@register
class IsNan(Logical):
    """True where the input is NaN."""

    name = "tp.isnan"
    operands = (Operand("input"),)

    def compute(self, a):
        return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, np.bool_)


@register
class IsInf(Logical):
    """True where the input is positive or negative infinity."""

    name = "tp.isinf"
    operands = (Operand("input"),)

    def compute(self, a):
        return np.isinf(a) if a.dtype.kind == "f" else np.zeros(a.shape, np.bool_)


# --- unary -------------------------------------------------------------------------------

@register
class Neg(Unary):
    """Elementwise negation ``-input``."""

    name = "tp.neg"
    allow_bool = False

    def vjp(self, ctx: RuleContext, grads):
        return (-grads[0],)

    def check_dtype(self, promoted):
        if promoted.is_bool:
            raise self.error(DTypeError, "negation, the `-` operator, on a bool tensor is not "
                                         "supported; use logical_not or `~` instead")

    def compute(self, a):
        return np.negative(a)


@register
class Abs(Unary):
    """Elementwise absolute value."""

    name = "tp.abs"
    allow_bool = False

    def vjp(self, ctx: RuleContext, grads):
        return (grads[0] * ctx.input(0).sign(),)

    def compute(self, a):
        return np.abs(a)


@register
class Sign(Unary):
    """Elementwise sign: -1, 0 or 1 (NaN stays NaN)."""

    name = "tp.sign"
    vjp = _grad.zero_vjp

    def compute(self, a):
        return a.copy() if a.dtype == np.bool_ else np.sign(a)


@register
class BitwiseNot(Unary):
    """Bitwise NOT of an integer tensor; logical NOT of a bool tensor (``~``)."""

    name = "tp.bitwise_not"
    differentiable = False
    allow_float = False

    def compute(self, a):
        return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


class Rounding(Unary):
    """Rounding is the identity on integer tensors, which keep their dtype."""

    allow_bool = False
    vjp = _grad.zero_vjp


@register
class Floor(Rounding):
    """Elementwise floor (round toward negative infinity)."""

    name = "tp.floor"

    def compute(self, a):
        return np.floor(a) if a.dtype.kind == "f" else a.copy()


@register
class Ceil(Rounding):
    """Elementwise ceiling (round toward positive infinity)."""

    name = "tp.ceil"

    def compute(self, a):
        return np.ceil(a) if a.dtype.kind == "f" else a.copy()


@register
class Trunc(Rounding):
    """Elementwise rounding toward zero."""

    name = "tp.trunc"

    def compute(self, a):
        return np.trunc(a) if a.dtype.kind == "f" else a.copy()


@register
class Round(Rounding):
    """Round half to even, optionally to ``decimals`` decimal places."""

    name = "tp.round"
    attributes = (Attr("decimals", AttrKind.INT, 0, doc="decimal places; negative rounds to tens"),)

    def compute(self, a, decimals):
        if a.dtype.kind != "f":
            return a.copy()
        if decimals == 0:
            return np.round(a)
        scale = 10.0 ** decimals
        return np.round(a * scale) / scale


def _unary_float(name: str, fn, doc: str, cls_name: str, grad) -> type[Op]:
    """A unary float op; ``grad(ctx, g)`` is its gradient rule (``ctx.input(0)`` is x,
    ``ctx.output()`` the result)."""
    cls = type(cls_name, (UnaryFloat,), {
        "__doc__": doc,
        "name": name,
        "compute": lambda self, a: fn(a),
        "vjp": lambda self, ctx, grads: (grad(ctx, grads[0]),),
        "__module__": __name__,
    })
    return register(cls)


_LN2, _LN10 = math.log(2.0), math.log(10.0)


Exp = _unary_float("tp.exp", np.exp, "Elementwise e raised to the input.", "Exp",
    lambda c, g: g * c.output())
Exp2 = _unary_float("tp.exp2", np.exp2, "Elementwise 2 raised to the input.", "Exp2",
    lambda c, g: g * c.output() * _LN2)
Expm1 = _unary_float("tp.expm1", np.expm1, "Elementwise ``exp(x) - 1``, accurate near zero.", "Expm1",
    lambda c, g: g * (c.output() + 1))
Log = _unary_float("tp.log", np.log, "Elementwise natural logarithm.", "Log",
    lambda c, g: g / c.input(0))
Log2 = _unary_float("tp.log2", np.log2, "Elementwise base-2 logarithm.", "Log2",
    lambda c, g: g / (c.input(0) * _LN2))
Log10 = _unary_float("tp.log10", np.log10, "Elementwise base-10 logarithm.", "Log10",
    lambda c, g: g / (c.input(0) * _LN10))
Log1p = _unary_float("tp.log1p", np.log1p, "Elementwise ``log(1 + x)``, accurate near zero.", "Log1p",
    lambda c, g: g / (c.input(0) + 1))
Sqrt = _unary_float("tp.sqrt", np.sqrt, "Elementwise square root.", "Sqrt",
    lambda c, g: g / (2 * c.output()))


def _rsqrt(a: np.ndarray) -> np.ndarray:
    out = np.asarray(np.sqrt(a))
    if not out.ndim:
        return 1.0 / out
    return np.divide(out.dtype.type(1.0), out, out=out)


Rsqrt = _unary_float("tp.rsqrt", _rsqrt, "Elementwise reciprocal square root.",
                     "Rsqrt",
    lambda c, g: -0.5 * g * c.output() ** 3)
Reciprocal = _unary_float("tp.reciprocal", lambda a: 1.0 / a, "Elementwise ``1 / x``.", "Reciprocal",
    lambda c, g: -g * c.output() * c.output())
Sin = _unary_float("tp.sin", np.sin, "Elementwise sine.", "Sin",
    lambda c, g: g * c.input(0).cos())
Cos = _unary_float("tp.cos", np.cos, "Elementwise cosine.", "Cos",
    lambda c, g: -g * c.input(0).sin())
Tan = _unary_float("tp.tan", np.tan, "Elementwise tangent.", "Tan",
    lambda c, g: g * (1 + c.output() * c.output()))
Asin = _unary_float("tp.asin", np.arcsin, "Elementwise arcsine.", "Asin",
    lambda c, g: g * (1 - c.input(0) * c.input(0)).rsqrt())
Acos = _unary_float("tp.acos", np.arccos, "Elementwise arccosine.", "Acos",
    lambda c, g: -g * (1 - c.input(0) * c.input(0)).rsqrt())
Atan = _unary_float("tp.atan", np.arctan, "Elementwise arctangent.", "Atan",
    lambda c, g: g / (1 + c.input(0) * c.input(0)))
Sinh = _unary_float("tp.sinh", np.sinh, "Elementwise hyperbolic sine.", "Sinh",
    lambda c, g: g * c.input(0).cosh())
Cosh = _unary_float("tp.cosh", np.cosh, "Elementwise hyperbolic cosine.", "Cosh",
    lambda c, g: g * c.input(0).sinh())
Tanh = _unary_float("tp.tanh", np.tanh, "Elementwise hyperbolic tangent.", "Tanh",
    lambda c, g: g * (1 - c.output() * c.output()))
Asinh = _unary_float("tp.asinh", np.arcsinh, "Elementwise inverse hyperbolic sine.", "Asinh",
    lambda c, g: g * (c.input(0) * c.input(0) + 1).rsqrt())
Acosh = _unary_float("tp.acosh", np.arccosh, "Elementwise inverse hyperbolic cosine (NaN below 1).", "Acosh",
    lambda c, g: g * (c.input(0) * c.input(0) - 1).rsqrt())
Atanh = _unary_float("tp.atanh", np.arctanh,
                     "Elementwise inverse hyperbolic tangent (infinite at -1 and 1, NaN outside).", "Atanh",
    lambda c, g: g / (1 - c.input(0) * c.input(0)))
Erf = _unary_float("tp.erf", erf, "Elementwise Gauss error function.", "Erf",
    lambda c, g: g * _TWO_OVER_SQRT_PI * (-(c.input(0) * c.input(0))).exp())


# below this, exp(-x) overflows float32 (sigmoid(x) is subnormal there)
_SIGMOID32_LOW = np.float32(-87.0)


def _sigmoid(a: np.ndarray) -> np.ndarray:
    if (a.dtype == np.float32 and a.ndim and a.size
            and not np.fmin.reduce(a, axis=None) < _SIGMOID32_LOW):
        # 1 / (1 + exp(-x)) in place: no overflow above the bound (fmin skips NaN, and
        # NaN comes out NaN)
        out = np.negative(a)
        np.exp(out, out=out)
        out += np.float32(1.0)
        return np.asarray(np.reciprocal(out, out=out))
    # exp of a non-positive argument only: no overflow for large |x|
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(a.dtype)


Sigmoid = _unary_float("tp.sigmoid", _sigmoid, "Elementwise logistic function ``1 / (1 + exp(-x))``.",
                       "Sigmoid",
    lambda c, g: g * c.output() * (1 - c.output()))


# --- activations -------------------------------------------------------------------------

class Activation(Unary):
    allow_bool = False


@register
class Relu(Activation):
    """Rectified linear unit ``max(x, 0)``."""

    name = "tp.relu"

    def vjp(self, ctx: RuleContext, grads):
        return (grads[0] * _grad.mask(ctx.output() > 0, grads[0]),)

    def compute(self, a):
        if a.dtype.kind != "f":
            return np.where(a > 0, a, np.zeros((), a.dtype))
        # clip keeps NaN; adding +0.0 turns its -0.0 into +0.0
        out = np.asarray(np.clip(a, 0, np.inf))
        out += a.dtype.type(0.0)
        return out


class FloatActivation(Activation):
    allow_int = False


@register
class Gelu(FloatActivation):
    """Gaussian error linear unit, exact (``erf``) or with the ``tanh`` approximation."""

    name = "tp.gelu"
    attributes = (Attr("approximate", AttrKind.STR, "none", choices=("none", "tanh")),)

    def vjp(self, ctx: RuleContext, grads):
        g, x = grads[0], ctx.input(0)
        if ctx.attrs["approximate"] == "tanh":
            k = math.sqrt(2.0 / math.pi)
            inner = k * (x + 0.044715 * x * x * x)
            t = inner.tanh()
            d_inner = k * (1 + 3 * 0.044715 * x * x)
            return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)
        cdf = 0.5 * (1 + (x * (1 / math.sqrt(2.0))).erf())
        pdf = (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
        return (g * (cdf + x * pdf),)

    def compute(self, a, approximate):
        if a.dtype != np.float32 or a.ndim == 0:
            return self._general(a, approximate)
        f = np.float32
        if approximate == "tanh":  # the same steps in place
            out = np.multiply(a, a)
            out *= f(0.044715)
            out *= a
            out += a
            out *= f(math.sqrt(2.0 / math.pi))
            np.tanh(out, out=out)
            out += f(1.0)
            out *= f(0.5)
            out *= a
            return out
        return _by_chunks(_gelu32_into, a)

    @staticmethod
    def _general(a, approximate):
        if approximate == "tanh":
            inner = math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)
            return 0.5 * a * (1.0 + np.tanh(inner))
        return 0.5 * a * (1.0 + erf(a * (1.0 / math.sqrt(2.0))))


@register
class Silu(FloatActivation):
    """Sigmoid linear unit ``x * sigmoid(x)``."""

    name = "tp.silu"

    def vjp(self, ctx: RuleContext, grads):
        x = ctx.input(0)
        s = x.sigmoid()
        return (grads[0] * s * (1 + x * (1 - s)),)

    def compute(self, a):
        s = _sigmoid(a)
        if s.dtype == a.dtype and s.shape == a.shape and s.ndim:
            return np.multiply(a, s, out=s)
        return a * s


@register
class LeakyRelu(FloatActivation):
    """``x`` where positive, ``negative_slope * x`` elsewhere."""

    name = "tp.leaky_relu"
    attributes = (Attr("negative_slope", AttrKind.FLOAT, 0.01),)

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        return (_grad.where(ctx, ctx.input(0) > 0, g, g * ctx.attrs["negative_slope"]),)

    def compute(self, a, negative_slope):
        slope = a.dtype.type(negative_slope)
        if a.ndim == 0 or not 0 < negative_slope < math.inf:
            return np.where(a > 0, a, a * slope)
        # the larger (slope <= 1) or smaller (slope > 1) of x and slope * x is the selected
        # one, with the same sign (-0.0 included); NaN propagates, and a positive finite
        # slope makes no NaN of an infinity
        out = np.multiply(a, slope)
        return (np.maximum if negative_slope <= 1 else np.minimum)(a, out, out=out)


# --- select, clamp, cast -----------------------------------------------------------------

@register
class Where(Elementwise):
    """Select ``lhs`` where ``condition`` is true, else ``rhs`` (broadcast over all three)."""

    name = "tp.where"
    operands = (Operand("condition"), Operand("lhs"), Operand("rhs"))

    def vjp(self, ctx: RuleContext, grads):
        g, cond = grads[0], ctx.input(0)
        return (None, _grad.where(ctx, cond, g, 0.0) if ctx.needs(1) else None,
                _grad.where(ctx, cond, 0.0, g) if ctx.needs(2) else None)

    def common_dtype(self, types):
        return promote_operands(list(types[1:]))

    def infer(self, types, attrs):
        cond = types[0]
        if not cond.dtype.is_bool:
            raise self.error(DTypeError, f"condition must be a bool tensor, got {cond.dtype.name}")
        shape = broadcast_shapes(self.name, *[t.shape for t in types])
        return (TensorType(shape, self.common_dtype(types)),)

    def reference(self, arrays, attrs):
        cond, a, b = arrays
        common = self.common_dtype([type_of_array(x) for x in arrays])
        return _select(cond, upcast(a, common), upcast(b, common))


@register
class Clamp(Unary):
    """Limit values to ``[min, max]``; either bound may be absent. NaN propagates."""

    name = "tp.clamp"
    allow_bool = False
    attributes = (Attr("min", AttrKind.FLOAT, None, optional=True),
                  Attr("max", AttrKind.FLOAT, None, optional=True))

    def vjp(self, ctx: RuleContext, grads):  # through where the input is within the bounds (inclusive, as PyTorch)
        x, lo, hi = ctx.input(0), ctx.attrs["min"], ctx.attrs["max"]
        inside = None
        if lo is not None:
            inside = x >= lo
        if hi is not None:
            inside = (x <= hi) if inside is None else inside & (x <= hi)
        return (_grad.where(ctx, inside, grads[0], 0.0),)

    def infer(self, types, attrs):
        if attrs["min"] is None and attrs["max"] is None:
            raise self.error(OpError, "at least one of 'min' or 'max' must not be None")
        return super().infer(types, attrs)

    def compute(self, a, min, max):  # noqa: A002 - attribute names as in PyTorch
        lo = -math.inf if min is None else min
        hi = math.inf if max is None else max
        negative_zero = lo == 0 and math.copysign(1.0, lo) < 0
        if a.dtype.kind == "f" and a.ndim and hi != 0 and not negative_zero:
            # one clip pass; where x and the lower bound are both zeros the bound's +0.0
            # wins, as in the two-step form below (adding +0.0 turns -0.0 into +0.0)
            out = np.clip(a, a.dtype.type(lo), a.dtype.type(hi))
            if lo == 0:
                out += a.dtype.type(0.0)
            return out
        out = a
        if min is not None:
            out = np.maximum(out, np.asarray(min).astype(a.dtype))
        if max is not None:
            out = np.minimum(out, np.asarray(max).astype(a.dtype))
        return out


def cast_array(a: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """``a`` converted to ``dtype`` with PyTorch's rules: float to int truncates toward zero,
    anything to bool tests for nonzero."""
    target = dtype.np_dtype
    if a.dtype == target:
        return a.copy()
    if dtype.is_bool:
        return a != 0
    if a.dtype.kind == "f" and dtype.is_integer:
        return np.trunc(a).astype(target)
    return a.astype(target)


@register
class Cast(Op):
    """Convert to ``dtype`` (float to int truncates toward zero; nonzero becomes true)."""

    name = "tp.cast"
    family = "elementwise"
    operands = (Operand("input"),)
    attributes = (Attr("dtype", AttrKind.DTYPE),)

    def vjp(self, ctx: RuleContext, grads):  # the engine casts the gradient back to the input's dtype
        return (grads[0],)

    def infer(self, types, attrs):
        return (types[0].with_dtype(attrs["dtype"]),)

    def reference(self, arrays, attrs):
        return cast_array(arrays[0], attrs["dtype"])


@register
class Fmod(BinaryArith):
    """C-style remainder: the result has the sign of ``lhs``."""

    name = "tp.fmod"
    allow_bool = False

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        if not ctx.needs(1):
            return g, None
        return g, -g * (ctx.input(0) / ctx.input(1)).trunc()

    def compute(self, a, b):
        _check_int_divisor(self, b)
        return np.fmod(a, b)
