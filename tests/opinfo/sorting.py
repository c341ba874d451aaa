"""Sorting cases: sort, argsort, msort, topk, kthvalue, searchsorted and bucketize.

Expectations are stable orders computed with Python's ``sorted`` (NaN largest). PyTorch's
unstable kernels (``stable=False``, topk, kthvalue) may order equal elements differently,
so their cases use distinct values; ties are checked with ``stable=True``."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from tests.opinfo import ALL_DTYPES, NUMERIC, ErrorCase, OpInfo, Sample, make_arg


def _order(row, descending):
    """The stable sorting permutation of a 1-D float64 row, NaN largest."""
    def key(i):
        v = row[i]
        nan = bool(np.isnan(v))
        if descending:
            return (0 if nan else 1, 0.0 if nan else -v)
        return (1 if nan else 0, 0.0 if nan else v)

    return sorted(range(len(row)), key=key)


def _sort_ref(x, dim=-1, descending=False, stable=False):
    x = np.asarray(x)
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    a = np.moveaxis(x, dim, -1)
    f = a.astype(np.float64)
    idx = np.zeros(a.shape, np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        idx[pos] = _order(f[pos], descending)
    values = np.take_along_axis(a, idx, -1)
    return np.moveaxis(values, -1, dim), np.moveaxis(idx, -1, dim)


def _topk_ref(x, k, dim=-1, largest=True, sorted=True):
    values, idx = _sort_ref(x, dim, largest)
    if np.ndim(x) == 0:
        return values, idx
    first = [slice(None)] * np.ndim(x)
    first[dim] = slice(0, k)
    return values[tuple(first)], idx[tuple(first)]


def _kthvalue_ref(x, k, dim=-1, keepdim=False):
    values, idx = _sort_ref(x, dim)
    if np.ndim(x) == 0:
        return values, idx
    values, idx = np.take(values, [k - 1], axis=dim), np.take(idx, [k - 1], axis=dim)
    return (values, idx) if keepdim else (np.squeeze(values, dim), np.squeeze(idx, dim))


def _distinct(rng, shape, dtype):
    """Values without ties (a permutation, scaled to the dtype's exact range)."""
    n = int(np.prod(shape))
    values = rng.permutation(n) - n // 2
    if dtype.is_floating_point:
        values = values * 0.25 + rng.uniform(-0.1, 0.1, n) * (dtype in (tp.float32, tp.float64))
    return np.asarray(values).reshape(shape).astype(dtype.np_dtype)


def _sort_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)  # (integers and bools tie: stable order)
    out = [Sample((x,), {"stable": True}, "last dim"),
           Sample((x,), {"dim": 0, "stable": True}, "dim 0"),
           Sample((x,), {"dim": 1, "descending": True, "stable": True}, "dim 1 descending"),
           Sample((make_arg(rng, (2, 3, 2, 4), dtype),), {"dim": 2, "descending": True, "stable": True},
                  "4-d dim 2 descending"),
           Sample((make_arg(rng, (), dtype),), {"stable": True}, "0-d"),
           Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0, "stable": True}, "empty dim"),
           Sample((make_arg(rng, (0, 3), dtype),), {"stable": True}, "empty")]
    if dtype is not tp.bool:
        out.append(Sample((_distinct(rng, (4, 6), dtype),), {"descending": True}, "unstable, distinct"))
    return out


def _edge_samples(rng, dtype):
    inf, nan = np.inf, np.nan
    x = np.array([[3.0, nan, 1.0, -inf, -0.0, 0.0, inf, 1.0, nan, -2.0],
                  [nan, nan, 0.0, -0.0, 5.0, 5.0, -inf, -inf, inf, 0.5]], dtype=dtype.np_dtype)
    return [Sample((x,), {"stable": True}, "NaN, inf, signed zeros"),
            Sample((x,), {"descending": True, "stable": True}, "NaN, inf, signed zeros, descending")]


