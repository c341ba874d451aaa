"""The vision and audio layers (``Conv1d``, transposed convolutions, 1-D and adaptive pooling,
upsampling, pixel shuffle, channel-wise dropout, instance normalization, padding and distance
layers) against PyTorch with the same weights: outputs, input and weight gradients, state dict
keys, errors, and compiled forward and backward passes on iree-cpu."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

torch = pytest.importorskip("torch")

#: (name, module factory over the library, input shapes, forward keyword arguments)
CASES = [
    ("conv1d", lambda lib: lib.nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 9)], {}),
    ("conv1d_unbatched", lambda lib: lib.nn.Conv1d(3, 2, 2, bias=False), [(3, 6)], {}),
    ("conv1d_same_groups_reflect",
     lambda lib: lib.nn.Conv1d(4, 6, 3, padding="same", dilation=2, groups=2, padding_mode="reflect"),
     [(2, 4, 7)], {}),
    ("conv_transpose1d", lambda lib: lib.nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
     [(2, 3, 5)], {}),
    ("conv_transpose1d_groups_dilated",
     lambda lib: lib.nn.ConvTranspose1d(4, 6, 2, stride=3, groups=2, dilation=2, bias=False), [(1, 4, 4)], {}),
    ("conv_transpose1d_unbatched", lambda lib: lib.nn.ConvTranspose1d(2, 3, 4, stride=2), [(2, 5)], {}),
    ("conv_transpose2d", lambda lib: lib.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     [(2, 3, 5, 4)], {}),
    ("conv_transpose2d_groups",
     lambda lib: lib.nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 0), groups=2, dilation=(2, 1)),
     [(1, 4, 5, 6)], {}),
    ("conv_transpose2d_padding_past_kernel",  # padding 2 > the kernel's reach 1: the output is cropped
     lambda lib: lib.nn.ConvTranspose2d(2, 2, 2, stride=3, padding=2, output_padding=(1, 0)), [(1, 2, 4, 3)], {}),
    ("conv_transpose2d_unbatched", lambda lib: lib.nn.ConvTranspose2d(3, 2, 2, stride=2), [(3, 3, 4)], {}),
    ("conv_transpose2d_output_size", lambda lib: lib.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
     [(1, 2, 4, 5)], {"output_size": (8, 10)}),
    ("max_pool1d", lambda lib: lib.nn.MaxPool1d(3, 2, 1, ceil_mode=True), [(2, 3, 8)], {}),
    ("max_pool1d_indices_unbatched", lambda lib: lib.nn.MaxPool1d(2, return_indices=True), [(3, 7)], {}),
    ("max_pool1d_dilated", lambda lib: lib.nn.MaxPool1d(2, 1, dilation=2), [(1, 2, 6)], {}),
    ("avg_pool1d", lambda lib: lib.nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False),
     [(2, 3, 8)], {}),
    ("avg_pool1d_unbatched", lambda lib: lib.nn.AvgPool1d(2), [(3, 7)], {}),
    ("adaptive_avg_pool1d", lambda lib: lib.nn.AdaptiveAvgPool1d(3), [(2, 3, 7)], {}),
    ("adaptive_avg_pool2d_uneven", lambda lib: lib.nn.AdaptiveAvgPool2d((3, None)), [(2, 3, 7, 5)], {}),
    ("adaptive_avg_pool2d_unbatched", lambda lib: lib.nn.AdaptiveAvgPool2d(4), [(3, 9, 6)], {}),
    ("adaptive_avg_pool2d_grow", lambda lib: lib.nn.AdaptiveAvgPool2d((5, 7)), [(1, 2, 3, 4)], {}),
    ("adaptive_max_pool1d", lambda lib: lib.nn.AdaptiveMaxPool1d(3, return_indices=True), [(2, 3, 7)], {}),
    ("adaptive_max_pool2d_uneven", lambda lib: lib.nn.AdaptiveMaxPool2d((3, 4), return_indices=True),
     [(2, 3, 7, 5)], {}),
    ("adaptive_max_pool2d_even_unbatched", lambda lib: lib.nn.AdaptiveMaxPool2d((2, None)), [(3, 4, 6)], {}),
    ("adaptive_max_pool2d_grow", lambda lib: lib.nn.AdaptiveMaxPool2d((5, 7), return_indices=True),
     [(1, 2, 3, 4)], {}),
    ("upsample_nearest", lambda lib: lib.nn.Upsample(scale_factor=2), [(2, 3, 4, 5)], {}),
    ("upsample_nearest_fractional", lambda lib: lib.nn.Upsample(scale_factor=(1.7, 0.6)), [(1, 2, 5, 7)], {}),
    ("upsample_nearest_exact", lambda lib: lib.nn.Upsample(size=(5, 3), mode="nearest-exact"), [(1, 2, 4, 7)], {}),
    ("upsample_bilinear", lambda lib: lib.nn.Upsample(size=(7, 9), mode="bilinear"), [(2, 3, 4, 5)], {}),
    ("upsample_bilinear_down", lambda lib: lib.nn.Upsample(scale_factor=0.6, mode="bilinear"), [(1, 2, 7, 9)], {}),
    ("upsample_bilinear_align_corners",
     lambda lib: lib.nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True), [(1, 2, 5, 4)], {}),
    ("upsample_linear", lambda lib: lib.nn.Upsample(scale_factor=2.5, mode="linear"), [(2, 3, 5)], {}),
    ("upsample_nearest_1d", lambda lib: lib.nn.Upsample(size=11), [(2, 3, 5)], {}),
    ("upsampling_bilinear2d", lambda lib: lib.nn.UpsamplingBilinear2d(scale_factor=2), [(1, 2, 3, 4)], {}),
    ("pixel_shuffle", lambda lib: lib.nn.PixelShuffle(2), [(2, 8, 3, 5)], {}),
    ("pixel_shuffle_unbatched", lambda lib: lib.nn.PixelShuffle(3), [(9, 2, 3)], {}),
    ("pixel_unshuffle", lambda lib: lib.nn.PixelUnshuffle(3), [(1, 2, 6, 9)], {}),
    ("dropout1d_eval", lambda lib: lib.nn.Dropout1d(0.4).eval(), [(2, 3, 5)], {}),
    ("dropout2d_eval", lambda lib: lib.nn.Dropout2d(0.4).eval(), [(2, 3, 4, 5)], {}),
    ("instance_norm1d", lambda lib: lib.nn.InstanceNorm1d(3), [(2, 3, 7)], {}),
    ("instance_norm2d_affine", lambda lib: lib.nn.InstanceNorm2d(3, affine=True), [(2, 3, 4, 5)], {}),
    ("instance_norm2d_unbatched", lambda lib: lib.nn.InstanceNorm2d(3, affine=True), [(3, 4, 5)], {}),
    ("instance_norm2d_running_stats",
     lambda lib: lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True), [(2, 3, 4, 5)], {}),
    ("instance_norm1d_running_stats_eval",
     lambda lib: lib.nn.InstanceNorm1d(3, track_running_stats=True).eval(), [(2, 3, 6)], {}),
    ("zero_pad2d", lambda lib: lib.nn.ZeroPad2d((1, 2, 0, 3)), [(2, 3, 4, 5)], {}),
    ("constant_pad1d", lambda lib: lib.nn.ConstantPad1d(2, 1.5), [(2, 3, 4)], {}),
    ("constant_pad2d_crop", lambda lib: lib.nn.ConstantPad2d((1, -1, 2, 0), -1.0), [(2, 3, 4)], {}),
    ("reflection_pad1d", lambda lib: lib.nn.ReflectionPad1d((3, 1)), [(2, 3, 5)], {}),
    ("reflection_pad2d", lambda lib: lib.nn.ReflectionPad2d(2), [(1, 2, 4, 5)], {}),
    ("replication_pad1d", lambda lib: lib.nn.ReplicationPad1d((0, 4)), [(3, 5)], {}),
    ("replication_pad2d", lambda lib: lib.nn.ReplicationPad2d((1, 2, 3, 0)), [(2, 3, 4)], {}),
    ("circular_pad2d", lambda lib: lib.nn.CircularPad2d((1, 2, 2, 1)), [(1, 2, 3, 4)], {}),
    ("cosine_similarity", lambda lib: lib.nn.CosineSimilarity(), [(4, 5, 2), (4, 5, 2)], {}),
    ("cosine_similarity_broadcast", lambda lib: lib.nn.CosineSimilarity(dim=-1, eps=0.5),
     [(3, 5), (1, 5)], {}),
    ("pairwise_distance", lambda lib: lib.nn.PairwiseDistance(), [(4, 5), (4, 5)], {}),
    ("pairwise_distance_p1_keepdim", lambda lib: lib.nn.PairwiseDistance(p=1.0, keepdim=True),
     [(4, 5), (1, 5)], {}),
    ("pairwise_distance_p3", lambda lib: lib.nn.PairwiseDistance(p=3.0, eps=0.0), [(2, 3, 4), (2, 3, 4)], {}),
]


def _pair(name: str):
    """The PyTorch module and ours, in float64, with PyTorch's weights loaded into ours."""
    factory = {c[0]: c[1] for c in CASES}[name]
    torch.manual_seed(0)
    theirs = factory(torch).double()
    ours = factory(tp).to(tp.float64)
    ours.load_state_dict(theirs.state_dict())
    ours.train(theirs.training)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _first(out):
    return out[0] if isinstance(out, tuple) else out


