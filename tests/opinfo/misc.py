"""Scan-like, shape and counting cases: cumprod, logcumsumexp, roll, rot90, diff,
tril_indices/triu_indices, cdist, bincount and histc."""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tests.opinfo import ALL_DTYPES, FLOATS, INTS, ErrorCase, OpInfo, Sample, make_arg

WITH_UINT8 = ALL_DTYPES + (tp.uint8,)
INT_INPUTS = INTS + (tp.uint8, tp.int16)


def _f(a):
    return np.asarray(a, dtype=np.float64)


def _acc(a):
    """Bool and integer inputs multiply in int64, floats in float64."""
    a = np.asarray(a)
    return a.astype(np.int64) if a.dtype.kind in "biu" else _f(a)


# --- cumprod, logcumsumexp ---------------------------------------------------------------

def _scan_samples(rng, dtype):
    low, high = (-2, 3) if dtype.is_integer else (-1.5, 1.5)
    arg = lambda shape: make_arg(rng, shape, dtype, low=low, high=high)
    out = [Sample((arg((3, 4, 5)),), {"dim": 1}, "dim 1"),
           Sample((arg((4, 5)),), {"dim": -1}, "dim -1"),
           Sample((arg((2, 3, 2, 4)),), {"dim": 2}, "4-d dim 2"),
           Sample((arg(()),), {"dim": 0}, "0-d"),
           Sample((arg((0, 3)),), {"dim": 0}, "empty")]
    if not dtype.is_bool:
        zeros = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 1.0, 2.0], [2.0, -0.5, 0.5, 0.0]])
        out.insert(0, Sample((zeros.astype(dtype.np_dtype),), {"dim": 1}, "zeros"))
        out.insert(1, Sample((zeros.T.copy().astype(dtype.np_dtype),), {"dim": 0}, "zeros dim 0"))
    return out


def _cumprod_ref(x, dim, dtype=None):
    a = _acc(x) if dtype is None else _f(x)
    return a.copy() if a.ndim == 0 else np.cumprod(a, axis=dim)


def _lcse_samples(rng, dtype):
    out = _scan_samples(rng, dtype)
    inf = float("inf")
    out.append(Sample((np.array([[1000.0, -1000.0, 999.0, 0.0], [-inf, -inf, 1.0, -inf],
                                 [-50.0, inf, 2.0, inf]], dtype=dtype.np_dtype),), {"dim": 1},
                      "large and infinite"))
    return out


def _lcse_ref(x, dim):
    a = _f(x)
    if a.ndim == 0:
        return a.copy()
    with np.errstate(invalid="ignore"):
        return np.logaddexp.accumulate(a, axis=dim)


# --- roll, rot90, diff -------------------------------------------------------------------

def _roll_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)
    return [Sample((x, 3), {}, "flattened"),
            Sample((x, -7, 1), {}, "dim 1 negative"),
            Sample((x, (1, -2), (0, 2)), {}, "two dims"),
            Sample((x, (2, 3), (-1, -1)), {}, "same dim twice"),
            Sample((x, 8), {"dims": 2}, "shift past the size"),
            Sample((x, 0, 1), {}, "no shift"),
            Sample((make_arg(rng, (), dtype), 1), {}, "0-d"),
            Sample((make_arg(rng, (0, 3), dtype), 2, 1), {}, "empty")]


def _roll_ref(x, shifts, dims=None):
    return np.roll(x, shifts, dims)


def _rot90_samples(rng, dtype):
    x = make_arg(rng, (2, 3, 4), dtype)
    out = [Sample((x,), {}, "default")]
    out += [Sample((x, k, (0, 2)), {}, f"k={k}") for k in (-1, 2, 3, 4, 5)]
    out += [Sample((x, 1, (2, 1)), {}, "reversed dims"), Sample((x, 1, (-1, 0)), {}, "negative dim"),
            Sample((make_arg(rng, (0, 3), dtype),), {}, "empty")]
    return out


