"""The libm-free scalar math of passes/lowering/_mathlib.py, compiled by IREE for llvm-cpu
(host CPU, f64 kept) and run over ~10^5 inputs per function (random ranges, huge and tiny
arguments, multiples of pi/2, special values): every float64 function within 1 ulp of the
correctly rounded result, fmod exact, float32 log10 and pow within 1 float32 ulp, and
float32→bfloat16 rounding bit-exact against ml_dtypes.

numpy, the reference, is itself a few ulp off at times (cos and tan near multiples of pi/2
for huge arguments, sinh, log10); where a result and numpy disagree beyond the bound, mpmath
at high precision decides. IREE's CPU runtime flushes subnormals to zero, so expectations
come from flushed inputs and results are compared flushed."""

from __future__ import annotations

import math as pymath

import ml_dtypes
import numpy as np
import pytest

from tensorplay.compiler.backends.iree import compile_mlir, get_iree_backend
from tensorplay.dialects.ir import arith, context, func, ir, linalg, tensor
from tensorplay.passes.lowering import _mathlib as ml
from tensorplay.runtime import Program

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

pytestmark = pytest.mark.iree

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                    1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0, 0.5, 2.0])

# Largest error allowed, in units in the last place of the correctly rounded result: every
# float64 function is faithfully rounded on these inputs (measured: 1 ulp at most).
MAX_ULP = dict.fromkeys(["sin", "cos", "tan", "atan", "atan2", "asin", "acos", "tanh", "sinh",
                         "cosh", "expm1", "exp2", "log1p", "log2", "log10", "pow", "erf"], 1.0)


def _rng():
    return np.random.default_rng(1234)


def _magnitudes(rng, n, lo=-300.0, hi=300.0):
    """Log-uniform magnitudes with random signs."""
    return 10.0 ** rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)


def _unary_inputs(name):
    rng = _rng()
    n = 25_000
    parts = [SPECIAL, _magnitudes(rng, n)]
    if name in ("sin", "cos", "tan"):
        k = rng.integers(-10**6, 10**6, n).astype(np.float64)
        parts += [rng.uniform(-10, 10, n), rng.uniform(-2e6, 2e6, n),
                  k * (np.pi / 2) + rng.uniform(-1e-6, 1e-6, n), k * (np.pi / 2),
                  np.array([6381956970095103 * 2.0 ** 797, 1e6, 1e22, np.pi, np.pi / 2, np.pi / 4])]
    elif name in ("asin", "acos"):
        parts += [rng.uniform(-1, 1, n), 1 - 10.0 ** rng.uniform(-16, 0, n), -1 + 10.0 ** rng.uniform(-16, 0, n),
                  _magnitudes(rng, n // 5, -300, -5)]
    elif name in ("tanh", "erf", "atan"):
        parts += [rng.uniform(-8, 8, n), rng.uniform(-1.5, 1.5, n), _magnitudes(rng, n // 5, -20, 2)]
    elif name == "exp2":
        parts += [rng.uniform(-1080, 1030, n), rng.uniform(-2, 2, n), np.arange(-1074.0, 1025.0)]
    elif name in ("sinh", "cosh", "expm1"):
        parts += [rng.uniform(-750, 750, n), rng.uniform(-2, 2, n), _magnitudes(rng, n // 5, -20, 0),
                  np.array([709.78, 709.79, 710.47, 710.48, -745.2, -37.5])]
    elif name == "log1p":
        parts += [rng.uniform(-1, 2, n), -1 + 10.0 ** rng.uniform(-16, 0, n), _magnitudes(rng, n // 5, -20, 0),
                  np.array([-1.0, -1.5, -np.inf])]
    elif name in ("log2", "log10"):
        parts += [np.abs(_magnitudes(rng, n, -323.5, 308)), rng.uniform(0.5, 2, n),
                  2.0 ** np.arange(-1074, 1024), 10.0 ** np.arange(-300, 301), np.array([-1.0, -np.inf])]
    return np.concatenate(parts)


def _atan2_inputs():
    rng = _rng()
    n = 60_000
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, 1e300, -1e-300])
    gy, gx = np.meshgrid(grid, grid)
    y = np.concatenate([gy.ravel(), _magnitudes(rng, n), rng.uniform(-1, 1, n)])
    x = np.concatenate([gx.ravel(), _magnitudes(rng, n), rng.uniform(-1, 1, n)])
    return y, x


def _pow_inputs():
    rng = _rng()
    n = 30_000
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5])
    gx, gy = np.meshgrid(grid, grid)
    ints = rng.integers(-60, 60, n).astype(np.float64)
    x = np.concatenate([gx.ravel(), _magnitudes(rng, n, -3, 3), 10.0 ** rng.uniform(-300, 300, n),
                        rng.uniform(0.5, 2, n)])
    y = np.concatenate([gy.ravel(), ints, rng.uniform(-1, 1, n), rng.uniform(-600, 600, n)])
    return x, y


def _fmod_inputs():
    rng = _rng()
    n = 40_000
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -3.5, 5e-324, 1.7976931348623157e308, 0.1])
    ga, gb = np.meshgrid(grid, grid)
    a = np.concatenate([ga.ravel(), _magnitudes(rng, n, -320, 308), rng.uniform(-100, 100, n),
                        _magnitudes(rng, n, -5, 25)])
    b = np.concatenate([gb.ravel(), _magnitudes(rng, n, -320, 308), rng.uniform(-10, 10, n),
                        _magnitudes(rng, n, -5, 5)])
    return a, b