# float64 on both sides: results agree to rounding (sums in another order); gradients of the
# adaptive pools and pads accumulate a few more terms
RTOL, ATOL = 1e-10, 1e-12


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_layer_matches_torch_forward_and_backward(name):
    _, _, shapes, kwargs = next(c for c in CASES if c[0] == name)
    ours, theirs = _pair(name)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    arrays = [rng.standard_normal(s) for s in shapes]
    xs_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    xs = [tp.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = theirs(*xs_t, **kwargs)
        got = ours(*xs, **kwargs)
    assert isinstance(got, tuple) == isinstance(want, tuple)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert tuple(g.shape) == tuple(w.shape) and g.dtype.name == str(w.dtype).removeprefix("torch.")
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=RTOL, atol=ATOL)
    upstream = rng.standard_normal(tuple(_first(want).shape))
    (_first(want) * torch.tensor(upstream)).sum().backward()
    (_first(got) * tp.tensor(upstream)).sum().backward()
    for x, x_t in zip(xs, xs_t):
        np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=RTOL, atol=ATOL)
    params = dict(theirs.named_parameters())
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), params[key].grad.numpy(), rtol=RTOL, atol=ATOL)
    for key, b in theirs.named_buffers():  # running statistics moved alike
        np.testing.assert_allclose(dict(ours.named_buffers())[key].numpy(), b.numpy(), rtol=RTOL, atol=ATOL)


