"""The loop op (docs/recurrent.md): ``tensorplay.func.scan`` eagerly and captured as one
``tp.scan``, its gradient (a reverse loop), one compiled program for every length and batch,
recurrent layers compiled through it, and export with a dynamic length."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.compiler.capture.graphs import op_counts
from tensorplay.compiler.errors import GraphCaptureError
from tensorplay.dialects.tp.graph import interpret
from tests.compiler.conftest import backend_param


def _weights(seed=0, dtype=tp.float64):
    rng = np.random.default_rng(seed)
    return tp.tensor(rng.standard_normal((4, 4)) * 0.5, dtype=dtype)


def _unrolled(h, xs, w, reverse=False):
    """The loop written out in Python, with ops that eager autograd records."""
    n = xs.shape[0]
    ys = [None] * n
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        h = tp.tanh(h @ w + xs[t])
        ys[t] = h * h
    return h, tp.stack(ys)


def _scanned(h, xs, w, reverse=False):
    def step(carry, x):
        new = tp.tanh(carry @ w + x)
        return new, new * new

    return tp.func.scan(step, h, xs, reverse=reverse)


def _inputs(steps=5, batch=3, dtype=tp.float64, seed=1):
    rng = np.random.default_rng(seed)
    return (tp.tensor(rng.standard_normal((batch, 4)), dtype=dtype),
            tp.tensor(rng.standard_normal((steps, batch, 4)), dtype=dtype))


class _Graphs:
    """A backend that records the graphs it is given and runs them with the reference."""

    def __init__(self):
        self.graphs = []

    def __call__(self, graph, example_inputs):
        self.graphs.append(graph)
        return lambda *arrays: interpret(graph, arrays)


# --- eager ------------------------------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True])
def test_eager_scan_is_the_python_loop(reverse):
    h, xs = _inputs()
    w = _weights()
    got = _scanned(h, xs, w, reverse)
    want = _unrolled(h, xs, w, reverse)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_eager_scan_takes_nested_carries_and_sequences():
    h, xs = _inputs()

    def step(carry, x):
        total = carry["sum"] + x[0] * x[1]
        return {"sum": total, "count": carry["count"] + 1}, (total, x[1].amax(-1))

    init = {"sum": h, "count": tp.zeros((), dtype=tp.int64)}
    carry, (totals, peaks) = tp.func.scan(step, init, (xs, xs * 2))
    np.testing.assert_allclose(carry["sum"].numpy(), h.numpy() + (xs * xs * 2).sum(0).numpy(), rtol=1e-12)
    assert int(carry["count"]) == 5
    assert totals.shape == (5, 3, 4) and peaks.shape == (5, 3)
    np.testing.assert_array_equal(peaks.numpy(), (xs * 2).amax(-1).numpy())


def test_bad_arguments_say_what_is_wrong():
    h, xs = _inputs()
    with pytest.raises(ValueError, match=r"scan: the tensors of xs differ in length \(dim 0\): 5 and 4"):
        tp.func.scan(lambda c, x: (c, x[0]), h, (xs, xs[:4]))
    with pytest.raises(TypeError, match=r"scan: init must hold tensors only, found float"):
        tp.func.scan(lambda c, x: (c, x), 1.0, xs)
    with pytest.raises(ValueError, match=r"scan: every tensor of xs needs a dim 0"):
        tp.func.scan(lambda c, x: (c, x), h, tp.tensor(1.0))
    with pytest.raises(TypeError, match=r"scan: fn must return a pair \(carry, y\)"):
        tp.func.scan(lambda c, x: c, h, xs)
    with pytest.raises(TypeError, match=r"scan: fn returned a carry of another structure than init"):
        tp.func.scan(lambda c, x: ((c, c), x), h, xs)


# --- captured ---------------------------------------------------------------------------------

def test_captured_scan_is_one_op_whatever_the_length():
    w = _weights()
    backend = _Graphs()
    run = tp.compile(lambda h, xs: _scanned(h, xs, w), backend=backend, fullgraph=True)
    sizes = []
    for steps in (3, 40):
        h, xs = _inputs(steps)
        got = run(h, xs)
        for a, b in zip(got, _unrolled(h, xs, w)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14, atol=1e-15)
        graph = backend.graphs[-1]
        assert op_counts(graph) == {"tp.scan": 1}
        body = graph.nodes[0].attrs["body"]
        sizes.append(sorted(op_counts(body).items()))
    assert sizes[0] == sizes[1]  # the body does not grow with the length


@pytest.mark.iree
@pytest.mark.parametrize("reverse", [False, True])
def test_compiled_scan_equals_eager_on_iree(reverse):
    w = _weights(dtype=tp.float32)
    h, xs = _inputs(dtype=tp.float32)
    run = tp.compile(lambda h, xs: _scanned(h, xs, w, reverse), fullgraph=True)
    for a, b in zip(run(h, xs), _unrolled(h, xs, w, reverse)):
        # float32: IREE's tanh and matmul round differently from numpy's (measured up to 2.4e-7)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.iree
def test_one_program_serves_every_length_and_batch():
    w = _weights(dtype=tp.float32)
    run = tp.compile(lambda h, xs: _scanned(h, xs, w), dynamic=True, fullgraph=True)
    for steps in (3, 8, 17, 40):
        for batch in (1, 2, 7, 16):
            h, xs = _inputs(steps, batch, tp.float32, seed=steps * 31 + batch)
            for a, b in zip(run(h, xs), _unrolled(h, xs, w)):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
    assert run.compile_count == 1


def test_a_body_reading_closures_and_modules_takes_them_as_invariants():
    lin = nn.Linear(4, 4).double()
    scale = tp.tensor(0.5, dtype=tp.float64)
    backend = _Graphs()

    def f(h, xs):
        return tp.func.scan(lambda c, x: (tp.tanh(lin(c) * scale + x), c.sum(-1)), h, xs)

    h, xs = _inputs()
    got = tp.compile(f, backend=backend, fullgraph=True)(h, xs)
    want = f(h, xs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14, atol=1e-15)
    node = backend.graphs[-1].nodes[-1]
    assert node.op == "tp.scan" and len(node.inputs) == 2 + 3  # h, xs; weight, bias, scale


def test_a_loop_inside_a_loop():
    w = _weights()

    def f(h, xs):
        def outer(c, x):
            inner, _ = tp.func.scan(lambda a, row: (a + row * c, row), c, x)
            return tp.tanh(inner @ w), inner.sum()
        return tp.func.scan(outer, h, xs)

    h, _ = _inputs()
    xs = tp.tensor(np.random.default_rng(4).standard_normal((3, 2, 3, 4)))
    backend = _Graphs()
    got = tp.compile(f, backend=backend, fullgraph=True)(h, xs)
    for a, b in zip(got, f(h, xs)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-14)
    body = backend.graphs[-1].nodes[-1].attrs["body"]
    assert op_counts(body)["tp.scan"] == 1


def test_what_a_body_cannot_do_is_a_clear_capture_error():
    h, xs = _inputs()
    state = tp.zeros(3, 4, dtype=tp.float64)

    def writes(h, xs):
        def step(c, x):
            state.add_(x)
            return c, x
        return tp.func.scan(step, h, xs)

    def draws(h, xs):
        return tp.func.scan(lambda c, x: (c + tp.randn(3, 4, dtype=tp.float64), x), h, xs)

    def changes_dtype(h, xs):
        return tp.func.scan(lambda c, x: (c.float(), x), h, xs)

    with pytest.raises(GraphCaptureError, match=r"scan body .*writes in place into a tensor it did not make"):
        tp.compile(writes, backend=_Graphs(), fullgraph=True)(h, xs)
    with pytest.raises(GraphCaptureError, match=r"scan body .*draws random numbers .*pass them in xs"):
        tp.compile(draws, backend=_Graphs(), fullgraph=True)(h, xs)
    with pytest.raises(GraphCaptureError, match=r"carry leaf 0 enters the loop as tensor<3x4xf64> and leaves the "
                                                 r"body as tensor<3x4xf32>"):
        tp.compile(changes_dtype, backend=_Graphs(), fullgraph=True)(h, xs)


# --- gradients --------------------------------------------------------------------------------

def _loss(result):
    h, ys = result
    weights = tp.arange(ys.numel(), dtype=ys.dtype).reshape(ys.shape) / ys.numel()
    return h.sum() * 2 + (ys * weights).sum()


def _grads(fn, *leaves):
    for t in leaves:
        t.grad = None
    _loss(fn()).backward()
    out = [t.grad.numpy().copy() for t in leaves]
    for t in leaves:
        t.grad = None
    return out


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("backend", ["eager", pytest.param("iree-cpu", marks=pytest.mark.iree)])
def test_gradients_of_the_loop_equal_those_of_the_unrolled_loop(backend, reverse):
    h, xs = _inputs()
    w = _weights()
    leaves = [h.requires_grad_(), xs.requires_grad_(), w.requires_grad_()]
    want = _grads(lambda: _unrolled(h, xs, w, reverse), *leaves)

    def step(h, xs):
        loss = _loss(_scanned(h, xs, w, reverse))
        loss.backward()
        return loss

    run = tp.compile(step, backend=backend, fullgraph=True)
    run(h, xs)
    got = [t.grad.numpy().copy() for t in leaves]
    for a, b in zip(got, want):
        # float64: the reverse loop sums the same terms in another order (measured 6e-14)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_the_gradient_is_a_reverse_loop():
    h, xs = _inputs()
    w = _weights().requires_grad_()
    backend = _Graphs()

    def step(h, xs):
        loss = _loss(_scanned(h, xs, w))
        loss.backward()
        return loss

    tp.compile(step, backend=backend, fullgraph=True)(h.requires_grad_(), xs)
    scans = [n for g in backend.graphs for n in g.nodes if n.op == "tp.scan"]
    # the forward loop (which also stacks the carry entering each step), the reverse loop
    assert sorted(n.attrs["reverse"] for n in scans) == [False, True]
    forward = next(n for n in scans if not n.attrs["reverse"])
    assert len(forward.results) == 1 + 1 + 1  # final carry, ys, saved carries


def test_a_loop_without_gradients_saves_nothing():
    h, xs = _inputs()
    w = _weights()
    backend = _Graphs()
    tp.compile(lambda h, xs: _scanned(h, xs, w), backend=backend, fullgraph=True)(h, xs)
    (node,) = backend.graphs[-1].nodes
    assert len(node.results) == 2


def test_the_gradient_of_a_loop_run_eagerly_recomputes_the_saved_carries():
    # tp.scan applied outside a capture (its rule then runs the forward loop again to save them)
    from tensorplay._dispatch import apply
    from tests.opinfo.control import _body

    h, xs = _inputs()
    w = _weights()
    body = _body(h._tensor_type(), xs[0]._tensor_type(), w._tensor_type(), False)
    leaves = [h.requires_grad_(), xs.requires_grad_(), w.requires_grad_()]
    h_t, ys = apply("tp.scan", h, xs, w, body=body, num_carries=1, num_xs=1, length=5)
    (h_t.sum() + (ys * ys).sum()).backward()
    got = [t.grad.numpy().copy() for t in leaves]

    def unrolled():
        c, outs = h, []
        for t in range(5):
            c = tp.tanh(c @ w + xs[t])
            outs.append(c + c)
        return c, tp.stack(outs)

    for t in leaves:
        t.grad = None
    c, ys = unrolled()
    (c.sum() + (ys * ys).sum()).backward()
    for a, t in zip(got, leaves):
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_finite_differences_of_a_two_carry_loop():
    rng = np.random.default_rng(5)
    w = tp.tensor(rng.standard_normal((3, 3)) * 0.4)

    def f(h, c, xs):
        def step(carry, x):
            h, c = carry
            h = tp.tanh(h @ w + x * c)
            return (h, c + h.sigmoid()), h.exp()
        (h, c), ys = tp.func.scan(step, (h, c), xs)
        return (h * c).sum() + ys.sum()

    args = [tp.tensor(rng.standard_normal(s)).requires_grad_() for s in ((2, 3), (2, 3), (4, 2, 3))]
    run = tp.compile(f, backend="eager", fullgraph=True)
    grads = tp.autograd.grad(run(*args), args)
    base = [a.detach().numpy() for a in args]
    eps = 1e-6
    for k, g in enumerate(grads):
        numeric = np.zeros_like(base[k])
        for idx in np.ndindex(*base[k].shape):
            hi = [b.copy() for b in base]
            lo = [b.copy() for b in base]
            hi[k][idx] += eps
            lo[k][idx] -= eps
            numeric[idx] = (float(f(*map(tp.tensor, hi))) - float(f(*map(tp.tensor, lo)))) / (2 * eps)
        # central differences in float64: truncation error ~eps**2 times the third derivative
        np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-6, atol=1e-7)


# --- recurrent layers -------------------------------------------------------------------------

class _LanguageModel(nn.Module):
    def __init__(self, mode="LSTM", vocab=23, hidden=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        layer = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}[mode]
        self.rnn = layer(hidden, hidden, num_layers=2)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.decoder(out)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_capture_one_loop_per_layer(mode):
    tp.manual_seed(0)
    model = _LanguageModel(mode).eval()
    backend = _Graphs()
    run = tp.compile(model, backend=backend, fullgraph=True)
    tokens = tp.tensor(np.random.default_rng(2).integers(0, 23, (30, 2)))
    with tp.no_grad():
        np.testing.assert_allclose(run(tokens).numpy(), model(tokens).numpy(), rtol=1e-6, atol=1e-6)
    assert op_counts(backend.graphs[-1])["tp.scan"] == 2


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", backend_param("iree-vulkan")])
def test_a_compiled_lstm_language_model_compiles_once(backend):
    tp.compiler.reset()
    tp.manual_seed(0)
    model = _LanguageModel().eval()
    run = tp.compile(model, backend=backend, dynamic=True)
    rng = np.random.default_rng(3)
    with tp.no_grad():
        for steps, batch in ((3, 1), (8, 16), (17, 5), (40, 2), (8, 9)):
            tokens = tp.tensor(rng.integers(0, 23, (steps, batch)))
            # float32 kernels against eager's numpy (measured up to 1e-6 over 40 steps)
            np.testing.assert_allclose(run(tokens).numpy(), model(tokens).numpy(), rtol=1e-5, atol=1e-5)
    assert run.compiled_function.compile_count == 1
    tp.compiler.reset()


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", backend_param("iree-vulkan")])
def test_a_compiled_training_step_over_varying_lengths_matches_eager(backend):
    def train(compiled):
        tp.compiler.reset()
        tp.manual_seed(0)
        model = _LanguageModel()
        opt = tp.optim.SGD(model.parameters(), lr=0.5)

        def step(tokens, targets):
            loss = nn.functional.cross_entropy(model(tokens).reshape(-1, 23), targets.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            opt.zero_grad()
            return loss

        run = tp.compile(step, dynamic=True, backend=backend) if compiled else step
        rng = np.random.default_rng(8)
        losses = []
        for steps, batch in ((5, 4), (12, 4), (3, 2), (20, 6), (12, 4)):
            tokens = tp.tensor(rng.integers(0, 23, (steps + 1, batch)))
            losses.append(float(run(tokens[:-1], tokens[1:])))
        return losses, run

    want, _ = train(False)
    got, run = train(True)
    # float32: compiled kernels round differently; the parameters drift apart over the steps
    # (measured 3e-7 relative)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert run.compile_count == 1
    tp.compiler.reset()


@pytest.mark.iree
def test_a_recurrent_model_exports_with_a_dynamic_length(tmp_path):
    from tensorplay import runtime
    from tensorplay.export import Dim

    tp.manual_seed(0)
    model = _LanguageModel().eval()
    tokens = tp.tensor(np.random.default_rng(4).integers(0, 23, (6, 2)))
    program = tp.export(model, (tokens,), dynamic_shapes={"tokens": {0: Dim("steps", min=1, max=64)}})
    path = program.save(tmp_path / "lm.vmfb")
    loaded = runtime.load(path)
    rng = np.random.default_rng(5)
    for steps in (1, 9, 64):
        t = rng.integers(0, 23, (steps, 2))
        with tp.no_grad():
            want = model(tp.tensor(t)).numpy()
        np.testing.assert_allclose(loaded.forward(t), want, rtol=1e-5, atol=1e-5)
