"""Symbolic sizes in capture: one graph for many sizes, guards on sizes (branches, ranges,
relations between arguments), specialization where Python needs an int, and the policies
(dynamic=True / None with automatic dynamic / False), checked with the counting backend."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.compiler.capture.graphs import format_graph
from tests.compiler.conftest import probe


def _arr(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def _t(*shape, seed=0):
    return tp.tensor(_arr(*shape, seed=seed))


def _mlp(x, w):
    b, t, c = x.shape
    h = (x.reshape(b * t, c) @ w).relu()
    return h.reshape(b, t, -1).sum(dim=1) / t


def test_one_graph_serves_every_size(backend):
    f = tp.compile(_mlp, backend=backend, dynamic=True)
    w = _t(4, 3)
    for b, t in [(2, 5), (7, 1), (1, 9), (3, 3)]:
        x = _t(b, t, 4)
        np.testing.assert_allclose(f(x, w).detach().numpy(), _mlp(x, w).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert backend.count == 1
    text = format_graph(backend.graphs[0])
    # every argument dim is symbolic; the matmul makes x.size(2) and w.size(0) one size
    assert "(%arg0: tensor<s0xs1xs2xf32>, %arg1: tensor<s2xs4xf32>)" in text
    assert "tensor<s0*s1xs2xf32>" in text


def test_size_arithmetic_stays_symbolic(backend):
    def f(x):
        n = x.shape[1] // 2
        return x[:, :n] * 2 + x[:, x.shape[1] - n:]

    g = tp.compile(f, backend=backend, dynamic=True)
    for shape in [(3, 8), (2, 5), (4, 1), (1, 12)]:
        x = _t(*shape)
        np.testing.assert_allclose(g(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    assert backend.count == 1


def test_a_branch_on_a_size_compiles_each_side_once(backend):
    def f(x):
        if x.shape[0] > 8:
            return x.sum(0)
        return x.mean(0) * 10

    g = tp.compile(f, backend=backend, dynamic=True)
    for n in [12, 3, 9, 8, 30, 1, 16, 5]:
        x = _t(n, 3)
        np.testing.assert_allclose(g(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert backend.count == 2
    guards = [e.shape_guard.describe() for e in g._group.order]
    assert guards == [["x.size(0) >= 9"], ["x.size(0) <= 8"]]


def test_sizes_shared_by_arguments_are_guarded_equal(backend):
    g = tp.compile(lambda x, y: x + y, backend=backend, dynamic=True)
    g(_t(4, 3), _t(4, 3))
    g(_t(6, 2), _t(6, 2))
    assert backend.count == 1
    out = g(_t(6, 2), _t(1, 2))  # y.size(0) == x.size(0) no longer holds: a new graph broadcasts
    np.testing.assert_allclose(out.detach().numpy(), _arr(6, 2) + _arr(1, 2), rtol=1e-6)
    assert backend.count == 2
    assert g._group.order[0].shape_guard.describe() == ["y.size(0) == x.size(0)", "y.size(1) == x.size(1)"]


def test_size_one_is_an_ordinary_size(backend):
    """No 0/1 specialization: a size captured as 1 stays symbolic unless broadcasting depends on it."""
    f = tp.compile(lambda x, b: x * 2 + b, backend=backend, dynamic=True)
    bias = _t(3)
    for n in [1, 4, 1, 7]:
        x = _t(n, 3)
        np.testing.assert_allclose(f(x, bias).detach().numpy(), _arr(n, 3) * 2 + _arr(3), rtol=1e-6)
    assert backend.count == 1


def test_broadcasting_against_a_size_one_dimension_specializes_it(backend, caplog):
    def f(x, y):
        return x * y

    g = tp.compile(f, backend=backend, dynamic=True)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.guards"):
        g(_t(1, 5), _t(4, 5))  # x.size(0) broadcasts: it is specialized to 1
    assert any("x.size(0) specialized to 1" in r.getMessage() and "broadcasting in tp.mul" in r.getMessage()
               for r in caplog.records)
    for xs, ys in [((1, 5), (9, 5)), ((3, 5), (3, 5)), ((3, 5), (1, 5))]:
        x, y = _t(*xs), _t(*ys)
        np.testing.assert_allclose(g(x, y).detach().numpy(), f(x, y).detach().numpy(), rtol=1e-6)


def test_int_of_a_size_specializes_it(backend, caplog):
    def f(x):
        return x.reshape(int(x.shape[0]), -1)

    g = tp.compile(f, backend=backend, dynamic=True)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.guards"):
        g(_t(2, 3, 4))
    assert any("x.size(0) specialized to 2: int() of the size" in r.getMessage() for r in caplog.records)
    g(_t(2, 5, 4))
    assert backend.count == 1
    g(_t(3, 3, 4))
    assert backend.count == 2


def test_mark_static_keeps_a_dimension_static_under_dynamic_true(backend):
    g = tp.compile(lambda x: x.sum(1), backend=backend, dynamic=True)
    for n in (3, 4):
        g(tp.compiler.mark_static(_t(2, n), 1))
    assert backend.count == 2
    g(tp.compiler.mark_static(_t(7, 4), 1))
    assert backend.count == 2
    assert "tensor<s0x4xf32>" in format_graph(backend.graphs[1])


def test_dynamic_false_specializes_every_size(backend):
    g = tp.compile(lambda x: x * 2, backend=backend, dynamic=False)
    for n in (2, 3, 4, 3):
        g(_t(n))
    assert backend.count == 3


def test_automatic_dynamic_recompiles_a_changed_size_once(backend, caplog):
    g = tp.compile(_mlp, backend=backend)  # dynamic=None
    w = _t(4, 3)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.recompiles"):
        g(_t(2, 3, 4), w)
        assert "s0" not in format_graph(backend.graphs[0])  # the first capture is static
        g(_t(5, 3, 4), w)
    assert backend.count == 2
    # every dim of the argument whose size changed: the batch changed, the sequence length
    # becomes dynamic with it; the feature dim is tied to w by the matmul and stays 4
    assert any("automatic dynamic: x dim 0, x dim 1, x dim 2 now dynamic" in r.getMessage()
               for r in caplog.records)
    assert "tensor<s0xs1x4xf32>" in format_graph(backend.graphs[1])
    for b, t in [(1, 3), (9, 3), (64, 3), (4, 6), (3, 2), (8, 11), (1, 1)]:
        x = _t(b, t, 4)
        np.testing.assert_allclose(g(x, w).detach().numpy(), _mlp(x, w).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert backend.count == 2
    g(_t(2, 3, 5), _t(5, 3))  # the feature dim changes too: its guard fails, one more capture
    assert backend.count == 3


def test_python_results_that_are_sizes_are_fixed_by_a_guard(backend):
    g = tp.compile(lambda x: (x * 2, x.shape[0]), backend=backend, dynamic=True)
    assert g(_t(3, 2))[1] == 3
    assert g(_t(5, 2))[1] == 5
    assert backend.count == 2


def test_a_graph_break_specializes_sizes_and_still_matches_eager(backend):
    def f(x):
        n = x.shape[0]
        y = x * 2
        if y.sum() > 0:  # graph break
            return y[: n // 2]
        return y[n // 2:]

    g = tp.compile(f, backend=backend, dynamic=True)
    for n in (4, 6, 4):
        for sign in (1, -1):
            x = tp.tensor(np.abs(_arr(n, 2)) * sign)
            np.testing.assert_allclose(g(x).detach().numpy(), f(x).detach().numpy())


def test_symbolic_sizes_do_not_outlive_their_capture(backend):
    kept, kept_append = probe()

    def f(x):
        kept_append(x.shape[0])
        return x + 1

    tp.compile(f, backend=backend, dynamic=True)(_t(3))
    with pytest.raises(RuntimeError, match="used after that capture finished"):
        kept[0] + 1 > 2  # noqa: B015


def test_nested_regions_take_symbolic_sizes(backend):
    w = _t(3, 3)

    @tp.compiler.nested_compile_region
    def layer(x):
        return (x @ w).relu() + x.shape[0]

    def f(x):
        return layer(layer(x))

    g = tp.compile(f, backend=backend, dynamic=True)
    for n in (2, 5, 1):
        x = _t(n, 3)
        np.testing.assert_allclose(g(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert backend.count == 1
    (graph,) = backend.graphs
    (callee,) = graph.callees()  # both sites call one callee
    assert "tensor<s0x3xf32>" in format_graph(callee)


def test_explain_follows_the_compiled_callables_dynamic_policy():
    def f(x, y):
        if x.shape[0] > 2:
            return (x + y).sum(0)
        return x - y

    x, y = tp.ones(4, 3), tp.ones(4, 3)
    static = tp.compiler.explain(f, x, y)
    assert static.size_guards == [] and "Size guards" not in str(static)
    assert "tensor<4x3xf32>" in static.format_graphs()
    dynamic = tp.compiler.explain(tp.compile(f, backend="eager", dynamic=True), x, y)
    assert dynamic.size_guards == ["y.size(0) == x.size(0)", "y.size(1) == x.size(1)", "x.size(0) >= 3"]
    assert "Size guards:\n  y.size(0) == x.size(0)" in str(dynamic)
    assert "tensor<s0xs1xf32>" in dynamic.format_graphs()
    named = tp.compiler.explain(tp.compile(f, backend="eager", dynamic_shapes={"x": {0: "n"}, "y": {0: "n"}}),
                                x, y)
    assert named.size_guards == ["y.size(0) == x.size(0)", "x.size(0) >= 3"]


def _noisy(x, y):
    b, t = x.shape
    noise = tp.randn(b, 2 * t) + tp.rand_like(x).repeat(1, 2)
    picks = tp.randint(0, 5, (b,))
    return x.repeat(1, 2) * noise + picks.unsqueeze(1), F.dropout(y, 0.5, training=True)


def test_random_draws_keep_symbolic_sizes(backend):
    f = tp.compile(_noisy, backend=backend, dynamic=True)
    for b, t in [(3, 4), (1, 7), (6, 1), (2, 2)]:
        x, y = _t(b, t), _t(b, t, seed=1)
        tp.manual_seed(b * 10 + t)
        got = f(x, y)
        tp.manual_seed(b * 10 + t)
        want = _noisy(x, y)
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert backend.count == 1
    text = format_graph(backend.graphs[0])
    assert "tensor<s0x2*s1xf32>" in text and "tensor<s0xi64>" in text


def test_repeat_and_reshape_shortcuts_record_no_size_guards(backend):
    f = tp.compile(lambda x: x.repeat(1, 2).reshape(x.shape[0], -1) + 1, backend=backend, dynamic=True)
    for n in (1, 3, 5):
        x = _t(n, 3)
        np.testing.assert_allclose(f(x).detach().numpy(), np.tile(x.detach().numpy(), (1, 2)) + 1)
    assert backend.count == 1
    # only reshape's -1 (a division by x.size(0)) constrains the size; no "!= 1" from shortcuts
    assert f._group.order[0].shape_guard.describe() == ["x.size(0) >= 1"]


def test_split_and_chunk_keep_piece_sizes_symbolic(backend):
    def f(x):
        a, b = x.chunk(2, dim=1)
        pieces = x.split(3, dim=1)
        return a.sum(1) - b.sum(1), pieces[-1] * 2, len(pieces)

    cf = tp.compile(f, backend=backend, dynamic=True)
    for t in (8, 7, 9, 6, 5, 4):
        x = _t(2, t)
        got, want = cf(x), f(x)
        np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got[1].detach().numpy(), want[1].detach().numpy())
        assert got[2] == want[2]
    # one graph per number of pieces (7..9: three pieces of split(3), 4..6: two)
    assert backend.count == 2
    guards = cf._group.order[0].shape_guard.describe()
    # split(3): 7..9 is three pieces; chunk(2)'s x.size(1) > ceil(x.size(1) / 2) follows from them
    assert guards == ["x.size(1) >= 7", "x.size(1) <= 9"]
    assert "tensor<s0xs1 - 6xf32>" in format_graph(backend.graphs[0])  # the last piece: 3, 3, s1 - 6


def test_draws_inside_a_nested_region_keep_symbolic_sizes(backend):
    @tp.compiler.nested_compile_region
    def noise(x):
        b, t = x.shape
        return tp.randn(b, t) + F.dropout(x, 0.5, training=True) * 0

    def f(x):
        return noise(x), noise(x * 2)

    g = tp.compile(f, backend=backend, dynamic=True)
    seen = []
    for b, t in [(2, 3), (4, 5), (1, 7), (4, 5)]:
        a, c = g(_t(b, t))
        assert a.shape == c.shape == (b, t)
        assert not np.array_equal(a.numpy(), c.numpy())  # each site draws its own values
        seen.append(a.numpy())
    assert not np.array_equal(seen[1], seen[3])  # and every call draws again
    assert backend.count == 1  # one graph for every size (the draws' sizes were specialized before)
    assert "tensor<s0xs1xf32>" in format_graph(backend.graphs[0])
