"""Markers under capture: where graphs end, what runs eagerly and how often, what is traced
instead, and the errors (with the user's file:line) when a marked piece cannot be captured."""

from __future__ import annotations

import dataclasses
import inspect
import logging

import numpy as np
import pytest

import tensorplay as tp
from tests.compiler.conftest import CountingBackend, probe
import tensorplay.compiler as tpc
from tensorplay.compiler import markers


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    yield
    tpc.reset()


def line_of(marker_text, fn):
    """``file:line`` of the line of ``fn``'s source containing ``marker_text``."""
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if marker_text in text:
            return f"{inspect.getsourcefile(fn)}:{start + i}"
    raise AssertionError(f"{marker_text!r} not in {fn.__name__}")


def x3():
    return tp.tensor([1.0, -2.0, 3.0])


# -- allow_in_graph ----------------------------------------------------------------------------

def test_allow_in_graph_traces_the_body_into_one_graph(backend):
    @tpc.allow_in_graph
    def scale(y):
        return y * 2 + 1

    def f(x):
        return scale(x - 1).sum()

    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), f(x3()).detach().numpy())
    assert len(backend.graphs) == 1 and "tp.mul" in backend.ops[0]


def test_break_inside_allow_in_graph_names_the_function_and_line(backend):
    @tpc.allow_in_graph
    def relu_if_positive(y):
        if y.sum() > 0:  # needs a value
            return y
        return -y

    def f(x):
        return relu_if_positive(x * 2)

    with pytest.raises(tpc.GraphCaptureError) as info:
        tpc.compile(f, backend=backend)(x3())  # no fullgraph: the marker alone forbids breaks
    message = str(info.value)
    assert f"inside allow_in_graph function {__name__}." in message
    assert "relu_if_positive" in message
    assert line_of("needs a value", relu_if_positive) in message
    assert backend.graphs == []


# -- disallow_in_graph -------------------------------------------------------------------------

def test_disallow_in_graph_splits_the_graph_and_runs_the_function_every_call(backend):
    calls, calls_append = probe()

    def log_and_scale(y):
        calls_append(tpc.is_compiling())
        return y * 3

    assert tpc.disallow_in_graph(log_and_scale) is log_and_scale

    def f(x):
        return log_and_scale(x + 1) - 1

    cf = tpc.compile(f, backend=backend)
    for _ in range(3):
        np.testing.assert_allclose(cf(x3()).detach().numpy(), [5.0, -4.0, 11.0])
    assert calls == [False] * 3  # eager between graphs, on every call
    assert len(backend.graphs) == 2  # before and after the call, each compiled once
    report = tpc.explain(f, x3())
    assert report.graph_count == 2 and report.graph_break_count == 1
    reason = report.break_reasons[0]
    assert "log_and_scale, marked with tensorplay.compiler.disallow_in_graph" in reason.reason
    assert f"called at {line_of('return log_and_scale', f)}" in reason.reason


def test_disallow_in_graph_under_fullgraph_raises(backend):
    def helper(y):
        return y * 3

    tpc.disallow_in_graph(helper)

    def f(x):
        return helper(x + 1)

    with pytest.raises(tpc.GraphCaptureError, match="disallow_in_graph") as info:
        tpc.compile(f, backend=backend, fullgraph=True)(x3())
    assert line_of("return helper", f) in str(info.value)


def test_disallow_in_graph_on_a_tensorplay_function_and_a_bound_method(backend):
    class Scaler:
        def __init__(self, k):
            self.k = k

        def __call__(self, y):
            return y * self.k

        def shift(self, y):
            return y + self.k

    watched, other = Scaler(2), Scaler(5)
    tpc.disallow_in_graph(watched.shift)
    tpc.disallow_in_graph(watched)

    def f(x):
        return other.shift(other(x)) + watched.shift(x) + watched(x)

    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), f(x3()).detach().numpy())
    report = tpc.explain(f, x3())
    assert report.graph_break_count == 2  # only the calls on `watched`
    assert all("Scaler" in b.reason for b in report.break_reasons)


