"""The conv and pooling lowerings on small spatial inputs (tests/compiler/conv_pool_sweep.py):
inputs smaller than, equal to and just larger than the kernel, strides 1-3, paddings 0-2 and
dilations 1-2, compiled forward and backward on iree-cpu and iree-vulkan and compared with
eager tensorplay and PyTorch; geometries PyTorch rejects raise PyTorch's error, eagerly and
compiled.

The suite runs a sample (every variant, each covering every input size against the kernel
with every stride, and every padding, dilation and kernel size; on iree-vulkan every other
case of it);
``TENSORPLAY_DIFFERENTIAL=full`` runs every case."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensorplay as tp
from tests.compiler import conv_pool_sweep as S
from tests.compiler.conftest import backend_param

pytest.importorskip("iree.runtime")

FULL = os.environ.get("TENSORPLAY_DIFFERENTIAL", "") == "full"
CASES = S.cases() if FULL else S.sample()


def _batches(cases: list[S.Case]) -> list:
    """The cases in batches compiled as one function, each named by its cases' positions and
    variants."""
    out = []
    for at in range(0, len(cases), S.BATCH_CASES):
        batch = cases[at:at + S.BATCH_CASES]
        ops = list(dict.fromkeys(c.op for c in batch))
        out.append(pytest.param(batch, id=f"{at}-{at + len(batch) - 1}:{ops[0]}" + (f"..{ops[-1]}" if len(ops) > 1 else "")))
    return out


@pytest.fixture(autouse=True)
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


@pytest.mark.iree
def test_a_stride_2_convolution_of_a_2x2_input_compiles_and_differentiates():
    # ResNet-18 at 32x32 reaches its last stage at 2x2: the 3x3, stride-2, padding-1
    # convolution (and the 1x1, stride-2 downsampling one) did not compile ("'linalg.generic'
    # op inferred input/output operand #1 has shape's dimension #2 to be 4, but found 3")
    torch = pytest.importorskip("torch")
    tp.manual_seed(0)
    for conv in (tp.nn.Conv2d(4, 8, 3, stride=2, padding=1), tp.nn.Conv2d(4, 8, 1, stride=2, bias=False)):
        x = tp.randn(1, 4, 2, 2, requires_grad=True)
        got = tp.compile(conv)(x)
        got.sum().backward()
        got_grads = [x.grad.numpy()] + [p.grad.numpy() for p in conv.parameters()]
        ref = torch.nn.Conv2d(4, 8, conv.kernel_size, stride=2, padding=conv.padding, bias=conv.bias is not None)
        with torch.no_grad():
            for mine, theirs in zip(conv.parameters(), ref.parameters()):
                theirs.copy_(torch.tensor(mine.detach().numpy()))
        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        want = ref(tx)
        want.sum().backward()
        assert tuple(got.shape) == tuple(want.shape) == (1, 8, 1, 1)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
        for g, w in zip(got_grads, [tx.grad] + [p.grad for p in ref.parameters()]):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.iree
def test_a_dilated_max_pool_window_of_padding_only_has_index_minus_one_and_no_gradient():
    # along the height (1 element, padding 1) both taps of the dilated window fall outside:
    # eager indexed it -2 and its backward raised, compiled it was int64's maximum
    F = tp.nn.functional
    geometry = dict(kernel_size=2, stride=1, padding=(1, 0), dilation=(2, 1))
    x = np.random.default_rng(0).standard_normal((1, 2, 1, 3)).astype(np.float32)

    def pool(a):
        return F.max_pool2d(a, return_indices=True, **geometry)

    for fn in (pool, tp.compile(pool)):
        a = tp.tensor(x, requires_grad=True)
        values, indices = fn(a)
        assert np.all(values.detach().numpy() == -np.inf) and np.all(indices.numpy() == -1)
        F.max_pool2d(a, **geometry).backward(tp.ones(1, 2, 1, 2))
        values.backward(tp.ones(1, 2, 1, 2))
        np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(x))
    torch = pytest.importorskip("torch")
    theirs, where = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **geometry)
    assert np.all(theirs.numpy() == -np.inf) and np.all(where.numpy() >= 0)  # (outside the window)


@pytest.mark.iree
@pytest.mark.parametrize("batch", _batches(CASES))
def test_cpu_results_and_gradients_equal_eager_and_pytorch(batch):
    report = S.run_batch(batch, "iree-cpu")
    assert report.cases == len(batch)
    assert not report.failures, "\n".join(report.failures)


#: lavapipe runs the sample about as slowly as the CPU compiles it: every other case of it
VULKAN_CASES = CASES if FULL else CASES[::2]


@pytest.mark.parametrize("backend", [backend_param("iree-vulkan")])
@pytest.mark.parametrize("batch", _batches(VULKAN_CASES))
def test_vulkan_results_and_gradients_equal_eager_and_pytorch(batch, backend):
    report = S.run_batch(batch, backend)
    assert report.cases == len(batch)
    assert not report.failures, "\n".join(report.failures)


@pytest.mark.iree
def test_geometries_pytorch_rejects_raise_its_error_eagerly_and_compiled():
    errors = S.error_cases()
    # every kind of rejection is there: a kernel past the padded input (conv2d, conv1d), an
    # output size below 1 and padding over half the kernel (each pool, floor and ceil mode)
    assert {e.op for e in errors} == {"conv2d_dense", "conv1d", "max_pool2d", "avg_pool2d"}
    chosen = errors if FULL else errors[::4]
    problems = [p for e in chosen for p in S.check_error(e, "iree-cpu")]
    assert not problems, "\n".join(problems)


def test_the_sample_covers_every_variant_at_every_small_size():
    full, sample = S.cases(), S.sample()
    assert {c.op for c in sample} == {c.op for c in full}
    for op in {c.op for c in full if c.dims}:
        cover = set().union(*(S._features(c) for c in sample if c.op == op))
        assert cover == set().union(*(S._features(c) for c in full if c.op == op)), op
        relations = {d.relation() for c in sample if c.op == op for d in c.dims}
        assert relations == {"<", "=", ">"}, op
        assert {d.stride for c in sample if c.op == op for d in c.dims} == {1, 2, 3}, op
    # some windows hold nothing but padding: a dilated max pool of a one-element dim
    assert any(c.may_miss_input() for c in sample if c.op.startswith("max_pool2d_indices"))
    assert len(sample) <= 100 and len(full) > 1000
