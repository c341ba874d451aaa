"""Compiled models equal eager ones on the ``eager``, ``iree-cpu``, ``iree-vmvx`` and
``iree-vulkan`` (Mesa's software device where installed) backends: an MLP, the
nanoGPT-style model and the CNN of tensorplay.examples, plus a segmented function and a
nested region on IREE. Each model is compiled once per backend (module-scoped fixtures)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.capture import current_capture
from tensorplay.dialects.tp.graph import CALL
from tensorplay.examples.models import GPTConfig, build_cnn, build_gpt
from tests.compiler.conftest import backend_param

BACKENDS = ["eager", "iree-cpu", "iree-vmvx", backend_param("iree-vulkan")]
TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-5), np.dtype(np.float64): dict(rtol=1e-10, atol=1e-10)}


def _close(actual, expected):
    actual, expected = np.asarray(actual.detach().numpy()), np.asarray(expected.detach().numpy())
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, **TOL[expected.dtype])


class MLP(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = tp.nn.Sequential(tp.nn.Linear(16, 32), tp.nn.GELU(), tp.nn.Linear(32, 32), tp.nn.Tanh(),
                                    tp.nn.Linear(32, 4))

    def forward(self, x):
        return tp.nn.functional.log_softmax(self.net(x), dim=-1)


@pytest.fixture(scope="module", params=BACKENDS)
def backend_name(request):
    return request.param


@pytest.fixture(scope="module")
def mlp(backend_name):
    tp.manual_seed(1)
    model = MLP()
    return model, tp.compile(model, backend=backend_name)


@pytest.fixture(scope="module")
def gpt(backend_name):
    tp.manual_seed(2)
    model = build_gpt(tp, GPTConfig()).eval()
    return model, tp.compile(model, backend=backend_name)


@pytest.fixture(scope="module")
def cnn(backend_name):
    tp.manual_seed(3)
    model = build_cnn(tp).eval()
    return model, tp.compile(model, backend=backend_name)


def test_mlp_matches_eager_and_follows_weight_updates(mlp):
    model, compiled = mlp
    x = tp.randn(5, 16)
    _close(compiled(x), model(x))
    with tp.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
    _close(compiled(x), model(x))
    assert compiled.compiled_function.compile_count == 1


def test_gpt_matches_eager(gpt):
    model, compiled = gpt
    idx = tp.randint(0, GPTConfig.vocab_size, (2, GPTConfig.block_size))
    logits, loss = compiled(idx)
    ref_logits, ref_loss = model(idx)
    assert loss is None and ref_loss is None
    _close(logits, ref_logits)
    idx2 = tp.randint(0, GPTConfig.vocab_size, (2, GPTConfig.block_size))
    _close(compiled(idx2)[0], model(idx2)[0])
    assert compiled.compiled_function.cache_info()["graph_entries"] == 1


def test_cnn_matches_eager(cnn):
    model, compiled = cnn
    x = tp.randn(4, 1, 12, 12)
    _close(compiled(x), model(x))
    _close(compiled(x * 2), model(x * 2))
    assert compiled.compiled_function.compile_count == 1


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_gpt_with_dropout_in_training_matches_eager_for_one_seed(backend_name):
    tp.manual_seed(4)
    model = build_gpt(tp, GPTConfig(n_layer=1, dropout=0.2))
    compiled = tp.compile(model, backend=backend_name)
    idx = tp.randint(0, GPTConfig.vocab_size, (2, 8))
    tp.manual_seed(5)
    eager = [model(idx)[0] for _ in range(2)]
    tp.manual_seed(5)
    got = [compiled(idx)[0] for _ in range(2)]
    for a, b in zip(got, eager):
        _close(a, b)
    assert compiled.compiled_function.compile_count == 1


@pytest.mark.iree
def test_segmented_function_on_iree_cpu():
    tp.compiler.reset()

    @tp.compile(backend="iree-cpu")
    def f(x, w):
        h = tp.tanh(x @ w)
        if h.mean() > 0:
            return h * 2
        return h - 1

    w = tp.randn(4, 4)
    for sign in (1.0, -1.0, 1.0):
        x = tp.ones(3, 4) * sign
        _close(f(x, w), f.original(x, w))
    assert f.compile_count == 3
    assert f.cache_info()["segment_programs"] == 3


@pytest.mark.iree
def test_nested_region_is_one_callee_on_iree_cpu():
    tp.manual_seed(6)
    blocks = tp.nn.ModuleList([tp.nn.Sequential(tp.nn.Linear(8, 8), tp.nn.SiLU()) for _ in range(3)])

    @tp.compile(backend="iree-cpu")
    def f(x):
        cap = current_capture()
        for b in blocks:
            x = cap.call_region(lambda blk, t: blk(t), (b, x), {}, key="block")
        return x

    x = tp.randn(2, 8)
    expected = x
    for b in blocks:
        expected = b(expected)
    _close(f(x), expected)
    (graph,) = f.graphs
    assert sum(n.op == CALL for n in graph.nodes) == 3 and len(graph.callees()) == 1
