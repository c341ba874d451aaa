"""Graph breaks: every way Python asks for a captured value, the fullgraph errors (reason
and the user's file:line), segmented execution equal to eager, the structural-hash
segment cache, and ``explain``."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError
from tests.compiler.conftest import probe


def _line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


def _item(x):
    y = x * 2
    return y.sum().item()


def _bool(x):
    y = x + 1
    if y.sum() > 0:
        return y
    return -y


def _numpy(x):
    return (x * 3).detach().numpy()


def _tolist(x):
    return (x - 1).tolist()


def _print(x):
    print(x * 5)
    return x


def _repr(x):
    return repr(x + 1)


def _np_function(x):
    return np.fft.fft(x * 2)


CASES = [
    (_item, "Tensor.item() needs the value of a captured tensor", "return y.sum().item()"),
    (_bool, "bool(tensor) needs the value of a captured tensor", "if y.sum() > 0:"),
    (_numpy, "Tensor.numpy() needs the value of a captured tensor", "return (x * 3).detach().numpy()"),
    (_tolist, "Tensor.tolist() needs the value of a captured tensor", "return (x - 1).tolist()"),
    (_print, "print(tensor) needs the value of a captured tensor", "print(x * 5)"),
    (_repr, "repr(tensor) needs the value of a captured tensor", "return repr(x + 1)"),
    (_np_function, "numpy.fft.fft() (no tp op) needs the value of a captured tensor",
     "return np.fft.fft(x * 2)"),
]


@pytest.mark.parametrize("fn, reason, source", CASES, ids=[c[0].__name__ for c in CASES])
def test_fullgraph_break_names_reason_and_user_line(fn, reason, source, backend):
    cf = tp.compile(fn, backend=backend, fullgraph=True)
    with pytest.raises(GraphCaptureError) as info:
        cf(tp.ones(3))
    line = _line_of(fn, source)
    err = info.value
    assert str(err).splitlines()[0] == f"graph break in {cf.name} at {__file__}:{line}: {reason}"
    assert str(err).splitlines()[1] == f"    {source}"
    assert "fullgraph=True forbids graph breaks" in str(err)
    assert (err.reason, err.loc.file, err.loc.line, err.source) == (reason, __file__, line, source)
    assert backend.count == 0


@pytest.mark.parametrize("fn, reason, source", CASES, ids=[c[0].__name__ for c in CASES])
def test_break_without_fullgraph_gives_the_eager_result(fn, reason, source, backend, capsys):
    x = tp.arange(3, dtype=tp.float32)
    expected = fn(x)
    eager_out = capsys.readouterr().out
    got = tp.compile(fn, backend=backend)(x)
    assert capsys.readouterr().out == eager_out
    if isinstance(expected, tp.Tensor):
        np.testing.assert_array_equal(np.asarray(got.detach().numpy()), np.asarray(expected.detach().numpy()))
    elif isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected


def test_data_dependent_branch_compiles_each_side_once(backend):
    calls, calls_append = probe()

    @tp.compile(backend=backend)
    def f(x):
        calls_append(1)
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1

    for v in [1.0, 2.0, -1.0, -3.0, 4.0, -5.0]:
        x = tp.full((3,), v)
        np.testing.assert_array_equal(f(x).detach().numpy(), (x * 2 + (1 if v > 0 else -1)).detach().numpy())
    assert len(calls) == 6  # a segmented function runs its Python every call
    assert backend.count == 3  # prefix, then each side once
    info = f.cache_info()
    assert (info["entries"], info["segmented_entries"], info["segment_programs"]) == (1, 1, 3)
    assert sorted(g.name for g in backend.graphs) == [f"{f.name}_segment{i}" for i in range(3)]


def test_live_tensors_become_concrete_and_later_segments_read_them(backend):
    @tp.compile(backend=backend)
    def f(x, w):
        h = x @ w
        scale = float(h.abs().max())  # break: h stays alive and becomes concrete
        return h / scale, h

    x, w = tp.randn(3, 4), tp.randn(4, 2)
    a, h = f(x, w)
    ref = x @ w
    np.testing.assert_allclose(h.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(a.detach().numpy(), (ref / float(ref.abs().max())).detach().numpy(), rtol=1e-6)
    assert backend.count == 2


def test_in_place_update_before_a_break_is_visible_after_it(backend):
    @tp.compile(backend=backend)
    def f(x):
        x.mul_(2)
        total = x.sum().item()
        x.add_(total)
        return x

    x = tp.ones(2)
    out = f(x)
    assert out is x
    np.testing.assert_array_equal(x.detach().numpy(), [6.0, 6.0])


def test_module_with_print_in_forward_runs_in_segments(backend, capsys):
    class Loud(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tp.nn.Linear(3, 3)

        def forward(self, x):
            h = self.lin(x)
            print("h sum", float(h.sum()))
            return tp.relu(h)

    m = Loud()
    x = tp.randn(2, 3)
    eager = m(x).detach().numpy()
    printed = capsys.readouterr().out
    cm = tp.compile(m, backend=backend)
    np.testing.assert_allclose(cm(x).detach().numpy(), eager, rtol=1e-6)
    np.testing.assert_allclose(cm(x).detach().numpy(), eager, rtol=1e-6)
    assert capsys.readouterr().out == printed * 2
    assert backend.count == 2


def test_a_python_decision_on_a_data_dependent_size_is_a_break(backend):
    def f(x):
        n = tp.nonzero(x > 0) * 2  # one graph: its row count is a size the program computes
        if n.shape[0] > 1:
            return n + 1
        return n

    line = _line_of(f, "if n.shape[0] > 1:")
    with pytest.raises(GraphCaptureError, match=rf"at {__file__}:{line}: > on a size \(u0 > 1\) depends on "
                                                r"u0 = the number of nonzero elements \(tp.nonzero at "):
        tp.compile(f, backend=backend, fullgraph=True)(tp.ones(3))
    for x in (tp.tensor([1.0, -1.0, 2.0]), tp.tensor([1.0, -1.0, -2.0])):
        np.testing.assert_array_equal(tp.compile(f, backend=backend)(x).detach().numpy(), f(x).detach().numpy())


def test_breaks_are_logged_with_file_and_line(backend, caplog):
    cf = tp.compile(_item, backend=backend)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.breaks"):
        cf(tp.ones(2))
    line = _line_of(_item, "return y.sum().item()")
    assert any(f"graph break in {cf.name} at {__file__}:{line}: Tensor.item()" in r.getMessage()
               for r in caplog.records)


def test_explain_reports_graphs_breaks_and_ops():
    def f(x):
        y = tp.relu(x) * 2
        if y.sum() > 1:
            y = y + 1
        print(y.mean())
        return y.exp()

    x = tp.ones(4)
    report = tp.compiler.explain(f, x)
    assert report.graph_count == 3
    assert report.graph_break_count == 2
    assert [b.reason for b in report.break_reasons] == [
        "bool(tensor) needs the value of a captured tensor",
        "print(tensor) needs the value of a captured tensor"]
    assert [b.loc.line for b in report.break_reasons] == [_line_of(f, "if y.sum() > 1:"),
                                                          _line_of(f, "print(y.mean())")]
    assert report.break_reasons[0].source == "if y.sum() > 1:"
    assert report.ops_per_graph == [4, 2, 1]
    text = str(report)
    assert "Graph count: 3" in text and "Graph break count: 2" in text
    assert f"at {__file__}:{_line_of(f, 'if y.sum() > 1:')}" in text
    assert "tp.relu x1" in text


def test_explain_of_a_whole_graph_function_and_a_module():
    m = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.GELU())
    report = tp.compiler.explain(m, tp.randn(2, 3))
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert report.op_counts[0]["tp.gelu"] == 1
    compiled = tp.compile(m, backend="eager")
    assert tp.compiler.explain(compiled, tp.randn(2, 3)).ops_per_graph == report.ops_per_graph


def test_segment_limit_runs_new_segments_eagerly(backend):
    @tp.compile(backend=backend, recompile_limit=1)
    def f(x, n):
        y = x * 2
        k = int(y.sum().item())  # break; then a segment whose graph depends on k
        return y[:k % 13 + 1] + k

    with pytest.warns(UserWarning, match="8 distinct graph segments compiled"):
        for i in range(12):
            x = tp.full((16,), float(i))
            expected = (x * 2)[:int((x * 2).sum().item()) % 13 + 1] + int((x * 2).sum().item())
            np.testing.assert_array_equal(f(x, 0).detach().numpy(), expected.detach().numpy())
    assert f.cache_info()["segment_programs"] == 8


def test_library_input_checks_do_not_break_later_calls(backend):
    """Calls after the first run a broken function's Python lazily; input checks in library
    code (embedding's index range, cross_entropy's targets) must not record ops and break the
    graph there: later calls reuse the first call's segments and compile nothing."""
    from tensorplay.examples.models import GPTConfig, build_gpt

    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16))

    def step(idx, target):
        logits, _ = model(idx)
        loss = tp.nn.functional.cross_entropy(logits.reshape(-1, 32), target)
        if loss.item() > 0:  # the one break
            loss = loss * 2.0
        return loss

    f = tp.compile(step, backend=backend)
    idx, target = tp.randint(0, 32, (2, 8)), tp.randint(0, 32, (2,))
    first = f(idx, target)
    compiled = backend.count
    for _ in range(2):
        assert f(idx, target).item() == pytest.approx(first.item())
    assert backend.count == compiled == 2
    np.testing.assert_allclose(first.detach().numpy(), step(idx, target).detach().numpy(), rtol=1e-5)
