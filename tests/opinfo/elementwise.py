"""Elementwise cases: arithmetic, comparisons, logic, unary math, select, clamp, cast."""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tests.opinfo import ALL_DTYPES, FLOATS, INTS, NUMERIC, ErrorCase, OpInfo, Sample, make_arg

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f(a):
    """numpy input as float64 for expectations."""
    return np.asarray(a, dtype=np.float64)


def _binary_samples(low=None, high=None, nonzero_rhs=False, rhs_low=None, rhs_high=None):
    def samples(rng, dtype):
        shapes = [((3, 4), (3, 4), "same"), ((2, 1, 4), (3, 1), "broadcast"), ((5,), (), "0-d rhs"),
                  ((0, 3), (1, 3), "empty"), ((), (), "scalars")]
        out = []
        for sa, sb, desc in shapes:
            a = make_arg(rng, sa, dtype, low=low, high=high)
            b = make_arg(rng, sb, dtype, low=rhs_low if rhs_low is not None else low,
                         high=rhs_high if rhs_high is not None else high)
            if nonzero_rhs:
                b = np.where(b == 0, np.ones((), b.dtype), b)
            out.append(Sample((a, b), desc=desc))
        return out

    return samples


def _unary_samples(low=None, high=None, extra=True):
    def samples(rng, dtype):
        out = [Sample((make_arg(rng, (4, 5), dtype, low=low, high=high),), desc="4x5"),
               Sample((make_arg(rng, (), dtype, low=low, high=high),), desc="0-d"),
               Sample((make_arg(rng, (0, 2), dtype),), desc="empty")]
        if extra and dtype.is_floating_point:
            out.append(Sample((np.array([0.0, -0.0, 1.5, -2.5, 0.5, 2.5], dtype=dtype.np_dtype),),
                              desc="edge values"))
        return out

    return samples


def _hyperbolic_extremes(rng, dtype):
    """Inputs where the inverse hyperbolic functions are easy to get wrong: tiny (lost low
    digits), near 1 (atanh's pole, acosh's zero), large (squares overflow), out of the domain
    (NaN), infinite and signed zeros."""
    tiny = [1e-30, -1e-30, 1e-8, -1e-8, 1e-3, -1e-3] if dtype is tp.float64 else [1e-20, -1e-20, 1e-6, -1e-3]
    near_one = [1.0, -1.0, 1 - 1e-7, -(1 - 1e-7), 1 + 1e-7] if dtype is tp.float64 else [1.0, -1.0, 0.999, 1.001]
    large = [3e8, -3e8, 1e300, -1e300, 5000.0] if dtype is tp.float64 else [3e8, -3e8, 1e30, 5000.0]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, -2.0]
    values = np.array(tiny + near_one + large + special, dtype=dtype.np_dtype)
    return [Sample((values,), desc="extremes")]


def _copysign_signs(rng, dtype):
    """Signed zeros and infinities on either side of ``copysign``, NaN as the magnitude (a NaN's
    own sign bit is not something PyTorch and numpy agree on across dtype conversions)."""
    a = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -0.0], dtype=dtype.np_dtype)
    b = np.array([-0.0, 0.0, -1.0, 1.0, -2.0, 5.0, -1.0, -3.0, -np.inf], dtype=dtype.np_dtype)
    return [Sample((a, b), desc="signs")]


def _bin(name, fn, ref, dtypes=NUMERIC, **kw):
    sample_kw = {k: kw.pop(k) for k in list(kw) if k in ("low", "high", "nonzero_rhs", "rhs_low", "rhs_high")}
    return OpInfo(name, fn, ref, _binary_samples(**sample_kw), dtypes=dtypes, **kw)


def _un(name, fn, ref, dtypes=FLOATS, low=None, high=None, **kw):
    return OpInfo(name, fn, ref, _unary_samples(low, high), dtypes=dtypes, **kw)


