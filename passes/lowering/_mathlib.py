"""Scalar math that IREE's llvm-cpu backend cannot link, rebuilt from arith/math ops it
compiles inline: float64 sin, cos, tan, asin, acos, atan, atan2, tanh, sinh, cosh, expm1,
exp2, log1p, log2, log10, pow, fmod and erf, float32 log10 and pow, and float32→bfloat16
rounding.

IREE links CPU dispatches without a C math library, so ``math.sin`` and friends on f64,
``arith.remf`` on f64, ``math.log10`` on f32 and the ``__truncsfbf2`` builtin fail to link,
and ``math.erf`` on f64 is not legalized. Of what does compile, f64 ``expm1``/``log1p``/
``sinh`` expand naively (``exp(x) - 1``: zero for tiny x), f64 ``exp2`` and ``powf`` lose
hundreds of ulp on large results, ``powf`` gives NaN for negative bases (``(-3)**2``) and
for pow(0, 0), and f64 ``cosh`` overflows early. Each function takes and returns
``ir.Value`` scalars and emits its ops at the current insertion point (a ``linalg.generic``
body). They use only f64 ``exp``, ``sqrt``, ``roundeven``, ``trunc``, ``fma``, ``copysign``,
``absf`` (and ``cosh`` where it does not overflow), integer ops, bitcasts and, for fmod's
long reductions, an ``scf.while``. Every float64 result is within 1 ulp of the correctly
rounded one on the inputs of tests/test_mathlib.py; fmod is exact. Exact error terms rely on
``math.fma`` being fused, as it is on every x86-64 with FMA3 and every AArch64 target.
IREE's CPU runtime flushes subnormals to zero; subnormal inputs here give the results of a
zero of the same sign (or, where a function returns its tiny input unchanged, that input).

Two functions serve targets with less than the CPU has (IREE's SPIR-V baseline):
``pow_f32_narrow`` uses no float64, and ``divrem_i64_narrow`` divides int64 values with the
operations IREE's 64-bit integer emulation supports.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...dialects.ir import arith, ir, math, scf, tensor

__all__ = ["sin_f64", "cos_f64", "tan_f64", "atan_f64", "atan2_f64", "asin_f64", "acos_f64",
           "tanh_f64", "sinh_f64", "cosh_f64", "expm1_f64", "exp2_f64", "log1p_f64", "log2_f64",
           "log10_f64", "log10_f32", "pow_f64", "pow_f32", "pow_f32_narrow", "fmod_f64", "erf_f64",
           "f32_to_bf16", "divrem_i64_narrow"]

# --- constants, computed exactly in fixed point --------------------------------------------

_PREC = 1400  # fraction bits of the fixed-point constants below


def _series(p: int, q: int, alternate: bool) -> int:
    """atan(p/q) (alternating) or atanh(p/q) scaled by 2**_PREC, for 0 < p/q < 1."""
    guard = 16
    term = (p << (_PREC + guard)) // q
    total, k = 0, 0
    while term:
        total += -(term // (2 * k + 1)) if alternate and k % 2 else term // (2 * k + 1)
        term = term * p * p // (q * q)
        k += 1
    return total >> guard


_PI = 16 * _series(1, 5, True) - 4 * _series(1, 239, True)  # Machin's formula
_LN2 = 2 * _series(1, 3, False)
_LN10 = 3 * _LN2 + 2 * _series(1, 9, False)  # ln 10 = 3 ln 2 + ln 1.25
_ONE = 1 << _PREC


def _split(fixed: int) -> tuple[float, float]:
    """A fixed-point constant as hi + lo doubles (hi correctly rounded)."""
    hi = fixed / _ONE
    return hi, float(Fraction(fixed, _ONE) - Fraction(hi))


_PIO2_H, _PIO2_L = _split(_PI // 2)
_PI_H, _PI_L = _split(_PI)
_ATAN_HALF = _split(_series(1, 2, True))
_ATAN_ONE = _split(_PI // 4)
_ATAN_3_2 = _split(_PI // 2 - _series(2, 3, True))
_LN2_H, _LN2_L = _split(_LN2)
_INV_LN2_H, _INV_LN2_L = _split(_ONE * _ONE // _LN2)
_INV_LN10_H, _INV_LN10_L = _split(_ONE * _ONE // _LN10)
_LOG10_2_H, _LOG10_2_L = _split(_LN2 * _ONE // _LN10)
_TWO_THIRDS_H, _TWO_THIRDS_L = _split(2 * _ONE // 3)

# Bits 1..1216 after the binary point of 2/pi in 64-bit words, after one zero word, so
# that the Payne-Hanek window of any finite double lies inside the table.
_TWO_OVER_PI_BITS = 1216
_TWO_OVER_PI = (1 << (_TWO_OVER_PI_BITS + 1 + _PREC)) // _PI
_TWO_OVER_PI_WORDS = [0] + [(_TWO_OVER_PI >> (_TWO_OVER_PI_BITS - 64 * (w + 1))) & (2**64 - 1)
                            for w in range(_TWO_OVER_PI_BITS // 64)]


def _coeffs(*hexes: str) -> tuple[float, ...]:
    return tuple(float.fromhex(h) for h in hexes)


# Polynomial coefficients, highest degree first: near-minimax (Chebyshev) fits in 200-bit
# arithmetic of the functions named, on the ranges the reductions produce (plus margin).
# (sin x - x) / x^3 as a polynomial in x^2, |x| <= pi/4
_SIN = _coeffs(
    "-0x1.ab17bdcbd3414p-41", "0x1.61217ee5cca1bp-33", "-0x1.ae64541295cdfp-26",
    "0x1.71de3a54607a5p-19", "-0x1.a01a01a019937p-13", "0x1.1111111111110p-7",
    "-0x1.5555555555555p-3")
# (cos x - 1 + x^2/2) / x^4 in x^2, |x| <= pi/4
_COS = _coeffs(
    "-0x1.907d8f29fe831p-37", "0x1.1eeb68cd22f56p-29", "-0x1.27e4fa17bf139p-22",
    "0x1.a01a019f4e9b4p-16", "-0x1.6c16c16c16967p-10", "0x1.5555555555555p-5")
# (atan u - u) / u^3 in u^2, |u| <= 7/16
_ATAN = _coeffs(
    "0x1.e32edd64fe1d8p-7", "-0x1.0f2861ac33793p-5", "0x1.6fe829d0a3ec1p-5",
    "-0x1.ab537f7d4c8dbp-5", "0x1.e16f8f1c47b36p-5", "-0x1.110c9133aa5bdp-4",
    "0x1.3b13751405671p-4", "-0x1.745d154551dfep-4", "0x1.c71c71bd022abp-4",
    "-0x1.2492492485138p-3", "0x1.99999999998c1p-3", "-0x1.5555555555555p-2")
# (expm1 r - r - r^2/2) / r^3 in r, |r| <= ln(2)/2
_EXPM1 = _coeffs(
    "0x1.1f6755b5ecab2p-29", "0x1.af39789bfd689p-26", "0x1.27e4e1c2b899fp-22",
    "0x1.71de0d573888bp-19", "0x1.a01a01a487dd6p-16", "0x1.a01a01a7da98dp-13",
    "0x1.6c16c16c167d1p-10", "0x1.1111111110996p-7", "0x1.5555555555555p-5",
    "0x1.5555555555556p-3")
# (2 atanh(s)/s - 2) / s^2 in s^2, |s| <= (sqrt 2 - 1)/(sqrt 2 + 1)
_LOG = _coeffs(
    "0x1.2b6688a387e03p-3", "0x1.39fd392179a95p-3", "0x1.7462bd8f7796ep-3",
    "0x1.c71c62c639fdep-3", "0x1.2492492e09d4dp-2", "0x1.9999999995204p-2",
    "0x1.5555555555558p-1")
# (2 atanh(s) - 2s - 2s^3/3) / s^5 in s^2, same range
_LOG_FINE = _coeffs(
    "0x1.e047e001993cbp-4", "0x1.df7a598f77bc4p-4", "0x1.1118d38b0f57bp-3",
    "0x1.3b13959b359a4p-3", "0x1.745d177b19a81p-3", "0x1.c71c71c6ea0c3p-3",
    "0x1.2492492492523p-2", "0x1.999999999999ap-2")
# erf(x)/x - 1 in x^2, |x| <= 1
_ERF_SMALL = _coeffs(
    "0x1.05fccb83cf37bp-34", "-0x1.389c36ba235e9p-30", "0x1.f7b46724de981p-27",
    "-0x1.5f1ec38082bdcp-23", "0x1.b9df216542643p-20", "-0x1.f4d1e306e0024p-17",
    "0x1.f9a321d4dab9dp-14", "-0x1.c02db3dabced8p-11", "0x1.565bcd0dba7cep-8",
    "-0x1.b82ce31284df1p-6", "0x1.ce2f21a042b2fp-4", "-0x1.812746b0379e6p-2",
    "0x1.06eba8214db69p-3")
# erfc(x) exp(x^2) in x - 1.75 for 1 <= x <= 2.5, and in x - 4.25 for 2.5 <= x <= 6
_ERFC_LOW = _coeffs(
    "0x1.4a00811caa27fp-32", "-0x1.502e7abeb118bp-30", "0x1.18ac6c75b3251p-28",
    "-0x1.10aecb000455cp-26", "0x1.0713a63e092cdp-24", "-0x1.e966745f3a6adp-23",
    "0x1.bc0e8fdd221aap-21", "-0x1.88f982431c7d7p-19", "0x1.5273f8ecd9f4bp-17",
    "-0x1.1b2918c718c17p-15", "0x1.cb4c6866a8da5p-14", "-0x1.68388831be182p-12",
    "0x1.106bd5c05ded8p-10", "-0x1.8bf716a923333p-9", "0x1.13648a11ffcbcp-7",
    "-0x1.6cb52fe4890c0p-6", "0x1.c8d0cef0f810ep-5", "-0x1.0c3d538446449p-3",
    "0x1.23cfc2f1dc7e0p-2")
_ERFC_HIGH = _coeffs(
    "0x1.d6f4dd4617a28p-46", "-0x1.5bf3204313bf4p-43", "0x1.2625b9619b3f8p-41",
    "-0x1.a1f897d6b23a6p-39", "0x1.4e3bac7ca44e9p-36", "-0x1.d27901b295eccp-34",
    "0x1.3d00d610e0483p-31", "-0x1.ae5b332318d36p-29", "0x1.204d286390278p-26",
    "-0x1.7c59f1d140c0fp-24", "0x1.ee33451d794a5p-22", "-0x1.3c0762d894bfep-19",
    "0x1.8d8e59c472d2dp-17", "-0x1.eb88e1606e904p-15", "0x1.2a660fde5194ap-12",
    "-0x1.6373226e38424p-10", "0x1.9ef71691a5acap-8", "-0x1.da395335251fdp-6",
    "0x1.08e62ce8c89adp-3")

_INF = float("inf")
_NAN = float("nan")
_SQRT2 = float.fromhex("0x1.6a09e667f3bcdp+0")
_MANTISSA = (1 << 52) - 1
_TINY = 2.0 ** -1022

# --- scalar op helpers (Python floats and ints become constants of the other operand's float
# type, f64 when it has none, or i64) ------------------------------------------------------

_F = arith.CmpFPredicate
_I = arith.CmpIPredicate


def _f64() -> ir.Type:
    return ir.F64Type.get()


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _v(x, like=None) -> ir.Value:
    """``x`` as a value: a Python number becomes a constant of ``like``'s type when ``like``
    is a value, of f64 otherwise."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        t = like.type if isinstance(like, ir.Value) else _f64()
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(x))).result
    return x