# -- disable -----------------------------------------------------------------------------------

def test_disable_runs_eagerly_on_every_call_and_reports_the_reason(backend, caplog):
    calls, calls_append = probe()

    @tpc.disable(reason="writes a log line")
    def side_effect(y):
        calls_append(tpc.is_compiling())
        return y * 3

    def f(x):
        return side_effect(x + 1) - 1

    cf = tpc.compile(f, backend=backend)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.breaks"):
        for _ in range(3):
            np.testing.assert_allclose(cf(x3()).detach().numpy(), [5.0, -4.0, 11.0])
    assert calls == [False, False, False]
    assert len(backend.graphs) == 2
    assert any("marked with tensorplay.compiler.disable: writes a log line" in r.getMessage()
               and line_of("side_effect(x + 1)", f) in r.getMessage() for r in caplog.records)

    with pytest.raises(tpc.GraphCaptureError, match="writes a log line") as info:
        tpc.compile(f, backend=backend, fullgraph=True, isolate_recompiles=True)(x3())
    assert line_of("side_effect(x + 1)", f) in str(info.value)


def test_disable_recursive_runs_nested_compiled_functions_eagerly(backend):
    inner_backend = CountingBackend()
    inner = tpc.compile(lambda y: y * 2 + 1, backend=inner_backend)

    @tpc.disable
    def deep(y):
        return inner(y)

    @tpc.disable(recursive=False)
    def shallow(y):
        return inner(y)

    np.testing.assert_allclose(deep(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    assert inner_backend.graphs == []  # recursive: nothing under deep compiles
    np.testing.assert_allclose(shallow(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    assert len(inner_backend.graphs) == 1  # non-recursive: the compiled callee still compiles

    def f(x):
        return deep(x) + shallow(x)

    np.testing.assert_allclose(tpc.compile(f, backend=backend)(x3()).detach().numpy(), [6.0, -6.0, 14.0])
    assert len(inner_backend.graphs) == 1  # reused by shallow's call, skipped by deep's


def test_disable_on_a_compiled_function_and_a_compiled_module(backend):
    calls, calls_append = probe()

    def f(x):
        calls_append(tpc.is_compiling())
        return x * 2

    cf = tpc.compile(f, backend=backend)
    plain = tpc.disable(cf)
    assert plain.__wrapped__ is f
    np.testing.assert_allclose(plain(x3()).detach().numpy(), [2.0, -4.0, 6.0])
    assert backend.graphs == [] and calls == [False]

    lin = tp.nn.Linear(3, 2)
    compiled = tpc.compile(lin, backend=backend)
    assert tpc.disable(compiled, recursive=False) is compiled  # in place, keeps state_dict
    np.testing.assert_allclose(compiled(tp.ones(1, 3)).detach().numpy(), lin(tp.ones(1, 3)).detach().numpy())
    assert backend.graphs == [] and list(compiled.state_dict()) == ["weight", "bias"]
    assert markers.marker_of(lin.forward) is None  # the original module is untouched


# -- disable_capture ---------------------------------------------------------------------------

def test_disable_capture_block_runs_eagerly_between_graphs(backend):
    seen, seen_append = probe()

    def f(x):
        y = x * 2
        with tpc.disable_capture():
            seen_append((tpc.is_compiling(), float(y.sum().item())))
        return y + 1

    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    assert seen == [(False, 4.0), (False, 4.0)]
    assert len(backend.graphs) == 2
    report = tpc.explain(f, x3())
    assert report.break_reasons[0].reason == "tensorplay.compiler.disable_capture() block"

    with pytest.raises(tpc.GraphCaptureError, match=r"disable_capture\(\) block") as info:
        tpc.compile(f, backend=backend, fullgraph=True, isolate_recompiles=True)(x3())
    assert line_of("with tpc.disable_capture()", f) in str(info.value)


def test_disable_capture_makes_compiled_callables_run_eagerly(backend):
    cf = tpc.compile(lambda x: x + 1, backend=backend)
    with tpc.disable_capture():
        np.testing.assert_allclose(cf(x3()).detach().numpy(), [2.0, -1.0, 4.0])
    assert backend.graphs == []
    cf(x3())
    assert len(backend.graphs) == 1


# -- unused ------------------------------------------------------------------------------------

def test_unused_is_a_graph_break_and_an_error_under_fullgraph(backend):
    class M(tp.nn.Module):
        @tpc.unused
        def check(self, x):
            assert float(x.abs().max().item()) < 100
            return x

        def forward(self, x):
            return self.check(x * 2) + 1

    m = M()
    np.testing.assert_allclose(tpc.compile(m, backend=backend)(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    assert len(backend.graphs) == 2
    with pytest.raises(tpc.GraphCaptureError, match=r"M\.check, marked with tensorplay\.compiler\.unused") \
            as info:
        tpc.compile(M(), backend=backend, fullgraph=True)(x3())
    assert line_of("self.check(x * 2)", M.forward) in str(info.value)


# -- nonstrict_trace ---------------------------------------------------------------------------

@dataclasses.dataclass
class Affine:
    weight: tp.Tensor
    shift: float


def test_nonstrict_trace_takes_pytrees_and_captures_one_graph(backend):
    calls, calls_append = probe()

    @tpc.nonstrict_trace
    def apply(params, xs, *, opts):
        calls_append(1)
        a, b = xs
        return {"y": a * params.weight + params.shift, "z": [b * opts["k"]]}

    def f(x, w):
        out = apply(Affine(w, 0.5), (x, x + 1), opts={"k": 3.0})
        return out["y"] + out["z"][0]

    cf = tpc.compile(f, backend=backend)
    w = tp.tensor([2.0, 2.0, 2.0])
    for _ in range(2):
        np.testing.assert_allclose(cf(x3(), w).detach().numpy(), f(x3(), w).detach().numpy())
    assert len(backend.graphs) == 1 and len(calls) == 2 + 1  # 2 eager calls + 1 capture


def test_nonstrict_trace_rejects_other_argument_types_with_their_path(backend):
    class Config:
        k = 2

    @tpc.nonstrict_trace
    def apply(x, extra):
        return x * extra["cfg"].k

    def f(x):
        return apply(x, {"cfg": Config()})

    with pytest.raises(TypeError, match=r"nonstrict_trace function .*apply: args\[1\]\['cfg'\] is a "
                                        r"Config; only tuples, lists, dicts and dataclasses"):
        tpc.compile(f, backend=backend)(x3())


def test_nonstrict_trace_forbids_reading_tensor_values(backend):
    @tpc.nonstrict_trace
    def peek(x):
        return x * float(x.sum().item())  # reads a value

    with pytest.raises(tpc.GraphCaptureError, match="inside nonstrict_trace function") as info:
        tpc.compile(lambda x: peek(x + 1), backend=backend)(x3())
    assert line_of("reads a value", peek) in str(info.value)


def test_nonstrict_trace_guards_constants_in_mutable_containers(backend):
    @tpc.nonstrict_trace
    def scaled(x, cfg):
        return x * cfg["k"]

    cfg = {"k": 2.0}

    def f(x):
        return scaled(x, cfg)

    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [2.0, -4.0, 6.0])
    assert len(backend.graphs) == 1
    cfg["k"] = 10.0  # a mutation the graph baked in: the guard fails, capture runs again
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [10.0, -20.0, 30.0])
    assert len(backend.graphs) == 2


# -- substitute_in_graph -----------------------------------------------------------------------

def test_substitute_in_graph_traces_the_substitute_and_keeps_eager_on_the_original(backend):
    calls, calls_append = probe()

    def clamp_np(x, lo=0.0):
        calls_append("original")
        return tp.tensor(np.maximum(x.detach().numpy(), lo))  # needs values: a graph break

    @tpc.substitute_in_graph(clamp_np)
    def clamp(x, lo=0.0):
        calls_append("substitute")
        return tp.clamp(x, min=lo)

    def f(x):
        return clamp(x * 2) + 1

    cf = tpc.compile(f, backend=backend, fullgraph=True)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [3.0, 1.0, 7.0])
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [3.0, 1.0, 7.0])
    assert calls == ["substitute"]  # traced once, replayed without Python
    np.testing.assert_allclose(f(x3()).detach().numpy(), [3.0, 1.0, 7.0])
    assert calls == ["substitute", "original"]
    assert len(backend.graphs) == 1


def test_substitute_in_graph_constant_folds_through_constant_arguments(backend):
    calls, calls_append = probe()

    def table_size(n, factor):
        calls_append((n, factor))
        return n * factor

    @tpc.substitute_in_graph(table_size, can_constant_fold_through=True)
    def table_size_in_graph(n, factor):
        raise AssertionError("not traced when all arguments are constants")

    def f(x):
        return x * table_size_in_graph(x.shape[0], 2)

    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [6.0, -12.0, 18.0])
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [6.0, -12.0, 18.0])
    assert calls == [(3, 2)]  # folded once at capture time, baked into the graph
    (graph,) = backend.graphs
    assert [n.op for n in graph.nodes] == ["tp.constant", "tp.mul"]
    assert float(graph.nodes[0].attrs["value"]) == 6.0  # the folded result, baked in


