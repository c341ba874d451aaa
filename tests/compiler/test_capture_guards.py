"""Guards and recompiles: what makes a cached graph reusable, what recompiles (and how it
is logged), the recompile budget and its sharing between wrappers."""

from __future__ import annotations

import functools
import logging
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError
from tensorplay.compiler.capture import current_capture
from tests.compiler.conftest import CountingBackend, probe


def _compiled(backend, **kw):
    calls, calls_append = probe()

    def f(x, k=1, mode="add"):
        calls_append(1)
        return x + k if mode == "add" else x * k

    return tp.compile(f, backend=backend, **kw), calls


@pytest.mark.parametrize("change, recompiles", [
    (lambda x: ((x,), {}), False),
    (lambda x: ((x.clone(),), {}), False),                       # another tensor, same type
    (lambda x: ((tp.ones(4, 3),), {}), True),                    # shape
    (lambda x: ((x.double(),), {}), True),                       # dtype
    (lambda x: ((x.clone().requires_grad_(),), {}), True),       # requires_grad
    (lambda x: ((x,), {"k": 2}), True),                          # Python scalar by value
    (lambda x: ((x,), {"k": 1.0}), True),                        # ... and by type
    (lambda x: ((x,), {"mode": "mul"}), True),                   # strings by value
])
def test_what_recompiles(change, recompiles, backend):
    cf, calls = _compiled(backend)
    x = tp.ones(2, 3)
    cf(x)
    args, kwargs = change(x)
    out = cf(*args, **kwargs)
    assert backend.count == (2 if recompiles else 1)
    assert len(calls) == (2 if recompiles else 1)
    np.testing.assert_allclose(out.detach().numpy(), cf.original(*args, **kwargs).detach().numpy())


def test_global_modes_are_guarded(backend):
    cf, calls = _compiled(backend)
    x = tp.ones(2)
    cf(x)
    with tp.no_grad():
        cf(x)
        cf(x)
    default = tp.get_default_dtype()
    tp.set_default_dtype(tp.float64)
    try:
        cf(x)
    finally:
        tp.set_default_dtype(default)
    cf(x)
    assert backend.count == 3
    assert len(calls) == 3  # the Python ran once per capture, never for a cached call


def test_aliasing_between_tensor_arguments_is_guarded(backend):
    @tp.compile(backend=backend)
    def f(a, b):
        a.add_(1)
        return a + b

    x = tp.zeros(2)
    np.testing.assert_array_equal(f(x, x).detach().numpy(), [2.0, 2.0])
    y, z = tp.zeros(2), tp.zeros(2)
    np.testing.assert_array_equal(f(y, z).detach().numpy(), [1.0, 1.0])
    assert backend.count == 2


def test_module_state_changes_recompile_but_weight_values_do_not(backend):
    model = tp.nn.Sequential(tp.nn.Linear(3, 3), tp.nn.Dropout(0.0), tp.nn.LayerNorm(3))
    cm = tp.compile(model, backend=backend)
    x = tp.randn(2, 3)

    def check():
        np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    check()
    with tp.no_grad():
        model[0].weight.copy_(tp.randn(3, 3))        # values: same graph
    check()
    assert backend.count == 1
    model.eval()                                     # training flag
    check()
    assert backend.count == 2
    model[2].eps = 1e-2                              # a plain attribute
    check()
    assert backend.count == 3
    model[0].weight = tp.nn.Parameter(tp.randn(3, 3))  # a new parameter object
    check()
    assert backend.count == 4
    handle = model.register_forward_hook(lambda m, a, out: out * 2)  # hooks
    check()
    assert backend.count == 5
    handle.remove()
    check()                                          # back to a cached state
    assert backend.count == 5
    model.double()                                   # parameter dtype
    check_x = x.double()
    np.testing.assert_allclose(cm(check_x).detach().numpy(), model(check_x).detach().numpy(), rtol=1e-9)
    assert backend.count == 6


