"""cumprod, logcumsumexp, roll, rot90, diff, tril/triu_indices, cdist, bincount and histc
beyond the op table: value-dependent sizes under capture (graph breaks), whole compiled
programs on iree-cpu against PyTorch, and gradients through a compiled function."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import GraphCaptureError

torch = pytest.importorskip("torch")


def _counts(x, w):
    return tp.bincount(x, w, minlength=4) * 2, x.float().histc(4)


def test_bincount_and_histc_read_values_at_a_graph_break():
    x = tp.tensor([0, 3, 3, 1, 6])
    w = tp.tensor([0.5, 1.0, 2.0, 0.25, 1.5])
    report = tp.compiler.explain(_counts, x, w)
    assert report.graph_break_count >= 1
    got = tp.compile(_counts, backend="eager")(x, w)
    want = (torch.bincount(torch.tensor(x.numpy()), torch.tensor(w.numpy()), minlength=4) * 2,
            torch.tensor(x.numpy()).float().histc(4))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(GraphCaptureError):
        tp.compile(_counts, backend="eager", fullgraph=True)(x, w)


def test_histc_with_a_given_range_captures_whole():
    def f(x):
        return (x * 2).histc(bins=5, min=-2.0, max=2.0)

    x = tp.tensor([-1.5, 0.1, 0.2, 1.9, 3.0])
    assert tp.compiler.explain(f, x).graph_break_count == 0
    got = tp.compile(f, backend="eager", fullgraph=True)(x)
    np.testing.assert_array_equal(got.numpy(), torch.histc(torch.tensor(x.numpy()) * 2, 5, -2.0, 2.0).numpy())


def _program(lib, x, z, a, b):
    return (x.cumprod(1), x.logcumsumexp(0), z.logcumsumexp(1), lib.roll(x, (1, -2), (0, 1)), lib.roll(x, 5),
            lib.rot90(x, 1, (0, 1)), lib.rot90(x, -1, (1, 0)), lib.diff(x, 2, 1, prepend=x[:, :1]),
            lib.cdist(a, b), lib.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), lib.cdist(a, b, 1.5),
            lib.cdist(a, b, float("inf")), lib.histc(x, 6, -1.0, 1.0), lib.tril_indices(3, 4, 1))


@pytest.mark.iree
def test_a_compiled_program_matches_pytorch():
    rng = np.random.default_rng(0)
    inf = float("inf")
    arrays = (rng.uniform(-1.5, 1.5, (4, 5)).astype(np.float32),
              np.array([[-inf, 2.0, -1000.0, inf], [1000.0, -inf, 0.0, 999.0]], np.float32),
              rng.uniform(-1, 1, (3, 4)).astype(np.float32), rng.uniform(-1, 1, (5, 4)).astype(np.float32))
    arrays[0][1, 2] = 0.0
    got = tp.compile(lambda *t: _program(tp, *t), backend="iree-cpu", fullgraph=True)(*map(tp.tensor, arrays))
    want = _program(torch, *map(torch.tensor, arrays))
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype.name == str(b.dtype).replace("torch.", ""), i
        # float32 tolerance: the scans and norms round in another order than PyTorch's loops
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1.3e-5, atol=1e-5, equal_nan=True, err_msg=str(i))


def _loss(lib, x, w):
    return ((x.cumprod(1) * w).sum() + (x.logcumsumexp(0) * w).sum()
            + (lib.cdist(x, x[:2] + 0.5) * w[:, :2]).sum() + (lib.diff(x, dim=0) * w[1:]).sum())


@pytest.mark.iree
def test_gradients_through_a_compiled_function_match_pytorch():
    """The rules trace into a compiled backward: cumprod's across zeros, logcumsumexp's in log
    space, cdist's of the differences."""
    rng = np.random.default_rng(1)
    xv = rng.uniform(-1.5, 1.5, (3, 4))
    xv[0, 1] = xv[2, 0] = xv[2, 3] = 0.0
    wv = rng.uniform(0.5, 1.5, (3, 4))
    x = tp.tensor(xv, requires_grad=True)
    tp.compile(lambda a, b: _loss(tp, a, b), backend="iree-cpu")(x, tp.tensor(wv)).backward()
    xt = torch.tensor(xv, requires_grad=True)
    _loss(torch, xt, torch.tensor(wv)).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_cumprod_second_order_gradients_match_pytorch():
    xv = np.array([[1.5, 0.0, 2.0, -1.0], [0.5, -2.0, 1.0, 3.0]])
    grads = []
    for lib in (tp, torch):
        x = lib.tensor(xv, requires_grad=True)
        (g,) = (tp.autograd if lib is tp else torch.autograd).grad((x.cumprod(1) ** 2).sum(), x, create_graph=True)
        (g * g).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)
