"""Lowerings of the elementwise family: one broadcasting ``linalg.generic`` per op whose
body converts operands to the dtype the op computes in (its common dtype's
``DType.computes_in``: float32 for half types), applies the scalar arith/math computation,
and converts to the result dtype. Broadcasts are indexing maps,
never materialized, so IREE fuses chains of these into one dispatch."""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from typing import Any

from ...dialects.ir import arith, ir, math
from ...dialects.tp import dtypes as dt
from . import LowerCtx, lowers
from ._target import target
from . import _mathlib as ml
from ._builder import (arith_op, cast_scalar, const_scalar, elementwise, int_div, int_divrem, int_rem, scalar_add,
                       scalar_extremum, scalar_mul)

Scalar = Callable[[list[ir.Value], dt.DType, dict[str, Any]], ir.Value]

_F = arith.CmpFPredicate
_I = arith.CmpIPredicate


def _float(d: dt.DType) -> bool:
    return d.is_floating_point


def _binary(fop, iop, bop=None) -> Scalar:
    return lambda args, d, attrs: arith_op(d, fop, iop, bop)(*args).result


def _cmp(fpred, spred, upred) -> Scalar:
    def fn(args, d, attrs):
        a, b = args
        if _float(d):
            return arith.CmpFOp(fpred, a, b).result
        return arith.CmpIOp(upred if d.is_bool or not d.is_signed else spred, a, b).result

    return fn


def _libm_free(scalar: Scalar, f64=None, f32=None) -> Scalar:
    """``scalar``, except in float64 (float32) where IREE's CPU backend cannot link (or
    expands too naively) the op: there the _mathlib replacement ``f64`` (``f32``). The
    float32 replacements compute in float64, so a target without float64 keeps ``scalar``."""
    def fn(args, d, attrs):
        alt = f64 if d is dt.float64 else f32 if d is dt.float32 and target().float64 else None
        return alt(*args) if alt is not None else scalar(args, d, attrs)

    return fn


def _fmod_value(a, b, d):
    return ml.fmod_f64(a, b) if d is dt.float64 else arith.RemFOp(a, b).result


def _int_floor_adjust(q, r, b, d):
    """Python-style rounding for signed integers: the floored quotient and remainder from
    the truncated ones (the same for unsigned ones)."""
    if d.is_bool or not d.is_signed:
        return q, r
    zero = const_scalar(0, d)
    r_nonzero = arith.CmpIOp(_I.ne, r, zero).result
    signs_differ = arith.XOrIOp(arith.CmpIOp(_I.slt, r, zero).result, arith.CmpIOp(_I.slt, b, zero).result).result
    adjust = arith.AndIOp(r_nonzero, signs_differ).result
    return (arith.SelectOp(adjust, arith.SubIOp(q, const_scalar(1, d)).result, q).result,
            arith.SelectOp(adjust, arith.AddIOp(r, b).result, r).result)


def _floor_div(args, d, attrs):
    a, b = args
    if _float(d):
        # floor(a / b) computed as numpy/PyTorch do: through fmod so that exact quotients
        # do not round up (e.g. 0.3 // 0.1 == 2).
        mod = _fmod_value(a, b, d)
        div = arith.DivFOp(arith.SubFOp(a, mod).result, b).result
        zero = const_scalar(0.0, d)
        mod_nz = arith.CmpFOp(_F.UNE, mod, zero).result
        differ = arith.XOrIOp(arith.CmpFOp(_F.OLT, b, zero).result, arith.CmpFOp(_F.OLT, mod, zero).result).result
        div = arith.SelectOp(arith.AndIOp(mod_nz, differ).result,
                             arith.SubFOp(div, const_scalar(1.0, d)).result, div).result
        fl = math.FloorOp(div).result
        fl = arith.SelectOp(arith.CmpFOp(_F.OGT, arith.SubFOp(div, fl).result, const_scalar(0.5, d)).result,
                            arith.AddFOp(fl, const_scalar(1.0, d)).result, fl).result
        b_zero = arith.CmpFOp(_F.OEQ, b, zero).result
        return arith.SelectOp(b_zero, arith.DivFOp(a, b).result, fl).result
    return _int_floor_adjust(*int_divrem(a, b, d), b, d)[0]


def _trunc_div(args, d, attrs):
    a, b = args
    if _float(d):
        return math.TruncOp(arith.DivFOp(a, b).result).result
    return int_div(a, b, d)