def _bf16_inputs():
    rng = _rng()
    bits = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 2**16, 20_000, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    near = ties[:5000] + rng.choice(np.array([-1, 1], dtype=np.int64), 5000).astype(np.uint32)
    specials = np.array([0x0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                         0xFF800001, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF,
                         0x00008000, 0x00018000, 0x7F7F8000, 0x7F7F7FFF], dtype=np.uint32)
    return np.concatenate([bits, ties, near, specials]).view(np.float32)


UNARY = {
    "sin": (ml.sin_f64, np.sin), "cos": (ml.cos_f64, np.cos), "tan": (ml.tan_f64, np.tan),
    "atan": (ml.atan_f64, np.arctan), "asin": (ml.asin_f64, np.arcsin), "acos": (ml.acos_f64, np.arccos),
    "tanh": (ml.tanh_f64, np.tanh), "sinh": (ml.sinh_f64, np.sinh), "expm1": (ml.expm1_f64, np.expm1),
    "cosh": (ml.cosh_f64, np.cosh), "exp2": (ml.exp2_f64, np.exp2),
    "log1p": (ml.log1p_f64, np.log1p), "log2": (ml.log2_f64, np.log2), "log10": (ml.log10_f64, np.log10),
    "erf": (ml.erf_f64, np.vectorize(pymath.erf, otypes=[np.float64])),
}