def _vv(a, b) -> tuple[ir.Value, ir.Value]:
    return _v(a, b), _v(b, a)


def _vi(x, bits: int = 64) -> ir.Value:
    if isinstance(x, int):
        t = ir.IntegerType.get_signless(bits)
        x = x - (1 << bits) if x >= 1 << (bits - 1) else x
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, x)).result
    return x


def _add(a, b):
    return arith.AddFOp(*_vv(a, b)).result


def _sub(a, b):
    return arith.SubFOp(*_vv(a, b)).result


def _mul(a, b):
    return arith.MulFOp(*_vv(a, b)).result


def _div(a, b):
    return arith.DivFOp(*_vv(a, b)).result


def _fma(a, b, c):
    return math.FmaOp(_v(a), _v(b), _v(c)).result


def _neg(a):
    return arith.NegFOp(a).result


def _abs(a):
    return math.AbsFOp(a).result


def _copysign(a, b):
    return math.CopySignOp(_v(a), b).result


def _sel(cond, a, b):
    return arith.SelectOp(cond, *_vv(a, b)).result


def _cmp(pred, a, b):
    return arith.CmpFOp(pred, *_vv(a, b)).result


def _icmp(pred, a, b, bits: int = 64):
    return arith.CmpIOp(pred, _vi(a, bits), _vi(b, bits)).result


