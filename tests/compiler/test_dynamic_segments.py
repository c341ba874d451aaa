"""Dynamic sizes across graph breaks: the segments of a function with a break are compiled
with symbolic sizes under the function's dynamic policy, so calls at other sizes reuse them."""

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.capture.graphs import format_graph
from tests.compiler.test_dynamic_capture import _arr, _t


def _broken(x, w):
    b, t, c = x.shape
    h = (x.reshape(b * t, c) @ w).relu()
    if h.sum() > 0:  # a graph break: Python needs the value
        h = h * 2
    y = h.reshape(b, t, -1)  # sizes from the argument, in the segment after the break
    return y.softmax(-1).sum(1) / t, b


SIZES = [(2, 3), (5, 3), (1, 7), (9, 2), (3, 3), (4, 1), (1, 1)]


def _check(g, sizes, w):
    for b, t in sizes:
        x = _t(b, t, 4, seed=b * 10 + t)
        got, n = g(x, w)
        want, m = _broken(x, w)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        assert n == m == b and type(n) is int  # a size returned by a segmented call is an int


def test_automatic_dynamic_segments_compile_once_for_every_size(backend):
    g = tp.compile(_broken, backend=backend)  # dynamic=None
    w = _t(4, 3)
    _check(g, SIZES[:1], w)
    assert backend.count == 2  # the first call: two static segments
    _check(g, SIZES[1:2], w)  # the batch changed: captured again, its segments symbolic
    assert backend.count == 4
    assert "tensor<s0xs1x4xf32>" in format_graph(backend.graphs[2])
    after = format_graph(backend.graphs[3])
    assert "shape=(s0, s1, -1)" in after and "value=s1" in after  # reads the argument's sizes
    _check(g, SIZES[2:], w)
    assert backend.count == 4  # every later size runs the same two programs
    assert g._group.count == 2


def test_dynamic_true_segments_are_symbolic_from_the_first_call(backend):
    g = tp.compile(_broken, backend=backend, dynamic=True)
    w = _t(4, 3)
    _check(g, SIZES, w)
    assert backend.count == 2 and g._group.count == 1


def test_dynamic_false_segments_compile_per_size(backend):
    g = tp.compile(_broken, backend=backend, dynamic=False)
    w = _t(4, 3)
    _check(g, SIZES[:3], w)
    assert backend.count == 6


def test_branches_on_sizes_after_a_break_follow_each_call(backend):
    def f(x):
        y = x * 2
        if y.sum() > 0:  # break
            y = y + 1
        if x.shape[0] > 4:  # decided again on every call: each side compiles once
            return y.sum(0)
        return y.mean(0)

    g = tp.compile(f, backend=backend, dynamic=True)
    for n in (2, 6, 3, 9, 1, 5):
        x = tp.tensor(np.abs(_arr(n, 3)))
        np.testing.assert_allclose(g(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert backend.count == 3  # the segment before the break, and one per side


def test_broadcasting_of_a_size_that_becomes_one_after_a_break(backend):
    def f(x, z):
        y = x.exp()
        if y.sum() > 0:  # break
            y = y / 2
        return y + z  # z broadcasts over y only when its dim 0 is 1

    g = tp.compile(f, backend=backend, dynamic=True)
    for n, m in [(3, 3), (4, 1), (5, 5), (1, 1), (2, 1), (6, 6)]:
        x, z = _t(n, 2), _t(m, 2, seed=7)
        np.testing.assert_allclose(g(x, z).numpy(), f(x, z).numpy(), rtol=1e-6)


def test_training_through_a_break_with_changing_sizes(backend):
    w0 = _arr(4, 3)

    def run(fn, b, t):
        w = tp.tensor(w0, requires_grad=True)
        x = _t(b, t, 4, seed=b + t)
        out, _ = fn(x, w)
        out.sum().backward()
        return out.detach().numpy(), w.grad.numpy()

    g = tp.compile(_broken, backend=backend)
    for i, (b, t) in enumerate(SIZES):
        got, want = run(g, b, t), run(_broken, b, t)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
        if i == 1:
            programs = backend.count  # static then symbolic segments, each with its backward
    assert programs == backend.count == 8  # the backwards are symbolic too: no compile after the 2nd call


@pytest.mark.iree
def test_iree_segments_with_symbolic_sizes():
    tp.compiler.reset()
    from tensorplay.compiler.backends import cache

    g = tp.compile(_broken)  # iree-cpu
    w = _t(4, 3)
    _check(g, SIZES[:2], w)
    before = cache.cache_stats()["compiles"] + cache.cache_stats()["hits"]
    programs = g.compile_count
    _check(g, SIZES[2:], w)
    assert g.compile_count == programs == 4
    assert cache.cache_stats()["compiles"] + cache.cache_stats()["hits"] == before  # nothing new loaded
    tp.compiler.reset()
