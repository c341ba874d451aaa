"""Capture by tracing: what a captured graph holds, where its inputs come from, and that
compiled calls give eager's results (inputs, parameters, closures, random draws, in-place
updates, pytrees)."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.capture.graphs import structural_key
from tests.compiler.conftest import probe


def _np(t):
    return np.asarray(t.detach().numpy())


def test_captured_graph_records_ops_with_user_source_lines(backend):
    def f(x, y):
        z = x * 2.0 + y  # line A
        return z.sum(1)

    cf = tp.compile(f, backend=backend)
    x, y = tp.randn(3, 4), tp.randn(3, 4)
    np.testing.assert_array_equal(_np(cf(x, y)), _np(f(x, y)))
    (graph,) = backend.graphs
    assert graph.name == "f"
    ops = [n.op for n in graph.nodes]
    assert ops == ["tp.constant", "tp.mul", "tp.add", "tp.sum"]
    line = f.__code__.co_firstlineno + 1
    assert {(n.loc.file, n.loc.line) for n in graph.nodes[1:3]} == {(__file__, line)}
    assert [str(v.type) for v in graph.inputs] == ["tensor<3x4xf32>", "tensor<3x4xf32>"]


def test_guard_hit_runs_cached_program_without_python(backend):
    calls, calls_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        calls_append(1)
        return tp.tanh(x) * 3

    x = tp.randn(5)
    for _ in range(4):
        np.testing.assert_allclose(_np(f(x)), np.tanh(_np(x)) * 3, rtol=1e-6)
    assert len(calls) == 1
    assert backend.count == 1


def test_closure_tensors_are_inputs_read_on_every_call(backend):
    table = tp.randn(4, 4) * 0.0 + 1.0
    big = tp.arange(100, dtype=tp.float32)

    @tp.compile(backend=backend)
    def f(x):
        return x @ table + big[:4]

    x = tp.randn(2, 4)
    first = _np(f(x))
    table.add_(1.0)   # an in-place update of a closure tensor: seen without recompiling
    second = _np(f(x))
    np.testing.assert_allclose(second, _np(x @ table + big[:4]), rtol=1e-6)
    assert not np.allclose(first, second)
    assert backend.count == 1


def test_tensors_made_during_capture_become_constants_or_fixed_inputs(backend):
    @tp.compile(backend=backend)
    def f(x):
        small = tp.tensor([1.0, 2.0, 3.0])
        large = tp.as_tensor(np.arange(1000, dtype=np.float32))
        return x + small, large.sum() + x.sum()

    x = tp.ones(3)
    a, b = f(x)
    np.testing.assert_array_equal(_np(a), [2.0, 3.0, 4.0])
    assert float(b) == pytest.approx(499500.0 + 3.0)
    (graph,) = backend.graphs
    constants = [n for n in graph.nodes if n.op == "tp.constant"]
    assert any(c.attrs["value"].tolist() == [1.0, 2.0, 3.0] for c in constants)
    assert [v.type.shape for v in graph.inputs] == [(3,), (1000,)]  # the large one stays an input


def test_parameters_are_graph_inputs_so_weight_updates_need_no_recompile(backend):
    model = tp.nn.Sequential(tp.nn.Linear(4, 8), tp.nn.ReLU(), tp.nn.Linear(8, 2))
    cm = tp.compile(model, backend=backend)
    x = tp.randn(3, 4)
    np.testing.assert_allclose(_np(cm(x)), _np(model(x)), rtol=1e-6)
    with tp.no_grad():
        model[0].weight.mul_(-2.0)
        model[2].bias.fill_(5.0)
    np.testing.assert_allclose(_np(cm(x)), _np(model(x)), rtol=1e-6)
    model.load_state_dict({k: v * 0.5 for k, v in model.state_dict().items()})
    np.testing.assert_allclose(_np(cm(x)), _np(model(x)), rtol=1e-6)
    assert backend.count == 1
    assert len(backend.graphs[0].inputs) == 5  # x and four parameters


def test_random_draws_are_redrawn_per_call_in_eager_order(backend):
    @tp.compile(backend=backend)
    def f(x):
        a = tp.randn(3)
        b = tp.rand(3)
        return x + a * b, tp.randn(2)

    x = tp.ones(3)
    tp.manual_seed(7)
    eager = [f.original(x) for _ in range(3)]
    tp.manual_seed(7)
    compiled = [f(x) for _ in range(3)]
    for (ea, eb), (ca, cb) in zip(eager, compiled):
        np.testing.assert_array_equal(_np(ea), _np(ca))
        np.testing.assert_array_equal(_np(eb), _np(cb))
    assert backend.count == 1


def test_dropout_in_training_matches_eager_with_the_same_seed(backend):
    model = tp.nn.Sequential(tp.nn.Linear(6, 6), tp.nn.Dropout(0.5))
    cm = tp.compile(model, backend=backend)
    x = tp.randn(4, 6)
    tp.manual_seed(3)
    eager = [_np(model(x)) for _ in range(2)]
    tp.manual_seed(3)
    compiled = [_np(cm(x)) for _ in range(2)]
    np.testing.assert_array_equal(eager[0], compiled[0])
    np.testing.assert_array_equal(eager[1], compiled[1])
    assert not np.array_equal(compiled[0], compiled[1])
    model.eval()
    np.testing.assert_allclose(_np(cm(x)), _np(model(x)), rtol=1e-6)  # eval recompiles: no dropout
    assert backend.count == 2


def test_in_place_update_of_an_argument_is_written_back(backend):
    @tp.compile(backend=backend)
    def f(x, y):
        x.add_(1.0)
        x[0] = y.sum()
        return x

    x, y = tp.zeros(3), tp.ones(2)
    out = f(x, y)
    assert out is x
    np.testing.assert_array_equal(_np(x), [2.0, 1.0, 1.0])
    f(x, y)
    np.testing.assert_array_equal(_np(x), [2.0, 2.0, 2.0])
    assert backend.count == 1


def test_buffer_updates_in_training_batch_norm_match_eager(backend):
    bn = tp.nn.BatchNorm1d(3)
    twin = tp.nn.BatchNorm1d(3)
    cbn = tp.compile(bn, backend=backend)
    x = tp.randn(8, 3)
    for _ in range(3):
        np.testing.assert_allclose(_np(cbn(x)), _np(twin(x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(bn.running_mean), _np(twin.running_mean), rtol=1e-5)
    np.testing.assert_allclose(_np(bn.running_var), _np(twin.running_var), rtol=1e-5)
    assert int(bn.num_batches_tracked) == int(twin.num_batches_tracked) == 3
    assert backend.count == 1


def test_tensor_stored_by_the_function_is_kept_current(backend):
    class Keeper:
        last = None

    keeper = Keeper()

    @tp.compile(backend=backend)
    def f(x):
        y = x * 2
        keeper.last = y
        return y + 1

    f(tp.ones(2))
    np.testing.assert_array_equal(_np(keeper.last), [2.0, 2.0])
    f(tp.full((2,), 5.0))
    np.testing.assert_array_equal(_np(keeper.last), [10.0, 10.0])


@dataclasses.dataclass
class Batch:
    x: tp.Tensor
    scale: float


Pair = namedtuple("Pair", "a b")


def test_pytree_arguments_and_results_are_rebuilt_each_call(backend):
    @tp.compile(backend=backend)
    def f(batch, extra, pair):
        y = batch.x * batch.scale + extra["bias"][0]
        return {"y": y, "shape": tuple(y.shape), "items": [pair.a + pair.b, None, "tag"]}

    b = Batch(tp.ones(2, 3), 2.0)
    extra = {"bias": [tp.full((3,), 0.5)]}
    pair = Pair(tp.ones(1), tp.ones(1))
    out = f(b, extra, pair)
    assert out["shape"] == (2, 3) and out["items"][1:] == [None, "tag"]
    np.testing.assert_array_equal(_np(out["y"]), np.full((2, 3), 2.5, np.float32))
    again = f(b, extra, pair)
    assert again is not out and again["items"] is not out["items"]
    f(Batch(tp.ones(2, 3), 3.0), extra, pair)  # a changed float field recompiles
    assert backend.count == 2


def test_returning_an_input_returns_the_same_object(backend):
    @tp.compile(backend=backend)
    def f(x, y):
        return x, y * 2

    x = tp.ones(2)
    a, _ = f(x, tp.ones(2))
    assert a is x
    a, _ = f(x, tp.ones(2))
    assert a is x


def test_structural_key_ignores_names_and_locations():
    def f(x):
        return tp.exp(x) + 1.0

    g1 = tp.compile(f, backend="eager", isolate_recompiles=True, name="one")
    g2 = tp.compile(lambda x: tp.exp(x) + 1.0, backend="eager", name="two")
    x = tp.ones(3)
    g1(x)
    g2(x)
    assert structural_key(g1.graphs[0]) == structural_key(g2.graphs[0])
    g2(tp.ones(4))
    assert structural_key(g1.graphs[0]) != structural_key(g2.graphs[1])


def test_nested_compiled_function_is_inlined(backend):
    inner_calls, inner_calls_append = probe()

    @tp.compile(backend=backend)
    def inner(x):
        inner_calls_append(1)
        return x + 1

    @tp.compile(backend=backend)
    def outer(x):
        return inner(x) * 2

    np.testing.assert_array_equal(_np(outer(tp.ones(2))), [4.0, 4.0])
    outer(tp.ones(2))
    assert backend.count == 1 and len(inner_calls) == 1
    assert [n.op for n in backend.graphs[0].nodes if n.op != "tp.constant"] == ["tp.add", "tp.mul"]


def test_is_compiling_is_true_while_capturing():
    seen, seen_append = probe()

    @tp.compile(backend="eager")
    def f(x):
        seen_append(tp.compiler.is_compiling())
        return x + 1

    assert not tp.compiler.is_compiling()
    f(tp.ones(1))
    assert seen == [True]
    assert not tp.compiler.is_exporting()


def test_failed_capture_leaves_arguments_and_parameters_intact(backend):
    lin = tp.nn.Linear(2, 2)
    weight = _np(lin.weight).copy()

    @tp.compile(backend=backend)
    def f(x):
        lin(x)
        raise ValueError("boom")

    x = tp.ones(1, 2)
    with pytest.raises(ValueError, match="boom"):
        f(x)
    np.testing.assert_array_equal(_np(lin.weight), weight)
    np.testing.assert_array_equal(_np(x), [[1.0, 1.0]])
    assert f.cache_info()["entries"] == 0
