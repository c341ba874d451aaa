"""Python state a compiled call read: every value the capture baked into a graph is guarded,
wherever the function found it (module attributes at any depth, dicts, lists, plain objects,
dataclasses, closures, globals of called helpers, class attributes), so a change gives the
result eager gives, never the value of the first call."""

from __future__ import annotations

import dataclasses
import gc
import logging
import types

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError

# -- module-level state the helpers read ----------------------------------------------------

SCALE = 2.0
W = None
CFG = types.SimpleNamespace(k=2.0)


class Cfg:
    factor = 2.0


def _helper(x):
    return x * SCALE


def _helper_w(x):
    return x + W


def _via_helper(x):
    return _helper(x) + 1


def _via_helper_w(x):
    return _helper_w(x) * 2


def _reads_cfg(x):
    return x * CFG.k


def _reads_class(x):
    return x * Cfg.factor


@pytest.fixture(autouse=True)
def _restore_globals():
    global SCALE, W
    saved = SCALE, W, CFG.k, Cfg.factor
    yield
    SCALE, W, CFG.k, Cfg.factor = saved


def _check(compiled, eager, *args):
    got, want = compiled(*args), eager(*args)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)


def _follows(backend, target, *changes):
    """Compile ``target``; before the first call and after each change the compiled result
    equals eager's."""
    compiled = tp.compile(target, backend=backend)
    x = tp.ones(3)
    _check(compiled, target, x)
    for change in changes:
        change()
        _check(compiled, target, x)
    return compiled


def _set_global(name, value):
    return lambda: globals().__setitem__(name, value)


# -- the state changes found stale, one test each --------------------------------------------

