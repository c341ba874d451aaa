"""Markers act on the marked callable itself: a model (or library code) that calls the original
directly, not the wrapper a marker returns, gets the marker's behaviour under capture. The
helpers live in another module, written to a temporary folder and imported, as third-party
code would be; eager calls, identity and signatures stay as they were."""

from __future__ import annotations

import importlib
import inspect
import pickle
import sys
import textwrap
import threading

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay.compiler import markers
from tests.compiler.conftest import probe

HELPERS = '''
import numpy as np
import tensorplay as tp

note = print  # the test replaces it with a list's append


def relu_if_positive(y):
    if y.sum() > 0:  # needs a value
        return y
    return -y


def scale(y, k=2.0, *, shift=1.0):
    """Scale and shift."""
    return y * k + shift


def clamp_np(x, lo=0.0):
    note("original")
    return tp.tensor(np.maximum(x.detach().numpy(), lo))  # needs values


def table_scale(name):
    note(("table_scale", name))
    return {"a": 2.0, "b": 5.0}[name]


def debug_stats(y):
    note("debug_stats")
    return y


def spread(y):
    return np.ptp(y)  # numpy's function, called by library code


class Outer(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Net()

    def forward(self, x):
        return self.inner(x) * 3  # Module.__call__ (tensorplay's) calls Net.forward


class Net(tp.nn.Module):
    def forward(self, x):
        return self.check(x * 2) + 1

    def check(self, y):
        if y.sum() > 0:  # needs a value
            return y
        return -y
'''

MODEL = '''
import mk_helpers as helpers
from mk_helpers import relu_if_positive, table_scale


def via_attribute(x):
    return helpers.relu_if_positive(x * 2)


def via_global(x):
    return relu_if_positive(x * 2)


def constant_scaled(x):
    return x * table_scale("a") + table_scale(name="b")
'''


@pytest.fixture
def mods(tmp_path, monkeypatch):
    """Fresh ``mk_helpers`` and ``mk_model`` modules for one test."""
    (tmp_path / "mk_helpers.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "mk_model.py").write_text(textwrap.dedent(MODEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mk_helpers", "mk_model"):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    helpers = importlib.import_module("mk_helpers")
    model = importlib.import_module("mk_model")
    yield helpers, model
    for name in ("mk_helpers", "mk_model"):
        sys.modules.pop(name, None)


def x3():
    return tp.tensor([1.0, -2.0, 3.0])


def line_in(module, text):
    """``file:line`` of the first line of ``module``'s source containing ``text``."""
    for i, line in enumerate(inspect.getsource(module).splitlines(), 1):
        if text in line:
            return f"{module.__file__}:{i}"
    raise AssertionError(text)


# -- allow_in_graph ----------------------------------------------------------------------------

def test_allow_in_graph_applies_to_direct_calls_of_the_original(backend, mods):
    helpers, model = mods
    original = helpers.relu_if_positive
    assert tpc.allow_in_graph(helpers.relu_if_positive) is not original  # a wrapper, as before
    assert helpers.relu_if_positive is original
    for f in (model.via_attribute, model.via_global):  # helpers.f(...) and `from helpers import f`
        with pytest.raises(tpc.GraphCaptureError) as info:
            tpc.compile(f, backend=backend)(x3())  # no fullgraph: the marker forbids the break
        message = str(info.value)
        assert "inside allow_in_graph function mk_helpers.relu_if_positive" in message
        assert line_in(helpers, "needs a value") in message
    assert backend.graphs == []
    np.testing.assert_allclose(model.via_global(x3()).detach().numpy(), [2.0, -4.0, 6.0])  # eager


def test_allow_in_graph_on_a_bound_method_applies_to_that_instance_only(backend, mods):
    helpers, _ = mods
    watched, other = helpers.Net(), helpers.Net()
    tpc.allow_in_graph(watched.check)
    report = tpc.explain(other, x3())  # not marked: the value read is an ordinary graph break
    assert report.graph_break_count == 1
    with pytest.raises(tpc.GraphCaptureError, match=r"inside allow_in_graph function mk_helpers\.Net\.check"):
        tpc.compile(watched, backend=backend)(x3())