def _rot90_ref(x, k=1, dims=(0, 1)):
    return np.rot90(x, k, dims).copy()


def _diff_samples(rng, dtype):
    x = make_arg(rng, (3, 5), dtype)
    return [Sample((x,), {}, "default"),
            Sample((x,), {"n": 2, "dim": 0}, "n=2 dim 0"),
            Sample((x,), {"n": 3, "dim": 0}, "n past the size"),
            Sample((x,), {"n": 0}, "n=0"),
            Sample((x, 1, 1, make_arg(rng, (3, 2), dtype), make_arg(rng, (3, 1), dtype)), {},
                   "prepend and append"),
            Sample((make_arg(rng, (4,), dtype), 1, 0, None, make_arg(rng, (2,), dtype)), {}, "1-d append"),
            Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0}, "empty")]


def _diff_ref(x, n=1, dim=-1, prepend=None, append=None):
    parts = [np.asarray(p) for p in (prepend, x, append) if p is not None]
    a = np.concatenate(parts, axis=dim) if len(parts) > 1 else np.asarray(x)
    if a.dtype == np.bool_:
        for _ in range(n):
            a = np.not_equal(np.take(a, range(1, a.shape[dim]), dim), np.take(a, range(a.shape[dim] - 1), dim))
        return a
    a = a if a.dtype.kind in "iu" else _f(a)  # integers wrap around in their dtype
    return np.diff(a, n, axis=dim) if n else a


# --- triangle coordinates ----------------------------------------------------------------

def _indices_samples(rng, dtype):
    return [Sample((4, 3, 0, "int64"), {}, "4x3"), Sample((3, 5, 2, "int32"), {}, "offset 2 int32"),
            Sample((4, 4, -1, "int64"), {}, "offset -1"), Sample((3, 3, -7, "int64"), {}, "whole"),
            Sample((0, 3, 0, "int64"), {}, "no rows"), Sample((3, 3, 9, "int64"), {}, "none kept")]


def _indices(lower):
    def fn(lib, row, col, offset, dtype):
        make = lib.tril_indices if lower else lib.triu_indices
        return make(row, col, offset, dtype=getattr(lib, dtype)), make(row, col, offset)

    def ref(row, col, offset, dtype):
        rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
        pairs = np.stack([rows, cols]).astype(np.int64).reshape(2, -1)
        return pairs.astype(np.dtype(dtype)), pairs

    return fn, ref


# --- cdist -------------------------------------------------------------------------------

def _cdist_samples(rng, dtype):
    arg = lambda *shape: make_arg(rng, shape, dtype, low=-1, high=1)
    same = arg(3, 4)
    return [Sample((arg(3, 4), arg(5, 4)), {}, "p=2 differences"),
            Sample((arg(27, 3), arg(4, 3)), {}, "p=2 by matmul (27 rows)"),
            Sample((arg(2, 1, 3, 4), arg(3, 6, 4)), {"compute_mode": "use_mm_for_euclid_dist"},
                   "matmul forced, batch broadcast"),
            Sample((arg(27, 3), arg(4, 3)), {"compute_mode": "donot_use_mm_for_euclid_dist"},
                   "matmul refused"),
            Sample((arg(3, 4), arg(2, 4)), {"p": 1.0}, "p=1"),
            Sample((arg(3, 4), arg(2, 4)), {"p": 0.0}, "p=0"),
            Sample((arg(3, 4), arg(2, 4)), {"p": math.inf}, "p=inf"),
            Sample((arg(2, 3, 4), arg(2, 2, 4)), {"p": 3.0}, "p=3 batched"),
            Sample((arg(3, 4), arg(2, 4)), {"p": 0.5}, "p=0.5"),
            Sample((same, np.concatenate([same[:1], arg(1, 4)])), {}, "a distance of 0"),
            Sample((arg(0, 4), arg(2, 4)), {}, "no rows"),
            Sample((arg(2, 0), arg(3, 0)), {"p": math.inf}, "no columns")]