def test_global_module_rebinding_is_guarded(backend):
    global _GLOBAL_MODEL
    _GLOBAL_MODEL = tp.nn.Linear(2, 2)

    @tp.compile(backend=backend)
    def f(x):
        return _GLOBAL_MODEL(x)

    x = tp.ones(1, 2)
    np.testing.assert_allclose(f(x).detach().numpy(), _GLOBAL_MODEL(x).detach().numpy(), rtol=1e-6)
    _GLOBAL_MODEL = tp.nn.Linear(2, 2)
    np.testing.assert_allclose(f(x).detach().numpy(), _GLOBAL_MODEL(x).detach().numpy(), rtol=1e-6)
    _GLOBAL_MODEL.eval()
    f(x)
    assert backend.count == 3


_GLOBAL_MODEL = None


def test_guard_failures_and_recompiles_are_logged_with_what_changed(backend, caplog):
    cf, _ = _compiled(backend, name="logged")
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler"):
        cf(tp.ones(2, 3), k=1)
        cf(tp.ones(4, 3), k=2)
        cf(tp.ones(4, 3).long(), k=2)
        cf(tp.ones(4, 3).long(), k=2, mode="mul")
    messages = [r.getMessage() for r in caplog.records if r.name == "tensorplay.compiler.recompiles"]
    assert messages == [
        "recompiling logged (capture 2 of at most 8): x: shape (2, 3) -> (4, 3); k: 1 -> 2",
        "recompiling logged (capture 3 of at most 8): x: dtype float32 -> int64",
        "recompiling logged (capture 4 of at most 8): mode: now passed ('mul')",
    ]
    graphs = [r.getMessage() for r in caplog.records if r.name == "tensorplay.compiler.graphs"]
    assert len(graphs) == 4 and graphs[0].startswith("captured graph of logged:\ngraph @logged(")


def test_failing_value_guard_is_logged_on_the_guards_channel(backend, caplog):
    state = {"flag": True}

    @tp.compile(backend=backend)
    def f(x):
        flag = state["flag"]
        current_capture().add_guard("state['flag'] unchanged", lambda: state["flag"] == flag)
        return x + 1 if flag else x - 1

    x = tp.ones(1)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler"):
        assert f(x).tolist() == [2.0]
        state["flag"] = False
        assert f(x).tolist() == [0.0]
    assert any(r.name == "tensorplay.compiler.guards" and r.getMessage().endswith(
        "state['flag'] unchanged") for r in caplog.records)
    assert any(r.name == "tensorplay.compiler.recompiles" and "guard failed: state['flag'] unchanged"
               in r.getMessage() for r in caplog.records)
    assert backend.count == 2