def _topk_samples(rng, dtype):
    x = _distinct(rng, (3, 4, 6), dtype)
    return [Sample((x, 3), {}, "largest 3"),
            Sample((x, 2), {"dim": 1, "largest": False}, "smallest 2 dim 1"),
            Sample((x, 3), {"dim": 0}, "all of dim 0"),
            Sample((x, 0), {}, "k = 0"),
            Sample((_distinct(rng, (2, 3, 2, 5), dtype), 2), {"dim": 3, "largest": False}, "4-d"),
            Sample((make_arg(rng, (), dtype), 1), {}, "0-d"),
            Sample((_distinct(rng, (1, 40), dtype), 5), {}, "long row")]


def _topk_nan_samples(rng, dtype):
    x = np.array([[1.0, np.nan, -np.inf, 4.0, 2.0, np.inf], [0.5, -1.0, 3.0, -3.0, 2.5, 7.0]], dtype.np_dtype)
    return [Sample((x, 3), {}, "NaN largest"), Sample((x, 2), {"largest": False}, "NaN smallest")]


def _ties_samples(rng, dtype):
    x = make_arg(rng, (2, 50), dtype, low=-2, high=3)  # every value many times
    return [Sample((x, 7), {}, "largest"), Sample((x, 7), {"largest": False}, "smallest")]


def _kth_ties_samples(rng, dtype):
    x = make_arg(rng, (2, 50), dtype, low=-2, high=3)
    return [Sample((x, 7), {}, "k 7"), Sample((x, 33), {"keepdim": True}, "k 33 keepdim")]


def _kthvalue_samples(rng, dtype):
    x = _distinct(rng, (3, 4, 5), dtype)
    return [Sample((x, 2), {}, "k 2"),
            Sample((x, 3), {"dim": 0, "keepdim": True}, "dim 0 keepdim"),
            Sample((x, 4), {"dim": 1}, "dim 1 last"),
            Sample((x, 1), {"dim": 2, "keepdim": True}, "smallest keepdim"),
            Sample((_distinct(rng, (5,), dtype), 3), {}, "1-d"),
            Sample((make_arg(rng, (), dtype), 1), {}, "0-d")]


def _search_ref(seq, values, sorter=None, right=False, side=None, out_int32=False):
    seq, values = np.asarray(seq, np.float64), np.asarray(values, np.float64)
    if sorter is not None:
        seq = np.take_along_axis(seq, np.asarray(sorter), -1)
    right = right or side == "right"
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side="right" if right else "left")
    else:
        out = np.stack([np.searchsorted(s, v, side="right" if right else "left")
                        for s, v in zip(seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1]))])
        out = out.reshape(values.shape)
    return out.astype(np.int32 if out_int32 else np.int64)


def _search_samples(rng, dtype):
    seq = np.sort(make_arg(rng, (6,), dtype))
    values = make_arg(rng, (3, 4), dtype)
    values.flat[:3] = seq[[0, 2, 5]]  # exact hits: left and right differ
    rows = np.sort(make_arg(rng, (2, 5), dtype), axis=-1)
    row_values = make_arg(rng, (2, 3), dtype)
    order = np.argsort(make_arg(rng, (6,), dtype), kind="stable")
    shuffled = np.empty_like(seq)
    shuffled[order] = seq
    return [Sample((seq, values), {}, "1-d sequence"),
            Sample((seq, values), {"right": True}, "right"),
            Sample((seq, values), {"side": "right", "out_int32": True}, "side right, int32"),
            Sample((rows, row_values), {}, "a sequence per row"),
            Sample((shuffled, values, order), {}, "sorter")]


def _bucketize_samples(rng, dtype):
    bounds = np.sort(make_arg(rng, (5,), dtype))
    x = make_arg(rng, (2, 6), dtype)
    x.flat[:2] = bounds[[1, 4]]
    return [Sample((x, bounds), {}, "left"),
            Sample((x, bounds), {"right": True, "out_int32": True}, "right, int32"),
            Sample((make_arg(rng, (), dtype), bounds), {}, "0-d")]


def _methods(lib, x):
    return (x.sort(dim=0, stable=True).values, x.argsort(dim=1, descending=True, stable=True), x.msort(),
            x.topk(2, 0, False).indices, x.kthvalue(2, 1, True).values)


