"""Reduction and normalization cases: sum, mean, prod, extrema and indices, var/std,
logsumexp, all/any, norm, cumsum, softmax, log_softmax and layer_norm."""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tests.opinfo import ALL_DTYPES, FLOATS, INTS, NUMERIC, ErrorCase, OpInfo, Sample, make_arg

WITH_UINT8 = ALL_DTYPES + (tp.uint8,)


def _f(a):
    """numpy input as float64 for expectations."""
    return np.asarray(a, dtype=np.float64)


def _acc(a):
    """Bool and integer inputs sum in int64, floats in float64."""
    a = np.asarray(a)
    return a.astype(np.int64) if a.dtype.kind in "biu" else _f(a)


def _ax(a, dim):
    """numpy's axis for a PyTorch dim (a 0-d tensor accepts 0 and -1 and reduces nothing)."""
    return None if dim is None or np.ndim(a) == 0 else dim


def _count(a, dim):
    if dim is None or np.ndim(a) == 0:
        return np.size(a)
    dims = (dim,) if isinstance(dim, int) else dim
    return int(np.prod([np.shape(a)[d] for d in dims]))


# --- samples -----------------------------------------------------------------------------

_DIMS = [
    ({}, "all"),
    ({"dim": 0}, "dim 0"),
    ({"dim": -1}, "dim -1"),
    ({"dim": 1, "keepdim": True}, "dim 1 keepdim"),
    ({"dim": (0, 2)}, "dims (0, 2)"),
    ({"dim": (-1, 0), "keepdim": True}, "dims (-1, 0) keepdim"),
    ({"dim": None, "keepdim": True}, "all keepdim"),
]


def _reduce_samples(*, tuple_dims=True, empty=True, low=None, high=None, shape=(3, 4, 5),
                    extra=()):
    """Reductions over several dims of a 3-d tensor, plus 0-d and 0-sized inputs."""

    def samples(rng, dtype):
        out = []
        for kw, desc in _DIMS:
            if not tuple_dims and (isinstance(kw.get("dim"), tuple) or
                                   ("dim" in kw and kw["dim"] is None)):
                continue
            out.append(Sample((make_arg(rng, shape, dtype, low=low, high=high),), dict(kw), desc))
        out.append(Sample((make_arg(rng, (), dtype, low=low, high=high),), {"dim": 0}, "0-d dim 0"))
        out.append(Sample((make_arg(rng, (), dtype, low=low, high=high),),
                          {"dim": -1, "keepdim": True}, "0-d dim -1 keepdim"))
        out.append(Sample((make_arg(rng, (), dtype, low=low, high=high),), {}, "0-d all"))
        if empty:
            out.append(Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0}, "empty dim 0"))
            out.append(Sample((make_arg(rng, (0, 3), dtype),), {}, "empty all"))
        out.append(Sample((make_arg(rng, (0, 3), dtype),), {"dim": 1}, "0-sized kept dim"))
        for make in extra:
            out.extend(make(rng, dtype))
        return out

    return samples


def _long_half_sum(rng, dtype):
    # accumulating 4096 * 0.1 in float16 itself would stall near 256
    if dtype in (tp.float16, tp.bfloat16):
        return [Sample((np.full((4096,), 0.1, dtype=dtype.np_dtype),), {}, "long half sum")]
    return []


def _tie_and_nan(rng, dtype):
    out = [Sample((np.array([[3, 1, 3, 0], [2, 2, 5, 5]], dtype=dtype.np_dtype),), {"dim": 1},
                  "ties pick first")]
    if dtype.is_floating_point:
        nan = float("nan")
        out.append(Sample((np.array([[1.0, nan, 3.0, nan], [2.0, 0.5, -1.0, 4.0]],
                                    dtype=dtype.np_dtype),), {"dim": 1}, "NaN"))
    return out