def test_substitute_in_graph_does_not_fold_captured_tensors(backend):
    def original(x):
        raise AssertionError("eager original not used under capture")

    @tpc.substitute_in_graph(original, can_constant_fold_through=True)
    def double(x):
        return x * 2

    np.testing.assert_allclose(tpc.compile(lambda x: double(x), backend=backend)(x3()).detach().numpy(),
                               [2.0, -4.0, 6.0])


# -- assume_constant_result --------------------------------------------------------------------

def test_assume_constant_result_is_called_once_until_reset(backend):
    calls, calls_append = probe()

    @tpc.assume_constant_result
    def scale():
        calls_append(tpc.is_compiling())
        return 3.0

    def f(x):
        return x * scale()

    cf = tpc.compile(f, backend=backend)
    cf(x3())
    cf(tp.ones(5))  # a new shape: a second capture, same assumed value
    cf(x3())
    assert len(backend.graphs) == 2 and len(calls) == 1
    assert scale() == 3.0 and len(calls) == 2  # eager calls always run it
    tpc.reset()
    cf(x3())
    assert len(calls) == 3 and len(backend.graphs) == 3


def test_assume_constant_result_keys_by_arguments_and_rejects_captured_tensors(backend):
    calls, calls_append = probe()

    @tpc.assume_constant_result
    def factor(name):
        calls_append(name)
        return {"a": 2.0, "b": 5.0}[name]

    def f(x):
        return x * factor("a") + factor("b") + factor("a")

    np.testing.assert_allclose(tpc.compile(f, backend=backend)(x3()).detach().numpy(), [9.0, 3.0, 13.0])
    assert calls == ["a", "b"]

    @tpc.assume_constant_result
    def bad(t):
        return 1.0

    with pytest.raises(TypeError, match=r"args\[0\] is a tensor being captured"):
        tpc.compile(lambda x: x * bad(x), backend=backend)(x3())