def _remainder(args, d, attrs):
    a, b = args
    if _float(d):
        r = _fmod_value(a, b, d)
        zero = const_scalar(0.0, d)
        differ = arith.XOrIOp(arith.CmpFOp(_F.OLT, r, zero).result, arith.CmpFOp(_F.OLT, b, zero).result).result
        adjust = arith.AndIOp(arith.CmpFOp(_F.UNE, r, zero).result, differ).result
        return arith.SelectOp(adjust, arith.AddFOp(r, b).result, r).result
    return _int_floor_adjust(*int_divrem(a, b, d), b, d)[1]


def _pow(args, d, attrs):
    a, b = args
    if _float(d):
        # math.powf gives NaN for negative bases (and for pow(0, 0)), and loses accuracy in f64.
        if d is dt.float64:
            return ml.pow_f64(a, b)
        return (ml.pow_f32 if target().float64 else ml.pow_f32_narrow)(a, b)
    # Exponentiation by squaring, unrolled over the exponent's bits: IREE's CPU backend
    # cannot legalize math.ipowi. Negative exponents are rejected before run time.
    one, zero = const_scalar(1, d), const_scalar(0, d)
    result, base = one, a
    for bit in range(d.bits - 1):
        mask = const_scalar(1 << bit, d)
        set_ = arith.CmpIOp(_I.ne, arith.AndIOp(b, mask).result, zero).result
        result = arith.SelectOp(set_, arith.MulIOp(result, base).result, result).result
        base = arith.MulIOp(base, base).result
    return result


def _shared(scalar: Callable[..., ir.Value], *extra: Any) -> Scalar:
    """A binary scalar function of the builders (``scalar(a, b, dtype, *extra)``) as a table entry."""
    return lambda args, d, attrs: scalar(*args, d, *extra)


def _unary_math(op) -> Scalar:
    return lambda args, d, attrs: op(args[0]).result


def _erf(args, d, attrs):
    x = args[0]
    if d is dt.float64:
        return ml.erf_f64(x)  # IREE's CPU backend does not legalize f64 math.erf
    return math.ErfOp(x).result


def _inverse_hyperbolic(kind: str) -> Scalar:
    """asinh, acosh, atanh from log1p (IREE's expansions through log lose the low digits near
    0 and 1) and sqrt; past 2**28 (2**12 in float32) asinh and acosh are log(2x), where the
    squares would overflow and the dropped terms are below half an ulp."""
    def fn(args, d, attrs):
        x = args[0]
        log1p = lambda v: _TABLE["tp.log1p"][0]([v], d, attrs)  # noqa: E731 (libm-free in float64)
        one, two = const_scalar(1.0, d), const_scalar(2.0, d)
        if kind == "atanh":  # 0.5 log1p(2a / (1 - a)), signed like x
            a = math.AbsFOp(x).result
            r = log1p(arith.DivFOp(arith.MulFOp(two, a).result, arith.SubFOp(one, a).result).result)
            return math.CopySignOp(arith.MulFOp(const_scalar(0.5, d), r).result, x).result
        large = const_scalar(2.0 ** 28 if d is dt.float64 else 2.0 ** 12, d)
        a = math.AbsFOp(x).result if kind == "asinh" else x
        far = arith.AddFOp(math.LogOp(a).result, const_scalar(pymath.log(2.0), d)).result
        if kind == "asinh":  # log1p(a + a^2 / (1 + sqrt(1 + a^2))), signed like x
            a2 = arith.MulFOp(a, a).result
            root = math.SqrtOp(arith.AddFOp(one, a2).result).result
            near = log1p(arith.AddFOp(a, arith.DivFOp(a2, arith.AddFOp(one, root).result).result).result)
        else:  # acosh: log1p(t + sqrt(2t + t^2)) with t = x - 1 (NaN below 1: selected below)
            t1 = arith.SubFOp(x, one).result
            root = math.SqrtOp(arith.AddFOp(arith.MulFOp(two, t1).result, arith.MulFOp(t1, t1).result).result).result
            near = log1p(arith.AddFOp(t1, root).result)
        r = arith.SelectOp(arith.CmpFOp(_F.OGT, a, large).result, far, near).result
        if kind == "asinh":
            return math.CopySignOp(r, x).result
        # far below 1 the formula gives -inf or inf (t^2 overflows) rather than NaN
        return arith.SelectOp(arith.CmpFOp(_F.OLT, x, one).result, const_scalar(float("nan"), d), r).result

    return fn