def _and(a, b):
    return arith.AndIOp(a, b).result


def _or(a, b):
    return arith.OrIOp(a, b).result


def _isnan(a):
    return _cmp(_F.UNO, a, a)


def _iadd(a, b, bits: int = 64):
    return arith.AddIOp(_vi(a, bits), _vi(b, bits)).result


def _isub(a, b, bits: int = 64):
    return arith.SubIOp(_vi(a, bits), _vi(b, bits)).result


def _iand(a, b, bits: int = 64):
    return arith.AndIOp(_vi(a, bits), _vi(b, bits)).result


def _ior(a, b, bits: int = 64):
    return arith.OrIOp(_vi(a, bits), _vi(b, bits)).result


def _shl(a, b, bits: int = 64):
    return arith.ShLIOp(_vi(a, bits), _vi(b, bits)).result


def _shr(a, b, bits: int = 64):
    return arith.ShRUIOp(_vi(a, bits), _vi(b, bits)).result


def _bits(x):
    return arith.BitcastOp(_i64(), x).result


def _from_bits(i):
    return arith.BitcastOp(_f64(), i).result


def _signbit(x):
    return _icmp(_I.slt, _bits(x), 0)


def _pow2(k):
    """2**k for an i64 k in [-1022, 1023]."""
    return _from_bits(_shl(_iadd(k, 1023), 52))


def _poly(x, coeffs):
    acc = _v(coeffs[0])
    for c in coeffs[1:]:
        acc = _fma(acc, x, c)
    return acc


def _fast_two_sum(a, b):
    """(s, e) with s + e == a + b exactly, for |a| >= |b| or a == 0."""
    s = _add(a, b)
    return s, _add(_sub(a, s), b)


def _two_sum(a, b):
    s = _add(a, b)
    bb = _sub(s, a)
    return s, _add(_sub(a, _sub(s, bb)), _sub(b, bb))


def _dd_ratio(nh, nl, dh, dl):
    """(nh + nl) / (dh + dl), to well under an ulp: one division and its correction."""
    q = _div(nh, dh)
    return _add(q, _div(_sub(_add(_fma(_neg(q), dh, nh), nl), _mul(q, dl)), dh))


# --- trigonometric functions -------------------------------------------------------------

def _payne_hanek(ax):
    """(q, hi, lo) with ax = (4n + q) pi/2 + hi + lo, |hi + lo| <= pi/4, for finite ax
    >= 1/2: the product of ax's 53-bit mantissa with a 192-bit window of 2/pi gives the
    quadrant and 128 fraction bits, exact for every double."""
    bits = _bits(ax)
    m = _ior(_iand(bits, _MANTISSA), 1 << 52)
    # The window starts at bit e - 1 of 2/pi (e: ax = m * 2**e); earlier bits only add
    # multiples of 4 quarter turns. Index j - 1 into the table, which has 64 zero bits first.
    j = _isub(_shr(bits, 52), 1013)
    word = arith.MinSIOp(_shr(j, 6), _vi(len(_TWO_OVER_PI_WORDS) - 4)).result
    shift = _iand(j, 63)
    t = ir.RankedTensorType.get([len(_TWO_OVER_PI_WORDS)], _i64())
    table = arith.ConstantOp(t, ir.DenseElementsAttr.get(
        np.array(_TWO_OVER_PI_WORDS, dtype=np.uint64).view(np.int64), type=t)).result
    w = [tensor.ExtractOp(table, [arith.IndexCastOp(ir.IndexType.get(), _iadd(word, i)).result]).result
         for i in range(4)]
    aligned = _icmp(_I.eq, shift, 0)
    back = _isub(64, shift)
    w0, w1, w2 = (_sel(aligned, w[i], _ior(_shl(w[i], shift), _shr(w[i + 1], back))) for i in range(3))
    # Low 192 bits of m * (w0:w1:w2): the quadrant in the top 2 bits, then the fraction.
    p2 = arith.MulUIExtendedOp(m, w2)
    p1 = arith.MulUIExtendedOp(m, w1)
    r2 = p2.low
    r1 = _iadd(p2.high, p1.low)
    carry = arith.ExtUIOp(_i64(), _icmp(_I.ult, r1, p1.low)).result
    r0 = _iadd(_iadd(arith.MulIOp(m, w0).result, p1.high), carry)
    fh = _ior(_shl(r0, 2), _shr(r1, 62))
    fl = _ior(_shl(r1, 2), _shr(r2, 62))
    # A fraction >= 1/2 rounds the quadrant up and, read as signed, is already f - 1.
    neg = _icmp(_I.slt, fh, 0)
    q = _iand(_iadd(_shr(r0, 62), arith.ExtUIOp(_i64(), neg).result), 3)
    nfl = _isub(0, fl)
    nfh = _iadd(arith.XOrIOp(fh, _vi(-1)).result, arith.ExtUIOp(_i64(), _icmp(_I.eq, fl, 0)).result)
    fh, fl = _sel(neg, nfh, fh), _sel(neg, nfl, fl)
    lz = arith.MinUIOp(math.CountLeadingZerosOp(fh).result, _vi(63)).result
    nh = _sel(_icmp(_I.eq, lz, 0), fh, _ior(_shl(fh, lz), _shr(fl, _isub(64, lz))))
    nl = _shl(fl, lz)
    top = arith.UIToFPOp(_f64(), _iand(nh, ~0x7FF & (2**64 - 1))).result  # 53 bits: exact
    rest = _fma(arith.UIToFPOp(_f64(), nl).result, 2.0 ** -64,
                arith.UIToFPOp(_f64(), _iand(nh, 0x7FF)).result)
    scale = _pow2(_isub(-64, lz))
    fhi, flo = _mul(top, scale), _mul(rest, scale)
    # (fhi + flo) * pi/2 in double-double.
    hi = _mul(fhi, _PIO2_H)
    lo = _add(_fma(fhi, _PIO2_H, _neg(hi)), _fma(flo, _PIO2_H, _mul(fhi, _PIO2_L)))
    hi, lo = _fast_two_sum(hi, lo)
    return q, _sel(neg, _neg(hi), hi), _sel(neg, _neg(lo), lo)