# -- is_compiling inside markers ---------------------------------------------------------------

def test_is_compiling_is_true_in_traced_markers_and_false_in_eager_ones(backend):
    seen = {}
    note = seen.__setitem__  # a C call: not a Python side effect the capture sees

    @tpc.allow_in_graph
    def atomic(x):
        note("allow_in_graph", tpc.is_compiling())
        return x

    @tpc.nonstrict_trace
    def opaque(x):
        note("nonstrict_trace", tpc.is_compiling())
        return x

    @tpc.disable
    def eager(x):
        note("disable", tpc.is_compiling())
        return x

    tpc.compile(lambda x: eager(opaque(atomic(x))), backend=backend)(x3())
    assert seen == {"allow_in_graph": True, "nonstrict_trace": True, "disable": False}


def test_disallowed_call_that_raises_resumes_capture_and_restores_profiling(backend):
    import sys

    def risky(y, fail):
        if fail:
            raise KeyError("from risky")
        return y * 2

    tpc.disallow_in_graph(risky)

    def f(x):
        try:
            risky(x, True)
        except KeyError:
            pass
        return risky(x + 1, False) + 1

    before = sys.getprofile()
    cf = tpc.compile(f, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [5.0, -1.0, 9.0])
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [5.0, -1.0, 9.0])
    assert sys.getprofile() is before
    assert tpc.explain(f, x3()).graph_break_count == 2
    with pytest.raises(tpc.GraphCaptureError):
        tpc.compile(f, backend=backend, fullgraph=True, isolate_recompiles=True)(x3())
    assert sys.getprofile() is before