def test_float32_layers_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1), torch.nn.InstanceNorm2d(3),
                                 torch.nn.Upsample(size=(9, 7), mode="bilinear"), torch.nn.AdaptiveMaxPool2d(4))
    ours = nn.Sequential(nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1), nn.InstanceNorm2d(3),
                         nn.Upsample(size=(9, 7), mode="bilinear"), nn.AdaptiveMaxPool2d(4))
    ours.load_state_dict(theirs.state_dict())
    got = ours(tp.tensor(x)).detach()
    assert got.dtype is tp.float32
    # float32 sums in another order, then normalized: a few ulps of unit-sized values
    np.testing.assert_allclose(got.numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=2e-6)


# --- construction: parameters, their shapes and initialization ------------------------------------

@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Conv1d(4, 6, 3, groups=2),
    lambda lib: lib.nn.ConvTranspose1d(4, 6, 3, groups=2, bias=False),
    lambda lib: lib.nn.ConvTranspose2d(4, 6, (3, 2), groups=2),
    lambda lib: lib.nn.InstanceNorm2d(5, affine=True, track_running_stats=True),
])
def test_parameters_have_torch_names_shapes_and_init_bounds(make):
    ours, theirs = make(tp), make(torch)
    want = {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == want
    assert repr(ours) == repr(theirs)
    if hasattr(theirs, "kernel_size"):
        fan_in = theirs.weight.shape[1] * int(np.prod(theirs.kernel_size))
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(ours.weight.detach().numpy()).max() <= bound
        assert np.abs(ours.weight.detach().numpy()).max() > bound / 2
        assert ours.transposed == theirs.transposed and ours.output_padding == theirs.output_padding
        assert (ours.kernel_size, ours.stride, ours.padding, ours.dilation) == \
            (theirs.kernel_size, theirs.stride, theirs.padding, theirs.dilation)
    else:
        assert ours.weight.detach().numpy().tolist() == [1.0] * 5 and ours.running_var.numpy().tolist() == [1.0] * 5


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Upsample(scale_factor=2, mode="bilinear"), lambda lib: lib.nn.Upsample(size=(3, 4)),
    lambda lib: lib.nn.PixelShuffle(2), lambda lib: lib.nn.MaxPool1d(3), lambda lib: lib.nn.AvgPool1d(3, 2),
    lambda lib: lib.nn.AdaptiveMaxPool2d((2, 3)), lambda lib: lib.nn.Dropout2d(0.2),
    lambda lib: lib.nn.ZeroPad2d((1, 2, 3, 4)), lambda lib: lib.nn.ConstantPad1d(2, 3.5),
    lambda lib: lib.nn.ReflectionPad2d(1), lambda lib: lib.nn.InstanceNorm1d(4),
])
def test_repr_matches_torch(make):
    assert repr(make(tp)) == repr(make(torch))


