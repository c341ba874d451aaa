"""Dtypes and PyTorch's type promotion, checked against PyTorch where installed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.dialects.tp import dtypes as dt

DTYPES = [tp.bool, tp.uint8, tp.int8, tp.int16, tp.int32, tp.int64, tp.float16, tp.bfloat16,
          tp.float32, tp.float64]


def test_promote_types_known_pairs():
    assert tp.promote_types(tp.int32, tp.float16) is tp.float16
    assert tp.promote_types(tp.uint8, tp.int8) is tp.int16
    assert tp.promote_types(tp.float16, tp.bfloat16) is tp.float32
    assert tp.promote_types(tp.bool, tp.int8) is tp.int8
    assert tp.promote_types(tp.int64, tp.float32) is tp.float32


def test_result_type_ranks_dimensioned_over_zero_dim_over_scalars():
    assert dt.result_type((tp.int8, 1), (tp.int64, 0)) is tp.int8
    assert dt.result_type((tp.int8, 1), (tp.float64, 0)) is tp.float64
    assert dt.result_type((tp.int32, 1), 2.5) is tp.float32
    assert dt.result_type((tp.float16, 2), 2.5) is tp.float16
    assert dt.result_type((tp.int32, 0), (tp.float64, 0)) is tp.float64
    assert dt.result_type((tp.bool, 1), 3) is tp.int64
    assert dt.result_type((tp.int32, 0), 2.5) is tp.float32


def test_default_dtype_changes_python_float_promotion():
    try:
        tp.set_default_dtype(tp.float64)
        assert tp.tensor([1.5]).dtype is tp.float64
        assert (tp.tensor([1, 2]) * 0.5).dtype is tp.float64
    finally:
        tp.set_default_dtype(tp.float32)
    with pytest.raises(TypeError, match="only floating-point"):
        tp.set_default_dtype(tp.int32)


def test_as_dtype_accepts_names_numpy_and_python_types():
    assert dt.as_dtype("float32") is tp.float32
    assert dt.as_dtype("f16") is tp.float16
    assert dt.as_dtype("long") is tp.int64
    assert dt.as_dtype(np.int8) is tp.int8
    assert dt.as_dtype(float) is tp.float32
    assert dt.as_dtype(bool) is tp.bool
    with pytest.raises(TypeError, match="no tensorplay equivalent"):
        dt.as_dtype(np.complex64)


def test_dtypes_pickle_to_the_same_object():
    import pickle

    for d in DTYPES:
        assert pickle.loads(pickle.dumps(d)) is d


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_promotion_matches_pytorch(a, b):
    torch = pytest.importorskip("torch")
    ta, tb = getattr(torch, a.name), getattr(torch, b.name)
    assert tp.promote_types(a, b).name == str(torch.promote_types(ta, tb)).replace("torch.", "")
    # tensor-tensor, tensor-0d and 0d-0d as the add op infers them
    x = tp.ones(2, dtype=a)
    for y_shape in ((2,), ()):
        y = tp.ones(y_shape, dtype=b)
        expected = torch.result_type(torch.ones(2, dtype=ta), torch.ones(y_shape, dtype=tb))
        if a is tp.bool and b is tp.bool:
            continue
        assert (x * y).dtype.name == str(expected).replace("torch.", "")


@pytest.mark.parametrize("d", DTYPES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5])
def test_scalar_promotion_matches_pytorch(d, scalar):
    torch = pytest.importorskip("torch")
    ours = (tp.ones(3, dtype=d) * scalar).dtype
    theirs = (torch.ones(3, dtype=getattr(torch, d.name)) * scalar).dtype
    assert ours.name == str(theirs).replace("torch.", "")