def _arg_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)
    out = [Sample((x,), {}, "flattened"), Sample((x,), {"keepdim": True}, "flattened keepdim"),
           Sample((x,), {"dim": 0}, "dim 0"),
           Sample((x,), {"dim": -1, "keepdim": True}, "dim -1 keepdim"),
           Sample((make_arg(rng, (), dtype),), {}, "0-d"),
           Sample((make_arg(rng, (), dtype),), {"dim": 0}, "0-d dim 0"),
           Sample((make_arg(rng, (0, 3), dtype),), {"dim": 1}, "0-sized kept dim")]
    return out + _tie_and_nan(rng, dtype)


def _dim_samples(rng, dtype):
    """Single-dim, same-shape ops (cumsum, softmax)."""
    return [Sample((make_arg(rng, (3, 4, 5), dtype),), {"dim": 0}, "dim 0"),
            Sample((make_arg(rng, (3, 4, 5), dtype),), {"dim": -1}, "dim -1"),
            Sample((make_arg(rng, (4, 5), dtype),), {"dim": 1}, "2-d dim 1"),
            Sample((make_arg(rng, (), dtype),), {"dim": 0}, "0-d dim 0"),
            Sample((make_arg(rng, (), dtype),), {"dim": -1}, "0-d dim -1"),
            Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0}, "empty")]


def _softmax_samples(rng, dtype):
    out = _dim_samples(rng, dtype)
    inf = float("inf")
    large = np.array([[1000.0, 1000.0, -1000.0], [-50.0, 0.0, 50.0]], dtype=dtype.np_dtype)
    out.append(Sample((large,), {"dim": 1}, "large values"))
    out.append(Sample((np.array([[-inf, 0.0, 1.0], [-inf, -inf, -inf]], dtype=dtype.np_dtype),),
                      {"dim": 1}, "-inf"))
    return out


def _lse_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)
    out = [Sample((x,), {"dim": 0}, "dim 0"),
           Sample((x,), {"dim": -1, "keepdim": True}, "dim -1 keepdim"),
           Sample((x,), {"dim": (0, 2)}, "dims (0, 2)"),
           Sample((x,), {"dim": (0, 1, 2)}, "all dims"),
           Sample((make_arg(rng, (), dtype),), {"dim": 0}, "0-d"),
           Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0}, "empty")]
    if dtype.is_floating_point:
        inf = float("inf")
        edge = np.array([[1000.0, 1000.0], [-inf, -inf], [inf, 1.0]], dtype=dtype.np_dtype)
        out.append(Sample((edge,), {"dim": 1}, "large and infinite"))
    return out


def _var_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)
    return [
        Sample((x,), {}, "all"),
        Sample((x,), {"dim": 1}, "dim 1"),
        Sample((x,), {"dim": (0, -1), "keepdim": True}, "dims (0, -1) keepdim"),
        Sample((x,), {"dim": 2, "correction": 0}, "correction 0"),
        Sample((x,), {"dim": 2, "correction": 2.5}, "correction 2.5"),
        Sample((x,), {"dim": 0, "correction": 3}, "correction = count: inf"),
        Sample((x,), {"dim": 0, "correction": 7}, "correction > count: inf"),
        Sample((np.ones((2, 3), dtype.np_dtype),), {"dim": 1, "correction": 3}, "0 / 0: nan"),
        Sample((x,), {"dim": 1, "unbiased": False}, "unbiased=False"),
        Sample((x,), {"dim": None, "unbiased": True, "keepdim": True}, "unbiased=True keepdim"),
        Sample((make_arg(rng, (), dtype),), {"correction": 0}, "0-d correction 0"),
        Sample((make_arg(rng, (), dtype),), {"dim": 0}, "0-d: nan"),
        Sample((make_arg(rng, (0, 3), dtype),), {"dim": 0}, "empty: nan"),
    ]


