"""Eager float32 math: the float32 erf and the in-place/bitwise fast paths of the elementwise
references keep accuracy and the previous results (dtype, NaN, inf, -0.0, subnormals)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.dialects.tp.ops import elementwise as E


def _ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 steps between two float32 arrays (0 and -0 are one point)."""
    g = got.astype(np.float32).view(np.int32).astype(np.int64)
    w = want.astype(np.float32).view(np.int32).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    return np.abs(g - w)


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return (got.shape == want.shape and got.dtype == want.dtype
            and np.array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)))


_EXACT_ERF = np.vectorize(math.erf, otypes=[np.float64])


def test_float32_erf_is_within_one_ulp_of_math_erf():
    # every 4099th float32 from 0 up to 4.5 (past the point where erf rounds to 1), both signs
    bits = np.arange(0, np.float32(4.5).view(np.int32), 4099, dtype=np.int32)
    x = bits.view(np.float32)
    x = np.concatenate([x, -x, np.linspace(-5, 5, 20001, dtype=np.float32)])
    got = tp.erf(tp.tensor(x)).numpy()
    assert got.dtype == np.float32
    want = _EXACT_ERF(x.astype(np.float64))
    # measured: at most 1 ulp over every 8th float32 in [0, 4.5]
    assert _ulp_distance(got, want).max() <= 1


def test_float32_erf_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.92, -3.92, 4.0, 1e30, -3.4e38,
                  1.0, -1.0], np.float32)
    got = tp.erf(tp.tensor(x)).numpy()
    assert _same_bits(got[:2], np.array([0.0, -0.0], np.float32))  # signed zeros kept
    assert got[2:4].tolist() == [1.0, -1.0]
    assert np.isnan(got[4])
    assert got[5:10].tolist() == [1.0, -1.0, 1.0, 1.0, -1.0]  # clamped where erf rounds to 1
    assert _ulp_distance(got[10:], np.array([math.erf(1.0), -math.erf(1.0)])).max() <= 1


def test_float32_erf_of_subnormals_scales_them():
    x = np.array([1e-45, -1e-45, 1e-40, -3e-39, 1.1e-38, np.finfo(np.float32).tiny], np.float32)
    got = tp.erf(tp.tensor(x)).numpy()
    want = x.astype(np.float64) * (2 / math.sqrt(math.pi))
    # the subnormal results are rounded once more than the float64 product: 1 step apart at most
    assert _ulp_distance(got, want).max() <= 1
    assert np.all(np.signbit(got) == np.signbit(x))


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16])
def test_half_erf_rounds_the_float32_result(dtype):
    x = np.linspace(-4, 4, 4097, dtype=np.float32)
    half = tp.tensor(x).to(dtype)
    got = tp.erf(half)
    assert got.dtype is dtype
    want = tp.erf(half.to(tp.float32)).to(dtype)
    assert _same_bits(got.numpy(), want.numpy())


def test_float64_erf_keeps_its_precision():
    x = np.linspace(-6, 6, 2001)
    np.testing.assert_allclose(tp.erf(tp.tensor(x)).numpy(), _EXACT_ERF(x), rtol=1e-13, atol=1e-300)


def _grid(n: int = 20000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-39, -1e-39,
                         -87.5, -90.0, -104.0, 88.0, 3.4e38, -3.4e38, 1.0, -1.0], np.float32)
    return np.concatenate([np.tile(specials, 50), (rng.standard_normal(n) * 6).astype(np.float32)])


def test_gelu_float32_accuracy():
    x = _grid()
    x = x[np.isfinite(x)]
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * (1 + np.array([math.erf(v) for v in x64 / math.sqrt(2)]))
    got = F.gelu(tp.tensor(x)).numpy().astype(np.float64)
    # 1 + erf(x / sqrt(2)) cancels for negative x (as in PyTorch): the error is absolute, measured
    # at most 1.05e-7 |x|; subnormal x / 2 rounds to the nearest subnormal step (1.4e-45)
    assert np.all(np.abs(got - want) <= 1.2e-7 * np.abs(x64) + 7.1e-46)
    tanh_want = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    tanh_got = F.gelu(tp.tensor(x), approximate="tanh").numpy().astype(np.float64)
    # measured 1.15e-7 |x|
    assert np.all(np.abs(tanh_got - tanh_want) <= 1.2e-7 * np.abs(x64) + 7.1e-46)


