"""Property-based checks of the rules every op shares: broadcasting, promotion, and
elementwise results over arbitrary shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorplay as tp
from tensorplay.dialects.tp import dtypes as dt
from tensorplay.dialects.tp.shapes import broadcast_shapes

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from(list(dt.ALL_DTYPES))


@given(shapes, shapes)
def test_broadcast_shapes_agrees_with_numpy(a, b):
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(tp.ShapeError, match="must match"):
            broadcast_shapes("tp.test", a, b)
    else:
        assert broadcast_shapes("tp.test", a, b) == expected


@given(dtypes, dtypes, dtypes)
def test_promotion_is_commutative_and_associative(a, b, c):
    assert dt.promote_types(a, b) is dt.promote_types(b, a)
    assert dt.promote_types(dt.promote_types(a, b), c) is dt.promote_types(a, dt.promote_types(b, c))


@given(dtypes, dtypes)
def test_promotion_never_loses_category(a, b):
    r = dt.promote_types(a, b)
    assert r.category == max(a.category, b.category)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_add_and_mul_match_numpy_on_broadcast_shapes(data):
    a_shape = data.draw(shapes)
    # draw b as a broadcast-compatible shape of a
    b_shape = tuple(data.draw(st.sampled_from([d, 1])) for d in a_shape[data.draw(st.integers(0, len(a_shape))):])
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    ta, tb = tp.tensor(a), tp.tensor(b)
    np.testing.assert_allclose((ta + tb).detach().numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose((ta * tb).detach().numpy(), a * b, rtol=1e-6)
    assert (ta < tb).detach().numpy().tolist() == (a < b).tolist()


def test_reference_erf_is_accurate_to_double_precision():
    import math

    from tensorplay.dialects.tp.ops.elementwise import erf

    xs = np.concatenate([np.linspace(-8, 8, 40001), [0.0, -0.0, 1e-300, 2.5, np.nextafter(2.5, 3), 40.0]])
    expected = np.array([math.erf(v) for v in xs])
    got = erf(xs)
    rel = np.abs(got - expected) / np.maximum(np.abs(expected), 1e-300)
    assert rel.max() < 1e-14
    assert np.isnan(erf(np.array([np.nan]))[0])
    assert erf(np.array([np.inf, -np.inf])).tolist() == [1.0, -1.0]
