"""The 3-D layers (``Conv3d``, ``ConvTranspose3d``, ``MaxPool3d``, ``AvgPool3d``,
``AdaptiveAvgPool3d``, ``BatchNorm3d``, ``InstanceNorm3d``, ``Dropout3d``) against PyTorch with
the same weights: outputs, input and weight gradients, running statistics, state dict keys,
initialization, autocast dtypes, errors, and a compiled forward and backward pass on iree-cpu."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

torch = pytest.importorskip("torch")

from tests import test_layers as _layers  # (after the skip: it needs PyTorch too)

#: (name, module factory over the library, input shapes, forward keyword arguments)
CASES = [
    ("conv3d", lambda lib: lib.nn.Conv3d(3, 4, (2, 3, 2), stride=(2, 1, 1), padding=1), [(2, 3, 5, 4, 5)], {}),
    ("conv3d_groups_dilated",
     lambda lib: lib.nn.Conv3d(4, 6, 3, stride=(1, 2, 1), dilation=(2, 1, 2), groups=2, bias=False),
     [(1, 4, 6, 5, 6)], {}),
    ("conv3d_same_reflect", lambda lib: lib.nn.Conv3d(2, 3, (2, 3, 3), padding="same", padding_mode="reflect"),
     [(2, 2, 4, 5, 4)], {}),
    ("conv3d_circular_unbatched", lambda lib: lib.nn.Conv3d(2, 2, 3, padding=1, padding_mode="circular"),
     [(2, 4, 3, 5)], {}),
    ("conv3d_valid_replicate", lambda lib: lib.nn.Conv3d(2, 3, 2, padding=(1, 0, 1), padding_mode="replicate"),
     [(1, 2, 3, 4, 3)], {}),
    ("conv_transpose3d",
     lambda lib: lib.nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=(1, 0, 1)),
     [(2, 3, 3, 4, 3)], {}),
    ("conv_transpose3d_groups_dilated",
     lambda lib: lib.nn.ConvTranspose3d(4, 6, (2, 3, 2), stride=(1, 2, 3), groups=2, dilation=(2, 1, 1),
                                        bias=False), [(1, 4, 3, 3, 2)], {}),
    ("conv_transpose3d_unbatched_output_size", lambda lib: lib.nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1),
     [(2, 3, 2, 3)], {"output_size": (6, 4, 5)}),
    ("max_pool3d", lambda lib: lib.nn.MaxPool3d(3, 2, 1, ceil_mode=True), [(2, 3, 5, 6, 5)], {}),
    ("max_pool3d_indices_dilated",
     lambda lib: lib.nn.MaxPool3d((2, 3, 2), (1, 2, 2), (1, 1, 0), dilation=(2, 1, 2), return_indices=True),
     [(1, 2, 5, 7, 6)], {}),
    ("max_pool3d_unbatched", lambda lib: lib.nn.MaxPool3d(2), [(3, 4, 5, 4)], {}),
    ("avg_pool3d", lambda lib: lib.nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False),
     [(2, 3, 5, 6, 5)], {}),
    ("avg_pool3d_divisor_unbatched", lambda lib: lib.nn.AvgPool3d((2, 3, 2), (2, 1, 3), 1, divisor_override=7),
     [(2, 5, 4, 6)], {}),
    ("adaptive_avg_pool3d", lambda lib: lib.nn.AdaptiveAvgPool3d((2, 3, 2)), [(2, 3, 4, 6, 6)], {}),
    ("adaptive_avg_pool3d_uneven", lambda lib: lib.nn.AdaptiveAvgPool3d((3, None, 4)), [(1, 2, 5, 4, 7)], {}),
    ("adaptive_avg_pool3d_unbatched", lambda lib: lib.nn.AdaptiveAvgPool3d(3), [(2, 4, 5, 7)], {}),
    ("batch_norm3d", lambda lib: lib.nn.BatchNorm3d(3), [(2, 3, 3, 4, 2)], {}),
    ("batch_norm3d_eval", lambda lib: lib.nn.BatchNorm3d(3, momentum=None).eval(), [(2, 3, 3, 4, 2)], {}),
    ("instance_norm3d_affine", lambda lib: lib.nn.InstanceNorm3d(3, affine=True), [(2, 3, 3, 4, 2)], {}),
    ("instance_norm3d_running_stats_unbatched",
     lambda lib: lib.nn.InstanceNorm3d(3, affine=True, track_running_stats=True), [(3, 3, 4, 2)], {}),
    ("dropout3d_eval", lambda lib: lib.nn.Dropout3d(0.4).eval(), [(2, 3, 2, 3, 4)], {}),
]


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_layer_matches_torch_forward_and_backward(name, monkeypatch):
    # the 1-D and 2-D layers' check (float64, PyTorch's weights loaded, outputs, input,
    # weight and buffer values after backward) over these cases
    monkeypatch.setattr(_layers, "CASES", CASES)
    _layers.test_layer_matches_torch_forward_and_backward(name)


def test_float32_layers_match_torch_with_gradients():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 6, 5)).astype(np.float32)

    def model(lib):
        torch.manual_seed(0)
        return lib.nn.Sequential(
            lib.nn.Conv3d(3, 4, 3, padding=1, groups=1), lib.nn.BatchNorm3d(4), lib.nn.MaxPool3d(2, ceil_mode=True),
            lib.nn.ConvTranspose3d(4, 2, 2, stride=2), lib.nn.InstanceNorm3d(2, affine=True),
            lib.nn.AvgPool3d(3, 2, 1), lib.nn.AdaptiveAvgPool3d((2, 1, 3)))

    theirs, ours = model(torch), model(tp)
    ours.load_state_dict(theirs.state_dict())
    xt, xo = torch.tensor(x, requires_grad=True), tp.tensor(x, requires_grad=True)
    want, got = theirs(xt), ours(xo)
    assert got.dtype is tp.float32
    want.square().sum().backward()
    got.square().sum().backward()
    # float32 sums in another order, then normalized twice: a few ulps of unit-sized values
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    grads = dict(theirs.named_parameters())
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key].grad.numpy(), rtol=1e-4, atol=1e-5)


def test_max_pool3d_indices_match_torch_with_ties_and_nans():
    rng = np.random.default_rng(2)
    ties = rng.integers(0, 2, (2, 2, 5, 6, 5)).astype(np.float64)
    nans = rng.standard_normal((1, 2, 5, 5, 5))
    nans[0, 0, 1, 1, 1] = nans[0, 0, 2, 0, 1] = nans[0, 1, 3, 3, 3] = np.nan
    nans[0, 1, 0] = -np.inf
    for x in (ties, nans):
        got = F.max_pool3d(tp.tensor(x), 3, 2, 1, return_indices=True)
        want = torch.nn.functional.max_pool3d(torch.tensor(x), 3, 2, 1, return_indices=True)
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        assert got[1].dtype is tp.int64


def test_integer_avg_pool3d_truncates_like_torch():
    x = np.random.default_rng(3).integers(-90, 100, (1, 2, 5, 5, 5))
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, divisor_override=3),
               dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)):
        got = F.avg_pool3d(tp.tensor(x), **kw)
        assert got.dtype is tp.int64
        np.testing.assert_array_equal(got.numpy(), torch.nn.functional.avg_pool3d(torch.tensor(x), **kw).numpy())


# --- construction: parameters, their shapes and initialization ------------------------------------

@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Conv3d(4, 6, (3, 2, 1), stride=2, groups=2),
    lambda lib: lib.nn.ConvTranspose3d(4, 6, 3, groups=2, output_padding=1, stride=2, bias=False),
    lambda lib: lib.nn.BatchNorm3d(5),
    lambda lib: lib.nn.InstanceNorm3d(5, affine=True, track_running_stats=True),
])
def test_parameters_have_torch_names_shapes_and_init_bounds(make):
    _layers.test_parameters_have_torch_names_shapes_and_init_bounds(make)


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.MaxPool3d(3, 2, 1, ceil_mode=True), lambda lib: lib.nn.AvgPool3d((2, 3, 2)),
    lambda lib: lib.nn.AdaptiveAvgPool3d((2, None, 3)), lambda lib: lib.nn.Dropout3d(0.2),
    lambda lib: lib.nn.Conv3d(2, 3, 3, padding="same", padding_mode="reflect", bias=False),
])
def test_repr_matches_torch(make):
    assert repr(make(tp)) == repr(make(torch))


# --- channel-wise dropout ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(8, 16, 2, 3, 2), (16, 2, 3, 2)])
def test_dropout3d_zeroes_whole_channels_and_scales_the_rest(shape):
    tp.manual_seed(0)
    layer = nn.Dropout3d(0.25)
    x = tp.tensor(np.random.default_rng(0).uniform(1, 2, shape), requires_grad=True)
    y = layer(x)
    ratio = (y.detach().numpy() / x.detach().numpy()).reshape(-1, 12)
    dropped = (ratio == 0).all(axis=1)
    kept = np.isclose(ratio, 1 / 0.75, rtol=1e-12).all(axis=1)
    assert (dropped | kept).all() and 0 < dropped.sum() < len(dropped)
    y.sum().backward()  # the gradient is the same mask
    np.testing.assert_array_equal(x.grad.numpy().reshape(ratio.shape),
                                  np.broadcast_to(np.where(dropped[:, None], 0.0, 1 / 0.75), ratio.shape))
    layer.eval()
    assert layer(x) is x
    assert (nn.Dropout3d(1.0)(x).detach().numpy() == 0).all()


def test_dropout3d_of_another_rank_warns_and_drops_along_the_first_dim():
    tp.manual_seed(1)
    with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input"):
        y = F.dropout3d(tp.ones(20, 3, 4), 0.5).numpy()
    assert (y.reshape(20, -1).min(axis=1) == y.reshape(20, -1).max(axis=1)).all()


# --- autocast ----------------------------------------------------------------------------------------

def test_autocast_policy_matches_torch_cpu():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 4, 4, 4)), rng.standard_normal((3, 2, 2, 2, 2))
    calls = {
        "conv3d": lambda lib, F, x, w: F.conv3d(x.float(), w.float()),
        "conv_transpose3d": lambda lib, F, x, w: F.conv_transpose3d(x.float(), w.transpose(0, 1).float()),
        "max_pool3d": lambda lib, F, x, w: F.max_pool3d(x.bfloat16(), 2),
        "avg_pool3d": lambda lib, F, x, w: F.avg_pool3d(x.bfloat16(), 2),
        "adaptive_avg_pool3d": lambda lib, F, x, w: F.adaptive_avg_pool3d(x.bfloat16(), (2, 3, 1)),
    }
    for name, f in calls.items():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = f(torch, torch.nn.functional, torch.tensor(x), torch.tensor(w))
        with tp.autocast("cpu", dtype=tp.bfloat16):
            got = f(tp, F, tp.tensor(x), tp.tensor(w))
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), name
        # bfloat16 results of float32 sums: one bfloat16 ulp where the float32 values differ
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2.0 ** -7, atol=2.0 ** -7)


# --- errors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.conv3d(tp.ones(1, 4, 3, 3, 3), tp.ones(2, 3, 1, 1, 1)), ValueError,
     (r"conv3d: Given groups=1, weight of size \[2, 3, 1, 1, 1\], expected input\[1, 4, 3, 3, 3\] to have 3 "
      r"channels, but got 4 channels instead")),
    (lambda: F.conv3d(tp.ones(1, 4, 3, 3, 3), tp.ones(3, 2, 1, 1, 1), groups=2), ValueError,
     r"expected weight to be divisible by 2 at dimension 0"),
    (lambda: F.conv3d(tp.ones(1, 1, 2, 4, 4), tp.ones(1, 1, 3, 3, 3), padding=(0, 1, 1)), ValueError,
     (r"Calculated padded input size per channel: \(2 x 6 x 6\)\. Kernel size: \(3 x 3 x 3\)\. Kernel size "
      r"can't be greater than actual input size")),
    (lambda: F.conv3d(tp.ones(1, 1, 4, 4), tp.ones(1, 1, 3, 3)), ValueError, r"conv3d: expected a 5-D weight"),
    (lambda: F.conv3d(tp.ones(4, 4, 4), tp.ones(1, 1, 3, 3, 3)), ValueError,
     r"Expected 4D \(unbatched\) or 5D \(batched\) input to conv3d, but got input of size: \[4, 4, 4\]"),
    (lambda: F.conv3d(tp.ones(1, 1, 5, 5, 5), tp.ones(1, 1, 3, 3, 3), padding="same", stride=2), ValueError,
     r"padding='same' is not supported for strided convolutions"),
    (lambda: F.conv3d(tp.ones(1, 1, 5, 5, 5), tp.ones(1, 1, 3, 3, 3), stride=(1, 0, 1)), ValueError,
     r"non-positive stride is not supported"),
    (lambda: F.conv3d(tp.ones(1, 1, 5, 5, 5), tp.ones(1, 1, 3, 3, 3), padding=(1, 2)), ValueError,
     r"expected padding to be a single integer value or a list of 3 values"),
    (lambda: F.conv3d(tp.ones(1, 1, 5, 5, 5), tp.ones(1, 1, 3, 3, 3, dtype=tp.float64)), TypeError,
     r"conv3d: Input type \(float32\) and weight type \(float64\) should be the same"),
    (lambda: F.conv3d(tp.ones(1, 2, 5, 5, 5), tp.ones(3, 2, 3, 3, 3), tp.ones(2)), ValueError,
     r"expected bias to be 1-dimensional with 3 elements, but got bias of size \[2\]"),
    (lambda: F.conv_transpose3d(tp.ones(1, 3, 4, 4, 4), tp.ones(2, 2, 3, 3, 3)), ValueError,
     r"conv_transpose3d: Given transposed=1, weight of size \[2, 2, 3, 3, 3\], expected input\[1, 3, 4, 4, 4\]"),
    (lambda: F.conv_transpose3d(tp.ones(1, 2, 4, 4, 4), tp.ones(2, 2, 3, 3)), ValueError,
     r"expected a 5-D weight \(C_in, C_out/groups, kD, kH, kW\)"),
    (lambda: nn.ConvTranspose3d(2, 2, 3, padding_mode="reflect"), ValueError,
     r'Only "zeros" padding mode is supported for ConvTranspose3d'),
    (lambda: nn.Conv3d(3, 4, 2, groups=2), ValueError, r"in_channels must be divisible by groups"),
    (lambda: F.max_pool3d(tp.ones(1, 1, 5, 5, 5), 3, padding=2), ValueError,
     r"max_pool3d: pad should be at most half of kernel size"),
    (lambda: F.max_pool3d(tp.ones(1, 2, 5, 5, 5), (6, 2, 2)), ValueError,
     r"max_pool3d: Given input size: \(2x5x5x5\)\. Calculated output size: \(2x0x2x2\)\. Output size is too small"),
    (lambda: F.max_pool3d(tp.ones(1, 1, 4, 4, 4), (2, 2)), ValueError,
     r"expected kernel_size to be a single integer value or a list of 3 values"),
    (lambda: F.max_pool3d(tp.ones(1, 0, 4, 4, 4), 2), ValueError, r"only the batch may be empty"),
    (lambda: F.max_pool3d(tp.ones(4, 4, 4), 2), ValueError, r"Expected 4D \(unbatched\) or 5D \(batched\) input"),
    (lambda: F.max_pool3d(tp.ones(1, 1, 4, 4, 4, dtype=tp.bool), 2), TypeError,
     r"max_pool3d: not implemented for dtype bool"),
    (lambda: F.avg_pool3d(tp.ones(1, 1, 4, 4, 4, dtype=tp.int32), 2), TypeError,
     r"avg_pool3d: not implemented for dtype int32"),
    (lambda: F.avg_pool3d(tp.ones(1, 1, 4, 4, 4), 2, divisor_override=0), ValueError, r"divisor must be not zero"),
    (lambda: F.avg_pool3d(tp.ones(1, 1, 4, 4, 4), 2, stride=0), ValueError, r"stride should be greater than zero"),
    (lambda: F.adaptive_avg_pool3d(tp.ones(1, 1, 4, 4, 4, dtype=tp.int64), 2), TypeError,
     r"adaptive_avg_pool3d: not implemented for dtype int64"),
    (lambda: F.adaptive_avg_pool3d(tp.ones(1, 1, 4, 4, 4), (2, 2)), ValueError, r"output_size must be 3"),
    (lambda: F.adaptive_avg_pool3d(tp.ones(4, 4, 4), 2), ValueError, r"Expected 4D or 5D tensor"),
    (lambda: nn.BatchNorm3d(3)(tp.ones(2, 3, 4, 4)), ValueError, r"expected 5D input \(got 4D input\)"),
    (lambda: nn.InstanceNorm3d(3)(tp.ones(2, 3, 4)), ValueError, r"expected 4D or 5D input \(got 3D input\)"),
    (lambda: nn.Dropout3d(1.5), ValueError, r"dropout probability has to be between 0 and 1"),
])
def test_bad_input_is_rejected_with_a_clear_message(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- compiled on iree-cpu ---------------------------------------------------------------------------------

def _volume_model():
    tp.manual_seed(0)
    return nn.Sequential(
        nn.Conv3d(2, 4, 3, stride=(1, 2, 1), padding=1, groups=2), nn.BatchNorm3d(4), nn.ReLU(),
        nn.MaxPool3d(2, ceil_mode=True), nn.ConvTranspose3d(4, 3, (2, 3, 2), stride=2, padding=(0, 1, 0)),
        nn.InstanceNorm3d(3, affine=True), nn.AvgPool3d(3, 2, 1, count_include_pad=False),
        nn.AdaptiveAvgPool3d((2, 3, 1)), nn.Dropout3d(0.3),
    )


@pytest.mark.iree
def test_compiled_forward_and_backward_equal_eager():
    tp.compiler.reset()
    x_np = np.random.default_rng(5).standard_normal((2, 2, 5, 7, 4)).astype(np.float32)

    def run(compiled):
        model = _volume_model().eval()
        x = tp.tensor(x_np, requires_grad=True)

        def loss(x):
            out = model(x)
            return (out ** 2).sum(), out

        value, out = (tp.compile(loss, backend="iree-cpu", fullgraph=True) if compiled else loss)(x)
        value.backward()
        return [out.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]

    want = run(False)
    got = run(True)
    assert len(got) == len(want)
    # float32 kernels of another summation order
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    tp.compiler.reset()
