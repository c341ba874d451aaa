"""``compile``: its call and decorator forms, the module wrapper, ``Module.compile()``, and
what every keyword does."""

from __future__ import annotations

import inspect
import logging
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError, InvalidBackend
from tensorplay.compiler.api import CompiledFunction, CompiledModule
from tensorplay.compiler.backends import BackendCapabilities
from tensorplay.compiler.capture import current_capture
from tests.compiler.conftest import CountingBackend


def _double(x):
    return x * 2


def test_signature_matches_the_reference():
    params = inspect.signature(tp.compiler.compile).parameters
    assert list(params) == ["model", "fullgraph", "dynamic", "backend", "mode", "options", "name",
                            "disable", "recompile_limit", "isolate_recompiles", "strict_native",
                            "dynamic_shapes"]
    assert tp.compile is tp.compiler.compile


def test_call_and_decorator_forms(backend):
    x = tp.ones(2)
    called = tp.compile(_double, backend=backend)
    assert isinstance(called, CompiledFunction) and called.original is _double

    @tp.compile
    def bare(t):
        return t + 1

    @tp.compile()
    def empty_parens(t):
        return t + 2

    @tp.compile(backend=backend, fullgraph=True)
    def with_args(t):
        return t + 3

    assert isinstance(bare, CompiledFunction) and bare.backend == tp.compiler.get_default_backend()
    assert bare.__name__ == "bare" and bare.__wrapped__.__name__ == "bare"
    assert called(x).tolist() == [2.0, 2.0]
    assert with_args(x).tolist() == [4.0, 4.0]
    assert isinstance(empty_parens, CompiledFunction)


def test_bound_methods_and_methods_decorated_in_a_class(backend):
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

        @tp.compile(backend=backend)
        def decorated(self, x):
            return x + self.k

    a, b = Scaler(2.0), Scaler(3.0)
    ca = tp.compile(a.apply, backend=backend)
    assert ca(tp.ones(1)).tolist() == [2.0]
    assert a.decorated(tp.ones(1)).tolist() == [3.0]
    assert b.decorated(tp.ones(1)).tolist() == [4.0]  # another instance: another entry
    assert backend.count == 3