def _mixed_samples(rng, dtype):
    """Promotion cases: int tensors with float scalars, 0-d tensors of wider dtypes."""
    return [
        Sample((make_arg(rng, (3,), dtype), 2.5), desc="tensor + python float"),
        Sample((make_arg(rng, (3,), dtype), 3), desc="tensor + python int"),
        Sample((make_arg(rng, (3,), dtype), True), desc="tensor + python bool"),
        Sample((make_arg(rng, (2, 3), dtype), np.array(1.5, np.float64)), desc="tensor + 0-d f64"),
        Sample((make_arg(rng, (2, 3), dtype), make_arg(rng, (3,), tp.int64)), desc="tensor + i64"),
        Sample((make_arg(rng, (), dtype), make_arg(rng, (), tp.float64)), desc="0-d + 0-d f64"),
    ]


def _is_bool(v):
    return isinstance(v, bool) or (isinstance(v, np.ndarray) and v.dtype == np.bool_)


def _add_ref(a, b):
    return np.logical_or(a, b) if _is_bool(a) and _is_bool(b) else _f(a) + _f(b)


def _mul_ref(a, b):
    return np.logical_and(a, b) if _is_bool(a) and _is_bool(b) else _f(a) * _f(b)


def _bool_arith_samples(rng, dtype):
    return [Sample((make_arg(rng, (4,), tp.bool), make_arg(rng, (4,), tp.bool)), desc="bool, bool")]


