"""Sizes the data decides, inside one compiled graph: ``x[mask]``, ``masked_select``,
``nonzero`` and ``unique`` capture with an unbacked size symbol (``u0``) that the program
computes, later ops compute with it, one compile serves every count (none, some, all
selected), and a Python question about such a size is a clear graph break (GraphCaptureError
under fullgraph) naming the op's line and the question's line, never a guard."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError
from tensorplay.compiler.symbolic import ShapeEnv
from tensorplay.dialects.tp import symbolic as sym
from tests.compiler.conftest import backend_param

HAS_TORCH = importlib.util.find_spec("torch") is not None
BACKENDS = [backend_param("iree-cpu"), backend_param("iree-vulkan")]

#: none, some and all elements selected (and zeros, which `> 0` leaves out)
PATTERNS = {
    "none": np.array([-1.0, -2.0, 0.0, -4.0, -0.5, -3.0], np.float32),
    "some": np.array([1.5, -2.0, 0.0, 4.0, -0.5, 3.0], np.float32),
    "all": np.array([1.0, 2.0, 3.0, 4.0, 0.5, 6.0], np.float32),
    "one": np.array([-1.0, -2.0, 7.0, -4.0, -0.5, -3.0], np.float32),
}


def _line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _numpy(v):
    return v.detach().numpy() if isinstance(v, tp.Tensor) else v


def _same(got, want, rtol=1e-5, atol=1e-6):
    assert type(got) is type(want) or isinstance(got, tp.Tensor) == isinstance(want, tp.Tensor)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, rtol, atol)
        return
    if isinstance(want, tp.Tensor):
        g, w = _numpy(got), _numpy(want)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        return
    assert got == want and type(got) is type(want)


@pytest.fixture(autouse=True)
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


# --- one compile for every count ------------------------------------------------------------

def _selected(x):
    m = x > 0
    y = x[m]
    return (y * 2).sum(), y.shape[0], y


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_values_compile_once_for_every_count(backend):
    f = tp.compile(_selected, fullgraph=True, backend=backend)
    for name, a in PATTERNS.items():
        x = tp.tensor(a)
        got = f(x)
        _same(got, _selected(x))
        kept = a[a > 0]
        np.testing.assert_allclose(got[0].numpy(), (kept * 2).sum(), rtol=1e-6)
        assert got[1] == kept.size and isinstance(got[1], int), name
        np.testing.assert_array_equal(got[2].numpy(), kept)
    assert f.compile_count == 1


def _flow(x, w, b):
    m = x.sum(1) > 0                      # rows whose sum is positive
    rows = x[m]                           # (u0, 3)
    h = rows @ w + b                      # (u0, 5): matmul with the other dims, broadcasting
    gram = rows.t() @ rows                # (3, 3): a contraction over u0
    both = tp.cat([h, h * 2], 0)          # (2 * u0, 5)
    picked = tp.masked_select(x, x > 0.5)  # u1: another count
    coords = tp.nonzero(m)                # (u0, 1): the same count as rows
    cols = tp.nonzero(x > 0, as_tuple=True)
    return (both.sum(0), gram, h.relu().sum(1), picked.cumsum(0),
            coords, cols, both.shape[0] + 1, rows.numel())


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_dependent_sizes_flow_through_later_ops(backend, rng):
    f = tp.compile(_flow, fullgraph=True, backend=backend)
    w = tp.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    b = tp.tensor(rng.standard_normal(5).astype(np.float32))
    xs = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(2)]
    xs.append(-np.abs(xs[0]) - 1)   # no row selected, nothing over 0.5
    xs.append(np.abs(xs[1]) + 1)    # every row
    for a in xs:
        x = tp.tensor(a)
        got, want = f(x, w, b), _flow(x, w, b)
        _same(got, want, rtol=1e-4, atol=1e-5)
        rows = a[a.sum(1) > 0]
        np.testing.assert_allclose(got[1].numpy(), rows.T @ rows, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(got[3].numpy(), np.cumsum(a[a > 0.5]))
        assert got[6] == 2 * len(rows) + 1 and got[7] == rows.size
    assert f.compile_count == 1


def _uniq(x):
    values, inverse, counts = tp.unique(x, return_inverse=True, return_counts=True)
    return values, inverse, counts, values.shape[0], (counts * values).sum(), values[inverse]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_unique_compiles_once_and_matches_eager_and_numpy(backend, dtype, rng):
    f = tp.compile(_uniq, fullgraph=True, backend=backend)
    datas = [rng.integers(-2, 3, (3, 4)), rng.integers(0, 2, (3, 4)), np.full((3, 4), 7), np.arange(12).reshape(3, 4)]
    for a in datas:
        a = a.astype(dtype)
        x = tp.tensor(a)
        got = f(x)
        _same(got, _uniq(x))
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(got[0].numpy(), values)
        np.testing.assert_array_equal(got[1].numpy(), inverse.reshape(a.shape))
        np.testing.assert_array_equal(got[2].numpy(), counts)
        np.testing.assert_array_equal(got[5].numpy(), a)  # values[inverse] rebuilds the input
        assert got[3] == len(values)
        if HAS_TORCH and dtype is not np.bool_:
            import torch

            tv, ti, tc = torch.unique(torch.from_numpy(a), return_inverse=True, return_counts=True)
            np.testing.assert_array_equal(got[0].numpy(), tv.numpy())
            np.testing.assert_array_equal(got[1].numpy(), ti.numpy())
            np.testing.assert_array_equal(got[2].numpy(), tc.numpy())
    assert f.compile_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_unique_values_alone_and_with_counts_and_nans(backend):
    def f(x):
        return tp.unique(x), tp.unique(x * 2, return_counts=True)

    c = tp.compile(f, fullgraph=True, backend=backend)
    for a in (np.array([2.0, np.nan, 1.0, np.nan, 2.0], np.float32), np.array([3.0, 3.0, 3.0, 3.0, 3.0], np.float32)):
        x = tp.tensor(a)
        got, want = c(x), f(x)
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())  # (NaNs: each one distinct, last)
        np.testing.assert_array_equal(got[1][0].numpy(), want[1][0].numpy())
        np.testing.assert_array_equal(got[1][1].numpy(), want[1][1].numpy())
        np.testing.assert_array_equal(got[0].numpy(), np.unique(a, equal_nan=False))
    assert c.compile_count == 1


# --- gradients ---------------------------------------------------------------------------------

def _loss(x, w):
    y = x[x > 0]                               # x[mask]: scatter back in the backward
    z = tp.masked_select(w, w < 0.3)           # masked_select with the same shape
    s = tp.masked_select(w, tp.tensor([True, False, True]))  # the mask broadcast over rows
    return (y * y).sum() + z.sum() * 3 + (s * s).mean()


def _grad_case(backend, pattern):
    p = backend_param(backend)
    return pytest.param(backend, pattern, marks=list(getattr(p, "marks", ())), id=f"{backend}-{pattern}")


@pytest.mark.parametrize("backend,pattern", [
    *[_grad_case(b, p) for b in ("iree-cpu", "iree-vulkan") for p in ("some", "all", "none")]])
def test_gradients_of_masked_values_match_eager(backend, pattern, rng):
    a = PATTERNS[pattern].reshape(2, 3)
    wa = rng.standard_normal((2, 3)).astype(np.float32)
    if pattern == "none":
        wa = np.abs(wa) + 1  # nothing under 0.3 either
    f = tp.compile(_loss, fullgraph=True, backend=backend)
    x1, w1 = tp.tensor(a, requires_grad=True), tp.tensor(wa, requires_grad=True)
    x2, w2 = tp.tensor(a, requires_grad=True), tp.tensor(wa, requires_grad=True)
    got = f(x1, w1)
    got.backward()
    want = _loss(x2, w2)
    want.backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(w1.grad.numpy(), w2.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(x1.grad.numpy(), np.where(a > 0, 2 * a, 0), rtol=1e-5)
    if HAS_TORCH:
        import torch

        tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(wa, requires_grad=True)
        ty = tx[tx > 0]
        tl = (ty * ty).sum() + torch.masked_select(tw, tw < 0.3).sum() * 3 + \
            (torch.masked_select(tw, torch.tensor([True, False, True])) ** 2).mean()
        tl.backward()
        np.testing.assert_allclose(w1.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    assert f.compile_count == 2  # the forward, and its backward on the first backward()


@pytest.mark.iree
def test_one_compile_serves_gradients_of_every_count():
    f = tp.compile(_loss, fullgraph=True, backend="iree-cpu")
    for pattern in PATTERNS:
        a = PATTERNS[pattern].reshape(2, 3)
        x, w = tp.tensor(a, requires_grad=True), tp.tensor(a, requires_grad=True)
        f(x, w).backward()
        np.testing.assert_allclose(x.grad.numpy(), np.where(a > 0, 2 * a, 0), rtol=1e-6)
    assert f.compile_count == 2  # one forward and one backward for every count


@pytest.mark.iree
def test_var_and_std_differentiate_over_a_data_dependent_length():
    def f(x):
        y = x[x > 0]
        return y.var() + y.std(correction=0) * 2 + y.mean()

    c = tp.compile(f, fullgraph=True, backend="iree-cpu")
    for a in (PATTERNS["some"], PATTERNS["one"], PATTERNS["none"]):  # one element: NaN; none: NaN, zero grads
        x1, x2 = tp.tensor(a, requires_grad=True), tp.tensor(a, requires_grad=True)
        got, want = c(x1), f(x2)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, equal_nan=True)
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    assert c.compile_count == 2


# --- assignment, shared lengths, automatic dynamic, segments ------------------------------------

@pytest.mark.iree
def test_masked_assignment_and_one_mask_giving_one_length():
    def f(x, y):
        x = x.clone()
        m = x > 0
        x[m] = x[m] * 2 + y[m]    # x[m] and y[m]: one mask, one length
        x[~m] = 0.5
        return x, x[m].shape[0] == y[m].shape[0]

    c = tp.compile(f, fullgraph=True, backend="iree-cpu")
    y = tp.tensor(np.arange(6, dtype=np.float32))
    for a in PATTERNS.values():
        got, want = c(tp.tensor(a), y), f(tp.tensor(a), y)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
        assert got[1] is True
    assert c.compile_count == 1


@pytest.mark.iree
def test_data_dependent_sizes_with_dynamic_input_sizes():
    def f(x):
        y = x[x > 0]
        return (y[:, None] * y[None, :]).sum(), y.shape[0], tp.unique(x.round(), return_counts=True)

    c = tp.compile(f, fullgraph=True, backend="iree-cpu")
    rng = np.random.default_rng(3)
    for n in (5, 7, 9, 12, 3):  # the second size makes the input dimension dynamic
        x = tp.tensor(rng.standard_normal(n).astype(np.float32))
        _same(c(x), f(x), rtol=1e-5, atol=1e-5)
    assert c.compile_count == 2


@pytest.mark.iree
def test_a_function_that_breaks_computes_its_data_dependent_sizes_in_segments():
    def f(x):
        s = float(x.sum())  # a break: the rest runs lazily, in segments
        y = x[x > s / 10]
        z = tp.nonzero(x > 0, as_tuple=True)[0]
        return y * 2, z + 1, y.shape[0] + 1

    c = tp.compile(f, backend="iree-cpu")
    for a in PATTERNS.values():
        got = c(tp.tensor(a))
        _same(got, f(tp.tensor(a)))
        assert isinstance(got[2], int)
    report = tp.compiler.explain(f, tp.tensor(PATTERNS["some"]))
    assert [b.reason for b in report.break_reasons] == ["Tensor.item() needs the value of a captured tensor"]
    assert report.graph_count == 2  # x[mask] and nonzero stay in the second segment


@pytest.mark.iree
def test_segments_after_a_break_keep_the_count_symbolic_and_serve_every_count():
    def f(x):
        y = x[x > 0]
        s = float(y.sum())  # a break: y leaves the first segment with the count computed
        return y * s, y.shape[0], tp.unique(y.round())

    c = tp.compile(f, backend="iree-cpu")
    for a in PATTERNS.values():
        _same(c(tp.tensor(a)), f(tp.tensor(a)))
    assert c.compile_count == 2  # two segments, each compiled once for every count


@pytest.mark.iree
def test_gradients_through_segments_with_a_data_dependent_count():
    def g(x):
        y = x[x > 0]
        s = float(y.sum())
        return (y * y).sum() * s

    c = tp.compile(g, backend="iree-cpu")
    for a in (PATTERNS["some"], PATTERNS["one"], PATTERNS["all"]):
        x1, x2 = tp.tensor(a, requires_grad=True), tp.tensor(a, requires_grad=True)
        c(x1).backward()
        g(x2).backward()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5)
    report = tp.compiler.explain(g, tp.tensor(PATTERNS["some"], requires_grad=True))
    assert [b.reason for b in report.break_reasons] == ["Tensor.item() needs the value of a captured tensor"]


# --- questions about sizes the data decides ----------------------------------------------------

def branch_on_count(x):
    y = x[x > 0]
    if y.shape[0] > 2:
        return y.sum()
    return y.mean()


def test_a_python_question_on_a_data_dependent_size_is_a_clear_error_under_fullgraph(backend):
    question = _line_of(branch_on_count, "if y.shape[0] > 2:")
    made = _line_of(branch_on_count, "y = x[x > 0]")
    with pytest.raises(GraphCaptureError) as info:
        tp.compile(branch_on_count, fullgraph=True, backend=backend)(tp.tensor(PATTERNS["some"]))
    text = str(info.value)
    assert f"graph break in branch_on_count at {__file__}:{question}: > on a size (u0 > 2) depends on u0 = the number " \
           f"of nonzero elements (tp.nonzero at {__file__}:{made})" in text
    assert "no guard can answer it" in text and "if y.shape[0] > 2:" in text
    assert backend.count == 0


def test_without_fullgraph_the_question_breaks_the_graph_and_each_branch_is_right(backend):
    c = tp.compile(branch_on_count, backend=backend)
    for a in PATTERNS.values():
        got, want = c(tp.tensor(a)), branch_on_count(tp.tensor(a))
        np.testing.assert_allclose(got.numpy(), want.numpy(), equal_nan=True)
    report = tp.compiler.explain(branch_on_count, tp.tensor(PATTERNS["some"]))
    assert report.graph_break_count == 1
    assert "on a size (u0 > 2) depends on u0" in report.break_reasons[0].reason


@pytest.mark.parametrize("question", [
    lambda y, w: int(y.shape[0]),
    lambda y, w: y.reshape(-1, 2),           # needs u0 % 2 == 0
    lambda y, w: y + w,                      # broadcasting (u0,) against (6,): u0 == 6?
    lambda y, w: range(len(y)),
    lambda y, w: tp.randn(y.shape[0]),
], ids=["int", "reshape", "broadcast", "len", "random-draw"])
def test_questions_that_need_the_count_are_errors_never_guards(backend, question):
    def f(x, w):
        return question(x[x > 0], w)

    with pytest.raises(GraphCaptureError, match=r"depends on u0 = the number of nonzero elements \(tp.nonzero at "):
        tp.compile(f, fullgraph=True, backend=backend)(tp.tensor(PATTERNS["some"]), tp.ones(6))


def test_the_same_op_on_the_same_values_shares_one_size_and_guards_stay_on_arguments(backend):
    def f(x, y):
        m = x > 0
        a, b = x[m], y[m]
        return a + b, tp.masked_select(x, m) * b, tp.nonzero(m)

    c = tp.compile(f, fullgraph=True, backend=backend, dynamic=True)
    x, y = tp.tensor(PATTERNS["some"]), tp.tensor(PATTERNS["all"])
    _same(c(x, y), f(x, y))
    (graph,) = backend.graphs
    sizes = {str(d) for n in graph.nodes for r in n.results for d in r.type.shape if sym.is_symbolic(d)}
    assert sizes == {"s0", "u0"}
    (entry,) = c._group.order
    assert all("u0" not in text for text in entry.shape_guard.describe())
    _same(c(tp.tensor(PATTERNS["none"]), y), f(tp.tensor(PATTERNS["none"]), y))
    assert backend.count == 1


def test_the_graph_lists_the_unbacked_size_and_emits_it(backend):
    c = tp.compile(_selected, fullgraph=True, backend=backend)
    c(tp.tensor(PATTERNS["some"]))
    (graph,) = backend.graphs
    (nonzero,) = [n for n in graph.nodes if n.op == "tp.nonzero"]
    assert str(nonzero.results[0].type.shape[0]) == "u0"
    from tensorplay.dialects.tp import mlir as M

    text = M.print_module(M.emit(graph))
    assert '"tp.nonzero"' in text and 'tp.shapes = [["u0", 1]]' in text and "tp.arg_shapes = [[6]]" in text


# --- the shape environment -------------------------------------------------------------------------

def test_unbacked_symbols_answer_what_their_range_settles_and_refuse_the_rest():
    from tensorplay.compiler.symbolic.shape_env import DataDependentSizeError

    env = ShapeEnv("f")
    u = env.wrap(env.create_unbacked("the number of nonzero elements (tp.nonzero)", hi=6))
    assert repr(u) == "u0" and env.unresolved() == [u.node]
    assert u >= 0 and u <= 6 and not u > 6 and (u + 1) > 0  # settled by [0, 6]: nothing recorded
    assert env.relations == [] and env.specializations == []
    with pytest.raises(DataDependentSizeError, match=r"> on a size \(u0 > 2\) depends on u0 = the number of "
                                                     r"nonzero elements \(tp.nonzero\)"):
        u > 2
    with pytest.raises(DataDependentSizeError, match=r"int\(\) of the size"):
        int(u)
    s = env.wrap(env.create_symbol(4, "x.size(0)"))
    assert repr(s) == "s0"
    env.resolve(u.node, 3)  # a segment computed it
    assert u > 2 and int(u + s) == 7 and env.unresolved() == []


def test_size_hints_count_an_unbacked_size_as_typical_for_cost_estimates():
    env = ShapeEnv("f")
    u = env.create_unbacked("n", hi=10)
    v = env.create_unbacked("m")
    assert env.size_hint(u * 2) == 20 and env.size_hint(v) == 64
    with pytest.raises(ValueError, match="no example value"):
        env.hint(u)


# --- lowering with sizes known only at run time, export -----------------------------------------

@pytest.mark.iree
@pytest.mark.parametrize("results", [(0, 1, 2), (0,), (0, 1), (0, 2)], ids=["all", "values", "inverse", "counts"])
def test_unique_lowers_for_dynamic_input_sizes(results):
    """The lowering with ``?`` input dims and each subset of results read (a result nobody
    reads is not built, which changes the sort): compiled for llvm-cpu, compared with the
    reference."""
    from tensorplay.compiler.backends.iree import compile_mlir, get_iree_backend
    from tensorplay.dialects.tp import lookup
    from tensorplay.dialects.tp import mlir as M
    from tensorplay.dialects.tp.graph import Graph
    from tensorplay.dialects.tp.types import TensorType, type_of_array
    from tensorplay.passes import run_pipeline
    from tensorplay.runtime import Program

    cases = [np.array([[2, 2, 3, 1], [3, 2, 0, 1], [3, 2, 0, 3]], np.int32),
             np.array([2.0, 1.0, np.nan, 2.0, np.nan, 0.0], np.float32),
             np.array([1, 0, 1, 1, 0], np.int64), np.array([3, 1, 3, 0], np.uint8),
             np.array([2, 1, 2], np.float16), np.zeros((0, 2), np.float32)]
    graphs = []
    for i, a in enumerate(cases):
        g = Graph(f"f{i}")
        t = type_of_array(a)
        x = g.add_input(TensorType((None,) + t.shape[1:], t.dtype))
        outs = g.add("tp.unique", [x], {})
        g.set_outputs([outs[k] for k in results])
        graphs.append(g)
    module = M.emit(graphs)
    run_pipeline(module, "convert-tp-to-linalg,canonicalize,cse")
    vmfb = compile_mlir(M.print_module(module), get_iree_backend("iree-cpu").flags(), backend="iree-cpu",
                        name="unique")
    program = Program(vmfb, "local-sync", name="unique")
    op = lookup("tp.unique")
    for i, a in enumerate(cases):
        want = op.reference([a], {})
        for got, k in zip(program.call(f"f{i}", a), results):
            got = np.asarray(got)
            if want[k].dtype == np.uint8:
                got = got.view(np.uint8)  # (the program's element types are signless)
            assert got.shape == want[k].shape and got.dtype == want[k].dtype, (i, k)
            np.testing.assert_array_equal(got, want[k])


@pytest.mark.iree
def test_export_needs_no_dynamic_shapes_and_returns_the_count_as_an_int(tmp_path):
    from tensorplay import runtime

    def f(x):
        y = x[x > 0]
        return (y * 2).sum(), y.shape[0], y, tp.unique(x.round())

    program = tp.export(f, (tp.tensor(PATTERNS["some"]),))
    assert str(program.signatures["forward"]) == "forward(x: float32[6]) -> (float32[], int, float32[u0], float32[u1])"
    path = program.save(tmp_path / "f.vmfb")
    module = runtime.load(path)
    for a in PATTERNS.values():
        got, want = module.forward(a), f(tp.tensor(a))
        np.testing.assert_allclose(got[0], want[0].numpy())
        assert got[1] == want[1] and isinstance(got[1], int)
        np.testing.assert_array_equal(got[2], want[2].numpy())
        np.testing.assert_array_equal(got[3], want[3].numpy())


def test_a_call_vulkan_refuses_for_an_empty_data_dependent_tensor_runs_on_the_host(backend):
    # IREE 3.13's Vulkan HAL refuses a dispatch binding of an empty buffer range; a count the
    # data decided is known only once the program runs, so that refusal sends the call to the
    # reference implementations (the results go back to the arguments' device)
    from tensorplay.compiler.backends.iree import _EmptyGuarded
    from tensorplay.compiler.backends.targets import TARGETS

    assert TARGETS["iree-vulkan"].empty_dispatch_fails
    tp.compile(_selected, fullgraph=True, backend=backend)(tp.tensor(PATTERNS["some"]))
    (graph,) = backend.graphs
    calls = []

    def program(*arrays):
        calls.append(arrays)
        if not (arrays[0] > 0).any():
            raise ValueError("<Program f on vulkan>: calling f failed: INVALID_ARGUMENT; Vulkan dispatch binding 2 "
                             "resolved to an empty buffer range")
        return ["program"]

    guarded = _EmptyGuarded(program, graph, None, "iree-vulkan", retry=True)
    assert guarded(PATTERNS["some"]) == ["program"]
    total, count, kept = guarded(PATTERNS["none"])
    assert len(calls) == 2 and float(total) == 0.0 and int(count) == 0 and kept.shape == (0,)
    with pytest.raises(ValueError, match="something else"):
        _EmptyGuarded(lambda *a: (_ for _ in ()).throw(ValueError("something else")), graph, None, "iree-vulkan",
                      retry=True)(PATTERNS["none"])


# --- eager semantics (PyTorch's) ------------------------------------------------------------------

def test_eager_ops_keep_pytorchs_semantics():
    x = tp.tensor([[0.0, 1.5], [2.0, 0.0]])
    coords = tp.nonzero(x)
    assert coords.dtype is tp.int64 and tuple(coords.shape) == (2, 2)
    np.testing.assert_array_equal(coords.numpy(), [[0, 1], [1, 0]])
    rows, cols = tp.nonzero(x, as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), [0, 1])
    np.testing.assert_array_equal(tp.masked_select(x, tp.tensor([True, False])).numpy(), [0.0, 2.0])
    v, inv, cnt = tp.tensor([3, 1, 3, 2]).unique(return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(v.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(inv.numpy(), [2, 0, 2, 1])
    np.testing.assert_array_equal(cnt.numpy(), [1, 1, 2])
    assert not tp.unique(tp.tensor([1.0, 1.0], requires_grad=True)).requires_grad
    with pytest.raises(NotImplementedError, match=r"unique\(dim=...\) is not supported"):
        tp.unique(x, dim=0)
    if HAS_TORCH:
        import torch

        tx = torch.tensor([[0.0, 1.5], [2.0, 0.0]])
        np.testing.assert_array_equal(torch.nonzero(tx).numpy(), coords.numpy())
        np.testing.assert_array_equal(torch.masked_select(tx, torch.tensor([True, False])).numpy(), [0.0, 2.0])