def _methods_ref(x):
    return (_sort_ref(x, 0)[0], _sort_ref(x, 1, True)[1], _sort_ref(x, 0)[0],
            _topk_ref(x, 2, 0, False)[1], _kthvalue_ref(x, 2, 1, True)[0])


OPS = [
    OpInfo("sort", lambda lib, x, **kw: lib.sort(x, **kw), _sort_ref, _sort_samples, dtypes=ALL_DTYPES),
    OpInfo("sort_nan", lambda lib, x, **kw: lib.sort(x, **kw), _sort_ref, _edge_samples,
           dtypes=(tp.float32, tp.float16, tp.bfloat16)),
    OpInfo("argsort", lambda lib, x, **kw: lib.argsort(x, **kw), lambda x, **kw: _sort_ref(x, **kw)[1],
           _sort_samples, dtypes=(tp.float32, tp.int32, tp.bool)),
    OpInfo("topk", lambda lib, x, k, **kw: lib.topk(x, k, **kw), _topk_ref, _topk_samples, dtypes=NUMERIC),
    OpInfo("topk_nan", lambda lib, x, k, **kw: lib.topk(x, k, **kw), _topk_ref, _topk_nan_samples,
           dtypes=(tp.float32, tp.float16)),
    OpInfo("topk_unsorted", lambda lib, x, k: lib.sort(lib.topk(x, k, sorted=False).values).values,
           lambda x, k: _sort_ref(_topk_ref(x, k)[0])[0],
           lambda rng, dtype: [Sample((_distinct(rng, (3, 7), dtype), 4))], dtypes=(tp.float32, tp.int64)),
    # equal elements in index order, where PyTorch's unstable kernels pick any of them: numpy only
    OpInfo("topk_ties", lambda lib, x, k, **kw: lib.topk(x, k, **kw), _topk_ref, _ties_samples,
           dtypes=(tp.float32, tp.int32), torch_skip_dtypes=(tp.float32, tp.int32)),
    OpInfo("kthvalue_ties", lambda lib, x, k, **kw: lib.kthvalue(x, k, **kw), _kthvalue_ref, _kth_ties_samples,
           dtypes=(tp.float32, tp.int32), torch_skip_dtypes=(tp.float32, tp.int32)),
    OpInfo("kthvalue", lambda lib, x, k, **kw: lib.kthvalue(x, k, **kw), _kthvalue_ref, _kthvalue_samples,
           dtypes=NUMERIC),
    OpInfo("searchsorted", lambda lib, s, v, sorter=None, **kw: lib.searchsorted(s, v, sorter=sorter, **kw), _search_ref, _search_samples,
           dtypes=(tp.float32, tp.float64, tp.int64, tp.int32)),
    OpInfo("bucketize", lambda lib, x, b, **kw: lib.bucketize(x, b, **kw),
           lambda x, b, **kw: _search_ref(b, x, **kw), _bucketize_samples, dtypes=(tp.float32, tp.int64)),
    OpInfo("sorting_methods", _methods, _methods_ref,
           lambda rng, dtype: [Sample((_distinct(rng, (4, 5), dtype),))], dtypes=(tp.float64, tp.int64)),
]


def _ones(*shape):
    return tp.ones(*shape)