OPS = [
    _bin("add", lambda lib, a, b: lib.add(a, b), lambda a, b: _f(a) + _f(b)),
    _bin("add_alpha", lambda lib, a, b: lib.add(a, b, alpha=2), lambda a, b: _f(a) + 2 * _f(b)),
    _bin("sub", lambda lib, a, b: a - b, lambda a, b: _f(a) - _f(b)),
    _bin("mul", lambda lib, a, b: a * b, lambda a, b: _f(a) * _f(b)),
    _bin("div", lambda lib, a, b: a / b, lambda a, b: _f(a) / _f(b), nonzero_rhs=True),
    _bin("floor_divide", lambda lib, a, b: a // b, lambda a, b: np.floor(_f(a) / _f(b)),
         nonzero_rhs=True),
    _bin("div_trunc", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
         lambda a, b: np.trunc(_f(a) / _f(b)), nonzero_rhs=True),
    _bin("remainder", lambda lib, a, b: a % b, lambda a, b: np.mod(_f(a), _f(b)), nonzero_rhs=True),
    _bin("fmod", lambda lib, a, b: lib.fmod(a, b), lambda a, b: np.fmod(_f(a), _f(b)), nonzero_rhs=True),
    _bin("pow", lambda lib, a, b: a ** b, lambda a, b: np.power(_f(a), _f(b)), low=0.5, high=2.0,
         dtypes=FLOATS),
    _bin("pow_int", lambda lib, a, b: lib.pow(a, b), lambda a, b: np.power(a.astype(np.int64), b.astype(np.int64)),
         low=0, high=4, dtypes=INTS),
    _bin("maximum", lambda lib, a, b: lib.maximum(a, b), lambda a, b: np.maximum(_f(a), _f(b))),
    _bin("minimum", lambda lib, a, b: lib.minimum(a, b), lambda a, b: np.minimum(_f(a), _f(b))),
    _bin("atan2", lambda lib, a, b: lib.atan2(a, b), lambda a, b: np.arctan2(_f(a), _f(b)), dtypes=FLOATS),
    _bin("copysign", lambda lib, a, b: lib.copysign(a, b), lambda a, b: np.copysign(_f(a), _f(b)),
         dtypes=ALL_DTYPES, low=-3, high=3),
    OpInfo("copysign_signs", lambda lib, a, b: a.copysign(b), lambda a, b: np.copysign(_f(a), _f(b)),
           _copysign_signs, dtypes=FLOATS),
    _bin("eq", lambda lib, a, b: a == b, lambda a, b: _f(a) == _f(b), dtypes=ALL_DTYPES, low=-2, high=2),
    _bin("ne", lambda lib, a, b: a != b, lambda a, b: _f(a) != _f(b), dtypes=ALL_DTYPES, low=-2, high=2),
    _bin("lt", lambda lib, a, b: a < b, lambda a, b: _f(a) < _f(b)),
    _bin("le", lambda lib, a, b: a <= b, lambda a, b: _f(a) <= _f(b), low=-2, high=2),
    _bin("gt", lambda lib, a, b: a > b, lambda a, b: _f(a) > _f(b)),
    _bin("ge", lambda lib, a, b: a >= b, lambda a, b: _f(a) >= _f(b), low=-2, high=2),
    _bin("logical_and", lambda lib, a, b: lib.logical_and(a, b),
         lambda a, b: np.logical_and(a, b), dtypes=ALL_DTYPES, low=-1, high=2),
    _bin("logical_or", lambda lib, a, b: lib.logical_or(a, b),
         lambda a, b: np.logical_or(a, b), dtypes=ALL_DTYPES, low=-1, high=2),
    _bin("logical_xor", lambda lib, a, b: lib.logical_xor(a, b),
         lambda a, b: np.logical_xor(a, b), dtypes=ALL_DTYPES, low=-1, high=2),
    _bin("bitwise_and", lambda lib, a, b: a & b, lambda a, b: np.bitwise_and(a, b),
         dtypes=INTS + (tp.bool,)),
    _bin("bitwise_or", lambda lib, a, b: a | b, lambda a, b: np.bitwise_or(a, b), dtypes=INTS + (tp.bool,)),
    _bin("bitwise_xor", lambda lib, a, b: a ^ b, lambda a, b: np.bitwise_xor(a, b),
         dtypes=INTS + (tp.bool,)),
    OpInfo("add_promotion", lambda lib, a, b: a + b, _add_ref, _mixed_samples,
           dtypes=ALL_DTYPES),
    OpInfo("mul_promotion", lambda lib, a, b: a * b, _mul_ref, _mixed_samples,
           dtypes=ALL_DTYPES),
    OpInfo("lt_promotion", lambda lib, a, b: a < b, lambda a, b: _f(a) < _f(b), _mixed_samples,
           dtypes=ALL_DTYPES),
    OpInfo("div_promotion", lambda lib, a, b: a / b, lambda a, b: _f(a) / _f(b), _mixed_samples,
           dtypes=NUMERIC),
    OpInfo("rsub_scalar", lambda lib, a: 2.5 - a, lambda a: 2.5 - _f(a), _unary_samples(), dtypes=NUMERIC),
    OpInfo("rdiv_scalar", lambda lib, a: 3 / a, lambda a: 3 / _f(a), _unary_samples(low=1, high=4),
           dtypes=NUMERIC),
    OpInfo("bool_add_mul", lambda lib, a, b: (a + b, a * b), lambda a, b: (a | b, a & b),
           _bool_arith_samples, dtypes=(tp.bool,)),
    _un("neg", lambda lib, a: -a, lambda a: -_f(a), dtypes=NUMERIC),
    _un("abs", lambda lib, a: lib.abs(a), lambda a: np.abs(_f(a)), dtypes=NUMERIC),
    _un("sign", lambda lib, a: lib.sign(a), lambda a: np.sign(_f(a)), dtypes=ALL_DTYPES),
    _un("bitwise_not", lambda lib, a: ~a, lambda a: np.invert(a), dtypes=INTS + (tp.bool,)),
    _un("logical_not", lambda lib, a: lib.logical_not(a), lambda a: np.logical_not(a), dtypes=ALL_DTYPES),
    _un("floor", lambda lib, a: lib.floor(a), lambda a: np.floor(_f(a)), dtypes=NUMERIC),
    _un("ceil", lambda lib, a: lib.ceil(a), lambda a: np.ceil(_f(a)), dtypes=NUMERIC),
    _un("trunc", lambda lib, a: lib.trunc(a), lambda a: np.trunc(_f(a)), dtypes=NUMERIC),
    _un("round", lambda lib, a: lib.round(a), lambda a: np.round(_f(a)), dtypes=NUMERIC),
    _un("round_decimals", lambda lib, a: lib.round(a, decimals=2), lambda a: np.round(_f(a), 2),
        dtypes=(tp.float32, tp.float64)),
    _un("exp", lambda lib, a: lib.exp(a), lambda a: np.exp(_f(a)), dtypes=ALL_DTYPES),
    _un("exp2", lambda lib, a: lib.exp2(a), lambda a: np.exp2(_f(a))),
    _un("expm1", lambda lib, a: lib.expm1(a), lambda a: np.expm1(_f(a))),
    _un("log", lambda lib, a: lib.log(a), lambda a: np.log(_f(a)), low=0.1, high=5, dtypes=FLOATS + INTS),
    _un("log2", lambda lib, a: lib.log2(a), lambda a: np.log2(_f(a)), low=0.1, high=5),
    _un("log10", lambda lib, a: lib.log10(a), lambda a: np.log10(_f(a)), low=0.1, high=5),
    _un("log1p", lambda lib, a: lib.log1p(a), lambda a: np.log1p(_f(a)), low=-0.5, high=5),
    _un("sqrt", lambda lib, a: lib.sqrt(a), lambda a: np.sqrt(_f(a)), low=0, high=9, dtypes=FLOATS + INTS),
    _un("rsqrt", lambda lib, a: lib.rsqrt(a), lambda a: 1 / np.sqrt(_f(a)), low=0.1, high=9),
    _un("reciprocal", lambda lib, a: lib.reciprocal(a), lambda a: 1 / _f(a), low=0.5, high=4),
    _un("square", lambda lib, a: lib.square(a), lambda a: _f(a) ** 2, dtypes=NUMERIC),
    _un("sin", lambda lib, a: lib.sin(a), lambda a: np.sin(_f(a))),
    _un("cos", lambda lib, a: lib.cos(a), lambda a: np.cos(_f(a))),
    _un("tan", lambda lib, a: lib.tan(a), lambda a: np.tan(_f(a)), low=-1.2, high=1.2),
    _un("asin", lambda lib, a: lib.asin(a), lambda a: np.arcsin(_f(a)), low=-0.99, high=0.99),
    _un("acos", lambda lib, a: lib.acos(a), lambda a: np.arccos(_f(a)), low=-0.99, high=0.99),
    _un("atan", lambda lib, a: lib.atan(a), lambda a: np.arctan(_f(a))),
    _un("sinh", lambda lib, a: lib.sinh(a), lambda a: np.sinh(_f(a))),
    _un("cosh", lambda lib, a: lib.cosh(a), lambda a: np.cosh(_f(a))),
    _un("tanh", lambda lib, a: lib.tanh(a), lambda a: np.tanh(_f(a))),
    _un("asinh", lambda lib, a: lib.asinh(a), lambda a: np.arcsinh(_f(a)), low=-50, high=50),
    OpInfo("asinh_extremes", lambda lib, a: lib.arcsinh(a), lambda a: np.arcsinh(_f(a)), _hyperbolic_extremes,
           dtypes=(tp.float32, tp.float64)),
    _un("acosh", lambda lib, a: lib.acosh(a), lambda a: np.arccosh(_f(a)), low=1, high=60, dtypes=FLOATS + INTS),
    OpInfo("acosh_extremes", lambda lib, a: a.arccosh(), lambda a: np.arccosh(_f(a)), _hyperbolic_extremes,
           dtypes=(tp.float32, tp.float64)),
    _un("atanh", lambda lib, a: lib.atanh(a), lambda a: np.arctanh(_f(a)), low=-0.99, high=0.99),
    OpInfo("atanh_extremes", lambda lib, a: a.arctanh(), lambda a: np.arctanh(_f(a)), _hyperbolic_extremes,
           dtypes=(tp.float32, tp.float64)),
    _un("sigmoid", lambda lib, a: lib.sigmoid(a), lambda a: 1 / (1 + np.exp(-_f(a))), low=-30, high=30),
    _un("erf", lambda lib, a: lib.erf(a), lambda a: _erf(_f(a))),
    _un("relu", lambda lib, a: lib.relu(a), lambda a: np.maximum(_f(a), 0), dtypes=NUMERIC),
    _un("isnan", lambda lib, a: lib.isnan(lib.log(a)), lambda a: np.isnan(np.log(_f(a)))),
    _un("isinf", lambda lib, a: lib.isinf(1 / a), lambda a: np.isinf(1 / _f(a)), dtypes=FLOATS),
    _un("isfinite", lambda lib, a: lib.isfinite(1 / a), lambda a: np.isfinite(1 / _f(a)), dtypes=FLOATS),
    _un("clamp", lambda lib, a: lib.clamp(a, -1, 2), lambda a: np.clip(_f(a), -1, 2), dtypes=NUMERIC),
    _un("clamp_min_float", lambda lib, a: lib.clamp(a, min=0.5), lambda a: np.maximum(_f(a), 0.5),
        dtypes=NUMERIC),
    _un("clamp_max", lambda lib, a: a.clamp(max=1), lambda a: np.minimum(_f(a), 1), dtypes=NUMERIC),
    OpInfo("clamp_tensor_bounds", lambda lib, a, lo, hi: lib.clamp(a, lo, hi),
           lambda a, lo, hi: np.minimum(np.maximum(_f(a), _f(lo)), _f(hi)),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), d), make_arg(rng, (4,), d, low=-3, high=-1),
                                   make_arg(rng, (3, 1), d, low=1, high=3)))], dtypes=NUMERIC),
    OpInfo("where", lambda lib, c, a, b: lib.where(c, a, b), lambda c, a, b: np.where(c, _f(a), _f(b)),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), tp.bool), make_arg(rng, (3, 1), d),
                                   make_arg(rng, (4,), d)), desc="broadcast"),
                           Sample((make_arg(rng, (2,), tp.bool), make_arg(rng, (2,), d), 0.5),
                                  desc="scalar other")],
           dtypes=ALL_DTYPES),
    OpInfo("where_method", lambda lib, c, a, b: a.where(c, b), lambda c, a, b: np.where(c, _f(a), _f(b)),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), tp.bool), make_arg(rng, (3, 1), d),
                                   make_arg(rng, (4,), d)), desc="broadcast")],
           dtypes=ALL_DTYPES),
    OpInfo("cast", lambda lib, a, dtype: a.to(getattr(lib, dtype)),
           lambda a, dtype: np.trunc(_f(a)) if dtype in ("int32", "int64")
           else (_f(a) != 0 if dtype == "bool" else _f(a)),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), d, low=-100, high=100),), {"dtype": t}, desc=t)
                           for t in ("float32", "float64", "int32", "int64", "bool")],
           dtypes=ALL_DTYPES),
    OpInfo("clone", lambda lib, a: a.clone(), lambda a: a, _unary_samples(), dtypes=ALL_DTYPES),
    OpInfo("gelu_activation", lambda lib, a: lib.nn.functional.gelu(a),
           lambda a: 0.5 * _f(a) * (1 + _erf(_f(a) / math.sqrt(2))), _unary_samples()),
    OpInfo("gelu_tanh", lambda lib, a: lib.nn.functional.gelu(a, approximate="tanh"),
           lambda a: 0.5 * _f(a) * (1 + np.tanh(math.sqrt(2 / math.pi) * (_f(a) + 0.044715 * _f(a) ** 3))),
           _unary_samples()),
    OpInfo("silu", lambda lib, a: lib.nn.functional.silu(a), lambda a: _f(a) / (1 + np.exp(-_f(a))),
           _unary_samples()),
    OpInfo("leaky_relu", lambda lib, a: lib.nn.functional.leaky_relu(a, 0.2),
           lambda a: np.where(_f(a) > 0, _f(a), 0.2 * _f(a)), _unary_samples()),
    # uint8 over its whole range: values of 128 and above read as negative by a signed
    # instruction (a divsi, a maxsi, a slt) give wrong results only there
    _bin("floor_divide_uint8", lambda lib, a, b: a // b, lambda a, b: np.floor(_f(a) / _f(b)),
         dtypes=(tp.uint8,), low=0, high=256, rhs_low=1),
    _bin("div_trunc_uint8", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
         lambda a, b: np.trunc(_f(a) / _f(b)), dtypes=(tp.uint8,), low=0, high=256, rhs_low=1),
    _bin("remainder_uint8", lambda lib, a, b: a % b, lambda a, b: np.mod(_f(a), _f(b)),
         dtypes=(tp.uint8,), low=0, high=256, rhs_low=1),
    _bin("fmod_uint8", lambda lib, a, b: lib.fmod(a, b), lambda a, b: np.fmod(_f(a), _f(b)),
         dtypes=(tp.uint8,), low=0, high=256, rhs_low=1),
    _bin("maximum_uint8", lambda lib, a, b: lib.maximum(a, b), lambda a, b: np.maximum(_f(a), _f(b)),
         dtypes=(tp.uint8,), low=0, high=256),
    _bin("lt_uint8", lambda lib, a, b: a < b, lambda a, b: _f(a) < _f(b), dtypes=(tp.uint8,), low=0, high=256),
    _un("sign_uint8", lambda lib, a: lib.sign(a), lambda a: np.sign(_f(a)), dtypes=(tp.uint8,), low=0, high=256),
    _un("relu_uint8", lambda lib, a: lib.relu(a), lambda a: _f(a), dtypes=(tp.uint8,), low=0, high=256),
    _un("clamp_uint8", lambda lib, a: lib.clamp(a, 50, 200), lambda a: np.clip(_f(a), 50, 200),
        dtypes=(tp.uint8,), low=0, high=256),
]