def _reciprocal(args, d, attrs):
    return arith.DivFOp(const_scalar(1.0, d), args[0]).result


def _sigmoid_value(x, d):
    one = const_scalar(1.0, d)
    return arith.DivFOp(one, arith.AddFOp(one, math.ExpOp(arith.NegFOp(x).result).result).result).result


def _neg(args, d, attrs):
    if _float(d):
        return arith.NegFOp(args[0]).result
    return arith.SubIOp(const_scalar(0, d), args[0]).result


def _abs(args, d, attrs):
    if _float(d):
        return math.AbsFOp(args[0]).result
    # x < 0 ? -x : x rather than math.absi, which IREE's SPIR-V backend miscompiles for i8
    # (it returned x unchanged); the CPU backends turn this select into the same abs
    x = args[0]
    if d.is_bool or not d.is_signed:
        return x
    zero = const_scalar(0, d)
    return arith.SelectOp(arith.CmpIOp(_I.slt, x, zero).result, arith.SubIOp(zero, x).result, x).result


def _sign(args, d, attrs):
    x = args[0]
    if d.is_bool:
        return x
    zero, one, minus = const_scalar(0, d), const_scalar(1, d), const_scalar(-1, d)
    if _float(d):
        pos = arith.CmpFOp(_F.OGT, x, zero).result
        neg = arith.CmpFOp(_F.OLT, x, zero).result
        s = arith.SelectOp(pos, one, arith.SelectOp(neg, minus, zero).result).result
        return arith.SelectOp(arith.CmpFOp(_F.UNO, x, x).result, x, s).result
    if not d.is_signed:
        return arith.SelectOp(arith.CmpIOp(_I.ne, x, zero).result, one, zero).result
    pos = arith.CmpIOp(_I.sgt, x, zero).result
    neg = arith.CmpIOp(_I.slt, x, zero).result
    return arith.SelectOp(pos, one, arith.SelectOp(neg, minus, zero).result).result


def _bitwise_not(args, d, attrs):
    return arith.XOrIOp(args[0], const_scalar(True if d.is_bool else -1, d)).result


def _rounding(op):
    def fn(args, d, attrs):
        return op(args[0]).result if _float(d) else args[0]

    return fn


def _round(args, d, attrs):
    x = args[0]
    if not _float(d):
        return x
    decimals = attrs["decimals"]
    if decimals == 0:
        return math.RoundEvenOp(x).result
    scale = const_scalar(10.0 ** decimals, d)
    return arith.DivFOp(math.RoundEvenOp(arith.MulFOp(x, scale).result).result, scale).result


def _relu(args, d, attrs):
    x = args[0]
    zero = const_scalar(0, d)
    if _float(d):
        keep = arith.OrIOp(arith.CmpFOp(_F.OGT, x, zero).result, arith.CmpFOp(_F.UNO, x, x).result).result
        return arith.SelectOp(keep, x, zero).result
    return scalar_extremum(x, zero, d, largest=True)


def _gelu(args, d, attrs):
    x = args[0]
    half, one = const_scalar(0.5, d), const_scalar(1.0, d)
    if attrs["approximate"] == "tanh":
        cube = arith.MulFOp(arith.MulFOp(x, x).result, x).result
        inner = arith.AddFOp(x, arith.MulFOp(const_scalar(0.044715, d), cube).result).result
        inner = arith.MulFOp(const_scalar(pymath.sqrt(2.0 / pymath.pi), d), inner).result
        t = ml.tanh_f64(inner) if d is dt.float64 else math.TanhOp(inner).result
    else:
        t = _erf([arith.MulFOp(x, const_scalar(1.0 / pymath.sqrt(2.0), d)).result], d, attrs)
    return arith.MulFOp(arith.MulFOp(half, x).result, arith.AddFOp(one, t).result).result


def _silu(args, d, attrs):
    return arith.MulFOp(args[0], _sigmoid_value(args[0], d)).result


def _leaky_relu(args, d, attrs):
    x = args[0]
    pos = arith.CmpFOp(_F.OGT, x, const_scalar(0.0, d)).result
    return arith.SelectOp(pos, x, arith.MulFOp(x, const_scalar(attrs["negative_slope"], d)).result).result


def _isnan(args, d, attrs):
    if _float(d):
        return arith.CmpFOp(_F.UNO, args[0], args[0]).result
    return const_scalar(False, dt.bool_)