def _cdist_ref(x1, x2, p=2.0, compute_mode=None):
    diff = np.abs(_f(x1)[..., :, None, :] - _f(x2)[..., None, :, :])
    if p == 0:
        return np.sum(diff != 0, axis=-1).astype(np.float64)
    if p == math.inf:
        return np.max(diff, axis=-1, initial=0.0)
    return np.sum(diff ** p, axis=-1) ** (1.0 / p)


# --- bincount, histc ---------------------------------------------------------------------

def _bincount_samples(rng, dtype):
    x = make_arg(rng, (20,), dtype, low=0, high=7)
    return [Sample((x,), {}, "counts"),
            Sample((x,), {"minlength": 12}, "minlength"),
            Sample((x, make_arg(rng, (20,), tp.float64)), {}, "float64 weights"),
            Sample((x, make_arg(rng, (20,), tp.float32)), {"minlength": 3}, "float32 weights"),
            Sample((x, make_arg(rng, (20,), tp.int32)), {}, "int weights"),
            Sample((np.zeros((0,), dtype.np_dtype),), {"minlength": 3}, "empty")]


def _bincount_ref(x, weights=None, minlength=0):
    if np.size(x) == 0:
        return np.zeros(minlength, np.int64)
    out = np.bincount(np.asarray(x, np.int64), None if weights is None else _f(weights), minlength)
    if weights is not None and np.asarray(weights).dtype == np.float32:
        return out.astype(np.float32)
    return out


def _histc_samples(rng, dtype):
    x = make_arg(rng, (4, 25), dtype, low=-2, high=2)
    edge = np.array([0.0, 1.0, 2.0, 3.0, 3.0, np.nan, -1.0, 4.0, np.inf, 0.5], dtype=dtype.np_dtype)
    return [Sample((x,), {}, "data range"),
            Sample((x, 7, -1, 1.5), {}, "given range"),
            Sample((x, 9, 0.3, 0.3), {}, "min == max: data range"),
            Sample((edge, 4, 0, 3), {}, "edges, outside, NaN"),
            Sample((np.full((3,), 2.0, dtype.np_dtype), 4), {}, "one value"),
            Sample((np.zeros((0,), dtype.np_dtype), 3), {}, "empty")]


def _histc_ref(x, bins=100, low=0, high=0):
    """PyTorch's kernel: edges in the input's dtype, each step rounded to it."""
    a = np.asarray(x).reshape(-1)
    left, right = float(low), float(high)
    if left == right and a.size:
        left, right = float(np.min(a.astype(np.float64))), float(np.max(a.astype(np.float64)))
    if left == right:
        left, right = left - 1, right + 1
    t = a.dtype.type
    lo, hi = t(left), t(right)
    out = np.zeros(bins, np.float64)
    for v in a:
        if not (v >= lo and v <= hi):
            continue
        pos = int(t(t(t(v - lo) * t(bins)) / t(hi - lo)))
        out[min(pos, bins - 1)] += 1
    return out