ERRORS = [
    ErrorCase("sort_dim_out_of_range", lambda lib: lib.sort(_ones(2, 3), 2), IndexError,
              r"tp\.sort: Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ErrorCase("sort_not_a_tensor", lambda lib: lib.sort([3, 1]), TypeError,
              r"sort\(\): argument 'input' must be Tensor, not list"),
    ErrorCase("topk_k_too_large", lambda lib: lib.topk(_ones(2, 3), 4), IndexError,
              r"tp\.topk: selected index k out of range \(k = 4, size 3 along dim 1\)"),
    ErrorCase("topk_negative_k", lambda lib: _ones(3).topk(-1), IndexError, r"tp\.topk: selected index k out of range"),
    ErrorCase("topk_bool", lambda lib: lib.topk(lib.tensor([True, False]), 1), TypeError,
              r"tp\.topk: not implemented for dtype bool"),
    ErrorCase("topk_float_k", lambda lib: _ones(3).topk(1.5), TypeError, r"topk\(\): argument 'k' must be int, not float"),
    ErrorCase("kthvalue_k_zero", lambda lib: lib.kthvalue(_ones(3), 0), ValueError, r"tp\.kthvalue: k must be at least 1"),
    ErrorCase("kthvalue_k_too_large", lambda lib: _ones(2, 3).kthvalue(3, 0), IndexError,
              r"tp\.kthvalue: selected number k out of range for dimension 0"),
    ErrorCase("searchsorted_bad_side", lambda lib: lib.searchsorted(_ones(3), _ones(2), side="middle"), ValueError,
              r"searchsorted\(\): side can only be 'left' or 'right' but got 'middle'"),
    ErrorCase("searchsorted_side_conflict",
              lambda lib: lib.searchsorted(_ones(3), _ones(2), side="left", right=True), ValueError,
              r"searchsorted\(\): side and right can't be set to opposites"),
    ErrorCase("searchsorted_leading_dims", lambda lib: lib.searchsorted(_ones(2, 3), _ones(3, 2)), ValueError,
              r"searchsorted\(\): boundaries tensor should be 1 dimension or the first N-1 dimensions"),
    ErrorCase("bucketize_2d_boundaries", lambda lib: lib.bucketize(_ones(3), _ones(2, 2)), ValueError,
              r"bucketize\(\): boundaries tensor must be 1 dimension, but got dim\(2\)"),
]


def _median_ref(skip_nan):
    def ref(x, dim=None, keepdim=False):
        x = np.asarray(x, np.float64)
        if dim is None:
            v = np.sort(x.reshape(-1))
            v = v[~np.isnan(v)] if skip_nan else v
            return v[(v.size - 1) // 2] if v.size and not np.isnan(v[-1]) else (np.nan if v.size == 0 or not skip_nan
                                                                               else v[(v.size - 1) // 2])
        order = np.argsort(x, axis=dim, kind="stable")  # NaN last
        nans = np.isnan(x).sum(axis=dim, keepdims=True)
        n = x.shape[dim]
        k = np.maximum((n - nans - 1) // 2, 0) if skip_nan else np.where(nans > 0, n - nans, (n - 1) // 2)
        idx = np.take_along_axis(order, k, dim)
        values = np.take_along_axis(x, idx, dim)
        return (values, idx) if keepdim else (np.squeeze(values, dim), np.squeeze(idx, dim))
    return ref


def _median_samples(rng, dtype):
    return [Sample((_distinct(rng, (3, 4), dtype),), {}, "all elements, even count"),
            Sample((_distinct(rng, (3, 5), dtype),), {"dim": 1}, "dim 1, odd"),
            Sample((_distinct(rng, (4, 3), dtype),), {"dim": 0, "keepdim": True}, "dim 0 keepdim, even")]


def _median_nan_samples(rng, dtype):
    x = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, -1.0, 5.0, 4.0], [np.nan, 2.0, np.nan, 1.0]], dtype.np_dtype)
    return [Sample((x,), {"dim": 1}, "rows with NaN"), Sample((x,), {}, "all elements")]


OPS += [
    OpInfo("median", lambda lib, x, **kw: lib.median(x, **kw), _median_ref(False), _median_samples, dtypes=NUMERIC),
    OpInfo("nanmedian", lambda lib, x, **kw: x.nanmedian(**kw), _median_ref(True), _median_samples,
           dtypes=(tp.float32, tp.float64)),
    OpInfo("median_nan", lambda lib, x, **kw: lib.median(x, **kw), _median_ref(False), _median_nan_samples,
           dtypes=(tp.float32,)),
    OpInfo("nanmedian_nan", lambda lib, x, **kw: lib.nanmedian(x, **kw), _median_ref(True), _median_nan_samples,
           dtypes=(tp.float32,)),
]