def _isinf(args, d, attrs):
    if _float(d):
        return arith.CmpFOp(_F.OEQ, math.AbsFOp(args[0]).result, const_scalar(float("inf"), d)).result
    return const_scalar(False, dt.bool_)


def _clamp(args, d, attrs):
    x = args[0]
    lo, hi = attrs["min"], attrs["max"]
    if _float(d):
        if lo is not None:
            x = arith.MaximumFOp(x, const_scalar(lo, d)).result
        if hi is not None:
            x = arith.MinimumFOp(x, const_scalar(hi, d)).result
        return x
    if lo is not None:
        x = scalar_extremum(x, const_scalar(lo, d), d, largest=True)
    if hi is not None:
        x = scalar_extremum(x, const_scalar(hi, d), d, largest=False)
    return x


# name -> (scalar computation, how operands/results are typed)
#   "work":    operands converted to the dtype the op computes in, result in it
#   "pred":    operands converted to the dtype the op computes in, result bool
#   "logical": operands converted to bool, result bool
_TABLE: dict[str, tuple[Scalar, str]] = {
    "tp.add": (_shared(scalar_add), "work"),
    "tp.sub": (_binary(arith.SubFOp, arith.SubIOp), "work"),
    "tp.mul": (_shared(scalar_mul), "work"),
    "tp.div": (lambda args, d, attrs: arith.DivFOp(*args).result if _float(d) else int_div(*args, d), "work"),
    "tp.floor_div": (_floor_div, "work"),
    "tp.trunc_div": (_trunc_div, "work"),
    "tp.remainder": (_remainder, "work"),
    "tp.fmod": (_libm_free(lambda args, d, attrs: arith.RemFOp(*args).result if _float(d) else int_rem(*args, d),
                           f64=ml.fmod_f64), "work"),
    "tp.pow": (_pow, "work"),
    "tp.maximum": (_shared(scalar_extremum, True), "work"),
    "tp.minimum": (_shared(scalar_extremum, False), "work"),
    "tp.atan2": (_libm_free(_binary(math.Atan2Op, None), f64=ml.atan2_f64), "work"),
    "tp.copysign": (_binary(math.CopySignOp, None), "work"),
    "tp.bitwise_and": (_binary(None, arith.AndIOp, arith.AndIOp), "work"),
    "tp.bitwise_or": (_binary(None, arith.OrIOp, arith.OrIOp), "work"),
    "tp.bitwise_xor": (_binary(None, arith.XOrIOp, arith.XOrIOp), "work"),
    "tp.eq": (_cmp(_F.OEQ, _I.eq, _I.eq), "pred"),
    "tp.ne": (_cmp(_F.UNE, _I.ne, _I.ne), "pred"),
    "tp.lt": (_cmp(_F.OLT, _I.slt, _I.ult), "pred"),
    "tp.le": (_cmp(_F.OLE, _I.sle, _I.ule), "pred"),
    "tp.gt": (_cmp(_F.OGT, _I.sgt, _I.ugt), "pred"),
    "tp.ge": (_cmp(_F.OGE, _I.sge, _I.uge), "pred"),
    "tp.logical_and": (lambda a, d, at: arith.AndIOp(a[0], a[1]).result, "logical"),
    "tp.logical_or": (lambda a, d, at: arith.OrIOp(a[0], a[1]).result, "logical"),
    "tp.logical_xor": (lambda a, d, at: arith.XOrIOp(a[0], a[1]).result, "logical"),
    "tp.logical_not": (lambda a, d, at: arith.XOrIOp(a[0], const_scalar(True, dt.bool_)).result, "logical"),
    "tp.isnan": (_isnan, "pred"),
    "tp.isinf": (_isinf, "pred"),
    "tp.neg": (_neg, "work"),
    "tp.abs": (_abs, "work"),
    "tp.sign": (_sign, "work"),
    "tp.bitwise_not": (_bitwise_not, "work"),
    "tp.floor": (_rounding(math.FloorOp), "work"),
    "tp.ceil": (_rounding(math.CeilOp), "work"),
    "tp.trunc": (_rounding(math.TruncOp), "work"),
    "tp.round": (_round, "work"),
    "tp.exp": (_unary_math(math.ExpOp), "work"),
    "tp.exp2": (_libm_free(_unary_math(math.Exp2Op), f64=ml.exp2_f64), "work"),
    "tp.expm1": (_libm_free(_unary_math(math.ExpM1Op), f64=ml.expm1_f64), "work"),
    "tp.log": (_unary_math(math.LogOp), "work"),
    "tp.log2": (_libm_free(_unary_math(math.Log2Op), f64=ml.log2_f64), "work"),
    "tp.log10": (_libm_free(_unary_math(math.Log10Op), f64=ml.log10_f64, f32=ml.log10_f32), "work"),
    "tp.log1p": (_libm_free(_unary_math(math.Log1pOp), f64=ml.log1p_f64), "work"),
    "tp.sqrt": (_unary_math(math.SqrtOp), "work"),
    "tp.rsqrt": (_unary_math(math.RsqrtOp), "work"),
    "tp.reciprocal": (_reciprocal, "work"),
    "tp.sin": (_libm_free(_unary_math(math.SinOp), f64=ml.sin_f64), "work"),
    "tp.cos": (_libm_free(_unary_math(math.CosOp), f64=ml.cos_f64), "work"),
    "tp.tan": (_libm_free(_unary_math(math.TanOp), f64=ml.tan_f64), "work"),
    "tp.asin": (_libm_free(_unary_math(math.AsinOp), f64=ml.asin_f64), "work"),
    "tp.acos": (_libm_free(_unary_math(math.AcosOp), f64=ml.acos_f64), "work"),
    "tp.atan": (_libm_free(_unary_math(math.AtanOp), f64=ml.atan_f64), "work"),
    "tp.sinh": (_libm_free(_unary_math(math.SinhOp), f64=ml.sinh_f64), "work"),
    "tp.cosh": (_libm_free(_unary_math(math.CoshOp), f64=ml.cosh_f64), "work"),
    "tp.tanh": (_libm_free(_unary_math(math.TanhOp), f64=ml.tanh_f64), "work"),
    "tp.asinh": (_inverse_hyperbolic("asinh"), "work"),
    "tp.acosh": (_inverse_hyperbolic("acosh"), "work"),
    "tp.atanh": (_inverse_hyperbolic("atanh"), "work"),
    "tp.erf": (_erf, "work"),
    "tp.sigmoid": (lambda a, d, at: _sigmoid_value(a[0], d), "work"),
    "tp.relu": (_relu, "work"),
    "tp.gelu": (_gelu, "work"),
    "tp.silu": (_silu, "work"),
    "tp.leaky_relu": (_leaky_relu, "work"),
    "tp.clamp": (_clamp, "work"),
}