def _elementwise_func(name, fn, arg_types, result_type):
    dyn = ir.ShapedType.get_dynamic_size()
    tensors = [ir.RankedTensorType.get([dyn], t) for t in arg_types]
    out_t = ir.RankedTensorType.get([dyn], result_type)

    @func.FuncOp.from_py_func(*tensors, name=name)
    def _(*args):
        size = tensor.DimOp(args[0], _index(0)).result
        init = tensor.EmptyOp([size], result_type).result
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))
        op = linalg.GenericOp([out_t], list(args), [init], ir.ArrayAttr.get([identity] * (len(args) + 1)),
                              ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")]))
        block = op.regions[0].blocks.append(*arg_types, result_type)
        with ir.InsertionPoint(block):
            linalg.YieldOp([fn(*list(block.arguments)[:-1])])
        return op.result


def _index(v):
    return arith.ConstantOp(ir.IndexType.get(), ir.IntegerAttr.get(ir.IndexType.get(), v)).result


@pytest.fixture(scope="module")
def compiled():
    """Every function of the module under test, compiled into one IREE module."""
    with context(), ir.Location.unknown():
        module = ir.Module.create()
        f64, f32 = ir.F64Type.get(), ir.F32Type.get()
        with ir.InsertionPoint(module.body):
            for name, (fn, _) in UNARY.items():
                _elementwise_func(name, fn, [f64], f64)
            _elementwise_func("atan2", ml.atan2_f64, [f64, f64], f64)
            _elementwise_func("fmod", ml.fmod_f64, [f64, f64], f64)
            _elementwise_func("pow", ml.pow_f64, [f64, f64], f64)
            _elementwise_func("pow_f32", ml.pow_f32, [f32, f32], f32)
            _elementwise_func("log10_f32", ml.log10_f32, [f32], f32)
            _elementwise_func("f32_to_bf16", ml.f32_to_bf16, [f32], ir.BF16Type.get())
        assert module.operation.verify()
        text = module.operation.get_asm()
    vmfb = compile_mlir(text, get_iree_backend("iree-cpu").flags(), backend="iree-cpu", name="mathlib")
    program = Program(vmfb, "local-sync", name="mathlib")

    def call(name, *args):
        (result,) = program.call(name, *args)
        return result

    yield call
    program.close()


def ulp_error(got, expected):
    """|got - expected| in ulps of expected (in expected's dtype); 0 where both are equal
    (zeros of the same sign) or both NaN, inf where only one is NaN."""
    expected = np.asarray(expected)
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.spacing(np.abs(expected)).astype(np.float64)
        got, expected = np.asarray(got).astype(np.float64), expected.astype(np.float64)
        err = np.abs(got - expected) / spacing
    same = (got == expected) & (np.signbit(got) == np.signbit(expected))
    err[same | (np.isnan(got) & np.isnan(expected))] = 0.0
    err[np.isnan(err)] = np.inf
    return err


def flush(a):
    """Subnormals to zeros of the same sign, as IREE's CPU runtime treats them."""
    a = np.array(a)
    tiny = np.finfo(a.dtype).tiny
    with np.errstate(invalid="ignore"):
        sub = (np.abs(a) < tiny) & (a != 0)
    a[sub] = np.copysign(0, a[sub])
    return a


ADJUDICATE_AT_MOST = 5000
MPMATH = {
    "sin": "sin", "cos": "cos", "tan": "tan", "atan": "atan", "asin": "asin", "acos": "acos",
    "tanh": "tanh", "sinh": "sinh", "expm1": "expm1", "log1p": "log1p", "log10": "log10",
    "erf": "erf", "atan2": "atan2", "cosh": "cosh", "pow": "power",
}


def checked_error(name, got, expected, args):
    """ulp errors of ``got``; where they exceed the bound, against mpmath instead of numpy."""
    got = flush(got)
    err = ulp_error(got, expected)
    bad = np.nonzero(err > MAX_ULP[name])[0]
    if bad.size == 0 or bad.size > ADJUDICATE_AT_MOST:
        return err
    mpmath = pytest.importorskip("mpmath")
    fn = getattr(mpmath, MPMATH[name]) if name in MPMATH else {
        "log2": lambda v: mpmath.log(v, 2), "exp2": lambda v: mpmath.power(2, v)}[name]
    expected = np.array(expected)
    with mpmath.workprec(2300):
        for i in bad:
            point = [a[i] for a in args]
            if all(np.isfinite(point)):
                expected[i] = float(fn(*[mpmath.mpf(float(v)) for v in point]))
    return ulp_error(got, flush(expected))


def _report(err, inputs):
    i = int(np.argmax(err))
    where = ", ".join(f"{a[i]!r}" for a in inputs)
    return f"max {err[i]:.3g} ulp at ({where})"


@pytest.mark.parametrize("name", sorted(UNARY))
def test_f64_function_is_within_its_ulp_bound(compiled, name):
    x = _unary_inputs(name)
    with np.errstate(all="ignore"):
        expected = flush(UNARY[name][1](flush(x)))
    err = checked_error(name, compiled(name, x), expected, [flush(x)])
    assert err.max() <= MAX_ULP[name], f"{name}: {_report(err, [x])} over {x.size} inputs"


def test_atan2_follows_c_quadrant_rules_within_its_bound(compiled):
    y, x = _atan2_inputs()
    expected = flush(np.arctan2(flush(y), flush(x)))
    err = checked_error("atan2", compiled("atan2", y, x), expected, [flush(y), flush(x)])
    assert err.max() <= MAX_ULP["atan2"], f"atan2: {_report(err, [y, x])}"


def test_pow_follows_c_special_cases_within_its_bound(compiled):
    x, y = _pow_inputs()
    with np.errstate(all="ignore"):
        expected = flush(np.power(flush(x), flush(y)))
    err = checked_error("pow", compiled("pow", x, y), expected, [flush(x), flush(y)])
    assert err.max() <= MAX_ULP["pow"], f"pow: {_report(err, [x, y])}"


def test_pow_f32_is_correctly_signed_and_within_one_ulp(compiled):
    x, y = (v.astype(np.float32) for v in _pow_inputs())
    with np.errstate(all="ignore"):
        expected = flush(np.power(flush(x).astype(np.float64), y.astype(np.float64)).astype(np.float32))
    got = flush(compiled("pow_f32", x, y))
    assert got.dtype == np.float32
    err = ulp_error(got, expected)
    assert err.max() <= 1.0, f"pow f32: {_report(err, [x, y])}"


def test_fmod_is_exact_for_all_finite_ratios(compiled):
    a, b = _fmod_inputs()
    with np.errstate(all="ignore"):
        expected = flush(np.fmod(flush(a), flush(b)))
    err = ulp_error(flush(compiled("fmod", a, b)), expected)
    assert err.max() == 0, f"fmod: {_report(err, [a, b])}"


def test_log10_f32_is_within_one_ulp(compiled):
    rng = _rng()
    with np.errstate(over="ignore"):
        x = np.concatenate([rng.uniform(0, 100, 50_000), 10.0 ** rng.uniform(-45, 38.5, 50_000),
                            10.0 ** np.arange(-37, 39), SPECIAL]).astype(np.float32)
    got = flush(compiled("log10_f32", x))
    with np.errstate(all="ignore"):
        expected = flush(np.log10(flush(x).astype(np.float64)).astype(np.float32))
    err = ulp_error(got, expected)
    assert got.dtype == np.float32
    assert err.max() <= 1.0, f"log10 f32: {_report(err, [x])}"


def test_f32_to_bf16_rounds_to_nearest_even_bit_exactly(compiled):
    x = _bf16_inputs()
    got = compiled("f32_to_bf16", x)
    with np.errstate(invalid="ignore"):
        expected = x.astype(ml_dtypes.bfloat16)
    nan = np.isnan(x)
    assert np.isnan(got.astype(np.float32)[nan]).all()
    assert np.array_equal(np.signbit(got.astype(np.float32)[nan]), np.signbit(x[nan]))
    assert np.array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))
