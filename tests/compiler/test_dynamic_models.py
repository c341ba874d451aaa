"""Dynamic sizes end to end on IREE's CPU backend: the nanoGPT-style model with a dynamic
sequence length compiled once, and a sweep over batch sizes 1..64 and sequence lengths
1..128 that compiles twice in total (the first call, then the automatic-dynamic recompile)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.compiler.symbolic import Dim
from tensorplay.examples.models import GPTConfig, build_gpt

pytestmark = pytest.mark.iree

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")


@pytest.fixture(scope="module")
def gpt():
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig()).eval()
    tp.compiler.reset()
    fast = tp.compile(model, backend="iree-cpu", dynamic_shapes={"idx": {1: Dim("seq", min=1, max=16)}})
    yield model, fast
    tp.compiler.reset()


def test_gpt_with_a_dynamic_sequence_length_compiles_once(gpt):
    model, fast = gpt
    for t in (5, 1, 16, 9, 2):
        idx = tp.randint(0, 61, (2, t))
        got, _ = fast(idx)
        want, _ = model(idx)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    cf = fast.compiled_function
    assert cf.compile_count == 1
    (entry,) = cf._group.order
    # the Dim's range covers the model's `assert t <= block_size`: no other size guard
    assert entry.shape_guard.describe() == ["idx.size(1) >= 1", "idx.size(1) <= 16"]


def test_a_length_outside_the_dim_range_is_a_clear_error(gpt):
    _, fast = gpt
    with pytest.raises(ValueError, match=r"idx dim 1 \('seq'\) has size 17, outside Dim\('seq', min=1, "
                                         r"max=16\)'s range \[1, 16\]"):
        fast(tp.randint(0, 61, (2, 17)))


def _block(x, w, g):
    """Attention-style work over (batch, seq, channels) with its own weights."""
    h = F.layer_norm(x, (x.shape[-1],), g)
    att = F.softmax(h @ h.transpose(1, 2) * (x.shape[-1] ** -0.5), dim=-1)
    return F.gelu((att @ h) @ w).mean(dim=1)


def _sweep():
    """Batch sizes 1..64 and sequence lengths 1..128, each several times, both changing
    from the first call to the second."""
    pairs = [(b, (37 * b) % 128 + 1) for b in range(1, 65)]
    pairs += [((13 * t) % 64 + 1, t) for t in range(1, 129)]
    return pairs


@pytest.mark.slow
def test_a_shape_sweep_compiles_at_most_twice_and_matches_eager():
    tp.compiler.reset()
    rng = np.random.default_rng(0)
    w = tp.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    g = tp.tensor(rng.standard_normal(8).astype(np.float32))
    fast = tp.compile(_block, backend="iree-cpu")  # dynamic=None: automatic dynamic
    for b, t in _sweep():
        x = tp.tensor(rng.standard_normal((b, t, 8)).astype(np.float32))
        np.testing.assert_allclose(fast(x, w, g).detach().numpy(), _block(x, w, g).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert fast.compile_count == 2
    info = fast.cache_info()
    assert info["entries"] == 2 and info["graph_entries"] == 2
    tp.compiler.reset()


def test_gpt_blocks_as_one_nested_region_with_symbolic_sizes():
    tp.compiler.reset()
    tp.manual_seed(1)
    model = build_gpt(tp, GPTConfig(n_layer=3)).eval()
    block = type(model.transformer.h[0])
    plain = block.forward
    block.forward = tp.compiler.nested_compile_region(plain)
    try:
        fast = tp.compile(model, backend="iree-cpu", dynamic=True)
        for b, t in [(2, 5), (1, 9), (3, 16)]:
            idx = tp.randint(0, 61, (b, t))
            np.testing.assert_allclose(fast(idx)[0].detach().numpy(), model(idx)[0].detach().numpy(), rtol=1e-4, atol=1e-5)
        cf = fast.compiled_function
        assert cf.compile_count == 1 and cf.cache_info()["regions"] == 1
        (graph,) = cf.graphs
        (callee,) = graph.callees()  # the three blocks call one function
        assert [n.callee for n in graph.nodes if n.callee is not None] == [callee] * 3
    finally:
        block.forward = plain
        tp.compiler.reset()