def test_allow_in_graph_on_forward_applies_to_calls_through_module_call(backend, mods):
    helpers, _ = mods
    outer = helpers.Outer()
    assert tpc.explain(outer, x3()).graph_break_count == 1
    tpc.allow_in_graph(helpers.Net.forward)
    with pytest.raises(tpc.GraphCaptureError, match=r"inside allow_in_graph function mk_helpers\.Net\.forward"):
        tpc.compile(outer, backend=backend)(x3())
    np.testing.assert_allclose(outer(x3()).detach().numpy(), [9.0, -9.0, 21.0])


# -- substitute_in_graph -----------------------------------------------------------------------

def test_substitute_in_graph_redirects_direct_calls_of_the_original(backend, mods):
    helpers, model = mods
    calls, note = probe()
    helpers.note = note

    @tpc.substitute_in_graph(helpers.clamp_np)
    def clamp(x, lo=0.0):
        note("substitute")
        return tp.clamp(x, min=lo)

    def f(x):
        return helpers.clamp_np(x * 2) + 1  # the original, not `clamp`

    cf = tpc.compile(f, backend=backend, fullgraph=True)
    for _ in range(2):
        np.testing.assert_allclose(cf(x3()).detach().numpy(), [3.0, 1.0, 7.0])
    assert calls == ["substitute"]  # traced once, replayed without Python
    assert len(backend.graphs) == 1 and "tp.clamp" in backend.ops[0]
    np.testing.assert_allclose(f(x3()).detach().numpy(), [3.0, 1.0, 7.0])
    assert calls == ["substitute", "original"]  # eager: the original


def test_substitute_in_graph_redirects_a_numpy_function_called_by_library_code(backend, mods):
    helpers, _ = mods
    original = np.ptp
    try:
        @tpc.substitute_in_graph(np.ptp, skip_signature_check=True)
        def ptp(a, axis=None, out=None, keepdims=False):
            return a.amax() - a.amin()

        def f(x):
            return x * helpers.spread(x)  # mk_helpers calls np.ptp(y)

        report = tpc.explain(f, x3())
        assert report.graph_break_count == 0 and report.graph_count == 1
        assert report.op_counts[0]["tp.amax"] == 1
        cf = tpc.compile(f, backend=backend, fullgraph=True)
        for _ in range(2):
            np.testing.assert_allclose(cf(x3()).detach().numpy(), [5.0, -10.0, 15.0])
        assert len(backend.graphs) == 1  # the guard on `np.ptp` holds between calls
        assert np.ptp is original  # patched only while a capture runs
        assert np.ptp(np.array([1.0, 4.0])) == 3.0
    finally:
        markers.substitution._unregister(original)
    assert np.ptp is original


def test_substitute_of_a_numpy_function_is_restored_after_a_failed_capture(backend):
    original = np.ptp

    def failing(a, axis=None, out=None, keepdims=False):
        raise RuntimeError("substitute failed")

    try:
        tpc.substitute_in_graph(np.ptp, skip_signature_check=True)(failing)
        with pytest.raises(RuntimeError, match="substitute failed"):
            tpc.compile(lambda x: x * np.ptp(x), backend=backend)(x3())
        assert np.ptp is original
    finally:
        markers.substitution._unregister(original)


def test_a_capture_in_one_thread_does_not_redirect_eager_calls_in_another(backend, mods):
    helpers, _ = mods
    entered, release = threading.Event(), threading.Event()
    seen = {}
    original_ptp = np.ptp

    def clamp(x, lo=0.0):
        entered.set()
        assert release.wait(30)
        return tp.clamp(x, min=lo)

    def ptp(a, axis=None, out=None, keepdims=False):
        return a.amax() - a.amin()

    try:
        tpc.substitute_in_graph(helpers.clamp_np)(clamp)
        tpc.substitute_in_graph(np.ptp, skip_signature_check=True)(ptp)
        cf = tpc.compile(lambda x: helpers.clamp_np(x) * np.ptp(x), backend=backend)
        worker = threading.Thread(target=lambda: seen.setdefault("result", cf(x3())))
        worker.start()
        try:
            assert entered.wait(30)  # the worker is inside its capture now
            calls, helpers.note = probe()
            eager = helpers.clamp_np(x3())  # this thread does not capture: the original runs
            assert calls == ["original"]
            np.testing.assert_allclose(eager.detach().numpy(), [1.0, 0.0, 3.0])
            assert np.ptp(np.array([1.0, 4.0])) == 3.0  # numpy's, through the patched attribute
        finally:
            release.set()
            worker.join(30)
        np.testing.assert_allclose(seen["result"].detach().numpy(), [5.0, 0.0, 15.0])
    finally:
        markers.substitution._unregister(original_ptp)


