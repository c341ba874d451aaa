"""Convolutions the CPU lowering computes by columns (im2col): strided ones and those over few
output positions. Each case is checked to take that path (the lowered MLIR has no
``linalg.conv_2d_nchw_fchw``; a long reduction is one ``linalg.matmul``) and to give eager's
values, computed in float64 by the reference, forward and backward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

pytestmark = pytest.mark.iree

#: (name, input shape, weight shape, conv2d keywords, the form expected: "matmul" or "contraction")
CASES = [
    ("strided 3x3", (2, 3, 9, 9), (5, 3, 3, 3), dict(stride=2, padding=1), "contraction"),
    ("strided 1x1 (a downsampling shortcut)", (2, 8, 7, 7), (4, 8, 1, 1), dict(stride=2), "contraction"),
    ("few positions, long reduction", (2, 32, 4, 4), (16, 32, 3, 3), dict(padding=1), "matmul"),
    ("strided, long reduction", (3, 64, 5, 5), (8, 64, 3, 3), dict(stride=2, padding=1), "matmul"),
    ("mixed strides, dilation, asymmetric kernel", (2, 16, 6, 5), (8, 16, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2)), "contraction"),
]
#: float32: sums of up to 576 products in another order than the reference's float64, on
#: outputs up to ~40 (3.4e-5 measured, within 2e-5 + 2e-5 * |value|); float16 and bfloat16
#: accumulate in float32 and round once, as eager does: one unit in the last place for a float32
#: sum that rounds the other way (0 measured)
TOLERANCE = {tp.float32: 2e-5, tp.float16: 1e-3, tp.bfloat16: 8e-3}


def _linalg(trace: Path) -> str:
    return "\n".join(p.read_text() for p in trace.rglob("04-linalg.mlir"))


def _inputs(xs, ws, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = tp.tensor(rng.standard_normal(xs).astype(np.float32)).to(dtype)
    w = tp.tensor(rng.standard_normal(ws).astype(np.float32)).to(dtype)
    b = tp.tensor(rng.standard_normal(ws[0]).astype(np.float32)).to(dtype)
    return x, w, b


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16], ids=str)
@pytest.mark.parametrize("name, xs, ws, kw, form", CASES, ids=[c[0] for c in CASES])
def test_a_convolution_by_columns_equals_eager(name, xs, ws, kw, form, dtype, tmp_path):
    x, w, b = _inputs(xs, ws, dtype)
    compiled = tp.compile(lambda x, w, b: F.conv2d(x, w, b, **kw), fullgraph=True,
                          options={"trace_dir": tmp_path})
    got, want = compiled(x, w, b), F.conv2d(x, w, b, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=tol, atol=tol)
    text = _linalg(tmp_path)
    assert "linalg.conv_2d_nchw_fchw" not in text
    assert ("linalg.matmul" in text) == (form == "matmul")


def test_an_integer_convolution_by_columns_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    x = tp.tensor(rng.integers(-50, 50, (2, 3, 9, 9)).astype(np.int32))
    w = tp.tensor(rng.integers(-50, 50, (5, 3, 3, 3)).astype(np.int32))
    compiled = tp.compile(lambda x, w: F.conv2d(x, w, stride=2, padding=1), fullgraph=True,
                          options={"trace_dir": tmp_path})
    np.testing.assert_array_equal(compiled(x, w).numpy(), F.conv2d(x, w, stride=2, padding=1).numpy())
    assert "linalg.conv_2d_nchw_fchw" not in _linalg(tmp_path)


@pytest.mark.parametrize("name, xs, ws, kw, form", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_gradients_through_a_convolution_by_columns_equal_eager(name, xs, ws, kw, form):
    def loss(x, w, b):
        return (F.conv2d(x, w, b, **kw) ** 2).sum()

    def leaves():
        return [t.requires_grad_() for t in _inputs(xs, ws, tp.float32, seed=2)]

    eager, compiled = leaves(), leaves()
    loss(*eager).backward()
    tp.compile(loss, fullgraph=True)(*compiled).backward()
    for g, e in zip(compiled, eager):
        # sums of squares of outputs of up to ~30: gradients up to ~1e3, float32 in another order
        np.testing.assert_allclose(g.grad.numpy(), e.grad.numpy(), rtol=2e-5, atol=2e-4)


def test_a_torch_convolution_agrees():
    torch = pytest.importorskip("torch")
    x, w, b = _inputs((2, 32, 4, 4), (16, 32, 3, 3), tp.float32, seed=3)
    got = tp.compile(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), fullgraph=True)(x, w, b)
    want = torch.nn.functional.conv2d(torch.from_numpy(x.numpy()), torch.from_numpy(w.numpy()),
                                      torch.from_numpy(b.numpy()), stride=2, padding=1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