OPS = [
    OpInfo("cumprod", lambda lib, x, **kw: lib.cumprod(x, **kw), _cumprod_ref, _scan_samples,
           dtypes=WITH_UINT8),
    OpInfo("cumprod_dtype", lambda lib, x, dim: x.cumprod(dim, dtype=lib.float64),
           lambda x, dim: _cumprod_ref(x, dim, tp.float64), _scan_samples, dtypes=(tp.float32, tp.int32)),
    OpInfo("logcumsumexp", lambda lib, x, **kw: x.logcumsumexp(**kw), _lcse_ref, _lcse_samples,
           dtypes=FLOATS),
    OpInfo("roll", lambda lib, x, *a, **kw: lib.roll(x, *a, **kw), _roll_ref, _roll_samples,
           dtypes=ALL_DTYPES),
    OpInfo("rot90", lambda lib, x, *a, **kw: x.rot90(*a, **kw) if a or kw else lib.rot90(x), _rot90_ref,
           _rot90_samples, dtypes=ALL_DTYPES),
    OpInfo("diff", lambda lib, x, *a, **kw: lib.diff(x, *a, **kw), _diff_ref, _diff_samples, dtypes=WITH_UINT8),
    OpInfo("tril_indices", *_indices(True), _indices_samples, dtypes=(tp.int64,)),
    OpInfo("triu_indices", *_indices(False), _indices_samples, dtypes=(tp.int64,)),
    OpInfo("cdist", lambda lib, x1, x2, **kw: lib.cdist(x1, x2, **kw), _cdist_ref, _cdist_samples,
           dtypes=(tp.float32, tp.float64)),
    OpInfo("bincount", lambda lib, x, *w, **kw: x.bincount(*w, **kw), _bincount_ref, _bincount_samples,
           dtypes=INT_INPUTS),
    OpInfo("histc", lambda lib, x, *a, **kw: lib.histc(x, *a, **kw), _histc_ref, _histc_samples,
           dtypes=FLOATS),
]


def _ones(*shape, dtype=tp.float32):
    return tp.ones(*shape, dtype=dtype)