def _reduce_half_pi(ax):
    """Quadrant and remainder (hi, lo) of ax >= 0 (ax itself up to pi/4); garbage, but no
    trap, where ax is not finite."""
    beyond = _and(_cmp(_F.OGT, ax, 0.7853981633974483), _cmp(_F.OLT, ax, _INF))
    q, hi, lo = _payne_hanek(_sel(beyond, ax, 1.0))
    return _sel(beyond, q, _vi(0)), _sel(beyond, hi, ax), _sel(beyond, lo, 0.0)


def _sin_kernel(x, y):
    """sin(x + y) as hi + lo, for |x + y| <= pi/4, |y| <= ulp(x)."""
    z = _mul(x, x)
    tail = _fma(_mul(x, z), _poly(z, _SIN), _mul(y, _fma(-0.5, z, 1.0)))
    return _fast_two_sum(x, tail)


def _cos_kernel(x, y):
    """cos(x + y) as hi + lo, for |x + y| <= pi/4, |y| <= ulp(x)."""
    z = _mul(x, x)
    ze = _fma(x, x, _neg(z))
    hz = _mul(0.5, z)
    w = _sub(1.0, hz)
    tail = _add(_sub(_sub(1.0, w), hz),
                _sub(_mul(_mul(z, z), _poly(z, _COS)), _fma(x, y, _mul(0.5, ze))))
    return _fast_two_sum(w, tail)


def _quadrant_bit(q, bit):
    return _icmp(_I.ne, _iand(q, bit), 0)


def sin_f64(x):
    """sin on the exactly reduced argument: a kernel polynomial picked by quadrant."""
    ax = _abs(x)
    q, hi, lo = _reduce_half_pi(ax)
    v = _sel(_quadrant_bit(q, 1), _cos_kernel(hi, lo)[0], _sin_kernel(hi, lo)[0])
    flip = arith.XOrIOp(_quadrant_bit(q, 2), _signbit(x)).result
    v = _sel(flip, _neg(v), v)
    return _sel(_cmp(_F.OLT, ax, _INF), v, _sub(x, x))


def cos_f64(x):
    """cos on the exactly reduced argument: a kernel polynomial picked by quadrant."""
    ax = _abs(x)
    q, hi, lo = _reduce_half_pi(ax)
    v = _sel(_quadrant_bit(q, 1), _sin_kernel(hi, lo)[0], _cos_kernel(hi, lo)[0])
    v = _sel(_quadrant_bit(_iadd(q, 1), 2), _neg(v), v)
    return _sel(_cmp(_F.OLT, ax, _INF), v, _sub(x, x))


def tan_f64(x):
    """sin/cos (or -cos/sin in odd quadrants) of the reduced argument, in double-double."""
    ax = _abs(x)
    q, hi, lo = _reduce_half_pi(ax)
    (s, sl), (c, cl) = _sin_kernel(hi, lo), _cos_kernel(hi, lo)
    odd = _quadrant_bit(q, 1)
    v = _dd_ratio(_sel(odd, c, s), _sel(odd, cl, sl), _sel(odd, s, c), _sel(odd, sl, cl))
    v = _sel(odd, _neg(v), v)
    v = _sel(_signbit(x), _neg(v), v)
    return _sel(_cmp(_F.OLT, ax, _INF), v, _sub(x, x))


def _atan_nonneg(t, tl=None):
    """atan(t + tl) as hi + lo for t >= 0 (or NaN): t is moved next to 0, 1/2, 1, 3/2 or infinity
    with an exactly computed numerator, leaving |u| <= 7/16 for the polynomial."""
    below = [_cmp(_F.OLT, t, bound) for bound in (7 / 16, 11 / 16, 19 / 16, 39 / 16)]

    def pick(values):
        acc = _v(values[4])
        for i in (3, 2, 1, 0):
            acc = _sel(below[i], values[i], acc)
        return acc

    centre = pick([0.0, 0.5, 1.0, 1.5, 0.0])
    base_hi = pick([0.0, _ATAN_HALF[0], _ATAN_ONE[0], _ATAN_3_2[0], _PIO2_H])
    base_lo = pick([0.0, _ATAN_HALF[1], _ATAN_ONE[1], _ATAN_3_2[1], _PIO2_L])
    num = _sel(below[3], _sub(t, centre), -1.0)
    den = _sel(below[3], _fma(centre, t, 1.0), t)
    u = _div(num, den)
    z = _mul(u, u)
    p = _fma(_mul(u, z), _poly(z, _ATAN), u)
    if tl is not None:
        base_lo = _add(base_lo, _div(tl, _fma(t, t, 1.0)))
    return _fast_two_sum(base_hi, _add(base_lo, p))  # |base_hi| >= |base_lo + p| or 0


def _pi_minus(z, zl):
    """pi - (z + zl) for 0 <= z <= pi/2, rounded once."""
    s, e = _two_sum(_PI_H, _neg(z))
    return _add(s, _add(e, _sub(_PI_L, zl)))


def atan_f64(x):
    """atan, odd: the reduction of _atan_nonneg on |x|."""
    return _copysign(_atan_nonneg(_abs(x))[0], x)


