"""Sorting compiled whole: top-k sampling as nanoGPT's ``generate`` filters logits, and sorts
over sizes known only at run time (the op table's cases cover each op lowered alone)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

pytestmark = pytest.mark.iree
pytest.importorskip("iree.compiler")


def _top_k_filter(logits, k):
    logits = logits[:, -1, :] / 0.8
    v, _ = tp.topk(logits, k)
    logits[logits < v[:, [-1]]] = -float("inf")
    return logits, tp.softmax(logits, dim=-1)


def test_top_k_sampling_filter_compiled_gives_eagers_result():
    rng = np.random.default_rng(0)
    logits = tp.tensor(rng.standard_normal((3, 4, 65)).astype(np.float32))
    tp.compiler.reset()
    try:
        got = tp.compile(_top_k_filter, fullgraph=True)(logits, 5)
        want = _top_k_filter(logits, 5)
    finally:
        tp.compiler.reset()
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    assert (np.isfinite(got[0].numpy()).sum(axis=-1) == 5).all()
    # softmax's exp in IREE is not numpy's: a few ulps
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=2e-6, atol=1e-7)


def _sort_and_select(x):
    s = tp.sort(x, dim=-1, descending=True, stable=True)
    t = tp.topk(x, 2, dim=0, largest=False)
    m = tp.kthvalue(x, 1, dim=-1)
    return s.values, s.indices, t.values, t.indices, m.values, m.indices


@pytest.mark.parametrize("dtype", [tp.float32, tp.int64])
def test_sorts_over_dynamic_sizes_give_eagers_results(dtype):
    rng = np.random.default_rng(1)
    tp.compiler.reset()
    try:
        f = tp.compile(_sort_and_select, fullgraph=True, dynamic=True)
        for shape in [(3, 7), (5, 4)]:
            x = tp.tensor(rng.integers(-4, 5, size=shape).astype(dtype.np_dtype))  # ties: stable order
            for g, w in zip(f(x), _sort_and_select(x)):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    finally:
        tp.compiler.reset()
