"""The Capture API that markers build on (tensorplay.compiler.capture): current_capture,
fullgraph/exporting, graph_break, run_eagerly, call_atomic, call_region, add_guard, loc."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError
from tensorplay.compiler.capture import Capture, current_capture, exporting, is_exporting, without_capture
from tests.compiler.conftest import CountingBackend, probe
from tensorplay.dialects.tp.graph import CALL


def test_current_capture_is_the_session_while_capturing(backend):
    seen, seen_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        cap = current_capture()
        seen_append((type(cap), cap.fullgraph, cap.exporting))
        return x * 2

    assert current_capture() is None
    f(tp.ones(1))
    assert seen == [(Capture, False, False)]
    tp.compile(f.original, backend=backend, fullgraph=True, isolate_recompiles=True)(tp.ones(1))
    assert seen[-1] == (Capture, True, False)


def test_exporting_sessions_are_fullgraph(backend):
    seen, seen_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        seen_append((tp.compiler.is_exporting(), current_capture().fullgraph))
        return x + 1

    with exporting():
        assert is_exporting()
        f(tp.ones(1))
    assert not is_exporting()
    assert seen == [(True, True)]


def test_graph_break_raises_under_fullgraph_with_the_callers_line(backend):
    def helper():
        current_capture().graph_break("custom reason")

    @tp.compile(backend=backend, fullgraph=True)
    def f(x):
        y = x + 1
        helper()  # the user's line
        return y

    with pytest.raises(GraphCaptureError) as info:
        f(tp.ones(1))
    line = f.original.__code__.co_firstlineno + 3
    # helper is user code too: the innermost user frame is reported
    assert info.value.loc.line in (line, helper.__code__.co_firstlineno + 1)
    assert "custom reason" in str(info.value)


def test_graph_break_splits_and_makes_live_tensors_concrete(backend):
    states, states_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        y = x * 3
        states_append(y._data is None)
        current_capture().graph_break("split here")
        states_append(y._data is not None and tp.compiler.is_compiling())
        return y + 1

    np.testing.assert_array_equal(f(tp.ones(2)).detach().numpy(), [4.0, 4.0])
    assert states == [True, True]
    assert backend.count == 2


def test_run_eagerly_runs_without_capture_and_feeds_the_next_segment(backend):
    inside, inside_append = probe()

    def eager_part(t):
        inside_append((current_capture(), t._data is not None, tp.compiler.is_compiling()))
        return t.detach().numpy().sum() * t  # numpy on a concrete tensor, no break

    @tp.compile(backend=backend)
    def f(x):
        y = x + 1
        z = current_capture().run_eagerly(eager_part, (y,), {}, "eager helper")
        return z * 2

    np.testing.assert_array_equal(f(tp.ones(2)).detach().numpy(), [16.0, 16.0])
    assert inside == [(None, True, False)]
    with pytest.raises(GraphCaptureError, match="eager helper"):
        tp.compile(f.original, backend=backend, fullgraph=True, isolate_recompiles=True)(tp.ones(2))


def test_call_atomic_traces_inline_and_names_itself_when_it_breaks(backend):
    def body(t):
        return tp.sin(t) + 1

    def breaking(t):
        return t.item()

    @tp.compile(backend=backend)
    def f(x):
        return current_capture().call_atomic(body, (x,), {}, "allow_in_graph(body)") * 2

    np.testing.assert_allclose(f(tp.ones(1)).detach().numpy(), (np.sin(1.0) + 1) * 2, rtol=1e-6)
    assert backend.count == 1

    @tp.compile(backend=backend)
    def g(x):
        return current_capture().call_atomic(breaking, (x + 1,), {}, "allow_in_graph(breaking)")

    with pytest.raises(GraphCaptureError,
                       match=r"graph break inside allow_in_graph\(breaking\) in .*Tensor.item\(\)"):
        g(tp.ones(1))


class Block(tp.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = tp.nn.Linear(dim, dim)
        self.norm = tp.nn.LayerNorm(dim)

    def forward(self, x):
        return x + tp.nn.functional.gelu(self.lin(self.norm(x)))


def _stack(n, dim=8):
    tp.manual_seed(0)
    return tp.nn.ModuleList([Block(dim) for _ in range(n)])


def test_call_region_traces_once_and_calls_the_callee_from_every_site(backend):
    blocks = _stack(4)
    runs, runs_append = probe()

    def block_call(block, x):
        runs_append(1)
        return block(x)

    @tp.compile(backend=backend)
    def f(x):
        cap = current_capture()
        for b in blocks:
            x = cap.call_region(block_call, (b, x), {}, key="block")
        return x

    x = tp.randn(2, 8)
    expected = x
    for b in blocks:
        expected = b(expected)
    np.testing.assert_allclose(f(x).detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(runs) == 1  # later sites replay the callee without running Python
    (graph,) = backend.graphs
    calls = [n for n in graph.nodes if n.op == CALL]
    assert len(calls) == 4 and len({id(n.callee) for n in calls}) == 1
    callee = calls[0].callee
    # the callee takes x and its block's parameters (found by name at each site)
    assert len(callee.inputs) == 1 + 4
    assert graph.callees() == [callee]
    with tp.no_grad():
        blocks[2].lin.weight.mul_(0.5)
    expected = x
    for b in blocks:
        expected = b(expected)
    np.testing.assert_allclose(f(x).detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_call_region_keys_by_signature_and_reapplies_in_place_updates(backend):
    def bump(t, k):
        t.add_(k)
        return t * 2

    @tp.compile(backend=backend)
    def f(a, b):
        cap = current_capture()
        r1 = cap.call_region(bump, (a, 1.0), {}, key="bump")
        r2 = cap.call_region(bump, (b, 1.0), {}, key="bump")
        r3 = cap.call_region(bump, (b, 2.0), {}, key="bump")  # another constant: another callee
        return r1 + r2 + r3

    a, b = tp.zeros(2), tp.ones(2)
    out = f(a, b)
    np.testing.assert_array_equal(a.detach().numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(b.detach().numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(out.detach().numpy(), [2.0 + 4.0 + 8.0] * 2)
    callees = backend.graphs[0].callees()
    assert len(callees) == 2


def test_call_region_with_its_own_compiler_runs_in_pieces(backend):
    region_backend = CountingBackend()
    blocks = _stack(3)

    @tp.compile(backend=backend)
    def f(x):
        cap = current_capture()
        x = x * 2
        for b in blocks:
            x = cap.call_region(lambda blk, t: blk(t), (b, x), {}, key="blk", compiler=region_backend)
        return x - 1

    x = tp.randn(2, 8)
    expected = x * 2
    for b in blocks:
        expected = b(expected)
    np.testing.assert_allclose(f(x).detach().numpy(), (expected - 1).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert region_backend.count == 1  # the callee, compiled once by its own backend
    assert all(CALL not in [n.op for n in g.nodes] for g in backend.graphs)  # pieces around it
    np.testing.assert_allclose(f(x).detach().numpy(), (expected - 1).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_break_inside_a_region_raises(backend):
    def body(t):
        print(t)
        return t

    @tp.compile(backend=backend)
    def f(x):
        return current_capture().call_region(body, (x + 1,), {}, key="p")

    with pytest.raises(GraphCaptureError, match=r"inside nested_compile_region .*body"):
        f(tp.ones(1))


def test_add_guard_recaptures_when_the_check_fails(backend):
    config = {"scale": 2.0}

    @tp.compile(backend=backend)
    def f(x):
        scale = config["scale"]
        current_capture().add_guard("config scale", lambda: config["scale"] == scale)
        return x * scale

    assert f(tp.ones(1)).tolist() == [2.0]
    assert f(tp.ones(1)).tolist() == [2.0]
    config["scale"] = 3.0
    assert f(tp.ones(1)).tolist() == [3.0]
    assert backend.count == 2


def test_loc_is_the_users_frame(backend):
    locs, locs_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        locs_append(current_capture().loc())
        return x

    f(tp.ones(1))
    assert (locs[0].file, locs[0].line) == (__file__, f.original.__code__.co_firstlineno + 2)


def test_without_capture_runs_the_block_eagerly(backend):
    seen, seen_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        cap = current_capture()
        y = x + 1
        cap.graph_break("before eager block")
        with without_capture():
            seen_append((current_capture(), tp.compiler.is_compiling()))
            z = y * 10  # eager: y is concrete after the break
            seen_append(z._data is not None)
        return z + 1

    np.testing.assert_array_equal(f(tp.ones(1)).detach().numpy(), [21.0])
    assert seen == [(None, False), True]