def test_recompile_limit_warns_once_keeps_entries_and_runs_eagerly(backend):
    cf, calls = _compiled(backend, recompile_limit=2)
    x = tp.ones(2)
    cf(x, k=1)
    cf(x, k=2)
    with pytest.warns(UserWarning, match=r"recompile_limit \(2\) reached; the last miss: k: 2 -> 3"):
        assert cf(x, k=3).tolist() == [4.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cf(x, k=4).tolist() == [5.0, 5.0]          # eager, no second warning
        assert cf(x, k=1).tolist() == [2.0, 2.0]          # still served by its entry
    assert backend.count == 2
    assert len(calls) == 4  # k=1 and k=2 captured, k=3 and k=4 eager, k=1 cached
    assert cf.cache_info()["limit_reached"]


def test_recompile_limit_raises_under_fullgraph(backend):
    cf, _ = _compiled(backend, recompile_limit=1, fullgraph=True)
    cf(tp.ones(2))
    with pytest.raises(GraphCaptureError, match=r"recompile_limit \(1\) reached; the last miss: "
                                                r"x: shape \(2,\) -> \(3,\)"):
        cf(tp.ones(3))


def test_wrappers_of_one_function_share_cache_and_budget(backend):
    def f(x, k):
        return x * k

    a = tp.compile(f, backend=backend, recompile_limit=2)
    b = tp.compile(f, backend=backend, recompile_limit=2)
    x = tp.ones(2)
    a(x, 1)
    b(x, 1)                      # served by a's entry
    assert backend.count == 1
    b(x, 2)
    with pytest.warns(UserWarning, match="recompile_limit"):
        a(x, 3)                  # the shared budget is spent
    assert a.cache_info()["entries"] == b.cache_info()["entries"] == 2


def test_isolate_recompiles_gives_a_wrapper_its_own_cache_and_budget(backend):
    def f(x, k):
        return x * k

    shared = tp.compile(f, backend=backend, recompile_limit=1)
    own = tp.compile(f, backend=backend, recompile_limit=1, isolate_recompiles=True)
    x = tp.ones(2)
    shared(x, 1)
    own(x, 1)                    # its own entry, compiled again
    assert backend.count == 2
    own(x, 1)
    assert backend.count == 2
    with pytest.warns(UserWarning):
        shared(x, 2)
    with pytest.warns(UserWarning):
        own(x, 2)
    assert shared.cache_info()["entries"] == own.cache_info()["entries"] == 1


def test_wrappers_with_other_backends_do_not_reuse_entries(backend):
    other = CountingBackend()

    def f(x):
        return x - 1

    tp.compile(f, backend=backend)(tp.ones(1))
    tp.compile(f, backend=other)(tp.ones(1))
    assert (backend.count, other.count) == (1, 1)


def test_reset_forgets_entries_and_budget(backend):
    cf, calls = _compiled(backend, recompile_limit=1)
    x = tp.ones(2)
    cf(x)
    tp.compiler.reset()
    cf(x)
    assert backend.count == 2 and len(calls) == 2
    assert cf.cache_info()["entries"] == 1


# -- the state of function objects ------------------------------------------------------------

def _partial_fn(a, x, b=1.0):
    return x * a * b


_PARTIAL = functools.partial(_partial_fn, 2.0)


def _defaults():
    def f(x, k=2.0):
        return x * k
    return f, lambda: setattr(f, "__defaults__", (3.0,))


def _kwdefaults():
    def f(x, *, k=2.0):
        return x * k
    return f, lambda: f.__kwdefaults__.__setitem__("k", 3.0)


def _helper_defaults():
    def helper(y, k=2.0, *, j=1.0):
        return y * k * j

    def f(x):
        return helper(x) + 1

    def change():
        helper.__defaults__ = (3.0,)
        helper.__kwdefaults__["j"] = -1.0
    return f, change


def _tensor_default_replaced():
    def f(x, w=tp.full((3,), 2.0)):
        return x * w
    return f, lambda: setattr(f, "__defaults__", (tp.full((3,), 5.0),))


def _partial_compiled():
    p = functools.partial(_partial_fn, 2.0, b=1.0)

    def change():
        p.keywords["b"] = 4.0
    return p, change


def _partial_args_compiled():
    p = functools.partial(_partial_fn, 2.0)
    return p, lambda: p.__setstate__((_partial_fn, (6.0,), {}, None))


def _partial_inside():
    state = {"p": functools.partial(_partial_fn, 2.0)}

    def f(x):
        return state["p"](x) + _PARTIAL(x)

    def change():
        state["p"].keywords["b"] = 3.0
        _PARTIAL.keywords["b"] = -2.0
    return f, change


def _partial_on_module():
    class M(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = functools.partial(_partial_fn, 2.0)

        def forward(self, x):
            return self.act(x)

    m = M()
    return m, lambda: m.act.__setstate__((_partial_fn, (3.0,), {"b": 2.0}, None))


class _Holder:
    def __init__(self):
        self.s = 2.0

    def get(self, x):
        return x * self.s


def _method_rebound_on_class():
    klass = type("H", (_Holder,), {})
    obj = klass()

    def f(x):
        return obj.get(x)
    return f, lambda: setattr(klass, "get", lambda self, x: x * 10.0)


def _method_rebound_on_instance():
    obj = _Holder()

    def f(x):
        return obj.get(x)
    return f, lambda: setattr(obj, "get", lambda x: x * 10.0)


def _bound_method_state():
    klass = type("H", (_Holder,), {"get": lambda self, x, k=1.0: x * self.s * k})
    obj = klass()
    return obj.get, lambda: setattr(obj.get.__func__, "__defaults__", (4.0,))


def _forward_rebound_on_class():
    class M(tp.nn.Module):
        def forward(self, x, k=2.0):
            return x * k

    m = M()

    def change():
        M.forward = lambda self, x: x * 9.0
    return m, change


def _forward_defaults():
    class M(tp.nn.Module):
        def forward(self, x, k=2.0):
            return x * k

    m = M()
    return m, lambda: setattr(M.forward, "__defaults__", (3.0,))


def _code_of_the_compiled_function():
    def f(x):
        return x * 2.0

    def g(x):
        return x * 3.0
    return f, lambda: setattr(f, "__code__", g.__code__)


def _code_of_a_helper():
    def helper(y):
        return y * 2.0

    def other(y):
        return y - 5.0

    def f(x):
        return helper(x) + 1
    return f, lambda: setattr(helper, "__code__", other.__code__)


@pytest.mark.parametrize("make", [
    _defaults, _kwdefaults, _helper_defaults, _tensor_default_replaced, _partial_compiled, _partial_args_compiled,
    _partial_inside, _partial_on_module, _method_rebound_on_class, _method_rebound_on_instance, _bound_method_state,
    _forward_rebound_on_class, _forward_defaults, _code_of_the_compiled_function, _code_of_a_helper,
], ids=lambda make: make.__name__.strip("_"))
def test_a_change_to_a_function_object_recompiles(make, backend):
    """What a call reads from function objects themselves (defaults, keyword defaults, a
    partial's arguments, which function a method name gives, the code) is guarded."""
    target, change = make()
    cf = tp.compile(target, backend=backend)
    x = tp.tensor([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(cf(x).detach().numpy(), target(x).detach().numpy())
    cf(x)
    assert backend.count == 1
    change()
    np.testing.assert_array_equal(cf(x).detach().numpy(), target(x).detach().numpy())
    assert backend.count == 2
    cf(x)
    assert backend.count == 2


def test_a_tensor_default_updated_in_place_is_read_on_every_call(backend):
    w = tp.full((3,), 2.0)

    def f(x, w=w):
        return x * w

    cf = tp.compile(f, backend=backend)
    x = tp.ones(3)
    cf(x)
    w.add_(1.0)
    np.testing.assert_array_equal(cf(x).detach().numpy(), [3.0, 3.0, 3.0])
    assert backend.count == 1


def test_a_function_argument_is_guarded_with_its_defaults(backend):
    def act(y, k=2.0):
        return y * k

    def f(x, fn):
        return fn(x)

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2)
    cf(x, act)
    act.__defaults__ = (5.0,)
    np.testing.assert_array_equal(cf(x, act).detach().numpy(), [5.0, 5.0])
    assert backend.count == 2


def test_a_compiled_bound_method_keeps_calling_its_own_function(backend):
    """``tp.compile(obj.method)`` wraps that bound method: rebinding the name on the object
    afterwards changes what ``obj.method`` gives, not the compiled callable (as with any
    bound method saved before), and does not make every call recompile."""
    obj = _Holder()
    bound = obj.get
    cf = tp.compile(bound, backend=backend)
    x = tp.ones(2)
    cf(x)
    obj.get = lambda x: x * 10.0
    for _ in range(3):
        np.testing.assert_array_equal(cf(x).detach().numpy(), bound(x).detach().numpy())
    assert backend.count == 1
    obj.s = 3.0  # what the method reads from its object is guarded
    np.testing.assert_array_equal(cf(x).detach().numpy(), [3.0, 3.0])
    assert backend.count == 2


def test_equal_defaults_put_back_do_not_recompile(backend):
    def f(x, k=2.0, *, j=(1, 2)):
        return x * k * len(j)

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2)
    cf(x)
    f.__defaults__ = (2.0,)  # a new tuple, equal
    f.__kwdefaults__ = {"j": (1, 2)}
    cf(x)
    assert backend.count == 1