def atan2_f64(y, x):
    """C's atan2: quadrants from the signs (of zeros too), exact special values."""
    ay, ax = _abs(y), _abs(x)
    t = _div(ay, ax)
    ordinary = _and(_and(_cmp(_F.OLT, t, 2.0 ** 1000), _cmp(_F.OGT, ay, 0.0)), _cmp(_F.OLT, ax, _INF))
    tl = _sel(ordinary, _div(_fma(_neg(t), ax, ay), ax), 0.0)  # rounding error of t
    both_inf = _and(_cmp(_F.OEQ, ay, _INF), _cmp(_F.OEQ, ax, _INF))
    t = _sel(both_inf, 1.0, _sel(_cmp(_F.OEQ, ay, 0.0), 0.0, t))
    z, zl = _atan_nonneg(t, tl)
    r = _sel(_signbit(x), _pi_minus(z, zl), z)
    r = _copysign(r, y)
    return _sel(_or(_isnan(x), _isnan(y)), _add(x, y), r)


def _sqrt_one_minus_square(ax):
    """sqrt(1 - ax^2) as w + dw (dw a Newton correction), for 0 <= ax <= 1: 1 - ax^2 is
    formed exactly as (1 - ax)(1 + ax) from 1/2 up and as 1 - ax^2 with its error below."""
    d, s = _sub(1.0, ax), _add(1.0, ax)
    prod = _mul(d, s)
    prod_err = _fma(d, s, _neg(prod))
    sq = _mul(ax, ax)
    diff = _sub(1.0, sq)
    diff_err = _sub(_sub(_sub(1.0, diff), sq), _fma(ax, ax, _neg(sq)))
    half = _cmp(_F.OGE, ax, 0.5)
    a, err = _sel(half, prod, diff), _sel(half, prod_err, diff_err)
    w = math.SqrtOp(a).result
    dw = _div(_add(_fma(_neg(w), w, a), err), _mul(2.0, w))
    return w, _sel(_cmp(_F.OGT, w, 0.0), dw, 0.0)


def _finite_ratio_error(t, err):
    """``err`` where the quotient t is an ordinary number, else 0."""
    return _sel(_cmp(_F.OLT, t, 2.0 ** 1000), err, 0.0)


def asin_f64(x):
    """atan2(x, sqrt(1 - x^2)) with the square root and the quotient carried to double-double."""
    ax = _abs(x)
    w, dw = _sqrt_one_minus_square(ax)
    t = _div(ax, w)
    tl = _finite_ratio_error(t, _div(_sub(_fma(_neg(t), w, ax), _mul(t, dw)), w))
    return _copysign(_atan_nonneg(t, tl)[0], x)


def acos_f64(x):
    """atan2(sqrt(1 - x^2), x), with the square root and the quotient in double-double."""
    ax = _abs(x)
    w, dw = _sqrt_one_minus_square(ax)
    t = _div(w, ax)
    tl = _finite_ratio_error(t, _div(_add(_fma(_neg(t), ax, w), dw), ax))
    z, zl = _atan_nonneg(t, tl)
    return _sel(_signbit(x), _pi_minus(z, zl), z)


# --- exponential and hyperbolic functions ------------------------------------------------

def _expm1_dd(x):
    """expm1(x) as hi + lo (|lo| <= ulp(hi)/2, hi correctly rounded from a sum good to
    about 2^-60 relative), for x not tiny and not NaN: x = k ln2 + r with |r| <= ln2/2,
    expm1(r) = e + el exactly summed, then 2^k - 1 + 2^k (e + el)."""
    xc = _sel(_cmp(_F.OLT, x, -60.0), -60.0, _sel(_cmp(_F.OGT, x, 710.0), 710.0, x))
    xc = _sel(_isnan(x), 0.0, xc)
    k = math.RoundEvenOp(_mul(xc, _INV_LN2_H)).result
    nk = _neg(k)
    hi = _fma(nk, _LN2_H, xc)  # exact: k ln2_hi is a multiple of 2**-53 close to xc
    r = _fma(nk, _LN2_L, hi)
    c = _fma(nk, _LN2_L, _sub(hi, r))  # the rest of x - k ln2
    # expm1(r + c) = r + w with w = r^2/2 + r^3 E(r) + c e^r, and |w| <= |r|/5.
    w = _fma(_mul(r, r), _fma(r, _poly(r, _EXPM1), 0.5), _fma(c, r, c))
    e, el = _fast_two_sum(r, w)
    half_scale = _pow2(_isub(arith.FPToSIOp(_i64(), k).result, 1))  # 2^(k-1): no overflow at k = 1024
    s, se = _two_sum(_sub(half_scale, 0.5), _mul(half_scale, e))
    h, l = _fast_two_sum(s, _fma(half_scale, el, se))
    overflow = _cmp(_F.OEQ, s, _INF)
    return _sel(overflow, _INF, _mul(2.0, h)), _sel(overflow, 0.0, _mul(2.0, l))


def _tiny_or_nan(x):
    return _or(_cmp(_F.OLT, _abs(x), 2.0 ** -54), _isnan(x))


def expm1_f64(x):
    """exp(x) - 1, also for tiny x (returned as is) and near overflow."""
    return _sel(_tiny_or_nan(x), x, _expm1_dd(x)[0])


def _expm1_dd_any(x):
    tiny = _tiny_or_nan(x)
    th, tl = _expm1_dd(x)
    return _sel(tiny, x, th), _sel(tiny, 0.0, tl)


def tanh_f64(x):
    """tanh = t/(t + 2) with t = expm1(2|x|) in double-double; 1 beyond |x| = 22."""
    ax = _abs(x)
    th, tl = _expm1_dd_any(_mul(2.0, ax))
    den, dl = _two_sum(th, 2.0)
    z = _dd_ratio(th, tl, den, _add(dl, tl))
    return _copysign(_sel(_cmp(_F.OGT, ax, 22.0), 1.0, z), x)


def sinh_f64(x):
    """sinh = (t + t/(t + 1))/2 with t = expm1(|x|) in double-double, and exp(|x|)/2 where
    t overflows."""
    ax = _abs(x)
    th, tl = _expm1_dd_any(ax)
    den, dl = _two_sum(th, 1.0)
    s, se = _two_sum(th, _dd_ratio(th, tl, den, _add(dl, tl)))
    moderate = _mul(0.5, _add(s, _add(se, tl)))
    return _copysign(_sel(_cmp(_F.OGE, ax, 709.0), _half_exp(ax), moderate), x)


