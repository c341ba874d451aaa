"""Every case of the op table, compiled with dynamic=True (every argument size symbolic) and
run through the graph interpreter: the frontends and the shape inference of every op work
on symbolic sizes, and the result equals eager (values, shapes and dtypes)."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import tensorplay as tp
from tests.opinfo import ALL, OpInfo, to_lib, to_numpy


def _close(got, want, what):
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), what
        for g, w in zip(got, want):
            _close(g, w, what)
    elif isinstance(want, np.ndarray):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape} {got.dtype}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5,
                                   equal_nan=True, err_msg=what)
    else:
        assert got == want, what


@pytest.mark.parametrize("info", ALL, ids=[i.name for i in ALL])
def test_op_cases_capture_with_symbolic_sizes_like_eager(info: OpInfo, backend):
    dtype = info.dtypes[0]
    rng = np.random.default_rng(zlib.crc32(f"{info.name}-{dtype.name}".encode()))
    for sample in info.samples(rng, dtype):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
            except Exception:  # noqa: BLE001 - error cases are tested by test_ops
                continue
            tp.compiler.reset()
            compiled = tp.compile(lambda *a: info.fn(tp, *a, **sample.kwargs), backend=backend, dynamic=True)
            got = compiled(*to_lib(tp, sample.args))
        if info.compare_values:
            _close(to_numpy(got), to_numpy(want), f"{info.name} {sample.desc}")
    tp.compiler.reset()