# --- channel-wise dropout ---------------------------------------------------------------------------

@pytest.mark.parametrize("cls, shape", [(nn.Dropout1d, (8, 16, 5)), (nn.Dropout1d, (16, 5)),
                                        (nn.Dropout2d, (8, 16, 3, 4))])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(cls, shape):
    tp.manual_seed(0)
    layer = cls(0.25)
    x = tp.tensor(np.random.default_rng(0).uniform(1, 2, shape), requires_grad=True)
    y = layer(x)
    channels = y.detach().numpy().reshape(-1, shape[-1] if cls is nn.Dropout1d else shape[-1] * shape[-2])
    ratio = channels / x.detach().numpy().reshape(channels.shape)
    dropped = (ratio == 0).all(axis=1)
    kept = np.isclose(ratio, 1 / 0.75, rtol=1e-12).all(axis=1)
    assert (dropped | kept).all() and 0 < dropped.sum() < len(dropped)
    y.sum().backward()  # the gradient is the same mask
    np.testing.assert_array_equal(x.grad.numpy().reshape(ratio.shape),
                                  np.broadcast_to(np.where(dropped[:, None], 0.0, 1 / 0.75), ratio.shape))
    layer.eval()
    assert layer(x) is x
    assert (cls(1.0)(x).detach().numpy() == 0).all()


def test_dropout2d_of_a_3d_input_drops_channels_of_n_c_l_with_a_warning():
    tp.manual_seed(1)
    x = tp.ones(6, 20, 3)
    with pytest.warns(UserWarning, match="dropout2d: Received a 3D input"):
        y = F.dropout2d(x, 0.5).numpy()
    assert (y.min(axis=2) == y.max(axis=2)).all()


# --- functional forms not reached through the modules -------------------------------------------------

def test_functional_forms_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 6))
    w = rng.standard_normal((3, 2, 2, 3))
    tf = torch.nn.functional
    pairs = [
        (F.conv_transpose2d(tp.tensor(x), tp.tensor(w), stride=2, output_padding=1),
         tf.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2, output_padding=1)),
        (F.interpolate(tp.tensor(x), scale_factor=1.5, mode="bilinear", recompute_scale_factor=True),
         tf.interpolate(torch.tensor(x), scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)),
        (F.interpolate(tp.tensor(x), size=(3, 4), mode="area"), tf.interpolate(torch.tensor(x), size=(3, 4), mode="area")),
        (F.interpolate(tp.tensor(x[:, :, None]), size=(2, 3, 4), mode="trilinear"),
         tf.interpolate(torch.tensor(x[:, :, None]), size=(2, 3, 4), mode="trilinear")),
        (F.interpolate(tp.tensor((x * 9 + 30).astype(np.uint8)), scale_factor=2),
         tf.interpolate(torch.tensor((x * 9 + 30).astype(np.uint8)), scale_factor=2)),
        (F.instance_norm(tp.tensor(x), use_input_stats=False, running_mean=tp.ones(3), running_var=tp.full((3,), 2.0)),
         tf.instance_norm(torch.tensor(x), use_input_stats=False, running_mean=torch.ones(3), running_var=torch.full((3,), 2.0))),
    ]
    for got, want in pairs:
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.warns(UserWarning, match="upsample is deprecated"):
        up = F.upsample(tp.tensor(x), scale_factor=2)
    np.testing.assert_array_equal(up.numpy(), F.interpolate(tp.tensor(x), scale_factor=2).numpy())