def _half_exp(ax):
    """exp(ax)/2 = exp(ax - ln2) for ax >= 700 (so exp(d) = expm1(d) to the bit), with
    the subtraction in double-double; finite up to where the result overflows."""
    d, de = _two_sum(ax, -_LN2_H)
    eh, el = _expm1_dd(d)
    return _sel(_cmp(_F.OEQ, eh, _INF), eh, _add(eh, _fma(eh, _sub(de, _LN2_L), el)))


def cosh_f64(x):
    """``math.cosh`` (which links), except from |x| = 709 on, where its exp(|x|) overflows
    before cosh does."""
    ax = _abs(x)
    return _sel(_cmp(_F.OGE, ax, 709.0), _half_exp(ax), math.CoshOp(x).result)


def exp2_f64(x):
    """2^x = 2^n exp((x - n) ln2) with n = round(x): exact for integers, one exp rounding
    otherwise (``math.exp2`` goes through exp(x ln2) and loses |x| ulp)."""
    xc = _sel(_isnan(x), 0.0, _sel(_cmp(_F.OLT, x, -1100.0), -1100.0, _sel(_cmp(_F.OGT, x, 1100.0), 1100.0, x)))
    n = math.RoundEvenOp(xc).result
    f = _sub(xc, n)
    ph = _mul(f, _LN2_H)
    pl = _fma(f, _LN2_L, _fma(f, _LN2_H, _neg(ph)))
    e = math.ExpOp(ph).result
    e = _fma(e, pl, e)
    ni = arith.FPToSIOp(_i64(), n).result
    n1 = arith.ShRSIOp(ni, _vi(1)).result
    res = _mul(_mul(e, _pow2(n1)), _pow2(_isub(ni, n1)))
    return _sel(_isnan(x), x, res)


# --- logarithms --------------------------------------------------------------------------

def _log_reduce(x):
    """(k, f) with x = 2^k (1 + f), |f| <= sqrt 2 - 1, for positive finite normal x."""
    bits = _bits(x)
    kb = arith.SIToFPOp(_f64(), _isub(_shr(bits, 52), 1023)).result
    m = _from_bits(_ior(_iand(bits, _MANTISSA), 1023 << 52))
    big = _cmp(_F.OGT, m, _SQRT2)
    m = _sel(big, _mul(0.5, m), m)
    return _sel(big, _add(kb, 1.0), kb), _sub(m, 1.0)


def _log_parts(x):
    """(k, v, lo) with log(x) = k ln2 + v + lo for positive finite normal x: x = 2^k (1 + f)
    with |f| <= sqrt 2 - 1, log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f);
    v = f - f^2/2 rounded, lo (under |v|/10) the rest."""
    k, f = _log_reduce(x)
    s = _div(f, _add(2.0, f))
    z = _mul(s, s)
    ff = _mul(f, f)
    hfsq = _mul(0.5, ff)
    v = _sub(f, hfsq)
    lo = _add(_sub(_sub(f, v), hfsq),
              _fma(s, _fma(z, _poly(z, _LOG), hfsq), _mul(-0.5, _fma(f, f, _neg(ff)))))
    return k, v, lo


def _log_domain(x, zero):
    """(ok, special): whether x - zero is a positive finite normal number, and the result
    otherwise (-inf at zero, where subnormal distances count as zero)."""
    d = _sub(x, zero) if zero else x
    ok = _and(_cmp(_F.OGE, d, _TINY), _cmp(_F.OLT, x, _INF))
    at_zero = _cmp(_F.OLT, _abs(d), _TINY)
    return ok, _sel(at_zero, -_INF, _sel(_cmp(_F.OEQ, x, _INF), _INF, _NAN))


def _log_dd(x):
    """log(x) as hi + lo, |lo| <= ulp(hi)/2, for positive finite normal x."""
    k, v, lo = _log_parts(x)
    a = _mul(k, _LN2_H)
    ae = _fma(k, _LN2_L, _fma(k, _LN2_H, _neg(a)))
    hi, he = _fast_two_sum(a, v)  # |v| <= ln(2)/2 <= |a| unless k == 0
    return _fast_two_sum(hi, _add(he, _add(ae, lo)))


def log2_f64(x):
    """k + log(1 + f)/ln2 with the product by 1/ln2 in double-double: exact at powers of 2."""
    ok, special = _log_domain(x, 0.0)
    k, v, lo = _log_parts(_sel(ok, x, 1.0))
    p = _mul(v, _INV_LN2_H)
    pe = _add(_fma(v, _INV_LN2_H, _neg(p)), _fma(lo, _INV_LN2_H, _mul(v, _INV_LN2_L)))
    s, se = _fast_two_sum(k, p)  # |p| <= 1/2 <= |k| unless k == 0
    return _sel(ok, _add(s, _add(se, pe)), special)


def log10_f64(x):
    """k log10(2) + log(1 + f)/ln10, both products in double-double."""
    ok, special = _log_domain(x, 0.0)
    k, v, lo = _log_parts(_sel(ok, x, 1.0))
    a = _mul(k, _LOG10_2_H)
    ae = _fma(k, _LOG10_2_L, _fma(k, _LOG10_2_H, _neg(a)))
    p = _mul(v, _INV_LN10_H)
    pe = _add(_fma(v, _INV_LN10_H, _neg(p)), _fma(lo, _INV_LN10_H, _mul(v, _INV_LN10_L)))
    s, se = _two_sum(a, p)
    return _sel(ok, _add(s, _add(se, _add(ae, pe))), special)


def log10_f32(x):
    """float32 log10, computed in float64 and rounded once more."""
    return arith.TruncFOp(ir.F32Type.get(), log10_f64(arith.ExtFOp(_f64(), x).result)).result


def log1p_f64(x):
    """log(1 + x) from u = 1 + x and its exact rounding error e: log(u) + e/u."""
    u, e = _two_sum(1.0, x)
    ok, special = _log_domain(x, -1.0)
    hi, lo = _log_dd(_sel(ok, u, 1.0))
    res = _add(hi, _add(lo, _div(e, u)))
    res = _sel(_cmp(_F.OEQ, x, 0.0), x, res)  # keeps the sign of zero
    return _sel(ok, res, special)