def test_sigmoid_and_silu_float32_accuracy_and_tails():
    x = _grid()
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s64 = 1 / (1 + np.exp(-x64))
        silu64 = x64 * s64
    got = tp.sigmoid(tp.tensor(x)).numpy()
    assert got.dtype == np.float32
    assert _ulp_distance(got, s64)[~np.isnan(x)].max() <= 3  # measured 3
    assert np.array_equal(np.isnan(got), np.isnan(x))
    # below -87 the result is subnormal and still computed (not flushed to zero)
    tail = tp.sigmoid(tp.tensor(np.array([-90.0, -100.0, -104.0], np.float32))).numpy()
    assert _ulp_distance(tail, 1 / (1 + np.exp(np.array([90.0, 100.0, 104.0])))).max() <= 1
    silu = F.silu(tp.tensor(x)).numpy()
    normal = np.abs(x) < 80  # (beyond, sigmoid's subnormal result carries fewer digits)
    assert _ulp_distance(silu[normal], silu64[normal]).max() <= 4  # measured 4


def _old_clamp(a, lo, hi):
    out = a
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(a.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(a.dtype))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_leaky_relu_clamp_where_keep_their_bits(dtype):
    x = _grid().astype(dtype)  # large enough for the bitwise select and clip paths
    t = tp.tensor(x)
    assert _same_bits(F.relu(t).numpy(), np.where(np.isnan(x) | (x > 0), x, np.zeros((), dtype)))
    for slope in (0.01, 0.0, 1.0, 2.5, -0.3):
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.where(x > 0, x, x * dtype(slope))
            got = F.leaky_relu(t, slope).numpy()
        assert _same_bits(got, want), slope
    for lo, hi in ((0, 6), (-1.0, 1.0), (None, 0.0), (0.0, None), (-2.0, None), (None, 3.0),
                   (2.0, -1.0), (-0.0, 1.0)):
        assert _same_bits(tp.clamp(t, lo, hi).numpy(), _old_clamp(x, lo, hi)), (lo, hi)
    y = np.flip(x).copy()
    cond = x > 0.5
    assert _same_bits(tp.where(tp.tensor(cond), t, tp.tensor(y)).numpy(), np.where(cond, x, y))
    assert _same_bits(tp.where(tp.tensor(cond), t, 0.25).numpy(), np.where(cond, x, dtype(0.25)))
    # a condition broadcast over rows, 6400 elements (the bitwise path)
    rows = cond[:64].reshape(-1, 1)
    grid = x[: 64 * 100].reshape(64, 100)
    other = np.flip(grid).copy()
    got = tp.where(tp.tensor(rows), tp.tensor(grid), tp.tensor(other)).numpy()
    assert _same_bits(got, np.where(rows, grid, other))


def test_where_selects_integers_and_bools():
    rng = np.random.default_rng(1)
    cond = rng.random(10000) < 0.5
    for dtype in (np.int64, np.int32, np.int8, np.bool_):
        a = rng.integers(0, 100, 10000).astype(dtype)
        b = rng.integers(-100, 0, 10000).astype(dtype)
        assert _same_bits(tp.where(tp.tensor(cond), tp.tensor(a), tp.tensor(b)).numpy(),
                          np.where(cond, a, b))


def test_reference_erf_function_handles_0d_and_empty():
    assert E.erf(np.asarray(0.5, np.float32)).shape == ()
    assert float(E.erf(np.asarray(0.5, np.float32))) == pytest.approx(math.erf(0.5), rel=1.2e-7)
    assert E.erf(np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_chunked_formulas_follow_strided_inputs():
    x = np.random.default_rng(2).standard_normal((700, 400)).astype(np.float32) * 3
    for fn in (tp.erf, F.gelu, tp.sigmoid, F.silu):
        assert _same_bits(fn(tp.tensor(x).T).numpy(), fn(tp.tensor(x)).numpy().T)
        assert _same_bits(fn(tp.tensor(x)[:, ::3]).numpy(), fn(tp.tensor(x)).numpy()[:, ::3])