def test_module_wrapper_keeps_the_original_reachable(backend):
    model = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.ReLU(), tp.nn.Linear(4, 2))
    model.custom = "kept"
    cm = tp.compile(model, backend=backend)
    assert isinstance(cm, CompiledModule) and isinstance(cm, tp.nn.Module)
    assert cm._orig_mod is model
    assert cm.custom == "kept" and cm._orig_mod[0] is model[0] and cm.get_submodule("0") is model[0]
    assert list(cm.state_dict()) == list(model.state_dict())
    assert [p for p in cm.parameters()] == list(model.parameters())
    assert [n for n, _ in cm.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    cm.load_state_dict(model.state_dict())
    cm.extra = 5
    assert model.extra == 5
    cm.eval()
    assert not model.training and not cm.training
    cm.train()
    assert model.training
    x = tp.randn(2, 3)
    np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert "_orig_mod" in repr(cm)
    assert cm.compiled_function.cache_info()["entries"] == 1


def test_module_compile_in_place_keeps_type_and_identity(backend):
    model = tp.nn.Linear(3, 3)
    x = tp.randn(2, 3)
    eager = model(x).detach().numpy()
    assert model.compile(backend=backend) is None
    assert type(model) is tp.nn.Linear
    np.testing.assert_allclose(model(x).detach().numpy(), eager, rtol=1e-6)
    model(x)
    assert backend.count == 1
    wrapper = tp.compile(model, backend=backend)  # shares the in-place compile's cache
    wrapper(x)
    assert backend.count == 1


def test_disable_returns_a_wrapper_that_runs_eagerly(backend):
    calls = []

    def f(x):
        calls.append(current_capture())
        return x - 1

    cf = tp.compile(f, backend=backend, disable=True)
    for _ in range(3):
        assert cf(tp.ones(1)).tolist() == [0.0]
    assert calls == [None, None, None] and backend.count == 0
    cm = tp.compile(tp.nn.Linear(2, 2), disable=True)
    cm(tp.ones(1, 2))
    assert cm.compiled_function.compile_count == 0


def test_backend_by_name_or_callable_and_unknown_names_fail_early(backend):
    cf = tp.compile(_double, backend="eager")
    assert cf(tp.ones(1)).tolist() == [2.0]
    with pytest.raises(InvalidBackend, match="did you mean 'eager'"):
        tp.compile(_double, backend="eagre")
    with pytest.raises(TypeError):
        tp.compile(_double, backend=42)


def test_mode_and_options_are_resolved_at_compile_time(backend):
    with pytest.raises(ValueError, match="both"):
        tp.compile(_double, backend=backend, mode="max-autotune", options={"opt_level": "O3"})
    with pytest.raises(ValueError, match="unknown compile mode 'fastest'; modes: default, reduce-overhead, max-autotune"):
        tp.compile(_double, backend=backend, mode="fastest")
    with pytest.raises(ValueError, match="opt_levle"):
        tp.compile(_double, backend=backend, options={"opt_levle": "O3"})
    cf = tp.compile(_double, backend=backend, options={"opt_level": "O1"})
    cf(tp.ones(1))
    assert backend.options[-1] == {"opt_level": "O1"}
    tp.compile(_double, backend=backend, mode="max-autotune", isolate_recompiles=True)(tp.ones(1))
    assert backend.options[-1] == tp.compiler.list_mode_options("max-autotune")
    tp.compile(_double, backend=backend, isolate_recompiles=True)(tp.ones(1))
    assert backend.options[-1] is None  # nothing to pass: the two-argument form


def test_name_names_graphs_and_log_lines(backend, caplog):
    cf = tp.compile(_double, backend=backend, name="doubler")
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler"):
        cf(tp.ones(1))
        cf(tp.ones(2))
    assert [g.name for g in backend.graphs] == ["doubler", "doubler_1"]
    assert any("recompiling doubler" in r.getMessage() for r in caplog.records)
    for bad in ("two words", "1st", "class", ""):
        with pytest.raises(ValueError, match="must be a Python identifier"):
            tp.compile(_double, name=bad)
    assert tp.compile(lambda x: x, backend=backend).name == "lambda"


@pytest.mark.parametrize("kw, err", [
    ({"recompile_limit": 0}, ValueError), ({"recompile_limit": True}, ValueError),
    ({"fullgraph": 1}, TypeError), ({"dynamic": "yes"}, TypeError), ({"options": [1]}, TypeError),
])
def test_invalid_keyword_values(kw, err, backend):
    with pytest.raises(err):
        tp.compile(_double, backend=backend, **kw)


def test_compile_rejects_non_callables():
    with pytest.raises(TypeError, match="expects a callable"):
        tp.compile(3)


def test_dynamic_true_compiles_once_for_every_size(backend):
    cf = tp.compile(_double, backend=backend, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf(tp.ones(2))
        assert cf(tp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert backend.count == 1 and cf.dynamic is True
    assert tp.compile(_double, backend=backend, dynamic=False).dynamic is False


def _two(x, y):
    return x + y.sum()


def test_dynamic_shapes_spec_is_checked_against_arguments(backend):
    spec = {"x": {0: "batch"}, "y": ("batch", None)}
    cf = tp.compile(_two, backend=backend, dynamic_shapes=spec)
    assert cf.dynamic_shapes == spec
    cf(tp.ones(4, 2), tp.ones(4, 3))
    tuple_form = tp.compile(_two, backend=backend, dynamic_shapes=({0: "n"}, None))
    tuple_form(tp.ones(4, 2), tp.ones(4, 3))
    with pytest.raises(ValueError, match="'batch' has size 4 at x dim 0 but 5 at y dim 0"):
        cf(tp.ones(4, 2), tp.ones(5, 3))
    with pytest.raises(ValueError, match="y has 2 dims but its spec lists 3"):
        bad_rank = tp.compile(_two, backend=backend, dynamic_shapes={"y": ("a", None, None)})
        bad_rank(tp.ones(1), tp.ones(2, 2))
    with pytest.raises(ValueError, match="x has 1 dims; dim 3 is out of range"):
        tp.compile(_two, backend=backend, dynamic_shapes={"x": {3: "a"}})(tp.ones(1), tp.ones(1))
    with pytest.raises(ValueError, match="names 'z', which is not a parameter"):
        tp.compile(_two, dynamic_shapes={"z": {0: "a"}})
    with pytest.raises(ValueError, match="needs dynamic=None or dynamic=True"):
        tp.compile(_two, dynamic=False, dynamic_shapes={"x": {0: "a"}})
    with pytest.raises(TypeError, match="dynamic_shapes must be a dict"):
        tp.compile(_two, dynamic_shapes="batch")
    with pytest.raises(ValueError, match="has 3 entries but the function takes 2"):
        tp.compile(_two, backend=backend, dynamic_shapes=(None, None, None))(tp.ones(1), tp.ones(1))
    marked = tp.compiler.mark_static(tp.ones(4, 2), 0)
    with pytest.raises(ValueError, match="x dim 0 is named 'batch' .* marked static"):
        cf(marked, tp.ones(4, 3))


def test_dynamic_shapes_for_a_non_tensor_argument_must_be_none(backend):
    def f(x, n):
        return x * n

    with pytest.raises(ValueError, match="n is a int, not a tensor"):
        tp.compile(f, backend=backend, dynamic_shapes={"n": {0: "a"}})(tp.ones(1), 2)
    tp.compile(f, backend=backend, dynamic_shapes={"n": None, "x": {0: "a"}})(tp.ones(1), 2)


def test_strict_native_needs_a_native_backend():
    with pytest.raises(ValueError, match="backend 'eager' declares no native compile target"):
        tp.compile(_double, backend="eager", strict_native=True)


def test_strict_native_refuses_every_eager_fallback(monkeypatch):
    tp.compiler.reset()
    native = CountingBackend(BackendCapabilities(name="native", target="llvm-cpu"))

    def breaks(x):
        return x * x.sum().item()

    with pytest.raises(GraphCaptureError, match="strict_native=True runs nothing outside the compiled graph"):
        tp.compile(breaks, backend=native, strict_native=True)(tp.ones(2))

    def eager_region(x):
        return current_capture().run_eagerly(lambda t: t + 1, (x * 2,), {}, "an eager helper")

    with pytest.raises(GraphCaptureError, match="an eager helper"):
        tp.compile(eager_region, backend=native, strict_native=True)(tp.ones(2))

    strict = tp.compile(_double, backend=native, strict_native=True, recompile_limit=1)
    assert strict.fullgraph
    strict(tp.ones(1))
    with pytest.raises(GraphCaptureError, match="recompile_limit"):
        strict(tp.ones(2))

    from tensorplay.passes import lowering

    lowering._load()
    monkeypatch.delitem(lowering.LOWERINGS, "tp.tanh")

    def uses_tanh(x):
        return tp.tanh(x) + 1

    line = uses_tanh.__code__.co_firstlineno + 1
    with pytest.raises(GraphCaptureError,
                       match=rf"strict_native: tp.tanh at {__file__}:{line} has no native lowering"):
        tp.compile(uses_tanh, backend=native, strict_native=True)(tp.ones(2))
    assert native.count == 1


def test_copies_of_compiled_modules_compile_afresh(backend):
    import copy
    import pickle

    model = tp.nn.Linear(2, 2)
    model.compile(backend="eager")
    x = tp.ones(1, 2)
    model(x)
    clone = copy.deepcopy(model)
    assert clone._compiled_call.original.__self__ is clone
    np.testing.assert_allclose(clone(x).detach().numpy(), model(x).detach().numpy())
    with tp.no_grad():
        clone.weight.zero_()
    assert not np.allclose(clone(x).detach().numpy(), model(x).detach().numpy())
    restored = pickle.loads(pickle.dumps(tp.compile(model, backend="eager")))
    assert isinstance(restored, CompiledModule)
    np.testing.assert_allclose(restored(x).detach().numpy(), model(x).detach().numpy())


def test_a_dynamic_wrapper_does_not_reuse_a_static_wrappers_program():
    seen = []

    def backend(graph, example_inputs):
        seen.append(graph.inputs[0].type.has_static_shape)
        from tensorplay.dialects.tp.graph import interpret
        return lambda *arrays: interpret(graph, arrays)

    def f(x):
        return (x * 2).sum(0)

    static, dynamic = tp.compile(f, backend=backend), tp.compile(f, backend=backend, dynamic=True)
    static(tp.ones(3, 4))
    dynamic(tp.ones(3, 4))
    assert seen == [True, False]  # the dynamic wrapper's first call captured a symbolic program
    dynamic(tp.ones(5, 4))
    assert seen == [True, False]  # which serves the next size
