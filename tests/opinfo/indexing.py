"""Indexing cases: ``tensor[key]`` and ``tensor[key] = value`` for every key kind, index_put,
masked_fill, masked_select, gather, index_select, take_along_dim, tril/triu, nonzero and unique."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from tensorplay._dispatch import apply
from tests.opinfo import ALL_DTYPES, NUMERIC, ErrorCase, OpInfo, Sample, make_arg

_MASK_3 = np.array([True, False, True])
_MASK_4 = np.array([True, False, True, True])


def _keyed(shape, *keys):
    """Samples of one random input of ``shape`` indexed by each ``(key, desc)``."""

    def samples(rng, dtype):
        return [Sample((make_arg(rng, shape, dtype), key), desc=desc) for key, desc in keys]

    return samples


def _samples(*makers):
    """Samples from ``maker(rng, dtype) -> (args, desc)`` callables."""

    def samples(rng, dtype):
        out = []
        for make in makers:
            args, desc = make(rng, dtype)
            out.append(Sample(tuple(args), desc=desc))
        return out

    return samples


def _getitem(lib, a, key):
    return a[key]


def _getitem_ref(a, key):
    return np.asarray(a[key])


def _setitem(lib, a, key, value):
    a[key] = value
    return a


def _setitem_ref(a, key, value):
    out = a.copy()
    out[key] = value
    return out


# --- getitem -------------------------------------------------------------------------------

_BASIC = [
    _keyed((4, 5), (1, "int"), (-1, "negative int"), (slice(1, 3), "slice"),
           (slice(None, None, 2), "step"), ((slice(None), 1), "column"), ((1, slice(1, None, 2)), "row part"),
           ((-2, -3), "two negative ints"), (None, "None"), ((Ellipsis, None), "trailing None"),
           ((slice(None), None, slice(2, 4)), "None between"), (slice(10, 20), "past the end"),
           (slice(-10, 2), "start before 0"), (slice(3, 1), "stop before start"), ((), "empty tuple"),
           (Ellipsis, "Ellipsis"), ((np.int64(2), slice(None)), "numpy int")),
    _keyed((2, 3, 4), ((0, Ellipsis, 1), "Ellipsis between ints"),
           ((Ellipsis, 0, slice(None)), "Ellipsis lead"), ((None, 1, None, Ellipsis, None), "Nones around"),
           ((slice(None), slice(None, None, 2), -1), "mixed")),
    _keyed((0, 3), ((slice(None), 1), "empty rows"), ((None, Ellipsis), "None on empty")),
    _keyed((), (None, "0-d None"), (Ellipsis, "0-d Ellipsis"), ((), "0-d empty tuple"),
           ((None, None), "0-d Nones")),
]


def _chain(*makers):
    def samples(rng, dtype):
        return [s for make in makers for s in make(rng, dtype)]

    return samples


_ADVANCED = _chain(
    _keyed((4, 5), (np.array([0, 2, -1]), "int tensor"), ([0, 3], "int list"),
           ((slice(None), [1, 0, 1]), "list on dim 1 with repeats"),
           ((np.array([[0], [2]]), np.array([1, 3, 4])), "broadcast index tensors"),
           ([], "empty list"), (np.array([3, 1], np.int32), "int32 tensor"),
           ((slice(1, 3), np.array([0, 4])), "slice then tensor"),
           (np.zeros((0,), np.int64), "empty int tensor")),
    _keyed((3, 4, 5), ((np.array([0, 2]), slice(None), np.array([1, 3])), "separated tensors lead"),
           ((slice(None), np.array([0, 1]), np.array([[1], [2]])), "adjacent tensors in place"),
           ((None, np.array([0, 1]), slice(None), np.array([1, 2])), "None then separated"),
           ((Ellipsis, np.array([4, 0])), "Ellipsis then tensor"),
           ((np.array([[0, 1], [2, 2]]), Ellipsis), "2-d index tensor")),
    _keyed((0, 3), ((slice(None), [0, 2]), "tensor on empty tensor"), ([], "empty list on empty")),
)

_MASKS = _chain(
    _keyed((3, 4), (_MASK_3, "mask on dim 0"), ((slice(None), _MASK_4), "mask on dim 1"),
           ([True, False, True], "bool list"), (np.array(True), "0-d true mask"),
           (np.array(False), "0-d false mask"),
           (True, "python True"), ((False, 1), "python False then int"), (np.zeros(3, bool), "all false"),
           ((_MASK_3, np.array([0, 3])), "mask with index tensor")),
    _keyed((2, 3, 4), (np.array([[True, False, True], [False, False, True]]), "2-d mask on 3-d"),
           ((Ellipsis, _MASK_4), "Ellipsis then mask")),
    _keyed((0, 2), (np.zeros((0,), bool), "mask on empty")),
)


def _full_mask_samples(rng, dtype):
    a = make_arg(rng, (3, 4), dtype)
    return [Sample((a, make_arg(rng, (3, 4), tp.bool)), desc="random full mask"),
            Sample((make_arg(rng, (5,), dtype), make_arg(rng, (5,), tp.bool)), desc="1-d")]


# --- setitem -------------------------------------------------------------------------------

def _set_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(3, 4), 1, 5), desc="row = python int"),
        Sample((x(3, 4), (slice(None), 1), x(3)), desc="column = tensor"),
        Sample((x(3, 4), slice(1, 3), x(1, 4)), desc="rows = broadcast tensor"),
        Sample((x(3, 4), 0, x(1, 1, 4)), desc="leading ones dropped"),
        Sample((x(3, 4), Ellipsis, 1), desc="Ellipsis = scalar"),
        Sample((x(3, 4), (None, 0), 0), desc="None then int"),
        Sample((x(4, 2), slice(None, None, 2), x(2, 1)), desc="step rows"),
        Sample((x(3, 4), (-1, slice(1, None, 2)), x(2)), desc="strided part of a row"),
        Sample((x(3, 4), 2, 2.7), desc="python float"),
        Sample((x(3, 4), 0, True), desc="python bool"),
        Sample((x(3, 4), 1, np.array(3, np.int64)), desc="0-d int64 tensor value"),
        Sample((x(3, 4), 1, make_arg(rng, (4,), tp.float64)), desc="float64 tensor value"),
        Sample((x(0, 3), (slice(None), 1), 5), desc="empty"),
        Sample((x(), Ellipsis, 7), desc="0-d"),
        Sample((x(), None, x(1)), desc="0-d with None"),
    ]


def _set_advanced_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(3, 4), [0, 2], x(2, 4)), desc="rows by list"),
        Sample((x(3, 4), (slice(None), [0, 3]), x(3, 1)), desc="columns by list, broadcast value"),
        Sample((x(3, 4), (np.array([0, 2]), np.array([1, 3])), x(2)), desc="points"),
        Sample((x(3, 4), (np.array([[0], [2]]), np.array([1, 3])), 4), desc="broadcast index tensors"),
        Sample((x(2, 3, 4), (np.array([0, 1]), slice(None), np.array([1, 3])), x(2, 3)),
               desc="separated lead"),
        Sample((x(3,), [0, 0], x(2)), desc="repeated index: last wins"),
        Sample((x(3, 4), (np.array(1), slice(None)), 6), desc="0-d index tensor"),
        Sample((x(3, 4), [-1], x(4)), desc="negative index"),
        Sample((x(3, 4), [], 1), desc="empty index"),
        Sample((x(3, 4), True, 3), desc="python True"),
    ]


def _set_mask_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    a = x(3, 4)
    return [
        Sample((a, make_arg(rng, (3, 4), tp.bool), 2), desc="full mask = scalar"),
        Sample((x(3, 4), _MASK_3, x(4)), desc="row mask = row"),
        Sample((x(3, 4), _MASK_3, x(2, 4)), desc="row mask = one row per true"),
        Sample((x(3, 4), (slice(None), _MASK_4), x(3, 1)), desc="column mask"),
        Sample((x(3, 4), make_arg(rng, (3, 4), tp.bool), np.array(1, np.int64)), desc="0-d tensor value"),
        Sample((x(2, 3), np.array(True), x(2, 3)), desc="0-d mask"),
        Sample((x(0, 2), np.zeros((0,), bool), 1), desc="empty mask"),
    ]


# --- index_put -----------------------------------------------------------------------------

def _index_put_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(3, 2), (np.array([0, 2]),), x(2, 2)), desc="rows"),
        Sample((x(3, 4), (np.array([0, 2]), np.array([3, 1])), x(1)), desc="points, broadcast value"),
        Sample((x(3, 4), (_MASK_3,), x(4)), desc="mask"),
    ]


def _index_put_accumulate_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(3, 2), (np.array([0, 0, 2]),), x(3, 2)), {"accumulate": True}, desc="repeats add up"),
        Sample((x(3, 4), (np.array([1, 1]), np.array([2, 2])), x(2)), {"accumulate": True},
               desc="same point"),
        Sample((x(3,), (np.array(1),), x()), {"accumulate": True}, desc="0-d index"),
    ]


def _index_put(lib, a, indices, values, accumulate=False):
    return lib.index_put(a, indices, values, accumulate=accumulate)


def _index_put_ref(a, indices, values, accumulate=False):
    out = a.copy()
    if accumulate:
        np.add.at(out, indices, values)
    else:
        out[indices] = values
    return out


# --- masked_fill, masked_select, nonzero ------------------------------------------------------

def _masked_fill_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (3, 4), dtype), make_arg(rng, (3, 4), tp.bool), 2.5), desc="float value"),
        Sample((make_arg(rng, (3, 4), dtype), _MASK_4, 1), desc="mask broadcast over rows"),
        Sample((make_arg(rng, (4,), dtype), make_arg(rng, (3, 4), tp.bool), 0), desc="input broadcast"),
        Sample((make_arg(rng, (2, 3), dtype), make_arg(rng, (2, 3), tp.bool), np.array(-3, np.int64)),
               desc="0-d int tensor value"),
        Sample((make_arg(rng, (2, 3), dtype), make_arg(rng, (), tp.bool), np.array(1.5)), desc="0-d mask"),
        Sample((make_arg(rng, (0, 3), dtype), make_arg(rng, (0, 3), tp.bool), 1), desc="empty"),
        Sample((make_arg(rng, (), dtype), np.array(True), True), desc="0-d"),
    ]


def _masked_fill_ref(a, mask, value):
    return np.where(mask, np.asarray(value).astype(a.dtype) if a.dtype != bool else bool(value), a)


def _masked_select_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (3, 4), dtype), make_arg(rng, (3, 4), tp.bool)), desc="same shape"),
        Sample((make_arg(rng, (3, 4), dtype), _MASK_4), desc="mask broadcast"),
        Sample((make_arg(rng, (4,), dtype), make_arg(rng, (2, 4), tp.bool)), desc="input broadcast"),
        Sample((make_arg(rng, (), dtype), np.array(True)), desc="0-d"),
        Sample((make_arg(rng, (0, 2), dtype), np.zeros((0, 2), bool)), desc="empty"),
    ]


def _masked_select_ref(a, mask):
    a, mask = np.broadcast_arrays(a, mask)
    return a[mask]


def _sparse(rng, shape, dtype):
    """Data with about half zeros."""
    a = make_arg(rng, shape, dtype)
    return np.where(rng.random(shape) < 0.5, np.zeros((), a.dtype), a)


def _nonzero_samples(rng, dtype):
    return [Sample((_sparse(rng, s, dtype),), desc=desc) for s, desc in
            (((3, 4), "2-d"), ((5,), "1-d"), ((2, 3, 2), "3-d"), ((), "0-d"), ((0, 3), "empty"))] + \
        [Sample((np.zeros((2, 2), dtype.np_dtype),), desc="all zero")]


def _nonzero_ref(a):
    return np.transpose(np.nonzero(a)) if a.ndim else np.zeros((int(a != 0), 0), np.int64)


def _nonzero_tuple_ref(a):
    if a.ndim == 0:
        return (np.arange(int(a != 0)),)
    return tuple(np.nonzero(a))


# --- unique ----------------------------------------------------------------------------------

def _repeating(rng, shape, dtype):
    """Data with repeated values (a few distinct ones)."""
    if dtype is tp.bool:
        return make_arg(rng, shape, dtype)
    low = 0 if dtype.is_integer and not dtype.is_signed else -2
    return np.asarray(rng.integers(low, 3, size=shape)).astype(dtype.np_dtype)


def _unique_samples(rng, dtype):
    out = [Sample((_repeating(rng, s, dtype),), desc=desc) for s, desc in
           (((3, 4), "2-d"), ((7,), "1-d"), ((2, 3, 2), "3-d"), ((), "0-d"), ((0, 3), "empty"))]
    out.append(Sample((np.full((5,), 1, dtype.np_dtype),), desc="one value"))
    if dtype.is_floating_point:
        a = _repeating(rng, (6,), dtype)
        a[[1, 4]] = np.nan
        out.append(Sample((a,), desc="NaNs (each one distinct)"))
    return out


def _unique_ref(a, **kw):
    values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    out = (values.astype(a.dtype),) + ((inverse.reshape(a.shape),) if kw.get("return_inverse") else ()) + \
        ((counts,) if kw.get("return_counts") else ())
    return out[0] if len(out) == 1 else out


# --- gather, index_select, take_along_dim, tril/triu --------------------------------------------

def _gather_samples(rng, dtype):
    def idx(high, shape, np_dtype=np.int64):
        return rng.integers(0, high, size=shape).astype(np_dtype)

    return [
        Sample((make_arg(rng, (3, 4), dtype), 0, idx(3, (2, 4))), desc="dim 0"),
        Sample((make_arg(rng, (3, 4), dtype), 1, idx(4, (3, 6))), desc="dim 1, longer index"),
        Sample((make_arg(rng, (3, 4), dtype), -1, idx(4, (2, 2))), desc="smaller index"),
        Sample((make_arg(rng, (2, 3, 4), dtype), 1, idx(3, (2, 3, 4), np.int32)), desc="int32 index"),
        Sample((make_arg(rng, (3, 4), dtype), 0, idx(3, (0, 4))), desc="empty index"),
        Sample((make_arg(rng, (), dtype), 0, np.array(0)), desc="0-d"),
    ]


def _gather_ref(a, dim, index):
    if a.ndim == 0:
        return a.copy()
    dim %= a.ndim
    out = np.empty(index.shape, a.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        src[dim] = index[pos]
        out[pos] = a[tuple(src)]
    return out


def _scatter_samples(rng, dtype):
    def unique_rows(n, shape):  # no index repeats along dim 0 (which write wins is unspecified)
        return np.stack([rng.permutation(n)[:shape[0]] for _ in range(shape[1])], axis=1)

    return [
        Sample((make_arg(rng, (3, 4), dtype), 0, unique_rows(3, (2, 4)), make_arg(rng, (2, 5), dtype)),
               desc="dim 0, larger src"),
        Sample((make_arg(rng, (3, 4), dtype), 1, unique_rows(4, (2, 3)).T.copy(), make_arg(rng, (3, 2), dtype)),
               desc="dim 1"),
    ]


def _scatter_ref(a, dim, index, src, add=False):
    out = a.copy()
    dim %= a.ndim
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        dst[dim] = index[pos]
        if add:
            out[tuple(dst)] += src[pos]
        else:
            out[tuple(dst)] = src[pos]
    return out


def _scatter_add_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (3, 4), dtype), 0, rng.integers(0, 3, (4, 4)), make_arg(rng, (4, 4), dtype)),
               desc="repeats add up"),
        Sample((make_arg(rng, (2, 3, 2), dtype), 2, rng.integers(0, 2, (2, 2, 3)), make_arg(rng, (2, 3, 3), dtype)),
               desc="last dim, larger src"),
    ]


def _index_select_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (4, 3), dtype), 0, np.array([3, 0, 0])), desc="dim 0 with repeats"),
        Sample((make_arg(rng, (4, 3), dtype), -1, np.array([2, 1], np.int32)), desc="dim -1 int32"),
        Sample((make_arg(rng, (2, 3, 4), dtype), 1, np.zeros((0,), np.int64)), desc="empty index"),
        Sample((make_arg(rng, (4, 3), dtype), 0, np.array(2)), desc="0-d index"),
        Sample((make_arg(rng, (), dtype), 0, np.array([0])), desc="0-d input"),
    ]


def _index_select_ref(a, dim, index):
    if a.ndim == 0:
        return a.copy()
    return np.stack([np.take(a, int(i), axis=dim) for i in index.reshape(-1)], axis=dim) if index.size else \
        np.take(a, index.reshape(-1), axis=dim)


def _take_along_dim_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (3, 4), dtype), np.array([[0], [-1], [2]]), 1), desc="negative index"),
        Sample((make_arg(rng, (3, 4), dtype), np.array([[0, 3]]), 1), desc="broadcast rows"),
        Sample((make_arg(rng, (2, 3, 4), dtype), rng.integers(0, 2, (2, 1, 4)), 0), desc="broadcast 3-d"),
        Sample((make_arg(rng, (3, 4), dtype), np.array([0, 11, 5])), desc="flattened"),
    ]


def _take_along_dim_ref(a, index, dim=None):
    if dim is None:
        return a.reshape(-1)[index.reshape(-1)]
    return np.take_along_axis(a, index, axis=dim)


def _triangle_samples(rng, dtype):
    return [Sample((make_arg(rng, s, dtype), k), desc=f"{s} diagonal {k}") for s, k in
            (((3, 4), 0), ((4, 3), 1), ((3, 4), -1), ((2, 3, 3), 2), ((3, 5), -4), ((0, 2), 0),
             ((2, 0, 3), 0))]


def _triangle_ref(lower):
    def ref(a, k):
        rows = np.arange(a.shape[-2])[:, None]
        cols = np.arange(a.shape[-1])[None, :]
        keep = (cols - rows <= k) if lower else (cols - rows >= k)
        return np.where(keep, a, np.zeros((), a.dtype))

    return ref


OPS = [
    OpInfo("getitem_basic", _getitem, _getitem_ref, _chain(*_BASIC), dtypes=ALL_DTYPES),
    OpInfo("getitem_advanced", _getitem, _getitem_ref, _ADVANCED, dtypes=ALL_DTYPES),
    OpInfo("getitem_mask", _getitem, _getitem_ref, _MASKS, dtypes=ALL_DTYPES),
    OpInfo("getitem_random_mask", _getitem, _getitem_ref, _full_mask_samples, dtypes=ALL_DTYPES),
    # PyTorch applies ints (and 0-d index tensors) before the other tensors: this differs
    # from numpy, so these expectations spell the two steps out.
    OpInfo("getitem_int_then_tensor", lambda lib, a, i: a[0, :, i], lambda a, i: a[0][:, i],
           _samples(lambda rng, d: ((make_arg(rng, (3, 4, 5), d), np.array([0, 4, 1])),
                                    "int, slice, tensor")),
           dtypes=ALL_DTYPES),
    OpInfo("getitem_0d_tensor_then_tensor", lambda lib, a, t, i: a[t, :, i], lambda a, t, i: a[int(t)][:, i],
           _samples(lambda rng, d: ((make_arg(rng, (3, 4, 5), d), np.array(-1), np.array([[1], [2]])),
                                    "0-d tensor, slice, 2-d tensor")),
           dtypes=ALL_DTYPES),
    OpInfo("setitem_0d_tensor_then_list", lambda lib, a, t, v: _setitem(lib, a, (t, slice(None), [0, 1]), v),
           lambda a, t, v: _setitem_ref(a, (int(t), slice(None), [0, 1]), v.T),
           _samples(lambda rng, d: ((make_arg(rng, (2, 3, 4), d), np.array(1), make_arg(rng, (3, 2), d)),
                                    "0-d tensor, slice, list")), dtypes=ALL_DTYPES),
    OpInfo("setitem_basic", _setitem, _setitem_ref, _set_samples, dtypes=ALL_DTYPES),
    OpInfo("setitem_advanced", _setitem, _setitem_ref, _set_advanced_samples, dtypes=ALL_DTYPES),
    OpInfo("setitem_mask", _setitem, _setitem_ref, _set_mask_samples, dtypes=ALL_DTYPES),
    OpInfo("index_put", _index_put, _index_put_ref, _index_put_samples, dtypes=ALL_DTYPES),
    OpInfo("index_put_accumulate", _index_put, _index_put_ref, _index_put_accumulate_samples, dtypes=NUMERIC),
    OpInfo("masked_fill", lambda lib, a, m, v: a.masked_fill(m, v), _masked_fill_ref, _masked_fill_samples,
           dtypes=ALL_DTYPES),
    OpInfo("masked_fill_inplace", lambda lib, a, m, v: a.masked_fill_(m, v), _masked_fill_ref,
           _samples(lambda rng, d: ((make_arg(rng, (3, 4), d), make_arg(rng, (3, 4), tp.bool), 1), "3x4")),
           dtypes=ALL_DTYPES),
    OpInfo("masked_select", lambda lib, a, m: lib.masked_select(a, m), _masked_select_ref,
           _masked_select_samples, dtypes=ALL_DTYPES),
    OpInfo("nonzero", lambda lib, a: lib.nonzero(a), _nonzero_ref, _nonzero_samples, dtypes=ALL_DTYPES),
    OpInfo("nonzero_as_tuple", lambda lib, a: a.nonzero(as_tuple=True), _nonzero_tuple_ref, _nonzero_samples,
           dtypes=ALL_DTYPES),
    OpInfo("argwhere", lambda lib, a: lib.argwhere(a), _nonzero_ref, _nonzero_samples, dtypes=(tp.float32,)),
    OpInfo("where_one_argument", lambda lib, a: lib.where(a), _nonzero_tuple_ref, _nonzero_samples,
           dtypes=(tp.bool,)),
    OpInfo("unique", lambda lib, a: lib.unique(a), _unique_ref, _unique_samples, dtypes=ALL_DTYPES),
    OpInfo("unique_inverse_counts", lambda lib, a: lib.unique(a, return_inverse=True, return_counts=True),
           lambda a: _unique_ref(a, return_inverse=True, return_counts=True), _unique_samples, dtypes=ALL_DTYPES),
    OpInfo("unique_method_counts", lambda lib, a: a.unique(sorted=True, return_counts=True),
           lambda a: _unique_ref(a, return_counts=True), _unique_samples, dtypes=(tp.float32, tp.int64)),
    OpInfo("gather", lambda lib, a, d, i: a.gather(d, i), _gather_ref, _gather_samples, dtypes=ALL_DTYPES),
    OpInfo("scatter", lambda lib, a, d, i, src: a.scatter(d, i, src), _scatter_ref, _scatter_samples,
           dtypes=NUMERIC),
    OpInfo("scatter_add", lambda lib, a, d, i, src: lib.scatter_add(a, d, i, src),
           lambda a, d, i, src: _scatter_ref(a, d, i, src, add=True), _scatter_add_samples, dtypes=NUMERIC),
    OpInfo("index_select", lambda lib, a, d, i: a.index_select(d, i), _index_select_ref,
           _index_select_samples, dtypes=ALL_DTYPES),
    OpInfo("take_along_dim", lambda lib, a, i, *d: lib.take_along_dim(a, i, *d), _take_along_dim_ref,
           _take_along_dim_samples, dtypes=ALL_DTYPES),
    OpInfo("tril", lambda lib, a, k: a.tril(k), _triangle_ref(True), _triangle_samples, dtypes=ALL_DTYPES),
    OpInfo("triu", lambda lib, a, k: lib.triu(a, diagonal=k), _triangle_ref(False), _triangle_samples,
           dtypes=ALL_DTYPES),
]


def _assign(lib, x, key, value):
    x[key] = value
    return x


ERRORS = [
    ErrorCase("getitem_int_out_of_range", lambda lib: lib.zeros(3, 4)[3], IndexError,
              r"index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("getitem_negative_int_out_of_range", lambda lib: lib.zeros(3, 4)[-4], IndexError,
              r"index -4 is out of bounds for dimension 0 with size 3"),
    ErrorCase("getitem_int_out_of_range_dim_1", lambda lib: lib.zeros(3, 4)[:, 4], IndexError,
              r"index 4 is out of bounds for dimension 1 with size 4"),
    ErrorCase("getitem_tensor_out_of_range", lambda lib: lib.zeros(3, 4)[lib.tensor([0, 3])], IndexError,
              r"tp\.index: index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("getitem_negative_tensor_out_of_range", lambda lib: lib.zeros(3, 4)[:, lib.tensor([-5])],
              IndexError, r"index -5 is out of bounds for dimension 1 with size 4"),
    ErrorCase("getitem_0d_tensor_out_of_range", lambda lib: lib.zeros(3, 4)[lib.tensor(5)], IndexError,
              r"index 5 is out of bounds for dimension 0 with size 3"),
    ErrorCase("getitem_too_many_indices", lambda lib: lib.zeros(3, 4)[0, 0, 0], IndexError,
              r"too many indices for tensor of dimension 2"),
    ErrorCase("getitem_index_of_0d", lambda lib: lib.tensor(1.0)[0], IndexError,
              r"invalid index of a 0-dim tensor"),
    ErrorCase("getitem_negative_step", lambda lib: lib.zeros(4)[::-1], ValueError,
              r"step must be greater than zero"),
    ErrorCase("getitem_zero_step", lambda lib: lib.zeros(4)[::0], ValueError, r"slice step cannot be zero"),
    ErrorCase("getitem_float_key", lambda lib: lib.zeros(4)[1.5], IndexError,
              r"only integers, slices \(`:`\), ellipsis \(`\.\.\.`\), None and long or byte Variables are "
              r"valid indices \(got float\)"),
    ErrorCase("getitem_float_tensor_key", lambda lib: lib.zeros(4)[lib.tensor([1.0])], IndexError,
              r"tensors used as indices must be long, int, byte or bool tensors"),
    ErrorCase("getitem_mask_shape_mismatch", lambda lib: lib.zeros(3, 4)[lib.tensor([True, False])],
              IndexError, r"The shape of the mask \[2\] at index 0 does not match the shape of the indexed "
                          r"tensor \[3, 4\] at index 0"),
    ErrorCase("getitem_index_tensors_do_not_broadcast",
              lambda lib: lib.zeros(3, 4)[lib.tensor([0, 1]), lib.tensor([0, 1, 2])], IndexError,
              r"shape mismatch: indexing tensors could not be broadcast together with shapes \[2\], \[3\]"),
    ErrorCase("setitem_value_does_not_broadcast",
              lambda lib: _assign(lib, lib.zeros(3, 4), (slice(None), 1), lib.zeros(2)), RuntimeError,
              r"shape mismatch: value tensor of shape \[2\] cannot be broadcast to indexing result of "
              r"shape \[3\]"),
    ErrorCase("setitem_mask_values_count",
              lambda lib: _assign(lib, lib.zeros(3, 4), lib.tensor([True, False, True]), lib.zeros(3, 4)),
              RuntimeError,
              r"value tensor of shape \[3, 4\] cannot be broadcast to indexing result of shape \[2, 4\]"),
    ErrorCase("setitem_out_of_range", lambda lib: _assign(lib, lib.zeros(3), 3, 1.0), IndexError,
              r"index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("setitem_tensor_index_out_of_range",
              lambda lib: _assign(lib, lib.zeros(3), lib.tensor([1, 3]), 1.0), IndexError,
              r"tp\.index_put: index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("setitem_value_overflow", lambda lib: _assign(lib, lib.zeros(3, dtype=lib.int8), 0, 1000),
              RuntimeError,
              r"value 1000 cannot be converted to type int8 without overflow"),
    ErrorCase("setitem_list_value", lambda lib: _assign(lib, lib.zeros(3), 0, [1, 2]), TypeError,
              r"can't assign a list to a tensorplay\.FloatTensor"),
    ErrorCase("index_put_dtype_mismatch",
              lambda lib: lib.index_put(lib.zeros(3), (lib.tensor([0]),), lib.tensor([1])), RuntimeError,
              r"Index put requires the source and destination dtypes match, got float32 for the destination "
              r"and int64 for the source"),
    ErrorCase("index_put_non_tensor_index", lambda lib: lib.index_put(lib.zeros(3), (None,), lib.zeros(1)),
              TypeError, r"expected Tensor as element 0 in argument 1, but got NoneType"),
    ErrorCase("masked_fill_float_mask", lambda lib: lib.zeros(4).masked_fill(lib.ones(4), 2.0), RuntimeError,
              r"masked_fill_ only supports boolean masks, but got mask with dtype float32"),
    ErrorCase("masked_fill_1d_value",
              lambda lib: lib.zeros(4).masked_fill(lib.ones(4, dtype=lib.bool), lib.ones(1)), RuntimeError,
              r"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 "
              r"dimension\(s\)\."),
    ErrorCase("masked_fill_overflow",
              lambda lib: lib.zeros(4, dtype=lib.int8).masked_fill(lib.ones(4, dtype=lib.bool), 1000),
              RuntimeError,
              r"value 1000 cannot be converted to type int8 without overflow"),
    ErrorCase("masked_fill_mask_does_not_broadcast",
              lambda lib: lib.zeros(3, 4).masked_fill(lib.ones(3, dtype=lib.bool), 1.0), RuntimeError,
              r"tp\.where: The size of tensor a \(3\) must match the size of tensor b \(4\)"),
    ErrorCase("masked_select_float_mask", lambda lib: lib.zeros(4).masked_select(lib.ones(4)), RuntimeError,
              r"masked_select: expected BoolTensor for mask"),
    ErrorCase("gather_out_of_range", lambda lib: lib.zeros(3, 4).gather(0, lib.tensor([[3]])), RuntimeError,
              r"tp\.gather: index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("gather_negative_index", lambda lib: lib.zeros(3, 4).gather(1, lib.tensor([[-1]])),
              RuntimeError,
              r"index -1 is out of bounds for dimension 1 with size 4"),
    ErrorCase("gather_float_index", lambda lib: lib.zeros(3, 4).gather(0, lib.tensor([[1.0]])), RuntimeError,
              r"tp\.gather: index must be an int32 or int64 tensor, got float32"),
    ErrorCase("gather_rank_mismatch", lambda lib: lib.zeros(3, 4).gather(0, lib.tensor([1])), RuntimeError,
              r"Index tensor must have the same number of dimensions as input tensor"),
    ErrorCase("gather_index_too_large",
              lambda lib: lib.zeros(3, 4).gather(0, lib.zeros(4, 5, dtype=lib.int64)), RuntimeError,
              r"Size does not match at dimension 1 expected index \[4, 5\] to be no larger than self "
              r"\[3, 4\] apart from dimension 0"),
    ErrorCase("gather_dim_out_of_range",
              lambda lib: lib.zeros(3, 4).gather(2, lib.zeros(3, 4, dtype=lib.int64)), IndexError,
              r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ErrorCase("index_select_out_of_range", lambda lib: lib.zeros(3, 4).index_select(0, lib.tensor([3])),
              IndexError, r"tp\.index_select: index 3 is out of bounds for dimension 0 with size 3"),
    ErrorCase("index_select_negative_index", lambda lib: lib.zeros(3, 4).index_select(1, lib.tensor([-1])),
              RuntimeError, r"index -1 is out of bounds for dimension 1 with size 4"),
    ErrorCase("index_select_matrix_index", lambda lib: lib.zeros(3, 4).index_select(0, lib.tensor([[1]])),
              IndexError, r"Index is supposed to be a vector"),
    ErrorCase("take_along_dim_rank_mismatch",
              lambda lib: lib.take_along_dim(lib.zeros(3, 4), lib.zeros(3, 4, 2, dtype=lib.int64), 1),
              RuntimeError,
              r"take_along_dim\(\): input and indices should have the same number of dimensions, but got 2 "
              r"dimensions for input, and 3 dimensions for indices"),
    ErrorCase("tril_1d", lambda lib: lib.zeros(3).tril(), RuntimeError,
              r"tp\.tril: input tensor must have at least 2 dimensions"),
    ErrorCase("triu_0d", lambda lib: lib.triu(lib.tensor(1.0)), RuntimeError,
              r"tp\.triu: input tensor must have at least 2 dimensions"),
    ErrorCase("index_op_unsorted_dims",
              lambda lib: apply("tp.index", lib.zeros(3, 4), lib.tensor([0]), lib.tensor([0]), dims=(1, 0)),
              IndexError, r"tp\.index: 'dims' must be increasing dimensions of a rank-2 input, got \[1, 0\]"),
    ErrorCase("index_op_dims_count",
              lambda lib: apply("tp.index", lib.zeros(3, 4), lib.tensor([0]), dims=(0, 1)), ValueError,
              r"tp\.index: 'dims' names 2 dimension\(s\) for 1 index tensor\(s\)"),
    ErrorCase("index_put_op_values_shape",
              lambda lib: apply("tp.index_put", lib.zeros(3, 4), lib.zeros(3), lib.tensor([0, 1]), dims=(0,)),
              ValueError,
              r"tp\.index_put: values of shape \[3\] do not match the indexing result of shape \[2, 4\]"),
    ErrorCase("index_put_op_values_dtype",
              lambda lib: apply("tp.index_put", lib.zeros(3), lib.tensor([1]), lib.tensor([0]), dims=(0,)),
              TypeError, r"tp\.index_put: values have dtype int64, input float32"),
]