def test_nothing_watches_calls_when_no_capture_runs():
    import sys

    def helper(y):
        return sys.getprofile()

    tpc.disallow_in_graph(helper)
    assert helper(1) is None


def test_disallow_in_graph_on_a_builtin(backend):
    import math

    tpc.disallow_in_graph(math.fsum)

    def f(x):
        y = x * 2
        return y + math.fsum([0.5, 0.25])

    np.testing.assert_allclose(tpc.compile(f, backend=backend)(x3()).detach().numpy(), [2.75, -3.25, 6.75])
    report = tpc.explain(f, x3())
    assert report.graph_break_count == 1
    assert report.break_reasons[0].reason.startswith("call to math.fsum, marked with "
                                                     "tensorplay.compiler.disallow_in_graph")


def test_disallow_in_graph_watches_one_closure_of_a_factory(backend):
    def make(k):
        def scale(y):
            return y * k
        return scale

    two, three = make(2.0), make(3.0)
    tpc.disallow_in_graph(three)

    def f(x):
        return two(x) + three(x)

    np.testing.assert_allclose(tpc.compile(f, backend=backend)(x3()).detach().numpy(), [5.0, -10.0, 15.0])
    report = tpc.explain(f, x3())
    assert report.graph_break_count == 1 and "make.<locals>.scale" in report.break_reasons[0].reason


@pytest.mark.iree
def test_a_disallowed_builtin_called_by_the_backend_does_not_reenter_the_capture(tmp_path, monkeypatch):
    """The IREE backend's cache names its temporary files with random.choices, which calls
    math.floor: with math.floor disallowed, a graph break's compile must not be taken for a
    call of the program (it once re-entered the flush and waited on its own cache lock)."""
    import math
    import threading

    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path))
    tpc.disallow_in_graph(math.floor)

    @tpc.compile(backend="iree-cpu")
    def f(x):
        y = x * 3
        return y + float(y.sum())  # a break: the first segment compiles (and is cached) here

    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(f(tp.ones(3)).detach().numpy()), daemon=True)
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "the compile inside the graph break deadlocked"
    np.testing.assert_allclose(outcome[0], [12.0, 12.0, 12.0])


def test_a_disallowed_builtin_breaks_user_code_but_not_the_library_calling_it():
    """F.interpolate computes its output size with math.floor: with math.floor disallowed,
    that call is tensorplay's own and the graph stays whole; the user's own call breaks it."""
    import math

    tpc.disallow_in_graph(math.floor)
    x = tp.arange(8.0).reshape(1, 1, 8)

    def resize(x):
        return tp.nn.functional.interpolate(x, scale_factor=1.5, mode="nearest") * 2

    np.testing.assert_allclose(tpc.compile(resize, backend="eager", fullgraph=True)(x).numpy(),
                               resize(x).numpy())

    def user(x):
        return x * math.floor(2.5)

    with pytest.raises(tpc.GraphCaptureError, match="call to math.floor"):
        tpc.compile(user, backend="eager", fullgraph=True)(x)