class DictOpts(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.opts = {"k": 2.0}

    def forward(self, x):
        return x * self.opts["k"]


class HoldsCfg(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = types.SimpleNamespace(z=2.0)

    def forward(self, x):
        return x + self.cfg.z


class Layers(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [1.0, 2.0, 3.0]

    def forward(self, x):
        return x * self.layers[-1]


def test_a_dict_entry_of_a_module_attribute(backend):
    m = DictOpts()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(3)
    _check(cm, m, x)
    m.opts["k"] = 4.0
    _check(cm, m, x)
    assert backend.count == 2
    _check(cm, m, x)
    assert backend.count == 2


def test_an_attribute_of_a_plain_object_held_by_a_module(backend):
    m = HoldsCfg()
    _follows(backend, m, lambda: setattr(m.cfg, "z", 5.0))


def test_an_attribute_of_a_plain_object_held_by_a_global(backend):
    _follows(backend, _reads_cfg, lambda: setattr(CFG, "k", 7.0))


def test_a_global_scalar_read_in_a_called_helper(backend):
    _follows(backend, _via_helper, _set_global("SCALE", 3.0))


def test_a_global_tensor_read_in_a_called_helper_then_rebound(backend):
    _set_global("W", tp.full((3,), 1.0))()
    _follows(backend, _via_helper_w, _set_global("W", tp.full((3,), 5.0)),
             lambda: W.add_(1.0))  # an in-place update is read, no recompile
    assert backend.count == 2


def test_a_detached_tensor_is_read_at_each_call_not_baked_in(backend):
    # x * w.detach() (a target network, an EMA, a stop-gradient): w is an input of the graph
    w = tp.full((3,), 2.0, requires_grad=True)
    plain = tp.full((3,), 2.0)

    def f(x):
        return x * w.detach() + plain.detach() + plain.data

    def step():
        with tp.no_grad():
            w.mul_(3.0)
            plain.add_(1.0)

    _follows(backend, f, step, step)
    assert backend.count == 1


def test_a_list_item_of_a_module_attribute(backend):
    m = Layers()
    _follows(backend, m, lambda: m.layers.__setitem__(-1, 10.0),
             lambda: m.layers.append(4.0))  # a longer list: [-1] is another item now


def test_a_class_attribute(backend):
    _follows(backend, _reads_class, lambda: setattr(Cfg, "factor", 9.0))


def test_a_class_attribute_read_through_self(backend):
    class M(tp.nn.Module):
        gain = 2.0

        def forward(self, x):
            return x * self.gain

    m = M()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(3)
    _check(cm, m, x)
    M.gain = 3.0
    _check(cm, m, x)
    m.gain = 4.0  # an instance attribute now shadows the class's
    _check(cm, m, x)


def test_a_closure_variable_rebound_after_the_first_call(backend):
    k = 2.0

    def f(x):
        return x * k

    cf = tp.compile(f, backend=backend)
    x = tp.ones(3)
    _check(cf, f, x)
    k = 5.0
    _check(cf, f, x)
    assert backend.count == 2
    _check(cf, f, x)
    assert backend.count == 2


def test_a_closure_variable_of_a_called_helper(backend):
    def make(scale):
        def helper(x):
            return x * scale[0]
        return helper

    box = [2.0]
    helper = make(box)

    def f(x):
        return helper(x) - 1

    cf = tp.compile(f, backend=backend)
    x = tp.ones(3)
    _check(cf, f, x)
    box[0] = 6.0
    _check(cf, f, x)


def test_an_argument_that_aliases_a_parameter(backend):
    lin = tp.nn.Linear(3, 3, bias=False)

    def f(x):
        return lin(x) + x.sum()

    cf = tp.compile(f, backend=backend)
    _check(cf, f, lin.weight)          # the argument is the weight itself
    other = tp.randn(3, 3)
    _check(cf, f, other)               # same shape and dtype, not the weight: another graph
    assert backend.count == 2
    _check(cf, f, lin.weight)
    assert backend.count == 2


# -- deeper and other shapes of the same thing ------------------------------------------------

@dataclasses.dataclass
class ModelConfig:
    depth: int = 1
    scale: float = 2.0
    inner: dict = dataclasses.field(default_factory=lambda: {"bias": 1.0})


class Deep(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = ModelConfig()

    def forward(self, x):
        for _ in range(self.config.depth):
            x = x * self.config.scale + self.config.inner["bias"]
        return x


@pytest.mark.parametrize("change", [
    lambda m: setattr(m.config, "depth", 3),
    lambda m: setattr(m.config, "scale", -1.0),
    lambda m: m.config.inner.__setitem__("bias", 7.0),
    lambda m: setattr(m, "config", ModelConfig(scale=0.5)),
])
def test_dataclass_config_fields_at_any_depth(backend, change):
    m = Deep()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(2)
    _check(cm, m, x)
    change(m)
    _check(cm, m, x)


def test_state_read_through_builtin_calls_on_containers(backend):
    opts = {"a": 1.0, "b": 2.0}
    weights = [1.0, 2.0]

    def f(x):
        return x * sum(weights) + len(opts) + opts.get("a", 0.0)

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2)
    _check(cf, f, x)
    weights.append(3.0)
    _check(cf, f, x)
    opts["c"] = 0.0
    _check(cf, f, x)
    opts["a"] = 10.0
    _check(cf, f, x)


def test_a_plain_object_argument_is_guarded_by_what_was_read(backend):
    def f(x, cfg):
        return x * cfg.k

    cf = tp.compile(f, backend=backend)
    cfg = types.SimpleNamespace(k=2.0)
    x = tp.ones(2)
    _check(cf, f, x, cfg)
    cfg.k = 3.0
    _check(cf, f, x, cfg)


def test_a_helper_rebound_in_its_module_is_seen(backend):
    global _helper

    cf = tp.compile(_via_helper, backend=backend)
    x = tp.ones(3)
    _check(cf, _via_helper, x)
    saved = _helper
    try:
        _helper = lambda x: x - 100  # noqa: E731
        _check(cf, _via_helper, x)
    finally:
        _helper = saved


def test_a_method_patched_on_the_class_is_seen(backend):
    class M(tp.nn.Module):
        def act(self, x):
            return x + 1

        def forward(self, x):
            return self.act(x) * 2

    m = M()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(2)
    _check(cm, m, x)
    M.act = lambda self, x: x - 1
    _check(cm, m, x)


def test_unchanged_state_does_not_recompile(backend):
    m = Deep()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(2)
    for _ in range(5):
        _check(cm, m, x)
    m.config.inner["bias"] = 1.0     # the same value again
    _check(cm, m, x)
    assert backend.count == 1


def test_nan_constants_do_not_recompile_every_call(backend):
    box = {"v": float("nan")}

    def f(x):
        return x + box["v"]

    cf = tp.compile(f, backend=backend)
    for _ in range(3):
        cf(tp.ones(2))
    assert backend.count == 1


def test_int_and_float_of_equal_value_are_different_constants(backend):
    box = {"v": 2}

    def f(x):
        return x * box["v"]

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2, dtype=tp.int32)
    _check(cf, f, x)
    box["v"] = 2.0  # int32 * 2.0 is float32 in eager
    out = cf(x)
    assert out.dtype == f(x).dtype == tp.float32


# -- reporting --------------------------------------------------------------------------------

def test_value_guards_are_logged_and_explained(backend, caplog):
    m = DictOpts()
    cm = tp.compile(m, backend=backend)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.guards"):
        cm(tp.ones(2))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "opts" in text and "{'k': 2.0}" in text
    m.opts["k"] = 3.0
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler"):
        cm(tp.ones(2))
    assert any("opts" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    report = tp.compiler.explain(m, tp.ones(2))
    assert "Value guards" in str(report) and "{'k': 3.0}" in str(report)


def test_python_side_effects_on_outside_state_are_replayed(backend):
    calls = {"n": 0}

    def f(x):
        calls["n"] += 1
        return x * calls["n"]

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2)
    outs = [cf(x).detach().numpy()[0] for _ in range(3)]
    assert outs == [1.0, 2.0, 3.0]


def test_fullgraph_refuses_python_side_effects_with_the_line(backend):
    state = types.SimpleNamespace(n=0)

    def f(x):
        state.n += 1
        return x * 2

    cf = tp.compile(f, backend=backend, fullgraph=True)
    with pytest.raises(GraphCaptureError, match=r"test_capture_state\.py:\d+"):
        cf(tp.ones(2))


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # (raised in a callback)
@pytest.mark.parametrize("fullgraph", [True, False])
def test_code_the_garbage_collector_runs_during_a_capture_is_not_the_functions(backend, fullgraph):
    # gc.callbacks and the finalizers of collected objects run wherever a collection happens
    # to start; their stores are not side effects of the traced function (before, a capture
    # recorded them and broke the graph, or failed under fullgraph, depending on GC timing)
    seen = {"collections": 0, "finalized": 0}

    def count(phase, info):
        seen["collections"] += 1

    class Cycle:
        def __del__(self):
            seen["finalized"] += 1

    def f(x):
        gc.collect()
        return x * 2

    was_enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(count)
    try:
        c = Cycle()
        c.me = c
        del c  # garbage only the collector frees: inside the capture's gc.collect()
        cf = tp.compile(f, backend=backend, fullgraph=fullgraph)
        np.testing.assert_allclose(cf(tp.ones(2)).detach().numpy(), [2.0, 2.0])
        np.testing.assert_allclose(cf(tp.ones(2)).detach().numpy(), [2.0, 2.0])
    finally:
        gc.callbacks.remove(count)
        if was_enabled:
            gc.enable()
    assert seen["collections"] >= 2 and seen["finalized"] == 1
    assert len(backend.graphs) == 1  # one graph: no break, no recompile


@pytest.mark.parametrize("before, after", [(0.0, -0.0), (1, True), (2, 2.0), (float("nan"), 1.0), ("a", "b")])
def test_flat_config_fields_compare_by_type_and_bits(backend, before, after):
    cfg = types.SimpleNamespace(v=before, other=3)

    def f(x):
        return x * cfg.v if not isinstance(cfg.v, str) else x + len(cfg.v + "xy")

    cf = tp.compile(f, backend=backend)
    x = tp.ones(2)
    cf(x)
    cfg.v = after
    got, want = cf(x), f(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got.detach().numpy()), np.signbit(want.detach().numpy()))
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert backend.count == 2


def test_guards_of_a_module_tree_do_not_repeat_the_module_guard(backend):
    from tensorplay.examples.models import GPTConfig, build_gpt

    model = build_gpt(tp, GPTConfig())
    cm = tp.compile(model, backend=backend)
    idx = tp.randint(0, GPTConfig().vocab_size, (1, 8))
    cm(idx)
    report = str(tp.compiler.explain(model, idx))
    value_guards = report.split("Value guards")[1].split("Ops per graph")[0]
    assert "config (content)" in value_guards
    assert "<Block>" not in value_guards  # submodules are the module guard's


def test_a_config_change_on_a_real_model_is_seen(backend):
    from tensorplay.examples.models import GPTConfig, build_gpt

    model = build_gpt(tp, GPTConfig())
    model.eval()
    cm = tp.compile(model, backend=backend)
    idx = tp.randint(0, GPTConfig().vocab_size, (1, 8))
    with tp.no_grad():
        np.testing.assert_allclose(cm(idx)[0].detach().numpy(), model(idx)[0].detach().numpy(), rtol=1e-5, atol=1e-6)
        cm(idx)
        assert backend.count == 1
        model.config.block_size = 4  # forward asserts the sequence fits: eager raises now
        with pytest.raises(AssertionError, match="exceeds 4"):
            model(idx)
        with pytest.raises(AssertionError, match="exceeds 4"):
            cm(idx)


def test_an_instance_attribute_removed_through_the_dict_uncovers_the_class_attribute(backend):
    class M(tp.nn.Module):
        gain = 2.0

        def forward(self, x):
            return x * self.gain

    m = M()
    cm = tp.compile(m, backend=backend)
    x = tp.ones(2)
    m.gain = 7.0
    _check(cm, m, x)
    m.__dict__.pop("gain")  # bypasses Module.__delattr__: found by the state fuzzer
    _check(cm, m, x)


def test_what_cannot_be_guarded_is_said_in_the_logs_and_in_explain(backend, caplog):
    import operator

    class Holder:
        value = property(operator.attrgetter("_v"))  # a getter that is not Python code of yours

        def __init__(self):
            self._v = 2.0

    holder = Holder()

    def f(x):
        return x * holder.value

    cf = tp.compile(f, backend=backend)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.guards"):
        _check(cf, f, tp.ones(2))
    assert any("not guarded" in r.getMessage() and "Holder.value" in r.getMessage() for r in caplog.records)
    report = str(tp.compiler.explain(f, tp.ones(2)))
    assert "Not guarded:" in report and "Holder.value" in report and "descriptor of library code" in report