ERRORS = [
    ErrorCase("cumprod_to_bool", lambda lib: _ones(3).cumprod(0, dtype=lib.bool), RuntimeError,
              r"tp\.cumprod: not implemented for result dtype bool"),
    ErrorCase("cumprod_dim_out_of_range", lambda lib: _ones(2, 3).cumprod(2), IndexError,
              r"tp\.cumprod: Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ErrorCase("logcumsumexp_of_int", lambda lib: lib.tensor([1, 2]).logcumsumexp(0), RuntimeError,
              r"tp\.logcumsumexp: not implemented for dtype int64"),
    ErrorCase("logcumsumexp_tuple_dim", lambda lib: _ones(2).logcumsumexp((0,)), TypeError,
              r"logcumsumexp\(\): argument 'dim' must be int, not tuple"),
    ErrorCase("roll_no_shifts", lambda lib: _ones(2).roll(()), RuntimeError, r"roll: `shifts` required"),
    ErrorCase("roll_misaligned", lambda lib: _ones(2, 3).roll((1, 2), 0), RuntimeError,
              r"roll: shifts and dimensions must align\. shifts: 2, dims:1"),
    ErrorCase("roll_0d_dim", lambda lib: lib.tensor(1.0).roll(1, 0), IndexError,
              r"roll: Dimension specified as 0 but tensor has no dimensions"),
    ErrorCase("roll_float_shift", lambda lib: _ones(2).roll(1.5), TypeError,
              r"roll\(\): argument 'shifts' must be tuple of ints, not float"),
    ErrorCase("rot90_one_dim", lambda lib: _ones(2, 2).rot90(1, (0,)), RuntimeError,
              r"rot90: expected total rotation dims == 2, but got dims = 1"),
    ErrorCase("rot90_same_dims", lambda lib: _ones(2, 2).rot90(1, (1, -1)), RuntimeError,
              r"rot90: expected rotation dims to be different, but got dim0 = 1 and dim1 = -1"),
    ErrorCase("rot90_1d", lambda lib: _ones(3).rot90(), RuntimeError,
              r"rot90: expected total dims >= 2, but got total dims = 1"),
    ErrorCase("rot90_dim_out_of_range", lambda lib: _ones(2, 2).rot90(1, (0, 2)), IndexError,
              r"rot90: Dimension out of range"),
    ErrorCase("diff_0d", lambda lib: lib.tensor(1.0).diff(), RuntimeError,
              r"diff: diff expects input to be at least one-dimensional"),
    ErrorCase("diff_negative_n", lambda lib: _ones(3).diff(-1), RuntimeError,
              r"diff: order must be non-negative but got -1"),
    ErrorCase("diff_prepend_rank", lambda lib: _ones(2, 3).diff(prepend=_ones(3)), RuntimeError,
              r"diff: diff expects prepend or append to be the same dimension as input"),
    ErrorCase("diff_prepend_number", lambda lib: _ones(3).diff(prepend=1), TypeError,
              r"diff\(\): argument 'prepend' must be Tensor, not int"),
    ErrorCase("tril_indices_negative_row", lambda lib: lib.tril_indices(-1, 3), ValueError,
              r"tril_indices: row must be non-negative, got -1"),
    ErrorCase("triu_indices_float_dtype", lambda lib: lib.triu_indices(2, 2, dtype=lib.float32), TypeError,
              r"triu_indices: not implemented for dtype float32; use int64 or int32"),
    ErrorCase("cdist_columns", lambda lib: lib.cdist(_ones(2, 3), _ones(2, 4)), RuntimeError,
              r"cdist: X1 and X2 must have the same number of columns\. X1: 3 X2: 4"),
    ErrorCase("cdist_1d", lambda lib: lib.cdist(_ones(3), _ones(2, 3)), RuntimeError,
              r"cdist: cdist only supports at least 2D tensors, X1 got: 1D"),
    ErrorCase("cdist_int", lambda lib: lib.cdist(lib.zeros(2, 3, dtype=lib.int64), _ones(2, 3)), RuntimeError,
              r"cdist: cdist only supports floating-point dtypes, X1 got: int64"),
    ErrorCase("cdist_mixed_dtypes", lambda lib: lib.cdist(_ones(2, 3), _ones(2, 3, dtype=lib.float64)),
              RuntimeError, r"cdist: X1 and X2 must have the same dtype, got float32 and float64"),
    ErrorCase("cdist_half", lambda lib: lib.cdist(_ones(2, 3, dtype=lib.float16), _ones(2, 3, dtype=lib.float16)),
              RuntimeError, r"cdist: not implemented for dtype float16"),
    ErrorCase("cdist_negative_p", lambda lib: lib.cdist(_ones(2, 3), _ones(2, 3), p=-1), ValueError,
              r"cdist: cdist only supports non-negative p values"),
    ErrorCase("cdist_bad_mode", lambda lib: lib.cdist(_ones(2, 3), _ones(2, 3), compute_mode="x"), ValueError,
              r"cdist: x is not a valid value for compute_mode"),
    ErrorCase("bincount_float", lambda lib: _ones(3).bincount(), RuntimeError,
              r"bincount: not implemented for dtype float32"),
    ErrorCase("bincount_negative", lambda lib: lib.tensor([1, -1]).bincount(), RuntimeError,
              r"bincount: bincount only supports 1-d non-negative integral inputs\."),
    ErrorCase("bincount_2d", lambda lib: lib.tensor([[1, 2]]).bincount(), RuntimeError,
              r"bincount: bincount only supports 1-d non-negative integral inputs\."),
    ErrorCase("bincount_minlength", lambda lib: lib.tensor([1]).bincount(minlength=-1), RuntimeError,
              r"bincount: minlength should be >= 0"),
    ErrorCase("bincount_weights_length", lambda lib: lib.tensor([1, 2]).bincount(_ones(3)), RuntimeError,
              r"bincount: weights should be 1-d and have the same length as input"),
    ErrorCase("histc_int", lambda lib: lib.tensor([1, 2]).histc(), RuntimeError,
              r"histc: not implemented for dtype int64"),
    ErrorCase("histc_bins", lambda lib: _ones(2).histc(0), RuntimeError, r"histc: bins must be > 0, but got 0"),
    ErrorCase("histc_min_above_max", lambda lib: _ones(2).histc(3, 2, 1), RuntimeError,
              r"histc: max must be larger than min"),
    ErrorCase("histc_nan_range", lambda lib: lib.tensor([1.0, float("nan")]).histc(3), RuntimeError,
              r"histc: range of \[nan, nan\] is not finite"),
]