ERRORS = [
    ErrorCase("add_broadcast_mismatch", lambda lib: lib.ones(2, 3) + lib.ones(2, 4), tp.ShapeError,
              r"tp\.add: The size of tensor a \(3\) must match the size of tensor b \(4\) at "
              r"non-singleton dimension 1.*\[2, 3\] and \[2, 4\]"),
    ErrorCase("add_broadcast_is_runtime_error", lambda lib: lib.ones(3) * lib.ones(4), RuntimeError,
              r"tp\.mul: .*size of tensor"),
    ErrorCase("sub_bool", lambda lib: lib.tensor([True]) - lib.tensor([False]), TypeError,
              r"tp\.sub: subtraction of bool tensors is not supported"),
    ErrorCase("neg_bool", lambda lib: -lib.tensor([True]), TypeError, r"tp\.neg: .*bool"),
    ErrorCase("bitwise_float", lambda lib: lib.ones(2) & lib.ones(2), TypeError,
              r"tp\.bitwise_and: not implemented for dtype float32"),
    ErrorCase("where_non_bool", lambda lib: lib.where(lib.ones(2), lib.ones(2), lib.zeros(2)), TypeError,
              r"where expected condition to be a boolean tensor"),
    ErrorCase("int_floor_div_zero", lambda lib: lib.tensor([1]) // lib.tensor([0]), RuntimeError,
              r"tp\.floor_div: integer division by zero"),
    ErrorCase("int_negative_power", lambda lib: lib.tensor([2]) ** lib.tensor([-1]), RuntimeError,
              r"Integers to negative integer powers are not allowed"),
    ErrorCase("scalar_overflow", lambda lib: lib.tensor([1], dtype=lib.int8) + 1000, RuntimeError,
              r"value 1000 cannot be converted to type int8 without overflow"),
    ErrorCase("unsupported_operand", lambda lib: lib.ones(2) + "a", TypeError,
              r"tp\.add\(\): unsupported operand type str"),
    ErrorCase("gelu_int", lambda lib: lib.nn.functional.gelu(lib.tensor([1, 2])), TypeError,
              r"tp\.gelu: not implemented for dtype int64"),
    ErrorCase("gelu_bad_approximate", lambda lib: lib.nn.functional.gelu(lib.ones(2), approximate="fast"),
              ValueError, r"tp\.gelu: attribute 'approximate' must be one of 'none', 'tanh'"),
    ErrorCase("clamp_no_bounds", lambda lib: lib.clamp(lib.ones(2)), ValueError,
              r"at least one of 'min' or 'max'"),
    ErrorCase("unknown_dtype", lambda lib: lib.ones(2).to("float8"), TypeError, r"unknown dtype 'float8'"),
]