# --- errors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.conv_transpose2d(tp.ones(1, 3, 4, 4), tp.ones(2, 2, 3, 3)), ValueError,
     (r"conv_transpose2d: Given transposed=1, weight of size \[2, 2, 3, 3\], expected input\[1, 3, 4, 4\] to "
      r"have 2 channels, but got 3 channels instead")),
    (lambda: F.conv_transpose2d(tp.ones(1, 2, 4, 4), tp.ones(2, 2, 3, 3), stride=2, output_padding=2), ValueError,
     r"output padding must be smaller than either stride or dilation"),
    (lambda: F.conv_transpose1d(tp.ones(1, 2, 2), tp.ones(2, 1, 2), padding=2), ValueError,
     r"Calculated output size per channel: \(-1\)\. Output size is too small"),
    (lambda: F.conv_transpose1d(tp.ones(1, 2, 4), tp.ones(2, 1, 2, 2)), ValueError, r"expected a 3-D weight"),
    (lambda: F.conv_transpose2d(tp.ones(1, 2, 4, 4), tp.ones(2, 1, 2, 2), groups=0), ValueError,
     r"non-positive groups"),
    (lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"), ValueError,
     r'Only "zeros" padding mode is supported for ConvTranspose2d'),
    (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2)(tp.ones(1, 2, 4, 4), output_size=(12, 12)), ValueError,
     r"requested an output size of \[12, 12\], but valid sizes range from 9 to 10"),
    (lambda: nn.Conv1d(3, 4, 2, groups=2), ValueError, r"in_channels must be divisible by groups"),
    (lambda: F.max_pool1d(tp.ones(2, 3, 4, 5), 2), ValueError,
     r"Expected 2D \(unbatched\) or 3D \(batched\) input to max_pool1d"),
    (lambda: F.avg_pool1d(tp.ones(1, 2, 5), 2, padding=2), ValueError, r"pad should be at most half of kernel size"),
    (lambda: F.adaptive_max_pool2d(tp.ones(1, 2, 4), (2, 2, 2)), ValueError, r"output_size must be 2"),
    (lambda: F.adaptive_max_pool1d(tp.ones(1, 2, 3, 4), 2), ValueError, r"Expected 2D or 3D tensor"),
    (lambda: F.adaptive_max_pool2d(tp.ones(1, 0, 4, 4), 2), ValueError, r"non-zero size for non-batch"),
    (lambda: F.interpolate(tp.ones(1, 2, 4, 4), size=3, scale_factor=2), ValueError,
     r"only one of size or scale_factor should be defined"),
    (lambda: F.interpolate(tp.ones(1, 2, 4, 4)), ValueError, r"either size or scale_factor should be defined"),
    (lambda: F.interpolate(tp.ones(1, 2, 4), scale_factor=2, mode="bilinear"), ValueError,
     r"Got 3D input, but bilinear mode needs 4D input"),
    (lambda: F.interpolate(tp.ones(1, 2, 4), scale_factor=2, align_corners=True), ValueError,
     r"align_corners option can only be set with the interpolating modes"),
    (lambda: F.interpolate(tp.ones(1, 2, 4), scale_factor=2, mode="bicubic"), ValueError, r"unsupported mode"),
    (lambda: F.interpolate(tp.ones(1, 2, 4, 4), size=(2, 3, 4)), ValueError,
     r"Input and output must have the same number of spatial dimensions"),
    (lambda: F.interpolate(tp.ones(1, 2, 4, 4, dtype=tp.int64), scale_factor=2, mode="bilinear"), TypeError,
     r"bilinear mode is not implemented for dtype int64"),
    (lambda: F.pixel_shuffle(tp.ones(1, 6, 2, 2), 2), ValueError,
     r"input.size\(-3\)=6 is not divisible by 4"),
    (lambda: F.pixel_shuffle(tp.ones(4, 2), 2), ValueError, r"at least 3 dimensions"),
    (lambda: F.pixel_unshuffle(tp.ones(1, 1, 4, 5), 2), ValueError, r"width to be divisible by downscale_factor"),
    (lambda: F.pixel_shuffle(tp.ones(1, 4, 2, 2), 0), ValueError, r"upscale_factor must be greater than 0"),
    (lambda: F.dropout1d(tp.ones(2, 3, 4, 5)), ValueError, r"dropout1d: Expected 2D or 3D input"),
    (lambda: F.dropout2d(tp.ones(2, 3), 0.5), ValueError, r"dropout2d: Expected 3D or 4D input"),
    (lambda: nn.Dropout2d(1.5), ValueError, r"dropout probability has to be between 0 and 1"),
    (lambda: nn.InstanceNorm2d(3)(tp.ones(2, 3, 4)[0, 0]), ValueError, r"expected 3D or 4D input \(got 1D input\)"),
    (lambda: nn.InstanceNorm1d(3, affine=True)(tp.ones(2, 4, 5)), ValueError,
     r"expected input's size at dim=1 to match num_features \(3\), but got: 4"),
    (lambda: F.instance_norm(tp.ones(2, 3, 1)), ValueError, r"Expected more than 1 spatial element"),
    (lambda: F.instance_norm(tp.ones(2, 3, 4), use_input_stats=False), ValueError,
     r"Expected running_mean and running_var to be defined"),
    (lambda: nn.ZeroPad2d((1, 2, 3)), ValueError, r"padding must be an int or a tuple of 4 ints"),
    (lambda: nn.ReflectionPad2d(4)(tp.ones(1, 2, 3, 3)), ValueError, r"Padding size should be less than"),
    (lambda: F.cosine_similarity(tp.ones(2, 3), tp.ones(3, 2)), ValueError, r"broadcast"),
    (lambda: F.pairwise_distance(tp.ones(2, 3, dtype=tp.int64), tp.ones(2, 3)), TypeError,
     r"pairwise_distance: expected floating point inputs"),
])
def test_bad_input_is_rejected_with_a_clear_message(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- compiled on iree-cpu ---------------------------------------------------------------------------------

def _vision_model():
    tp.manual_seed(0)
    return nn.Sequential(
        nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1, groups=1),
        nn.InstanceNorm2d(4, affine=True),
        nn.ReplicationPad2d((1, 0, 2, 1)), nn.ReflectionPad2d(1), nn.ZeroPad2d((0, 1, 1, 0)),
        nn.AdaptiveMaxPool2d((5, 6)),
        nn.Upsample(scale_factor=2, mode="bilinear"),
        nn.PixelUnshuffle(2), nn.Conv2d(16, 8, 1), nn.PixelShuffle(2),
        nn.Upsample(size=(7, 9)), nn.AdaptiveAvgPool2d((3, 4)), nn.Dropout2d(0.3),
    )


