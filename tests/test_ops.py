"""Every op case of the shared table, on tensorplay against numpy and against PyTorch,
plus the registry-wide checks: inferred types equal the reference results, and every
registered tp op is exercised by some case."""

from __future__ import annotations

import importlib.util

import zlib

import numpy as np
import pytest

import tensorplay as tp
from tensorplay._dispatch import capture_handler
from tensorplay.dialects.tp import all_ops
from tests.opinfo import ALL, ERRORS, OpInfo, to_lib, to_numpy

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _cases():
    for info in ALL:
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{info.name}-{dtype.name}")


def _samples(info: OpInfo, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{info.name}-{dtype.name}".encode()))
    return list(info.samples(rng, dtype))


def _flatten(value):
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


def _assert_close(actual, expected, dtype, info: OpInfo, what: str):
    actual, expected = _flatten(actual), _flatten(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} results, expected {len(expected)}"
    # integer and bool inputs of float-valued ops compute in the default float dtype
    rtol, atol = info.tolerance(dtype if dtype.is_floating_point or dtype in info.tol else tp.float32)
    for a, e in zip(actual, expected):
        if not isinstance(a, np.ndarray) and not isinstance(e, np.ndarray):
            if isinstance(e, float):
                assert a == pytest.approx(e, rel=rtol, abs=atol, nan_ok=True), what
            else:
                assert a == e, what
            continue
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{what}: shape {a.shape} != expected {e.shape}"
        if not info.compare_values:
            continue
        if a.dtype.kind in "fc" or e.dtype.kind in "fc":
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(a, e, err_msg=what)


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_op_matches_numpy_reference(info: OpInfo, dtype):
    if info.ref is None:
        pytest.skip("no independent numpy expectation for this case (checked against PyTorch)")
    for sample in _samples(info, dtype):
        result = info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
        with np.errstate(all="ignore"):
            expected = info.ref(*sample.args, **sample.kwargs)
        _assert_close(to_numpy(result), to_numpy(expected), dtype, info,
                      f"{info.name}[{dtype.name}] {sample.desc}")


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (optional oracle)")
@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_op_matches_pytorch(info: OpInfo, dtype):
    import torch

    if dtype in info.torch_skip_dtypes:
        pytest.skip(f"PyTorch does not implement {info.name} for {dtype.name}")
    for sample in _samples(info, dtype):
        ours = info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
        theirs = info.fn(torch, *to_lib(torch, sample.args), **sample.kwargs)
        what = f"{info.name}[{dtype.name}] {sample.desc}"
        for o, t in zip(_flatten(ours), _flatten(theirs)):
            if isinstance(o, tp.Tensor):
                assert o.dtype.name == str(t.dtype).replace("torch.", ""), \
                    f"{what}: dtype {o.dtype.name} != PyTorch's {t.dtype}"
        _assert_close(to_numpy(ours), to_numpy(theirs), dtype, info, what)


class _Recorder:
    """A capture handler that checks each op's inference against its reference on the
    real operands, then lets the op run eagerly."""

    def __init__(self):
        self.seen: set[str] = set()

    def __call__(self, op, operands, attrs, result_types):
        self.seen.add(op.name)
        arrays = [None if o is None else o._data for o in operands]
        with np.errstate(all="ignore"):
            raw = op.reference(arrays, attrs)
        raw = raw if isinstance(raw, tuple) else (raw,)
        assert len(raw) == len(result_types), op.name
        for r, t in zip(raw, result_types):
            r = np.asarray(r)
            # a None dimension is a size known only at run time (e.g. tp.nonzero's count)
            assert len(r.shape) == len(t.shape) and all(
                d is None or d == s for d, s in zip(t.shape, r.shape)), \
                f"{op.name}: inferred shape {t.shape}, reference gave {r.shape}"
            kind = "b" if t.dtype.is_bool else ("f" if t.dtype.is_floating_point else "iu")
            assert r.dtype.kind in kind or (r.dtype.kind == "V" and kind == "f"), \
                f"{op.name}: inferred {t.dtype.name}, reference computed {r.dtype}"
        return NotImplemented


_RECORDED: set[str] = set()


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_inferred_types_match_reference_results(info: OpInfo, dtype):
    recorder = _Recorder()
    with capture_handler(recorder):
        for sample in _samples(info, dtype):
            info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
    _RECORDED.update(recorder.seen)


def test_every_registered_op_is_exercised_by_the_table():
    recorder = _Recorder()
    with capture_handler(recorder):
        for info in ALL:
            for dtype in info.dtypes:
                for sample in _samples(info, dtype):
                    info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
    missing = sorted(op.name for op in all_ops() if op.name not in recorder.seen)
    assert not missing, f"tp ops with no case in tests/opinfo: {missing}"


@pytest.mark.parametrize("case", ERRORS, ids=[e.name for e in ERRORS])
def test_bad_input_raises_clear_error(case):
    with pytest.raises(case.exc, match=case.match):
        case.fn(tp)


def test_the_reference_erf_is_accurate_to_its_precision():
    # numpy has no erf: float64 inputs take a series good to 1e-14, narrower ones a float32-precise path
    import math

    from tensorplay.dialects.tp.ops.elementwise import erf

    x = np.concatenate([np.linspace(-7, 7, 20001), np.logspace(-30, 1, 500), -np.logspace(-30, 1, 500)])
    for dtype, rtol in ((np.float64, 1e-13), (np.float32, 4e-7)):
        got = erf(x.astype(dtype))
        assert got.dtype == dtype
        xs = x.astype(dtype).astype(np.float64)
        exact = np.array([math.erf(v) for v in xs])
        np.testing.assert_allclose(got.astype(np.float64), exact, rtol=rtol, atol=1e-300, err_msg=str(dtype))
    special = erf(np.array([np.inf, -np.inf, np.nan, 0.0], np.float32))
    assert special[0] == 1.0 and special[1] == -1.0 and np.isnan(special[2]) and special[3] == 0.0