# --- addcmul, addcdiv, erfinv, shifts (compositions of the ops above) ------------------------------

def _addc_samples(rng, dtype):
    return [Sample((make_arg(rng, (3, 4), dtype), make_arg(rng, (3, 4), dtype), make_arg(rng, (4,), dtype, low=0.5)),
                   {"value": 0.5}, "broadcast, value"),
            Sample((make_arg(rng, (), dtype), make_arg(rng, (2,), dtype), make_arg(rng, (2,), dtype, low=0.5)), {},
                   "0-d input")]


def _erfinv_ref(y):
    y = _f(y)
    x = np.zeros_like(y)
    for _ in range(60):  # Newton on erf(x) = y from 0 (monotone for |y| < 1)
        x = x - (_erf(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


def _shift_ref(left):
    def ref(a, s):
        bits = np.asarray(a).dtype.itemsize * 8
        a, s = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(s, np.int64))
        out = []
        for x, n in zip(a.reshape(-1).tolist(), s.reshape(-1).tolist()):
            if 0 <= n < bits:
                v = (x << n) if left else (x >> n)
            else:
                v = 0 if left or x >= 0 else -1
            v &= (1 << bits) - 1  # wrap to the dtype
            out.append(v - (1 << bits) if v >= 1 << (bits - 1) else v)
        return np.asarray(out, np.int64).reshape(a.shape)
    return ref


def _shift_samples(rng, dtype):
    bits = dtype.itemsize * 8
    a = make_arg(rng, (3, 4), dtype)
    return [Sample((a, rng.integers(0, bits, (3, 4)).astype(dtype.np_dtype)), {}, "in range"),
            Sample((a, np.array([0, bits - 1, bits, -1], dtype.np_dtype)), {}, "edges: width, negative"),
            Sample((make_arg(rng, (), dtype), 3), {}, "0-d, int amount")]


OPS += [
    OpInfo("addcmul", lambda lib, a, b, c, **kw: lib.addcmul(a, b, c, **kw),
           lambda a, b, c, value=1: _f(a) + value * _f(b) * _f(c), _addc_samples),
    OpInfo("addcdiv", lambda lib, a, b, c, **kw: a.addcdiv(b, c, **kw),
           lambda a, b, c, value=1: _f(a) + value * _f(b) / _f(c), _addc_samples),
    OpInfo("erfinv", lambda lib, a: lib.erfinv(a), _erfinv_ref,
           lambda rng, dtype: [Sample((make_arg(rng, (3, 5), dtype, low=-0.95, high=0.95),)),
                               Sample((np.array([0.0, -0.5, 0.999], dtype.np_dtype),), {}, "near 1")],
           dtypes=(tp.float32, tp.float64), tol={tp.float64: (1e-12, 1e-12)}),
    OpInfo("clamp_min", lambda lib, a: lib.clamp_min(a, 0.5).clamp_max(2.0),
           lambda a: np.clip(_f(a), 0.5, 2.0), lambda rng, dtype: [Sample((make_arg(rng, (3, 4), dtype),))]),
    OpInfo("bitwise_left_shift", lambda lib, a, s: lib.bitwise_left_shift(a, s), _shift_ref(True), _shift_samples,
           dtypes=INTS),
    OpInfo("bitwise_right_shift", lambda lib, a, s: a >> s, _shift_ref(False), _shift_samples, dtypes=INTS),
]