def _norm_samples(rng, dtype):
    x = make_arg(rng, (3, 4, 5), dtype)
    return [
        Sample((x,), {}, "fro all"),
        Sample((x,), {"p": 1}, "p 1"),
        Sample((x,), {"p": 2, "dim": 1}, "p 2 dim 1"),
        Sample((x,), {"p": math.inf, "dim": -1, "keepdim": True}, "inf dim -1 keepdim"),
        Sample((x,), {"p": -math.inf, "dim": (0, 2)}, "-inf dims (0, 2)"),
        Sample((x,), {"p": 0}, "p 0"),
        Sample((x,), {"p": 3, "dim": 0}, "p 3"),
        Sample((x,), {"p": 0.5, "dim": 2}, "p 0.5"),
        Sample((x,), {"p": "fro", "dim": (1, 2)}, "fro dims (1, 2)"),
        Sample((x,), {"dim": [0], "keepdim": True}, "dim list keepdim"),
        Sample((make_arg(rng, (), dtype),), {}, "0-d"),
        Sample((make_arg(rng, (0, 3), dtype),), {"p": 2, "dim": 0}, "empty 2-norm"),
        Sample((make_arg(rng, (0, 3), dtype),), {"p": math.inf, "dim": 1},
               "empty inf norm, kept dim"),
    ]


def _layer_norm_samples(rng, dtype):
    x = make_arg(rng, (2, 3, 5), dtype)
    w5, b5 = make_arg(rng, (5,), dtype), make_arg(rng, (5,), dtype)
    w35 = make_arg(rng, (3, 5), dtype)
    out = [
        Sample((x, (5,)), {}, "last dim"),
        Sample((x, (3, 5), w35), {}, "two dims, weight"),
        Sample((x, [5], w5, b5), {"eps": 1e-3}, "weight, bias, eps"),
        Sample((x, (5,), None, b5), {}, "bias only"),
        Sample((make_arg(rng, (4,), dtype, low=100, high=103), (4,)), {}, "large offset"),
        Sample((make_arg(rng, (0, 5), dtype), (5,)), {}, "empty batch"),
    ]
    if dtype in (tp.float16, tp.bfloat16):
        w, b = make_arg(rng, (5,), tp.float32), make_arg(rng, (5,), tp.float32)
        out.append(Sample((x, (5,), w, b), {}, "half input, float32 parameters"))
    return out


# --- expectations ------------------------------------------------------------------------

def _sum_ref(x, dim=None, keepdim=False):
    return np.sum(_acc(x), axis=_ax(x, dim), keepdims=keepdim)


def _mean_ref(x, dim=None, keepdim=False):
    with np.errstate(invalid="ignore"):
        return np.sum(_f(x), axis=_ax(x, dim), keepdims=keepdim) / _count(x, dim)


def _prod_ref(x, dim=None, keepdim=False):
    return np.prod(_acc(x), axis=_ax(x, dim), keepdims=keepdim)


def _amax_ref(x, dim=None, keepdim=False):
    return np.max(_acc(x), axis=_ax(x, dim), keepdims=keepdim)


def _amin_ref(x, dim=None, keepdim=False):
    return np.min(_acc(x), axis=_ax(x, dim), keepdims=keepdim)


