"""nested_compile_region: one callee per distinct input signature, called from every site;
max_reuse_entries, reuse_hash_fn, per-region backends, and the IREE compile of a layer stack."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest

import tensorplay as tp
from tests.compiler.conftest import CountingBackend, probe
import tensorplay.compiler as tpc
from tensorplay.dialects.tp.graph import CALL


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    yield
    tpc.reset()


def calls_in(graph):
    return [n for n in graph.nodes if n.op == CALL]


def test_repeated_region_is_traced_once_and_called_from_every_site(backend):
    traced, traced_append = probe()

    @tpc.nested_compile_region
    def layer(x, w):
        traced_append(tpc.is_compiling())
        return tp.tanh(x @ w) + x

    def f(x, ws):
        for w in ws:
            x = layer(x, w)
        return x

    rng = np.random.default_rng(0)
    x = tp.tensor(rng.standard_normal((2, 4)).astype(np.float32))
    ws = [tp.tensor(rng.standard_normal((4, 4)).astype(np.float32)) for _ in range(4)]
    expected = f(x, ws).detach().numpy()
    traced.clear()
    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x, ws).detach().numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(cf(x, ws).detach().numpy(), expected, rtol=1e-5)
    assert traced == [True]  # one trace for four sites, then replay without Python
    (graph,) = backend.graphs
    sites = calls_in(graph)
    assert len(sites) == 4 and len({id(n.callee) for n in sites}) == 1
    assert graph.callees() == [sites[0].callee]


def test_distinct_signatures_get_distinct_callees(backend):
    @tpc.nested_compile_region
    def block(x, scale):
        return x * scale + 1

    def f(a, b):
        return block(a, 2.0).sum() + block(b, 2.0).sum() + block(a, 3.0).sum() + block(a, 2.0).sum()

    a, b = tp.ones(3), tp.ones(2, 2)
    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(a, b).detach().numpy(), f(a, b).detach().numpy())
    sites = calls_in(backend.graphs[0])
    assert len(sites) == 4
    assert len({id(n.callee) for n in sites}) == 3  # (3,) x 2.0 shared by the 1st and 4th call


def test_past_max_reuse_entries_the_body_is_inlined(backend, caplog):
    @tpc.nested_compile_region(max_reuse_entries=1)
    def block(x):
        return tp.exp(x) * 2

    def f(a, b):
        return block(a).sum() + block(b).sum() + block(a).sum()

    a, b = tp.ones(3), tp.ones(4)
    with caplog.at_level(logging.WARNING, logger="tensorplay.compiler.perf"):
        np.testing.assert_allclose(tpc.compile(f, backend=backend)(a, b).detach().numpy(), f(a, b).detach().numpy(),
                                   rtol=1e-6)
    graph = backend.graphs[0]
    sites = calls_in(graph)
    assert len(sites) == 2 and sites[0].callee is sites[1].callee  # the first signature reused
    assert [n.op for n in graph.nodes].count("tp.exp") == 1  # the second signature inlined
    assert sum("more than max_reuse_entries=1" in r.getMessage() for r in caplog.records) == 1


def test_reuse_hash_fn_keys_the_region(backend):
    counter = itertools.count()
    seen, seen_append = probe()

    def key(x, tag):
        seen_append(tag)
        return tag % 2  # a key only this function knows

    @tpc.nested_compile_region(reuse_hash_fn=key)
    def block(x, tag):
        return x + 1

    def f(x):
        for tag in range(4):
            x = block(x, tag * 0)
        return x

    tpc.compile(f, backend=backend)(tp.ones(2))
    assert len({id(n.callee) for n in calls_in(backend.graphs[0])}) == 1
    assert seen == [0, 0, 0, 0]

    @tpc.nested_compile_region(reuse_hash_fn=lambda x: next(counter))
    def fresh(x):
        return x + 1

    backend.graphs.clear()
    tpc.compile(lambda x: fresh(fresh(fresh(x))), backend=backend)(tp.ones(2))
    assert len({id(n.callee) for n in calls_in(backend.graphs[0])}) == 3

    @tpc.nested_compile_region(reuse_hash_fn=lambda x: [1])
    def unhashable(x):
        return x

    with pytest.raises(TypeError, match="reuse_hash_fn returned an unhashable list"):
        tpc.compile(lambda x: unhashable(x) + 1, backend=backend)(tp.ones(2))


class Layer(tp.nn.Module):
    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.lin = tp.nn.Linear(width, width)
        self.norm = tp.nn.LayerNorm(width, eps=eps)

    @tpc.nested_compile_region
    def forward(self, x):
        return x + tp.nn.functional.gelu(self.lin(self.norm(x)))


def test_module_method_region_shares_one_callee_across_layers_with_their_own_weights(backend):
    stack = tp.nn.Sequential(*[Layer(8) for _ in range(3)], Layer(8, eps=1e-3))
    x = tp.randn(2, 8)
    expected = stack(x).detach().numpy()
    compiled = tpc.compile(stack, backend=backend)
    np.testing.assert_allclose(compiled(x).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    sites = calls_in(backend.graphs[0])
    assert len(sites) == 4
    # equal structure shares a callee; a different plain attribute (eps) does not
    assert len({id(n.callee) for n in sites[:3]}) == 1 and sites[3].callee is not sites[0].callee

    with tp.no_grad():
        stack[1].lin.weight.mul_(0.5)  # weights are callee inputs per site: no recompile
    np.testing.assert_allclose(compiled(x).detach().numpy(), stack(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(backend.graphs) == 1


def test_region_options_compile_the_callee_with_its_own_backend(backend):
    region_backend = CountingBackend()
    opts = tpc.NestedCompileRegionOptions(fw_compiler=region_backend, bw_compiler="eager")
    assert opts.bw_compiler == "eager"

    @tpc.nested_compile_region(options=opts)
    def block(x):
        return tp.sin(x) * 2

    def f(x):
        return block(block(x + 1)) - 1

    x = tp.tensor([0.1, 0.2])
    np.testing.assert_allclose(tpc.compile(f, backend=backend)(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    assert len(region_backend.graphs) == 1
    assert [n.op for n in region_backend.graphs[0].nodes] == ["tp.sin", "tp.mul"]
    assert all("tp.sin" not in [n.op for n in g.nodes] for g in backend.graphs)


def test_graph_break_inside_a_region_raises_naming_it(backend):
    @tpc.nested_compile_region
    def block(x):
        if x.sum() > 0:  # needs a value
            return x
        return -x

    with pytest.raises(tpc.GraphCaptureError, match="inside nested_compile_region") as info:
        tpc.compile(lambda x: block(x * 2), backend=backend)(tp.ones(2))
    assert "needs a value" in str(info.value)


def test_region_with_an_unkeyable_argument_is_inlined(backend):
    class Opaque:
        k = 2.0

    @tpc.nested_compile_region
    def block(x, obj):
        return x * obj.k

    np.testing.assert_allclose(tpc.compile(lambda x: block(x, Opaque()), backend=backend)(tp.ones(2)).detach().numpy(),
                               [2.0, 2.0])
    assert calls_in(backend.graphs[0]) == []


@pytest.mark.iree
def test_gpt_blocks_as_regions_match_eager_on_iree_cpu():
    from tensorplay.examples.models import GPTConfig, build_gpt

    model = build_gpt(tp, GPTConfig(n_layer=3, n_embd=16, n_head=2, block_size=8, vocab_size=11))
    model.eval()
    block_cls = type(model.transformer.h[0])
    idx = tp.tensor(np.random.default_rng(0).integers(0, 11, (2, 8)))
    expected = model(idx)[0].detach().numpy()
    original = block_cls.forward
    block_cls.forward = tpc.nested_compile_region(original)
    try:
        compiled = tpc.compile(model, backend="iree-cpu", fullgraph=True)
        np.testing.assert_allclose(compiled(idx)[0].detach().numpy(), expected, rtol=1e-4, atol=1e-5)
        graph = compiled.compiled_function.graphs[0]
        sites = calls_in(graph)
        assert len(sites) == 3 and len({id(n.callee) for n in sites}) == 1
        # one private function, kept as a function by IREE (not inlined per call site)
        from tensorplay.dialects.tp import mlir as M

        text = M.print_module(M.emit([graph]))
        assert text.count("func.func private") == 1 and text.count("noinline") == 1
        assert text.count(f"call @{sites[0].callee.name}(") == 3
    finally:
        block_cls.forward = original