# -- assume_constant_result --------------------------------------------------------------------

def test_assume_constant_result_applies_to_direct_calls(backend, mods):
    helpers, model = mods
    calls, helpers.note = probe()
    tpc.assume_constant_result(helpers.table_scale)
    cf = tpc.compile(model.constant_scaled, backend=backend)
    np.testing.assert_allclose(cf(x3()).detach().numpy(), [7.0, 1.0, 11.0])
    cf(tp.ones(5))  # a second capture: the assumed values are reused
    assert len(backend.graphs) == 2
    assert calls == [("table_scale", "a"), ("table_scale", "b")]
    assert helpers.table_scale("a") == 2.0 and len(calls) == 3  # eager calls always run it
    tpc.reset()
    cf(x3())
    assert len(calls) == 5


def test_assume_constant_result_rejects_a_captured_tensor_in_a_direct_call(backend, mods):
    helpers, _ = mods
    tpc.assume_constant_result(helpers.debug_stats)
    with pytest.raises(TypeError, match=r"assume_constant_result function mk_helpers\.debug_stats: "
                                        r"args\[0\] is a tensor being captured"):
        tpc.compile(lambda x: helpers.debug_stats(x) + 1, backend=backend)(x3())


# -- unused ------------------------------------------------------------------------------------

def test_unused_applies_to_direct_calls_and_methods(backend, mods):
    helpers, _ = mods
    calls, helpers.note = probe()
    tpc.unused(helpers.debug_stats)
    tpc.unused(helpers.Net.check)
    assert markers.is_unused(helpers.Net.check) and markers.is_unused(helpers.Net().check)

    def f(x):
        return helpers.debug_stats(x * 2) + 1

    report = tpc.explain(f, x3())
    assert report.graph_break_count == 1
    assert "mk_helpers.debug_stats, marked with tensorplay.compiler.unused" in report.break_reasons[0].reason
    assert calls == ["debug_stats"]
    with pytest.raises(tpc.GraphCaptureError, match=r"Net\.check, marked with tensorplay\.compiler\.unused") \
            as info:
        tpc.compile(helpers.Net(), backend=backend, fullgraph=True)(x3())
    assert line_in(helpers, "self.check(x * 2)") in str(info.value)
    np.testing.assert_allclose(tpc.compile(helpers.Net(), backend=backend)(x3()).detach().numpy(),
                               [3.0, -3.0, 7.0])


# -- disable and nonstrict_trace: the returned function only, as in torch ----------------------

def test_disable_and_nonstrict_trace_leave_the_original_traceable(backend, mods):
    helpers, _ = mods
    disabled = tpc.disable(helpers.scale)
    opaque = tpc.nonstrict_trace(helpers.scale)
    assert tpc.explain(lambda x: helpers.scale(x) * 2, x3()).graph_break_count == 0
    assert tpc.explain(lambda x: disabled(x) * 2, x3()).graph_break_count == 1
    with pytest.raises(TypeError, match="nonstrict_trace function"):
        tpc.compile(lambda x: opaque(x, object()), backend=backend)(x3())
    tpc.compile(lambda x: helpers.scale(x, 2.0), backend=backend)(x3())  # no pytree check


# -- eager behaviour and identity ----------------------------------------------------------------

def test_marking_keeps_identity_signature_source_and_pickling(mods):
    helpers, _ = mods
    original = helpers.scale
    signature, source = inspect.signature(original), inspect.getsource(original)
    tpc.allow_in_graph(helpers.scale)
    tpc.assume_constant_result(helpers.table_scale)
    tpc.unused(helpers.Net.check)
    assert helpers.scale is original and markers.marker_of(helpers.scale) == "allow_in_graph"
    assert inspect.signature(helpers.scale) == signature and str(signature) == "(y, k=2.0, *, shift=1.0)"
    assert inspect.getsource(helpers.scale) == source and helpers.scale.__doc__ == "Scale and shift."
    assert pickle.loads(pickle.dumps(helpers.scale)) is helpers.scale
    assert not hasattr(helpers.scale, "__wrapped__")
    np.testing.assert_allclose(helpers.scale(x3(), 3.0, shift=0.0).detach().numpy(), [3.0, -6.0, 9.0])
    np.testing.assert_allclose(helpers.scale(x3()).detach().numpy(), [3.0, -3.0, 7.0])
    assert helpers.Net().check(tp.tensor([-1.0])).item() == 1.0
