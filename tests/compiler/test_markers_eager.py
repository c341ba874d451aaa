"""Markers outside capture: eager calls are unchanged, registries record what export and shape
policies read, and bad uses fail with messages that say how to fix them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay.compiler import markers


def _counted():
    calls = []

    def f(x, scale=2.0):
        calls.append(1)
        return x * scale

    return f, calls


@pytest.mark.parametrize("mark", [
    tpc.allow_in_graph, tpc.disable, tpc.unused, tpc.nonstrict_trace, tpc.assume_constant_result,
    tpc.nested_compile_region, lambda f: tpc.disable(f, recursive=False, reason="why"),
    lambda f: tpc.nested_compile_region(max_reuse_entries=1)(f),
    lambda f: tpc.substitute_in_graph(f)(lambda x, scale=2.0: x * scale),
])
def test_marked_callable_runs_unchanged_when_called_eagerly(mark):
    f, calls = _counted()
    g = mark(f)
    x = tp.tensor([1.0, 2.0])
    np.testing.assert_array_equal(g(x).detach().numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(g(x, scale=3.0).detach().numpy(), [3.0, 6.0])
    assert len(calls) == 2  # every eager call runs the original, nothing is cached


def test_wrappers_keep_name_doc_and_signature():
    def scaled(x: tp.Tensor, k: int = 2) -> tp.Tensor:
        """Doc."""
        return x * k

    for mark in (tpc.allow_in_graph, tpc.disable, tpc.unused, tpc.nonstrict_trace,
                 tpc.assume_constant_result, tpc.nested_compile_region):
        g = mark(scaled)
        assert g.__name__ == "scaled" and g.__doc__ == "Doc."
        assert str(__import__("inspect").signature(g)) == "(x: 'tp.Tensor', k: 'int' = 2) -> 'tp.Tensor'"
        assert g.__wrapped__ is scaled


def test_disallow_in_graph_returns_the_callable_itself():
    def f(x):
        return x + 1

    assert tpc.disallow_in_graph(f) is f
    assert markers.is_disallowed_in_graph(f)
    assert not markers.is_disallowed_in_graph(lambda x: x)
    assert tpc.disallow_in_graph(math.floor) is math.floor
    assert markers.is_disallowed_in_graph(math.floor)
    fs = [lambda x: x, lambda x: x * 2]
    assert tpc.disallow_in_graph(fs) is fs and all(markers.is_disallowed_in_graph(g) for g in fs)


def test_disallow_in_graph_rejects_what_it_cannot_watch():
    import functools

    with pytest.raises(TypeError, match="is a class"):
        tpc.disallow_in_graph(dict)
    with pytest.raises(TypeError, match="cannot watch calls to a partial"):
        tpc.disallow_in_graph(functools.partial(max, 1))
    with pytest.raises(TypeError, match="expects a callable"):
        tpc.disallow_in_graph(3)


def test_disallow_in_graph_tells_closures_of_one_code_apart():
    def make(k):
        def scale(x):
            return x * k
        return scale

    two, three = make(2), make(3)
    tpc.disallow_in_graph(two)
    assert markers.is_disallowed_in_graph(two)
    assert not markers.is_disallowed_in_graph(three)


def test_decorator_forms_with_and_without_arguments():
    @tpc.disable
    def a(x):
        return x

    @tpc.disable(reason="prints")
    def b(x):
        return x

    @tpc.disable(recursive=False)
    def c(x):
        return x

    @tpc.nested_compile_region
    def d(x):
        return x

    @tpc.nested_compile_region(max_reuse_entries=2, reuse_hash_fn=lambda x: 0)
    def e(x):
        return x

    assert [a(1), b(2), c(3), d(4), e(5)] == [1, 2, 3, 4, 5]
    assert markers.marker_of(a) == "disable" and a._tp_disable_recursive is True
    assert b._tp_disable_reason == "prints" and c._tp_disable_recursive is False
    assert markers.marker_of(d) == markers.marker_of(e) == "nested_compile_region"
    assert markers.region_of(e).max_reuse_entries == 2


def test_disable_checks_its_arguments():
    with pytest.raises(TypeError, match="expects a callable"):
        tpc.disable(3)
    with pytest.raises(TypeError, match="recursive must be a bool"):
        tpc.disable(lambda: 0, "yes")
    with pytest.raises(TypeError, match="reason must be a string"):
        tpc.disable(lambda: 0, reason=3)


def test_disable_on_a_module_disables_its_forward_in_place():
    lin = tp.nn.Linear(2, 2)
    x = tp.ones(1, 2)
    expected = lin(x).detach().numpy()
    assert tpc.disable(lin, reason="debug") is lin
    assert markers.marker_of(lin.forward) == "disable"
    np.testing.assert_allclose(lin(x).detach().numpy(), expected)
    assert list(dict(lin.state_dict())) == ["weight", "bias"]


def test_disable_recursive_forces_eager_inside_but_not_outside():
    seen = []

    @tpc.disable
    def deep():
        seen.append(markers.compile_disabled())

    @tpc.disable(recursive=False)
    def shallow():
        seen.append(markers.compile_disabled())

    deep()
    shallow()
    assert seen == [True, False]
    assert not markers.compile_disabled()


def test_disable_capture_is_a_context_manager_that_forces_eager():
    assert not markers.compile_disabled()
    with tpc.disable_capture():
        assert markers.compile_disabled()
        assert not tpc.is_compiling()
        with tpc.disable_capture():
            assert markers.compile_disabled()
        assert markers.compile_disabled()
    assert not markers.compile_disabled()
    with pytest.raises(KeyError):
        with tpc.disable_capture():
            raise KeyError("propagates")
    assert not markers.compile_disabled()


# -- substitute_in_graph ---------------------------------------------------------------------

def test_substitute_in_graph_returns_a_callable_running_the_original_eagerly():
    calls = []

    def original(x, *, eps=1e-6):
        calls.append("original")
        return x + eps

    @tpc.substitute_in_graph(original)
    def substitute(x, *, eps=1e-6):
        calls.append("substitute")
        return x + eps

    assert substitute(1.0) == 1.0 + 1e-6
    assert calls == ["original"]
    assert markers.substitute_for(original) is substitute.__wrapped__
    assert substitute.__name__ == "substitute"


def test_substitute_in_graph_checks_signatures_unless_skipped():
    def original(x, y=1, *, z=2):
        return x

    with pytest.raises(TypeError) as info:
        @tpc.substitute_in_graph(original)
        def bad(x, y=2, *, z=2):
            return x
    message = str(info.value)
    assert "(x, y=2, *, z=2)" in message and "(x, y=1, *, z=2)" in message
    assert "skip_signature_check=True" in message

    for other in ("(a, y=1, *, z=2)", "(x, y=1, z=2)", "(x, y=1)"):
        namespace: dict = {}
        exec(f"def sub{other}: return x", namespace)
        with pytest.raises(TypeError, match="does not match"):
            tpc.substitute_in_graph(original)(namespace["sub"])

    # annotations and the names of *args / **kwargs do not matter; a wildcard side matches all
    def annotated(x: int, y: int = 1, *, z: int = 2) -> int:
        return x

    def original2(x, *rest, **extra):
        return x

    def renamed(x, *args, **kwargs):
        return x

    def original3(x, y):
        return x

    def wildcard(*args, **kwargs):
        return args[0]

    tpc.substitute_in_graph(original)(annotated)
    tpc.substitute_in_graph(original2)(renamed)
    tpc.substitute_in_graph(original3)(wildcard)

    def original4(a):
        return a

    tpc.substitute_in_graph(original4, skip_signature_check=True)(lambda b, c=0: b)


def test_substitute_in_graph_rejects_a_second_registration():
    def original(x):
        return x

    def first(x):
        return x

    tpc.substitute_in_graph(original)(first)
    with pytest.raises(ValueError) as info:
        tpc.substitute_in_graph(original)(lambda x: x)
    message = str(info.value)
    assert "already has a graph substitute" in message
    assert "first" in message and f"{__file__}:" in message


def test_substitute_in_graph_rejects_non_callables():
    with pytest.raises(TypeError, match="expects a callable"):
        tpc.substitute_in_graph(3)
    with pytest.raises(TypeError, match="expects a function"):
        tpc.substitute_in_graph(len)(3)


def test_substitute_for_a_builtin_without_a_signature():
    # builtins with no inspectable signature register without a comparison
    try:
        sub = tpc.substitute_in_graph(math.gcd)(lambda *a: 1)
        assert sub(12, 8) == 4
        assert math.gcd(12, 8) == 4 and markers.marker_of(math.gcd) == "substitute_in_graph"
    finally:  # calls of math.gcd are redirected in every later capture otherwise
        markers.substitution._unregister(math.gcd)
    assert markers.marker_of(math.gcd) is None


# -- export / unused / overload_method --------------------------------------------------------

def test_export_marks_methods_and_exported_methods_lists_them_in_order():
    class Base(tp.nn.Module):
        @tpc.export
        def encode(self, x):
            return x

        def forward(self, x):
            return x

    class Model(Base):
        @tpc.export()
        def decode(self, x):
            return x

        @tpc.export
        @staticmethod
        def info():
            return "m"

        @tpc.unused
        def debug(self, x):
            return x

    assert markers.exported_methods(Model) == ["encode", "decode", "info"]
    assert markers.exported_methods(Model()) == ["encode", "decode", "info"]
    assert Model().decode(5) == 5 and Model.info() == "m"
    assert markers.is_unused(Model.debug) and markers.is_unused(Model().debug)
    assert not markers.is_unused(Model.decode)

    class Override(Model):
        def encode(self, x):  # not marked again: no longer an entry point
            return x

    assert markers.exported_methods(Override) == ["decode", "info"]


def test_export_and_unused_exclude_each_other():
    def f(self):
        return 0

    with pytest.raises(TypeError, match="both an export entry point and unused"):
        tpc.unused(tpc.export(f))

    def g(self):
        return 0

    with pytest.raises(TypeError, match="both an export entry point and unused"):
        tpc.export(tpc.unused(g))


def test_overload_method_records_declarations_per_class():
    class M(tp.nn.Module):
        @tpc.overload_method
        def forward(self, x: int) -> int:
            ...

        @tpc.overload_method
        def forward(self, x: tp.Tensor) -> tp.Tensor:  # noqa: F811
            ...

        def forward(self, x):  # noqa: F811
            return x

    class Sub(M):
        pass

    decls = markers.overloads_of(M, "forward")
    assert [d.__annotations__["x"] for d in decls] == ["int", "tp.Tensor"]
    assert markers.overloads_of(M(), "forward") == decls
    assert markers.overloads_of(Sub, "forward") == decls
    assert markers.overloads_of(M, "other") == []
    assert M()(7) == 7


def test_overload_method_outside_a_class_is_an_error():
    def free(x: int) -> int:
        ...

    with pytest.raises(TypeError, match="not defined in a class body; use typing.overload"):
        tpc.overload_method(free)


# -- mark_static -----------------------------------------------------------------------------

def test_mark_static_records_dims_on_the_tensor():
    t = tp.zeros(2, 3, 4)
    assert markers.static_dims(t) == frozenset()
    assert tpc.mark_static(t, 1) is t
    assert t._static_dims == frozenset({1})
    tpc.mark_static(t, -1)
    assert markers.static_dims(t) == frozenset({1, 2})
    u = tpc.mark_static(tp.zeros(2, 3))
    assert u._static_dims == frozenset({0, 1})
    assert tpc.mark_static(tp.tensor(1.0))._static_dims == frozenset()


def test_mark_static_validates_the_dim():
    t = tp.zeros(2, 3)
    with pytest.raises(IndexError, match=r"dim 2 is out of range for a tensor with 2 dimension\(s\) "
                                         r"\(expected -2 <= dim < 2\)"):
        tpc.mark_static(t, 2)
    with pytest.raises(IndexError, match="out of range"):
        tpc.mark_static(t, -3)
    with pytest.raises(IndexError, match="0-d tensor"):
        tpc.mark_static(tp.tensor(1.0), 0)
    with pytest.raises(TypeError, match="got a bool"):
        tpc.mark_static(t, True)
    with pytest.raises(TypeError, match="got str"):
        tpc.mark_static(t, "0")
    with pytest.raises(TypeError, match="expects a tensorplay Tensor, got ndarray"):
        tpc.mark_static(np.zeros(3))
    assert t._static_dims is None


# -- NestedCompileRegionOptions / nested_compile_region arguments -----------------------------

def test_nested_compile_region_options_is_a_dataclass():
    opts = tpc.NestedCompileRegionOptions(fw_compiler="eager")
    assert dataclasses.is_dataclass(opts)
    assert opts == tpc.NestedCompileRegionOptions("eager", None)
    assert opts.bw_compiler is None
    with pytest.raises(TypeError, match="fw_compiler must be a backend name"):
        tpc.NestedCompileRegionOptions(fw_compiler=3)


def test_nested_compile_region_checks_its_arguments():
    with pytest.raises(TypeError, match="options must be a NestedCompileRegionOptions"):
        tpc.nested_compile_region(lambda x: x, options={"fw_compiler": "eager"})
    with pytest.raises(ValueError, match="max_reuse_entries must be an int >= 0"):
        tpc.nested_compile_region(lambda x: x, max_reuse_entries=-1)
    with pytest.raises(TypeError, match="reuse_hash_fn must be callable"):
        tpc.nested_compile_region(lambda x: x, reuse_hash_fn=3)
    with pytest.raises(TypeError, match="expects a callable"):
        tpc.nested_compile_region(3)


def test_nested_compile_region_of_a_region_reuses_the_inner_function():
    def f(x):
        return x

    outer = tpc.nested_compile_region(tpc.nested_compile_region(f))
    assert markers.region_of(outer).fn is f


# -- assume_constant_result / nonstrict_trace arguments ---------------------------------------

def test_marks_reject_non_callables():
    for mark in (tpc.allow_in_graph, tpc.unused, tpc.nonstrict_trace, tpc.assume_constant_result,
                 tpc.overload_method):
        with pytest.raises(TypeError, match="expects a"):
            mark(42)


def test_allow_in_graph_accepts_a_list():
    fs = tpc.allow_in_graph([lambda x: x + 1, lambda x: x + 2])
    assert isinstance(fs, list) and [f(0) for f in fs] == [1, 2]
    assert all(markers.marker_of(f) == "allow_in_graph" for f in fs)