def _lower_table_op(ctx: LowerCtx) -> list[ir.Value]:
    scalar, mode = _TABLE[ctx.op.name]
    inputs = ctx.inputs()
    work = ctx.opdef.common_dtype(ctx.in_types).computes_in
    out = ctx.out_types[0]

    def body(args: list[ir.Value]) -> ir.Value:
        target = dt.bool_ if mode == "logical" else work
        conv = [cast_scalar(a, t.dtype, target) for a, (_, t) in zip(args, inputs)]
        result = scalar(conv, target, ctx.attrs)
        produced = dt.bool_ if mode in ("pred", "logical") else work
        return cast_scalar(result, produced, out.dtype)

    return [elementwise(inputs, out, body, sym_in=ctx.sym_inputs(), sym_out=ctx.sym_output())]


lowers(*_TABLE, summary="`linalg.generic` (parallel; broadcasts as indexing maps) with arith/math "
                        "in the compute dtype")(_lower_table_op)


@lowers("tp.where", summary="`linalg.generic` with `arith.select`")
def _where(ctx: LowerCtx) -> list[ir.Value]:
    inputs = ctx.inputs()
    work = ctx.opdef.common_dtype(ctx.in_types).computes_in
    out = ctx.out_types[0]

    def body(args):
        cond = args[0]
        a = cast_scalar(args[1], inputs[1][1].dtype, work)
        b = cast_scalar(args[2], inputs[2][1].dtype, work)
        return cast_scalar(arith.SelectOp(cond, a, b).result, work, out.dtype)

    return [elementwise(inputs, out, body, sym_in=ctx.sym_inputs(), sym_out=ctx.sym_output())]


@lowers("tp.cast", summary="`linalg.generic` with the arith conversion (truncation toward zero, "
                           "nonzero tests for bool)")
def _cast(ctx: LowerCtx) -> list[ir.Value]:
    inputs = ctx.inputs()
    src, out = inputs[0][1].dtype, ctx.out_types[0]
    return [elementwise(inputs, out, lambda args: cast_scalar(args[0], src, out.dtype),
                        sym_in=ctx.sym_inputs(), sym_out=ctx.sym_output())]