def _first_index(x, dim, pick, keepdim=False):
    """Index of the first occurrence of the extreme value along ``dim`` (NaN counts as
    extreme), found by scanning rather than np.argmax."""
    a = np.moveaxis(_f(x), dim, -1)
    idx = np.zeros(a.shape[:-1], np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        row = a[pos]
        nans = np.flatnonzero(np.isnan(row))
        idx[pos] = nans[0] if nans.size else np.flatnonzero(row == pick(row))[0]
    return np.expand_dims(idx, dim) if keepdim else idx


def _arg_ref(pick):
    def ref(x, dim=None, keepdim=False):
        if np.ndim(x) == 0:
            return np.zeros((), np.int64)
        if dim is None:
            flat = _first_index(np.reshape(x, -1), 0, pick)
            return np.reshape(flat, (1,) * np.ndim(x)) if keepdim else flat
        return _first_index(x, dim, pick, keepdim)

    return ref


def _max_dim_ref(pick, extreme):
    arg = _arg_ref(pick)

    def ref(x, dim, keepdim=False):
        values = extreme(_acc(x), axis=_ax(x, dim), keepdims=keepdim)
        return values, arg(x, dim, keepdim)

    return ref


def _var_ref(x, dim=None, keepdim=False, correction=None, unbiased=None):
    c = correction if correction is not None else (0 if unbiased is False else 1)
    a, ax = _f(x), _ax(x, dim)
    n = _count(x, dim)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.sum(a, axis=ax, keepdims=True) / n
        squares = np.sum((a - mean) ** 2, axis=ax, keepdims=keepdim)
        return squares / max(0, n - c)


def _std_ref(x, **kw):
    return np.sqrt(_var_ref(x, **kw))


def _lse_ref(x, dim, keepdim=False):
    return np.logaddexp.reduce(_f(x), axis=_ax(x, dim), keepdims=keepdim)


def _all_ref(x, dim=None, keepdim=False):
    out = np.all(x, axis=_ax(x, dim), keepdims=keepdim)
    return out.astype(np.uint8) if np.asarray(x).dtype == np.uint8 else out


def _any_ref(x, dim=None, keepdim=False):
    out = np.any(x, axis=_ax(x, dim), keepdims=keepdim)
    return out.astype(np.uint8) if np.asarray(x).dtype == np.uint8 else out


def _softmax_ref(x, dim):
    a = _f(x)
    if a.ndim == 0:
        return np.ones(())
    with np.errstate(invalid="ignore"):
        e = np.exp(a - np.max(a, axis=dim, keepdims=True, initial=-np.inf))
        return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_ref(x, dim):
    a = _f(x)
    if a.ndim == 0:
        return np.zeros(())
    with np.errstate(invalid="ignore"):
        return a - np.logaddexp.reduce(a, axis=dim, keepdims=True)


def _cumsum_ref(x, dim):
    a = _acc(x)
    return a.copy() if a.ndim == 0 else np.cumsum(a, axis=dim)


def _norm_ref(x, p="fro", dim=None, keepdim=False):
    a, ax = np.abs(_f(x)), _ax(x, dim)
    if isinstance(ax, list):
        ax = tuple(ax)
    if p == "fro":
        p = 2
    if p == math.inf:
        return np.max(a, axis=ax, keepdims=keepdim)
    if p == -math.inf:
        return np.min(a, axis=ax, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(np.float64)
    return np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)


def _layer_norm_ref(x, shape, weight=None, bias=None, eps=1e-5):
    a = _f(x)
    axes = tuple(range(a.ndim - len(shape), a.ndim))
    if a.size == 0:
        return a.copy()
    mean = a.mean(axis=axes, keepdims=True)
    var = a.var(axis=axes, keepdims=True)
    out = (a - mean) / np.sqrt(var + eps)
    if weight is not None:
        out = out * _f(weight)
    if bias is not None:
        out = out + _f(bias)
    return out


def _methods_samples(rng, dtype):
    return [Sample((make_arg(rng, (3, 4), dtype),), desc="method forms")]


def _methods(lib, x):
    return (x.sum(1), x.sum([0, 1]), x.sum(0, True), x.mean(-1, True), x.amax(1), x.amin((0, 1)),
            x.max(), x.max(1), x.min(0, True), x.argmax(), x.argmin(1), x.var(0, False),
            x.var(True), x.std(1, True, True), x.logsumexp(1), x.all(), x.any(1),
            x.softmax(-1), x.log_softmax(0), x.norm(), x.norm(1, 0), x.cumsum(1), x.prod(0))


def _methods_ref(x):
    return (_sum_ref(x, 1), _sum_ref(x, (0, 1)), _sum_ref(x, 0, True), _mean_ref(x, -1, True),
            _amax_ref(x, 1), _amin_ref(x, (0, 1)), _amax_ref(x), _max_dim_ref(np.max, np.max)(x, 1),
            _max_dim_ref(np.min, np.min)(x, 0, True), _arg_ref(np.max)(x), _arg_ref(np.min)(x, 1),
            _var_ref(x, 0, unbiased=False), _var_ref(x), _std_ref(x, dim=1, keepdim=True),
            _lse_ref(x, 1), _all_ref(x), _any_ref(x, 1), _softmax_ref(x, -1),
            _log_softmax_ref(x, 0), _norm_ref(x), _norm_ref(x, 1, 0), _cumsum_ref(x, 1),
            _prod_ref(x, 0))


def _whole_samples(rng, dtype):
    return [Sample((make_arg(rng, s, dtype),), desc=str(s)) for s in ((3, 4), ())]


def _binary_extremum_samples(rng, dtype):
    return [Sample((make_arg(rng, (3, 4), dtype), make_arg(rng, (4,), dtype)), desc="broadcast"),
            Sample((make_arg(rng, (2,), dtype), make_arg(rng, (), dtype)), desc="0-d other")]


OPS = [
    OpInfo("sum", lambda lib, x, **kw: lib.sum(x, **kw), _sum_ref,
           _reduce_samples(extra=(_long_half_sum,)), dtypes=WITH_UINT8),
    OpInfo("sum_dtype", lambda lib, x, **kw: lib.sum(x, **kw, dtype=lib.float64),
           lambda x, **kw: _sum_ref(_f(x), **kw), _reduce_samples(), dtypes=ALL_DTYPES),
    OpInfo("sum_dtype_truncates", lambda lib, x: (x.sum(dtype=lib.int64), x.sum(0, dtype=lib.int8)),
           lambda x: (np.sum(np.trunc(_f(x)).astype(np.int64)),
                      np.sum(np.trunc(_f(x)).astype(np.int8), axis=0, dtype=np.int8)),
           lambda rng, dtype: [Sample((make_arg(rng, (4, 3), dtype, low=-40, high=40),))],
           dtypes=(tp.float32, tp.float64)),
    OpInfo("mean", lambda lib, x, **kw: lib.mean(x, **kw), _mean_ref, _reduce_samples(),
           dtypes=FLOATS),
    OpInfo("mean_dtype", lambda lib, x, **kw: x.mean(**kw, dtype=lib.float64), _mean_ref,
           _reduce_samples(), dtypes=INTS + (tp.float32,)),
    OpInfo("prod", lambda lib, x, **kw: lib.prod(x, **kw), _prod_ref,
           _reduce_samples(tuple_dims=False, low=-2, high=2, shape=(3, 4, 3)),
           dtypes=WITH_UINT8),
    OpInfo("prod_dtype", lambda lib, x: x.prod(1, dtype=lib.float64),
           lambda x: np.prod(_f(x), axis=1),
           lambda rng, dtype: [Sample((make_arg(rng, (3, 4), dtype),))], dtypes=ALL_DTYPES),
    OpInfo("amax", lambda lib, x, **kw: lib.amax(x, **kw), _amax_ref, _reduce_samples(empty=False),
           dtypes=WITH_UINT8),
    OpInfo("amin", lambda lib, x, **kw: lib.amin(x, **kw), _amin_ref, _reduce_samples(empty=False),
           dtypes=WITH_UINT8),
    OpInfo("max_all", lambda lib, x: lib.max(x), lambda x: np.max(_acc(x)), _whole_samples,
           dtypes=ALL_DTYPES),
    OpInfo("min_all", lambda lib, x: x.min(), lambda x: np.min(_acc(x)), _whole_samples,
           dtypes=ALL_DTYPES),
    OpInfo("max_dim", lambda lib, x, dim, keepdim=False: tuple(lib.max(x, dim, keepdim=keepdim)),
           _max_dim_ref(np.max, np.max), lambda rng, dtype: [s for s in _arg_samples(rng, dtype)
                                                           if "dim" in s.kwargs],
           dtypes=ALL_DTYPES),
    OpInfo("min_dim", lambda lib, x, dim, keepdim=False: tuple(x.min(dim=dim, keepdim=keepdim)),
           _max_dim_ref(np.min, np.min), lambda rng, dtype: [s for s in _arg_samples(rng, dtype)
                                                           if "dim" in s.kwargs],
           dtypes=ALL_DTYPES),
    OpInfo("max_dim_fields", lambda lib, x: (lib.max(x, 1).values, lib.max(x, 1).indices,
                                             x.min(0).indices),
           lambda x: (np.max(_f(x), 1), np.argmax(x, 1), np.argmin(x, 0)),
           lambda rng, dtype: [Sample((make_arg(rng, (3, 4), dtype),))], dtypes=(tp.float32,)),
    OpInfo("max_binary", lambda lib, x, y: lib.max(x, y), lambda x, y: np.maximum(_f(x), _f(y)),
           _binary_extremum_samples, dtypes=NUMERIC),
    OpInfo("min_binary", lambda lib, x, y: x.min(y), lambda x, y: np.minimum(_f(x), _f(y)),
           _binary_extremum_samples, dtypes=NUMERIC),
    OpInfo("argmax", lambda lib, x, **kw: lib.argmax(x, **kw), _arg_ref(np.max), _arg_samples,
           dtypes=NUMERIC),
    OpInfo("argmin", lambda lib, x, **kw: x.argmin(**kw), _arg_ref(np.min), _arg_samples,
           dtypes=NUMERIC),
    OpInfo("var", lambda lib, x, **kw: lib.var(x, **kw), _var_ref, _var_samples, dtypes=FLOATS),
    OpInfo("std", lambda lib, x, **kw: x.std(**kw), _std_ref, _var_samples, dtypes=FLOATS),
    OpInfo("logsumexp", lambda lib, x, **kw: lib.logsumexp(x, **kw), _lse_ref, _lse_samples,
           dtypes=ALL_DTYPES),
    OpInfo("all", lambda lib, x, **kw: lib.all(x, **kw), _all_ref,
           _reduce_samples(low=-1, high=2), dtypes=WITH_UINT8),
    OpInfo("any", lambda lib, x, **kw: x.any(**kw), _any_ref,
           _reduce_samples(low=-1, high=2), dtypes=WITH_UINT8),
    OpInfo("all_any_no_dims", lambda lib, x: (lib.all(x, ()), lib.any(x, dim=())),
           lambda x: (np.asarray(x) != 0, np.asarray(x) != 0),
           lambda rng, dtype: [Sample((make_arg(rng, (2, 3), dtype, low=-1, high=2),))],
           dtypes=(tp.float32, tp.int64, tp.bool)),
    OpInfo("softmax", lambda lib, x, **kw: lib.softmax(x, **kw), _softmax_ref, _softmax_samples,
           dtypes=FLOATS),
    OpInfo("log_softmax", lambda lib, x, **kw: x.log_softmax(**kw), _log_softmax_ref,
           _softmax_samples, dtypes=FLOATS),
    OpInfo("softmax_dtype", lambda lib, x, dim: (lib.softmax(x, dim, lib.float64),
                                                 lib.log_softmax(x, dim, dtype=lib.float32)),
           lambda x, dim: (_softmax_ref(x, dim), _log_softmax_ref(x, dim)), _dim_samples,
           dtypes=(tp.float16, tp.float32, tp.int64, tp.int8)),
    OpInfo("norm", lambda lib, x, **kw: lib.norm(x, **kw), _norm_ref, _norm_samples, dtypes=FLOATS),
    OpInfo("norm_dtype",
           lambda lib, x: (x.norm(dtype=lib.float64), x.norm(1, 0, dtype=lib.float64)),
           lambda x: (_norm_ref(x), _norm_ref(x, 1, 0)),
           lambda rng, dtype: [Sample((make_arg(rng, (3, 4), dtype),))], dtypes=FLOATS),
    OpInfo("cumsum", lambda lib, x, **kw: lib.cumsum(x, **kw), _cumsum_ref, _dim_samples,
           dtypes=WITH_UINT8),
    OpInfo("cumsum_dtype", lambda lib, x, dim: x.cumsum(dim, dtype=lib.float64),
           lambda x, dim: _cumsum_ref(_f(x), dim), _dim_samples, dtypes=ALL_DTYPES),
    OpInfo("layer_norm",
           lambda lib, x, shape, *params, **kw: lib.layer_norm(x, shape, *params, **kw),
           _layer_norm_ref, _layer_norm_samples, dtypes=FLOATS),
    OpInfo("reduction_methods", _methods, _methods_ref, _methods_samples,
           dtypes=(tp.float32, tp.float64)),
]


def _ones(*shape, dtype=tp.float32):
    return tp.ones(*shape, dtype=dtype)


ERRORS = [
    ErrorCase("sum_dim_out_of_range", lambda lib: _ones(2, 3).sum(2), IndexError,
              r"tp\.sum: Dimension out of range \(expected to be in range of \[-2, 1\], "
              r"but got 2\)"),
    ErrorCase("sum_0d_dim_out_of_range", lambda lib: lib.tensor(1.0).sum(1), IndexError,
              r"tp\.sum: Dimension out of range \(expected to be in range of \[-1, 0\], "
              r"but got 1\)"),
    ErrorCase("sum_repeated_dim", lambda lib: _ones(2, 3).sum((0, -2)), RuntimeError,
              r"tp\.sum: dim 0 appears multiple times in the list of dims"),
    ErrorCase("sum_dim_not_int", lambda lib: _ones(2, 3).sum("0"), TypeError,
              r"sum\(\): argument 'dim' must be int or tuple of ints, not str"),
    ErrorCase("mean_of_int", lambda lib: lib.tensor([1, 2]).mean(), RuntimeError,
              r"tp\.mean: could not infer output dtype\. Input dtype must be either a floating "
              r"point or complex dtype\. Got: int64"),
    ErrorCase("mean_int_dtype", lambda lib: _ones(2).mean(dtype=lib.int32), RuntimeError,
              r"tp\.mean: could not infer output dtype\. Optional dtype must be"),
    ErrorCase("mean_dim_out_of_range", lambda lib: _ones(2, 3).mean(-3), IndexError,
              r"tp\.mean: Dimension out of range"),
    ErrorCase("prod_tuple_dim", lambda lib: _ones(2, 3).prod((0, 1)), TypeError,
              r"prod\(\): argument 'dim' must be int, not tuple"),
    ErrorCase("amax_empty_dim", lambda lib: _ones(0, 3).amax(0), IndexError,
              r"tp\.amax: Expected reduction dim 0 to have non-zero size"),
    ErrorCase("amin_empty_all", lambda lib: _ones(0, 3).amin(), RuntimeError,
              r"tp\.amin: Expected reduction dim to be specified for input\.numel\(\) == 0"),
    ErrorCase("max_empty", lambda lib: _ones(0).max(), RuntimeError,
              r"tp\.amax: Expected reduction dim to be specified"),
    ErrorCase("max_dim_out_of_range", lambda lib: _ones(2, 3).max(2), IndexError,
              r"tp\.amax: Dimension out of range \(expected to be in range of \[-2, 1\], "
              r"but got 2\)"),
    ErrorCase("min_dim_empty", lambda lib: _ones(0, 3).min(0), IndexError,
              r"tp\.amin: Expected reduction dim 0 to have non-zero size"),
    ErrorCase("argmax_empty", lambda lib: _ones(0, 3).argmax(), IndexError,
              r"tp\.argmax: Expected reduction dim to be specified for input\.numel\(\) == 0"),
    ErrorCase("argmin_dim_out_of_range", lambda lib: _ones(3).argmin(1), IndexError,
              r"tp\.argmin: Dimension out of range \(expected to be in range of \[-1, 0\], "
              r"but got 1\)"),
    ErrorCase("argmax_bool", lambda lib: lib.tensor([True]).argmax(), RuntimeError,
              r"argmax\(\): does not support bool input"),
    ErrorCase("argmax_tuple_dim", lambda lib: _ones(2, 3).argmax((0,)), TypeError,
              r"argmax\(\): argument 'dim' must be int, not tuple"),
    ErrorCase("var_of_int", lambda lib: lib.tensor([1, 2]).var(), RuntimeError,
              r"tp\.var: std and var only support floating point and complex dtypes"),
    ErrorCase("std_of_bool", lambda lib: lib.tensor([True]).std(), RuntimeError,
              r"tp\.var: std and var only support floating point"),
    ErrorCase("var_unbiased_and_correction",
              lambda lib: _ones(3).var(0, unbiased=False, correction=0), TypeError,
              r"var\(\): pass either 'unbiased' or 'correction', not both"),
    ErrorCase("var_bad_correction", lambda lib: _ones(3).var(correction="1"), TypeError,
              r"var\(\): argument 'correction' must be a number, not str"),
    ErrorCase("var_dim_out_of_range", lambda lib: _ones(3).std(4), IndexError,
              r"tp\.var: Dimension out of range"),
    ErrorCase("logsumexp_needs_dim", lambda lib: lib.logsumexp(_ones(3)), TypeError, r"dim"),
    ErrorCase("logsumexp_dim_out_of_range", lambda lib: _ones(3).logsumexp(1), IndexError,
              r"tp\.logsumexp: Dimension out of range"),
    ErrorCase("all_dim_out_of_range", lambda lib: _ones(3).all(-2), IndexError,
              r"tp\.all: Dimension out of range"),
    ErrorCase("softmax_of_int", lambda lib: lib.tensor([1, 2]).softmax(0), RuntimeError,
              r"tp\.softmax: not implemented for dtype int64"),
    ErrorCase("log_softmax_int_dtype", lambda lib: _ones(2).log_softmax(0, dtype=lib.int32),
              RuntimeError, r"tp\.log_softmax: not implemented for dtype int32"),
    ErrorCase("softmax_dim_out_of_range", lambda lib: _ones(2, 3).softmax(2), IndexError,
              r"tp\.softmax: Dimension out of range \(expected to be in range of \[-2, 1\], "
              r"but got 2\)"),
    ErrorCase("softmax_tuple_dim", lambda lib: _ones(2, 3).softmax((1,)), TypeError,
              r"softmax\(\): argument 'dim' must be int, not tuple"),
    ErrorCase("cumsum_dim_out_of_range", lambda lib: lib.tensor(1.0).cumsum(1), IndexError,
              r"tp\.cumsum: Dimension out of range \(expected to be in range of \[-1, 0\], "
              r"but got 1\)"),
    ErrorCase("cumsum_to_bool", lambda lib: _ones(3).cumsum(0, dtype=lib.bool), RuntimeError,
              r"tp\.cumsum: not implemented for result dtype bool"),
    ErrorCase("norm_of_int", lambda lib: lib.tensor([3, 4]).norm(), RuntimeError,
              r"norm: Expected a floating point tensor as input\. Got int64"),
    ErrorCase("norm_bad_order", lambda lib: _ones(2, 2).norm("abc"), ValueError,
              r"norm: order 'abc' is not supported"),
    ErrorCase("norm_inf_of_empty", lambda lib: _ones(0, 3).norm(float("inf")), RuntimeError,
              r"norm: cannot compute the inf norm on an empty tensor"),
    ErrorCase("norm_narrowing_dtype", lambda lib: _ones(2).norm(dtype=lib.float16), RuntimeError,
              r"norm: the dtype of the input \(float32\) should be convertible without narrowing"),
    ErrorCase("layer_norm_shape_mismatch", lambda lib: lib.layer_norm(_ones(2, 3), (2,)),
              RuntimeError,
              r"tp\.layer_norm: Given normalized_shape=\[2\], expected input with shape \[\*, 2\], "
              r"but got input of size\[2, 3\]"),
    ErrorCase("layer_norm_weight_shape", lambda lib: lib.layer_norm(_ones(2, 3), (3,), _ones(2)),
              RuntimeError,
              r"tp\.layer_norm: Expected weight to be of same shape as normalized_shape, "
              r"but got weight of shape \[2\] and normalized_shape = \[3\]"),
    ErrorCase("layer_norm_empty_shape", lambda lib: lib.layer_norm(_ones(2, 3), ()), RuntimeError,
              r"tp\.layer_norm: Expected normalized_shape to be at least 1-dimensional"),
    ErrorCase("layer_norm_int_input", lambda lib: lib.layer_norm(lib.tensor([[1, 2]]), (2,)),
              RuntimeError, r"tp\.layer_norm: not implemented for dtype int64"),
    ErrorCase("layer_norm_mixed_dtypes", lambda lib: lib.layer_norm(
                  _ones(2, 3, dtype=lib.float64), (3,), _ones(3)),
              RuntimeError,
              r"tp\.layer_norm: mixed dtypes: input is float64 but weight is float32"),
    ErrorCase("layer_norm_int_shape", lambda lib: lib.layer_norm(_ones(2, 3), 3), TypeError,
              r"layer_norm\(\): argument 'normalized_shape' must be tuple of ints, not int"),
]