def _audio_model():
    tp.manual_seed(0)
    return nn.Sequential(
        nn.Conv1d(2, 4, 3, padding=1), nn.ConvTranspose1d(4, 3, 4, stride=3, padding=1, output_padding=2),
        nn.MaxPool1d(3, 2, 1, ceil_mode=True), nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False),
        nn.ConstantPad1d((2, 1), 0.5), nn.AdaptiveMaxPool1d(5), nn.Upsample(scale_factor=2.5, mode="linear"),
        nn.InstanceNorm1d(3, affine=True, track_running_stats=True), nn.Dropout1d(0.2),
        nn.AdaptiveAvgPool1d(3),
    )


@pytest.mark.iree
@pytest.mark.parametrize("make, shape", [(_vision_model, (2, 3, 5, 4)), (_audio_model, (2, 2, 7))])
def test_compiled_forward_equals_eager(make, shape):
    tp.compiler.reset()
    model = make().eval()
    x = tp.tensor(np.random.default_rng(3).standard_normal(shape).astype(np.float32))
    with tp.no_grad():
        want = model(x).numpy()
        got = tp.compile(model, backend="iree-cpu", fullgraph=True)(x).numpy()
    # float32 kernels of another summation order
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    tp.compiler.reset()


@pytest.mark.iree
def test_compiled_distances_and_indices_equal_eager():
    tp.compiler.reset()

    def fn(a, b):
        values, indices = F.adaptive_max_pool1d(a, 3, return_indices=True)
        return F.cosine_similarity(a, b, dim=-1), F.pairwise_distance(a, b, p=3.0), values, indices

    rng = np.random.default_rng(4)
    a, b = (tp.tensor(rng.standard_normal((2, 3, 5)).astype(np.float32)) for _ in range(2))
    want = fn(a, b)
    got = tp.compile(fn, backend="iree-cpu", fullgraph=True)(a, b)
    for g, w in zip(got, want):
        assert g.dtype is w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    tp.compiler.reset()


@pytest.mark.iree
def test_compiled_backward_equals_eager():
    tp.compiler.reset()
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)

    def grads(compiled):
        model = _vision_model().eval()
        x = tp.tensor(x_np, requires_grad=True)

        def loss(x):
            return (model(x) ** 2).sum()

        (tp.compile(loss, backend="iree-cpu", fullgraph=True) if compiled else loss)(x).backward()
        return [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]

    want = grads(False)
    got = grads(True)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    tp.compiler.reset()