def _log_dd_precise(x):
    """log(x) as hi + lo good to about 2^-64 relative (pow multiplies its error by up to
    745), for positive finite normal x: log(1 + f) = 2s + 2s^3/3 + s^5 Q(s^2) with s and
    the first two terms in double-double."""
    k, f = _log_reduce(x)
    dh, dl = _fast_two_sum(2.0, f)
    sh = _div(f, dh)
    sl = _div(_sub(_fma(_neg(sh), dh, f), _mul(sh, dl)), dh)
    s2h = _mul(sh, sh)
    s2l = _fma(_mul(2.0, sh), sl, _fma(sh, sh, _neg(s2h)))
    s3h = _mul(s2h, sh)
    s3l = _fma(s2l, sh, _fma(s2h, sl, _fma(s2h, sh, _neg(s3h))))
    t3h = _mul(_TWO_THIRDS_H, s3h)
    t3l = _fma(_TWO_THIRDS_L, s3h, _fma(_TWO_THIRDS_H, s3l, _fma(_TWO_THIRDS_H, s3h, _neg(t3h))))
    tail = _mul(_mul(s3h, s2h), _poly(s2h, _LOG_FINE))
    a = _mul(k, _LN2_H)
    ae = _fma(k, _LN2_L, _fma(k, _LN2_H, _neg(a)))
    h1, e1 = _two_sum(a, _mul(2.0, sh))
    h2, e2 = _two_sum(h1, t3h)
    lo = _add(_add(e1, e2), _add(_add(ae, _mul(2.0, sl)), _add(t3l, tail)))
    return _fast_two_sum(h2, lo)


def pow_f64(x, y):
    """C's pow: exp(y log|x|) with the logarithm and the product in double-double, the sign
    from odd integer exponents, NaN for negative bases with non-integer exponents, and
    pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1."""
    ax, ay = _abs(x), _abs(y)
    normal = _and(_cmp(_F.OGE, ax, _TINY), _cmp(_F.OLT, ax, _INF))
    lh, ll = _log_dd_precise(_sel(normal, ax, 1.0))
    ph = _mul(y, lh)
    pl = _fma(y, ll, _fma(y, lh, _neg(ph)))
    e = math.ExpOp(ph).result
    extreme = _or(_cmp(_F.OEQ, e, 0.0), _cmp(_F.OEQ, e, _INF))
    r = _sel(extreme, e, _fma(e, pl, e))
    # |x| zero (or subnormal) or infinite: 0 or inf by the sign of y.
    grows = _cmp(_F.OGT, y, 0.0)
    at_zero = _sel(grows, 0.0, _INF)
    at_inf = _sel(grows, _INF, 0.0)
    r = _sel(normal, r, _sel(_cmp(_F.OLT, ax, _TINY), at_zero, _sel(_cmp(_F.OEQ, ax, _INF), at_inf, r)))
    r = _sel(_or(_isnan(x), _isnan(y)), _add(x, y), r)
    whole = _cmp(_F.OEQ, math.TruncOp(y).result, y)
    half = _mul(0.5, y)
    odd = _and(whole, _cmp(_F.UNE, math.TruncOp(half).result, half))
    r = _sel(_and(_signbit(x), odd), _neg(r), r)
    negative_base = _and(_cmp(_F.OLE, x, -_TINY), _cmp(_F.OGT, x, -_INF))
    r = _sel(_and(negative_base, _and(_cmp(_F.OLT, ay, _INF), _cmp(_F.UNE, math.TruncOp(y).result, y))), _NAN, r)
    one = _or(_or(_cmp(_F.OEQ, y, 0.0), _cmp(_F.OEQ, x, 1.0)),
              _and(_cmp(_F.OEQ, x, -1.0), _cmp(_F.OEQ, ay, _INF)))
    return _sel(one, 1.0, r)


def pow_f32(x, y):
    """float32 pow through pow_f64 (``math.powf`` returns NaN for negative bases)."""
    f64 = _f64()
    wide = pow_f64(arith.ExtFOp(f64, x).result, arith.ExtFOp(f64, y).result)
    return arith.TruncFOp(ir.F32Type.get(), wide).result


def pow_f32_narrow(x, y):
    """float32 pow for targets without float64 (IREE's Vulkan/SPIR-V baseline): exp(y log|x|)
    in float32 with C's special cases (the sign from odd integer exponents, NaN for negative
    bases with non-integer exponents, pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1). The
    relative error grows with |y log|x||: about 2^-23 |y log|x|| plus the device's exp and
    log errors, about 1e-5 for results between 1e-38 and 1e38."""
    ax, ay = _abs(x), _abs(y)
    # log(0) = -inf and log(inf) = inf give 0 or inf by the sign of y, as C's pow does
    r = math.ExpOp(_mul(y, math.LogOp(ax).result)).result
    whole = _cmp(_F.OEQ, math.TruncOp(y).result, y)
    half = _mul(0.5, y)
    odd = _and(whole, _cmp(_F.UNE, math.TruncOp(half).result, half))
    negative = _icmp(_I.slt, arith.BitcastOp(ir.IntegerType.get_signless(32), x).result, 0, bits=32)
    r = _sel(_and(negative, odd), _neg(r), r)
    negative_base = _and(_cmp(_F.OLT, x, 0.0), _cmp(_F.OGT, x, -_INF))
    fraction = _and(_cmp(_F.OLT, ay, _INF), _cmp(_F.UNE, math.TruncOp(y).result, y))
    r = _sel(_and(negative_base, fraction), _NAN, r)
    one = _or(_or(_cmp(_F.OEQ, y, 0.0), _cmp(_F.OEQ, x, 1.0)),
              _and(_cmp(_F.OEQ, x, -1.0), _cmp(_F.OEQ, ay, _INF)))
    return _sel(one, 1.0, r)


def divrem_i64_narrow(a, b):
    """(a / b, a % b) for int64, truncating like ``arith.divsi``/``remsi``, by 64 steps of
    shift-and-subtract on the magnitudes, for targets whose int64 emulation
    has no division (IREE's SPIR-V backend). Uses only add, sub, shifts, compares, selects
    and bitwise ops; x / 0 gives -1 or 1 and x % 0 gives x."""
    i64 = _i64()
    zero = _vi(0)
    neg_a, neg_b = _icmp(_I.slt, a, zero), _icmp(_I.slt, b, zero)
    na = arith.SelectOp(neg_a, _isub(zero, a), a).result   # |INT64_MIN| is 2^63 unsigned
    nb = arith.SelectOp(neg_b, _isub(zero, b), b).result
    # unrolled: the SPIR-V int64 emulation cannot carry i64 values through scf.for
    q = r = zero
    for bit in range(63, -1, -1):
        r = _ior(arith.ShLIOp(r, _vi(1)).result, _iand(_shr(na, bit), 1))
        fits = _icmp(_I.uge, r, nb)
        r = arith.SelectOp(fits, _isub(r, nb), r).result
        q = _ior(q, arith.ShLIOp(arith.ExtUIOp(i64, fits).result, _vi(bit)).result)
    q = arith.SelectOp(arith.XOrIOp(neg_a, neg_b).result, _isub(zero, q), q).result
    r = arith.SelectOp(neg_a, _isub(zero, r), r).result
    return q, r


# --- fmod --------------------------------------------------------------------------------

def _fmod_step(r, d):
    """r mod d for 0 <= r < 2^53 d: the quotient may be one too large, never too small,
    and the fused remainder is then exact."""
    q = math.TruncOp(_div(r, d)).result
    t = _fma(_neg(q), d, r)
    return _sel(_cmp(_F.OLT, t, 0.0), _add(t, d), t)


def _ilogb(x):
    """floor(log2 x) as i64 for positive finite normal x."""
    return _isub(_shr(_bits(x), 52), 1023)


def _scale_to(d, r, eb):
    """d 2^m with m = ilogb(r) - eb - 52 (at least 0): r < 2^53 times it."""
    m = arith.MaxSIOp(_isub(_isub(_ilogb(r), eb), 52), _vi(0)).result
    half = _shr(m, 1)
    return _mul(_mul(d, _pow2(half)), _pow2(_isub(m, half)))


def fmod_f64(a, b):
    """C's fmod, exact for all finite inputs. While |a/b| >= 2^105, a is reduced modulo
    b 2^m (m >= 53, 52 quotient bits a step, at most 40 steps, remainders multiples of
    ulp(b) 2^53 so never subnormal); then two steps (modulo b 2^m, m <= 53, then b) on
    values scaled up by 2^108 when b is within 2^53 of the subnormals, which the runtime
    would flush."""
    ax, bx = _abs(a), _abs(b)
    # A subnormal divisor counts as zero (the runtime flushes it anyway), which also keeps
    # the loop below finite.
    valid = _and(_cmp(_F.OLT, ax, _INF), _and(_cmp(_F.OGE, bx, _TINY), _cmp(_F.OLT, bx, _INF)))
    d = _sel(valid, bx, 1.0)
    r = _sel(valid, ax, 0.0)
    limit = _mul(d, 2.0 ** 105)  # inf when no long reduction can be needed
    eb = _ilogb(d)
    loop = scf.WhileOp([_f64()], [r])
    before = loop.before.blocks.append(_f64())
    with ir.InsertionPoint(before):
        cur = before.arguments[0]
        scf.ConditionOp(_cmp(_F.OGE, cur, limit), [cur])
    after = loop.after.blocks.append(_f64())
    with ir.InsertionPoint(after):
        cur = after.arguments[0]
        scf.YieldOp([_fmod_step(cur, _scale_to(d, cur, eb))])
    scale = _sel(_cmp(_F.OLT, d, 2.0 ** -969), 2.0 ** 108, 1.0)
    d, r = _mul(d, scale), _mul(loop.results[0], scale)
    eb = _ilogb(d)
    r = _fmod_step(r, _scale_to(d, r, eb))
    res = _copysign(_div(_fmod_step(r, d), scale), a)
    finite_a_inf_b = _and(_cmp(_F.OLT, ax, _INF), _cmp(_F.OEQ, bx, _INF))
    return _sel(valid, res, _sel(finite_a_inf_b, a, _NAN))


# --- erf ---------------------------------------------------------------------------------

def erf_f64(x):
    """x + x P(x^2) below 1; 1 - exp(-x^2) G(|x|) up to 6 (G fitted on two intervals, x^2
    split exactly); 1 beyond."""
    ax = _abs(x)
    z = _mul(ax, ax)
    small = _fma(ax, _poly(z, _ERF_SMALL), ax)
    low = _cmp(_F.OLT, ax, 2.5)
    s = _sub(ax, _sel(low, 1.75, 4.25))
    acc = _sel(low, _ERFC_LOW[0], _ERFC_HIGH[0])
    for lo_c, hi_c in zip(_ERFC_LOW[1:], _ERFC_HIGH[1:]):
        acc = _fma(acc, s, _sel(low, lo_c, hi_c))
    ez = math.ExpOp(_neg(z)).result
    ez = _fma(_neg(ez), _fma(ax, ax, _neg(z)), ez)  # exp(-(z + ze)) = exp(-z)(1 - ze)
    mid = _fma(_neg(ez), acc, 1.0)
    res = _sel(_cmp(_F.OLT, ax, 1.0), small, _sel(_cmp(_F.OLT, ax, 6.0), mid, 1.0))
    return _sel(_isnan(x), x, _copysign(res, x))


# --- bfloat16 rounding ---------------------------------------------------------------------

def f32_to_bf16(x):
    """Round a float32 to bfloat16 (nearest, ties to even) on its bits; NaN stays a quiet
    NaN with its sign. Infinities, zeros and subnormals round like any other value."""
    i32 = ir.IntegerType.get_signless(32)
    bits = arith.BitcastOp(i32, x).result
    odd = _iand(_shr(bits, 16, 32), 1, 32)
    rounded = _shr(_iadd(_iadd(bits, 0x7FFF, 32), odd, 32), 16, 32)
    quiet = _ior(_shr(bits, 16, 32), 0x40, 32)
    top = arith.SelectOp(_isnan(x), quiet, rounded).result
    half = arith.TruncIOp(ir.IntegerType.get_signless(16), top).result
    return arith.BitcastOp(ir.BF16Type.get(), half).result
