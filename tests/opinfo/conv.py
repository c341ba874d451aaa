"""Convolution, pooling and padding cases: conv1d/conv2d over strides, paddings, dilations and
groups; max/avg pooling with ceil mode and indices; adaptive average pooling; pad in every mode.

The expectations are direct loops over output positions, independent of the im2col and
strided-window implementations they check.
"""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tensorplay.ops import conv as _tp_conv
from tests.opinfo import ALL_DTYPES, FLOATS, INTS, ErrorCase, OpInfo, Sample, make_arg

#: sums of many products: half types round inputs and the result
#: PyTorch's CPU kernels convolve int64 at any dilation, other integer types only undilated
CONV_INTS = (tp.int64,)


def F(lib, name):  # noqa: N802 - reads like PyTorch's F
    """``lib.nn.functional.<name>``, or this family's function where tensorplay's nn does not
    re-export it (yet)."""
    fn = getattr(lib.nn.functional, name, None)
    return fn if fn is not None else getattr(_tp_conv, name)


def _f(a):
    return np.asarray(a, dtype=np.float64)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v) * (2 if len(v) == 1 else 1)


# --- conv --------------------------------------------------------------------------------

def _conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    x, w = _f(x), _f(w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    kh, kw = w.shape[2:]
    if padding == "valid":
        padding = 0
    if padding == "same":
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pads = ((th // 2, th - th // 2), (tw // 2, tw - tw // 2))
    else:
        ph, pw = _pair(padding)
        pads = ((ph, ph), (pw, pw))
    x = np.pad(x, ((0, 0), (0, 0)) + pads)
    n, c, h, wd = x.shape
    o = w.shape[0]
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    cg, og = c // groups, o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for i in range(oh):
            for j in range(ow):
                patch = xs[:, :, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("nckl,ockl->no", patch, ws)
    if b is not None:
        out += _f(b)[None, :, None, None]
    return out[0] if unbatched else out


# (input shape, weight shape, with bias, kwargs)
_CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), True, {}),
    ((2, 3, 7, 6), (4, 3, 3, 3), False, dict(stride=2, padding=1)),
    ((1, 4, 8, 8), (6, 2, 3, 2), True, dict(stride=(2, 1), padding=(1, 0), groups=2)),
    ((1, 4, 9, 9), (4, 1, 3, 3), False, dict(padding=2, dilation=2, groups=4)),  # depthwise
    ((2, 2, 6, 7), (3, 2, 2, 3), True, dict(padding="same")),
    ((2, 2, 6, 7), (3, 2, 3, 2), False, dict(padding="same", dilation=(2, 1))),
    ((2, 2, 6, 7), (3, 2, 3, 3), True, dict(padding="valid", stride=(1, 3))),
    ((3, 5, 5), (2, 3, 3, 3), True, dict(padding=1)),  # unbatched CHW
    ((2, 3, 4, 4), (5, 3, 1, 1), True, {}),  # 1x1
    ((2, 3, 4, 4), (2, 3, 4, 4), False, {}),  # kernel equals input
    ((0, 3, 4, 4), (2, 3, 3, 3), True, {}),  # empty batch
    ((1, 6, 10, 10), (6, 3, 3, 3), True, dict(stride=3, padding=2, dilation=(1, 2), groups=2)),
    # one input channel per group: lowered as a sum over the kernel taps
    ((2, 1, 7, 6), (3, 1, 3, 3), True, dict(padding=1)),
    ((2, 1, 9, 8), (4, 1, 3, 2), False, dict(stride=2, padding=(1, 0), dilation=(1, 2))),
    ((1, 3, 6, 6), (6, 1, 3, 3), True, dict(groups=3, padding=1)),  # depthwise, two filters each
    ((1, 3, 7, 7), (3, 1, 3, 3), True, dict(groups=3, stride=2)),  # strided depthwise: a convolution
    ((0, 1, 5, 5), (2, 1, 3, 3), True, {}),
]


def _conv_samples(cases, spatial):
    def samples(rng, dtype):
        out = []
        for xs, ws, bias, kw in cases:
            x = make_arg(rng, xs, dtype, low=-2, high=3)
            w = make_arg(rng, ws, dtype, low=-2, high=3)
            args = (x, w, make_arg(rng, (ws[0],), dtype, low=-2, high=3)) if bias else (x, w)
            out.append(Sample(args, dict(kw), desc=f"{xs} * {ws} {kw}{' bias' if bias else ''}"))
        return out

    return samples


def _conv1d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    x, w = _f(x), _f(w)
    pad = padding if isinstance(padding, str) else (0, _pair(padding)[0])
    out = _conv2d_ref(x[..., None, :], w[:, :, None, :], b, (1, _pair(stride)[0]), pad,
                      (1, _pair(dilation)[0]), groups)
    return out[..., 0, :]


_CONV1D = [
    ((2, 3, 9), (4, 3, 3), True, {}),
    ((3, 9), (4, 3, 3), False, dict(padding="same", dilation=2)),
    ((2, 4, 9), (4, 2, 2), True, dict(groups=2, stride=2, padding=1)),
]

# --- pooling -----------------------------------------------------------------------------


def _pool_out(size, k, s, p, d, ceil_mode):
    span = (size + 2 * p - d * (k - 1) - 1) / s
    out = (math.ceil(span) if ceil_mode else math.floor(span)) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _max_pool2d_ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                    return_indices=False):
    x = np.asarray(x)
    unbatched = x.ndim == 3
    x = _f(x[None] if unbatched else x)
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel_size), _pair(padding), _pair(dilation)
    sh, sw = _pair(stride if stride else kernel_size)
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, ph, dh, ceil_mode), _pool_out(w, kw, sw, pw, dw, ceil_mode)
    out, idx = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * sh - ph, i * sh - ph + dh * kh, dh) if 0 <= r < h]
            cols = [q for q in range(j * sw - pw, j * sw - pw + dw * kw, dw) if 0 <= q < w]
            window = x[:, :, rows][:, :, :, cols].reshape(n, c, len(rows) * len(cols))
            first = np.argmax(window, axis=-1)  # the first maximum...
            k = window.shape[-1]
            last_nan = k - 1 - np.argmax(np.isnan(window[..., ::-1]), axis=-1)
            first = np.where(np.isnan(window).any(axis=-1), last_nan, first)  # ...or PyTorch's last NaN
            out[:, :, i, j] = np.max(window, axis=-1)
            idx[:, :, i, j] = np.array(rows)[first // len(cols)] * w + np.array(cols)[first % len(cols)]
    if unbatched:
        out, idx = out[0], idx[0]
    return (out, idx) if return_indices else out


def _avg_pool2d_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
    x = np.asarray(x)
    integer = x.dtype.kind in "iu"
    unbatched = x.ndim == 3
    x = _f(x[None] if unbatched else x)
    (kh, kw), (ph, pw) = _pair(kernel_size), _pair(padding)
    sh, sw = _pair(stride if stride else kernel_size)
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, ph, 1, ceil_mode), _pool_out(w, kw, sw, pw, 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - ph, j * sw - pw
            r1, c1 = min(r0 + kh, h + ph), min(c0 + kw, w + pw)
            whole = (r1 - r0) * (c1 - c0)
            r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
            total = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3))
            divisor = divisor_override or (whole if count_include_pad else (r1 - r0) * (c1 - c0))
            out[:, :, i, j] = np.trunc(total / divisor) if integer else total / divisor
    return out[0] if unbatched else out


# (input shape, kwargs)
_MAX_POOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 7, 7), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True)),
    ((1, 2, 9, 9), dict(kernel_size=3, stride=2, padding=1, dilation=2)),
    ((1, 2, 6, 7), dict(kernel_size=2, stride=3, ceil_mode=True)),
    ((1, 1, 5, 5), dict(kernel_size=4, stride=2, padding=2, ceil_mode=True)),
    ((3, 5, 5), dict(kernel_size=2, stride=[])),  # unbatched; an empty stride means kernel_size
    ((0, 2, 4, 4), dict(kernel_size=2)),
    ((2, 3, 7, 9), dict(kernel_size=(2, 3))),  # windows tile all but the last row
]

_AVG_POOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ((1, 2, 7, 7), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), divisor_override=4)),
    ((1, 2, 6, 7), dict(kernel_size=2, stride=3, ceil_mode=True)),
    ((1, 1, 5, 5), dict(kernel_size=4, stride=2, padding=2, ceil_mode=True)),
    ((3, 5, 5), dict(kernel_size=(3, 2), stride=1)),  # unbatched
]


def _pool_samples(cases, nan=False):
    def samples(rng, dtype):
        out = []
        for shape, kw in cases:
            x = make_arg(rng, shape, dtype)
            out.append(Sample((x,), dict(kw), desc=f"{shape} {kw}"))
        if dtype.is_integer:
            # ties: the index of the first maximum wins
            out.append(Sample((make_arg(rng, (1, 2, 6, 6), dtype, low=0, high=2),),
                              dict(kernel_size=3, stride=2, padding=1), desc="ties"))
        if nan and dtype.is_floating_point:
            x = make_arg(rng, (1, 2, 6, 6), dtype)
            x[0, 0, 1, 1] = x[0, 1, 4, 3] = np.nan
            x[0, 1, 0, :] = -np.inf
            out.append(Sample((x,), dict(kernel_size=3, stride=2, padding=1), desc="nan and -inf"))
        return out

    return samples


def _adaptive_ref(x, output_size):
    x = _f(x)
    h, w = x.shape[-2:]
    oh, ow = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    oh, ow = oh if oh is not None else h, ow if ow is not None else w
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
            c0, c1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[..., i, j] = x[..., r0:r1, c0:c1].mean(axis=(-2, -1))
    return out


_ADAPTIVE = [((2, 3, 8, 6), (4, 3)), ((2, 3, 7, 6), (3, 4)), ((3, 5, 5), 2), ((1, 2, 5, 7), (3, None)),
             ((1, 2, 5, 7), 1), ((1, 2, 5, 7), (0, 2))]


def _adaptive_samples(rng, dtype):
    return [Sample((make_arg(rng, s, dtype),), dict(output_size=o), desc=f"{s} -> {o}")
            for s, o in _ADAPTIVE]


# --- pad ---------------------------------------------------------------------------------

def _pad_ref(x, pad, mode="constant", value=None):
    """Each output element looked up through the source index of its dim."""
    x = np.asarray(x)
    integer = x.dtype.kind in "iu"
    if x.dtype == np.bool_:
        fill = bool(value)
    elif integer:
        fill = math.trunc(value or 0)
    else:
        fill = value or 0.0
    out = _f(x)
    valid = np.ones(out.shape, bool)
    for k in range(len(pad) // 2):
        dim = x.ndim - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        n = out.shape[dim]
        if mode == "circular":
            kept = np.arange(max(-lo, 0), n - max(-hi, 0))
            t = np.arange(len(kept) + max(lo, 0) + max(hi, 0)) - max(lo, 0)
            src, ok = kept[t % len(kept)], np.ones(len(t), bool)
        else:
            u = np.arange(n + lo + hi) - lo
            ok = (u >= 0) & (u < n)
            if mode == "reflect":
                src = np.abs(u)
                src = np.where(src >= n, 2 * (n - 1) - src, src)
            elif mode == "replicate":
                src = np.clip(u, 0, n - 1)
            else:
                src = np.clip(u, 0, max(n - 1, 0))
            if mode != "constant":
                ok = np.ones(len(u), bool)
        if n:
            out = np.take(out, src, axis=dim)
        else:
            out = np.zeros(out.shape[:dim] + (len(src),) + out.shape[dim + 1:])
        valid = np.take(valid, src, axis=dim) if n else np.zeros(out.shape, bool)
        shape = [1] * x.ndim
        shape[dim] = len(ok)
        valid = valid & ok.reshape(shape)
    out = np.where(valid, out, fill)
    return out.astype(bool) if x.dtype == np.bool_ else out


_PAD_CONSTANT = [
    ((2, 3, 4), (1, 2), None),
    ((2, 3, 4), (2, 1, 0, 3), 1.5),
    ((2, 3, 4), (1, 1, 1, 1, 1, 1), -2.0),  # every dim
    ((2, 3, 4), (-1, 2, 1, -2), None),  # negative pads crop
    ((2, 3, 4), (-2, -2), None),  # crops to nothing
    ((2, 1), (-1, 1), 1.5),  # crops all of a dim from the front, then pads it back
    ((3,), (0, 0), None),
    ((), (), None),
    ((2, 0, 3), (1, 1, 1, 0), 2.0),
]

_PAD_MODES = [
    ((2, 3, 4), (2, 1)),
    ((2, 3, 4), (3, 3)),  # reflect: up to size - 1
    ((2, 3, 4), (2, 1, 1, 2)),
    ((1, 2, 3, 4), (1, 2, 2, 1)),
    ((1, 2, 3, 4), (1, 1, 1, 1, 0, 1)),  # three dims of a 4-d tensor
    ((3, 4), (-1, 2)),
    ((2, 3, 4), (2, -1, -1, 1)),
]


def _pad_constant_samples(rng, dtype):
    return [Sample((make_arg(rng, s, dtype),), dict(pad=p, value=v), desc=f"{s} {p} value={v}")
            for s, p, v in _PAD_CONSTANT]


def _pad_mode_samples(mode):
    def samples(rng, dtype):
        out = []
        for s, p in _PAD_MODES:
            widest = [max(p[2 * k], p[2 * k + 1]) for k in range(len(p) // 2)]
            if mode == "reflect" and any(wide >= s[-1 - k] for k, wide in enumerate(widest)):
                continue
            if mode == "circular" and p == (3, 3):
                continue
            out.append(Sample((make_arg(rng, s, dtype),), dict(pad=p, mode=mode), desc=f"{s} {p}"))
        return out

    return samples


def _pad_fn(lib, x, **kw):
    return F(lib, "pad")(x, **kw)


# --- transposed convolution, 1-D and adaptive max pooling, resampling, pixel shuffle ------

def _conv_transpose2d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input element's products with the kernel added into the output, then cropped."""
    x, w = _f(x), _f(w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = map(_pair, (stride, padding, output_padding, dilation))
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full = np.zeros((n, og * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph, (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for q in range(kw):
                        full[:, g * og:(g + 1) * og, i * sh + a * dh, j * sw + q * dw] += np.einsum(
                            "nc,co->no", x[:, g * cg:(g + 1) * cg, i, j], w[g * cg:(g + 1) * cg, :, a, q])
    out = full[:, :, ph:full.shape[2] - ph, pw:full.shape[3] - pw]
    if b is not None:
        out = out + _f(b)[None, :, None, None]
    return out[0] if unbatched else out


def _conv_transpose1d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    one = (lambda v: (1, _pair(v)[0]))
    zero = (lambda v: (0, _pair(v)[0]))
    out = _conv_transpose2d_ref(_f(x)[..., None, :], _f(w)[:, :, None, :], b, one(stride), zero(padding),
                                zero(output_padding), groups, one(dilation))
    return out[..., 0, :]


# (input shape, weight shape, with bias, kwargs)
_CONV_TRANSPOSE2D = [
    ((2, 3, 4, 5), (3, 2, 3, 3), True, dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 4), (4, 3, 2, 3), False, dict(stride=(1, 2), padding=(1, 0), groups=2, dilation=(2, 1))),
    ((2, 3, 3), (2, 2, 2, 2), True, dict(stride=3, padding=2, output_padding=(1, 2))),  # unbatched, cropped
]


def _conv_transpose_samples(cases):
    def samples(rng, dtype):
        out = []
        for xs, ws, bias, kw in cases:
            x = make_arg(rng, xs, dtype, low=-2, high=3)
            w = make_arg(rng, ws, dtype, low=-2, high=3)
            channels = ws[1] * kw.get("groups", 1)
            args = (x, w, make_arg(rng, (channels,), dtype, low=-2, high=3)) if bias else (x, w)
            out.append(Sample(args, dict(kw), desc=f"{xs} * {ws} {kw}{' bias' if bias else ''}"))
        return out

    return samples


_CONV_TRANSPOSE1D = [
    ((2, 3, 5), (3, 2, 3), True, dict(stride=2, padding=1, output_padding=1)),
    ((4, 4), (4, 1, 2), False, dict(stride=3, groups=2, dilation=2)),  # unbatched
]


def _pool1d_ref(ref):
    def run(x, kernel_size, stride=None, padding=0, **kw):
        one = (lambda v: (1, _pair(v)[0]))
        out = ref(np.asarray(x)[..., None, :], one(kernel_size), one(stride or kernel_size),
                  (0, _pair(padding)[0]), **kw)
        return tuple(o[..., 0, :] for o in out) if isinstance(out, tuple) else out[..., 0, :]

    return run


_POOL1D = [
    ((2, 3, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((3, 7), dict(kernel_size=2)),  # unbatched
]


def _pool1d_samples(cases):
    def samples(rng, dtype):
        out = [Sample((make_arg(rng, shape, dtype),), dict(kw), desc=f"{shape} {kw}") for shape, kw in cases]
        if dtype.is_integer:  # ties: the index of the first maximum wins
            out.append(Sample((make_arg(rng, (2, 9), dtype, low=0, high=2),),
                              dict(kernel_size=3, stride=2, padding=1), desc="ties"))
        return out

    return samples


def _adaptive_max_ref(x, output_size, return_indices=False):
    x = _f(x)
    h, w = x.shape[-2:]
    oh, ow = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    oh, ow = oh if oh is not None else h, ow if ow is not None else w
    out, idx = np.zeros(x.shape[:-2] + (oh, ow)), np.zeros(x.shape[:-2] + (oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
            c0, c1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            window = x[..., r0:r1, c0:c1].reshape(x.shape[:-2] + (-1,))
            first = np.argmax(window, axis=-1)  # the first maximum, or PyTorch's last NaN
            k = window.shape[-1]
            last_nan = k - 1 - np.argmax(np.isnan(window[..., ::-1]), axis=-1)
            first = np.where(np.isnan(window).any(axis=-1), last_nan, first)
            out[..., i, j] = window.max(axis=-1)
            idx[..., i, j] = (r0 + first // (c1 - c0)) * w + c0 + first % (c1 - c0)
    return (out, idx) if return_indices else out


_ADAPTIVE_MAX = [((2, 3, 7, 5), (3, 4)), ((3, 8, 6), (4, None)), ((1, 2, 3, 4), (5, 7))]


def _adaptive_max_samples(rng, dtype):
    out = [Sample((make_arg(rng, s, dtype),), dict(output_size=o), desc=f"{s} -> {o}")
           for s, o in _ADAPTIVE_MAX]
    if dtype.is_floating_point:
        x = make_arg(rng, (1, 2, 5, 7), dtype)
        x[0, 0, 0, 0] = x[0, 0, 1, 1] = x[0, 1, 4, 6] = np.nan
        x[0, 1, 0, :] = -np.inf
        out.append(Sample((x,), dict(output_size=(3, 4)), desc="nan and -inf, windows overlap"))
    return out


def _interp_ref(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Each output position's source positions and weights, one spatial dim at a time."""
    out = _f(x)
    spatial = out.ndim - 2
    sizes = _pair(size) if spatial == 2 and size is not None else (
        (size,) if isinstance(size, int) else size)
    scales = None
    if size is None:
        scales = (scale_factor,) * spatial if not isinstance(scale_factor, (tuple, list)) else scale_factor
        sizes = tuple(math.floor(n * s) for n, s in zip(out.shape[2:], scales))
    for k in range(spatial):
        dim, n, o = 2 + k, out.shape[2 + k], sizes[k]
        step = 1 / scales[k] if scales else n / o
        rows = []
        for j in range(o):
            if mode == "nearest":
                rows.append({min(math.floor(j * step), n - 1): 1.0})
            else:
                if align_corners:
                    src = j * (n - 1) / (o - 1) if o > 1 else 0.0
                else:
                    src = max((j + 0.5) * step - 0.5, 0.0)
                i0 = min(int(src), n - 1)
                i1 = min(i0 + 1, n - 1)
                lam = src - i0
                rows.append({i0: 1.0} if i0 == i1 else {i0: 1 - lam, i1: lam})
        m = np.zeros((o, n))
        for j, row in enumerate(rows):
            for i, wgt in row.items():
                m[j, i] += wgt
        out = np.moveaxis(np.tensordot(m, np.moveaxis(out, dim, 0), axes=(1, 0)), 0, dim)
    return out


# (input shape, kwargs); the scales keep source positions off exact integer boundaries
_INTERP_NEAREST = [((2, 3, 4, 5), dict(scale_factor=2)), ((1, 2, 5, 7), dict(size=(3, 9))),
                   ((2, 3, 5), dict(size=11))]
_INTERP_LINEAR = [((2, 3, 4, 5), dict(size=(7, 9), mode="bilinear")),
                  ((1, 2, 7, 9), dict(scale_factor=0.5, mode="bilinear")),
                  ((1, 2, 5, 4), dict(size=(7, 6), mode="bilinear", align_corners=True)),
                  ((2, 3, 5), dict(scale_factor=2.5, mode="linear"))]


def _interp_samples(cases):
    def samples(rng, dtype):
        return [Sample((make_arg(rng, s, dtype),), dict(kw), desc=f"{s} {kw}") for s, kw in cases]

    return samples


def _pixel_shuffle_ref(x, upscale_factor):
    x = _f(x)
    r = upscale_factor
    *lead, c, h, w = x.shape
    out = np.zeros(tuple(lead) + (c // (r * r), h * r, w * r))
    for ch in range(c):
        out[..., ch // (r * r), (ch // r) % r::r, ch % r::r] = x[..., ch, :, :]
    return out


def _pixel_unshuffle_ref(x, downscale_factor):
    x = _f(x)
    r = downscale_factor
    *lead, c, h, w = x.shape
    out = np.zeros(tuple(lead) + (c * r * r, h // r, w // r))
    for ch in range(c * r * r):
        out[..., ch, :, :] = x[..., ch // (r * r), (ch // r) % r::r, ch % r::r]
    return out


OPS = [
    OpInfo("conv2d", lambda lib, *a, **kw: F(lib, "conv2d")(*a, **kw), _conv2d_ref,
           _conv_samples(_CONV2D, 2), dtypes=FLOATS + CONV_INTS),
    OpInfo("conv2d_int32_undilated", lambda lib, *a, **kw: F(lib, "conv2d")(*a, **kw), _conv2d_ref,
           _conv_samples([c for c in _CONV2D if "dilation" not in c[3]], 2), dtypes=(tp.int32,)),
    OpInfo("conv2d_bias_keyword", lambda lib, x, w, b: F(lib, "conv2d")(x, w, bias=b, padding=(0, 1)),
           lambda x, w, b: _conv2d_ref(x, w, b, padding=(0, 1)),
           _conv_samples([((1, 2, 4, 5), (3, 2, 2, 2), True, {})], 2)),
    OpInfo("conv1d", lambda lib, *a, **kw: F(lib, "conv1d")(*a, **kw), _conv1d_ref,
           _conv_samples(_CONV1D, 1), dtypes=FLOATS + CONV_INTS),
    OpInfo("max_pool2d", lambda lib, x, **kw: F(lib, "max_pool2d")(x, **kw), _max_pool2d_ref,
           _pool_samples(_MAX_POOL, nan=True), dtypes=FLOATS + INTS + (tp.uint8,)),
    OpInfo("max_pool2d_indices",
           lambda lib, x, **kw: F(lib, "max_pool2d")(x, return_indices=True, **kw),
           lambda x, **kw: _max_pool2d_ref(x, return_indices=True, **kw),
           _pool_samples(_MAX_POOL, nan=True), dtypes=FLOATS + INTS),
    OpInfo("avg_pool2d", lambda lib, x, **kw: F(lib, "avg_pool2d")(x, **kw), _avg_pool2d_ref,
           _pool_samples(_AVG_POOL), dtypes=FLOATS + (tp.int64,)),
    OpInfo("adaptive_avg_pool2d", lambda lib, x, **kw: F(lib, "adaptive_avg_pool2d")(x, **kw),
           _adaptive_ref, _adaptive_samples),
    OpInfo("pad_constant", _pad_fn, _pad_ref, _pad_constant_samples, dtypes=ALL_DTYPES),
    OpInfo("pad_int_value_truncates",
           lambda lib, x: F(lib, "pad")(x, (1, 1), value=2.7),
           lambda x: _pad_ref(x, (1, 1), value=2.7),
           lambda rng, d: [Sample((make_arg(rng, (2, 3), d),))], dtypes=INTS + FLOATS),
    OpInfo("pad_reflect", _pad_fn, lambda x, **kw: _pad_ref(x, **kw), _pad_mode_samples("reflect"),
           dtypes=FLOATS + INTS),
    OpInfo("pad_replicate", _pad_fn, lambda x, **kw: _pad_ref(x, **kw), _pad_mode_samples("replicate"),
           dtypes=FLOATS + INTS),
    OpInfo("pad_circular", _pad_fn, lambda x, **kw: _pad_ref(x, **kw), _pad_mode_samples("circular"),
           dtypes=FLOATS + INTS + (tp.bool,)),
    OpInfo("conv_transpose2d", lambda lib, *a, **kw: F(lib, "conv_transpose2d")(*a, **kw), _conv_transpose2d_ref,
           _conv_transpose_samples(_CONV_TRANSPOSE2D), dtypes=FLOATS + CONV_INTS,
           # PyTorch's CPU float16 kernel rounds partial sums: 3 ulps (0.0117 at -4.95) off the
           # float64 result, which tensorplay (rounding once) matches within the float16 tolerance
           torch_skip_dtypes=(tp.float16,)),
    OpInfo("conv_transpose1d", lambda lib, *a, **kw: F(lib, "conv_transpose1d")(*a, **kw), _conv_transpose1d_ref,
           _conv_transpose_samples(_CONV_TRANSPOSE1D)),
    OpInfo("max_pool1d", lambda lib, x, **kw: F(lib, "max_pool1d")(x, **kw), _pool1d_ref(_max_pool2d_ref),
           _pool1d_samples(_POOL1D), dtypes=FLOATS + INTS, torch_skip_dtypes=INTS),
    OpInfo("max_pool1d_indices", lambda lib, x, **kw: F(lib, "max_pool1d")(x, return_indices=True, **kw),
           lambda x, **kw: _pool1d_ref(_max_pool2d_ref)(x, return_indices=True, **kw),
           _pool1d_samples(_POOL1D)),
    OpInfo("avg_pool1d", lambda lib, x, **kw: F(lib, "avg_pool1d")(x, **kw), _pool1d_ref(_avg_pool2d_ref),
           _pool1d_samples(_POOL1D + [((2, 3, 8), dict(kernel_size=3, stride=2, padding=1,
                                                      count_include_pad=False))])),
    OpInfo("adaptive_avg_pool1d", lambda lib, x, o: F(lib, "adaptive_avg_pool1d")(x, o),
           lambda x, o: _adaptive_ref(np.asarray(x)[..., None, :], (1, o))[..., 0, :],
           lambda rng, d: [Sample((make_arg(rng, (2, 3, 7), d), 3)), Sample((make_arg(rng, (3, 4), d), 6))]),
    OpInfo("adaptive_max_pool2d", lambda lib, x, **kw: F(lib, "adaptive_max_pool2d")(x, **kw),
           _adaptive_max_ref, _adaptive_max_samples, dtypes=FLOATS + (tp.int64,), torch_skip_dtypes=(tp.int64,)),
    OpInfo("adaptive_max_pool2d_indices",
           lambda lib, x, **kw: F(lib, "adaptive_max_pool2d")(x, return_indices=True, **kw),
           lambda x, **kw: _adaptive_max_ref(x, return_indices=True, **kw), _adaptive_max_samples),
    OpInfo("adaptive_max_pool1d_indices",
           lambda lib, x, o: F(lib, "adaptive_max_pool1d")(x, o, return_indices=True),
           lambda x, o: tuple(r[..., 0, :] for r in _adaptive_max_ref(np.asarray(x)[..., None, :], (1, o), True)),
           lambda rng, d: [Sample((make_arg(rng, (2, 3, 7), d), 3)), Sample((make_arg(rng, (3, 4), d), 2))]),
    OpInfo("interpolate_nearest", lambda lib, x, **kw: F(lib, "interpolate")(x, **kw), _interp_ref,
           _interp_samples(_INTERP_NEAREST), dtypes=FLOATS + (tp.uint8,)),
    OpInfo("interpolate_linear", lambda lib, x, **kw: F(lib, "interpolate")(x, **kw), _interp_ref,
           _interp_samples(_INTERP_LINEAR)),
    OpInfo("pixel_shuffle", lambda lib, x, r: F(lib, "pixel_shuffle")(x, r), _pixel_shuffle_ref,
           lambda rng, d: [Sample((make_arg(rng, (2, 8, 3, 5), d), 2)), Sample((make_arg(rng, (9, 2, 3), d), 3))],
           dtypes=ALL_DTYPES),
    OpInfo("pixel_unshuffle", lambda lib, x, r: F(lib, "pixel_unshuffle")(x, r), _pixel_unshuffle_ref,
           lambda rng, d: [Sample((make_arg(rng, (1, 2, 6, 9), d), 3)), Sample((make_arg(rng, (2, 4, 6), d), 2))],
           dtypes=ALL_DTYPES),
]


def _x(lib, *shape, dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


def _conv(lib, xs, ws, **kw):
    return F(lib, "conv2d")(_x(lib, *xs), _x(lib, *ws), **kw)


ERRORS = [
    ErrorCase("conv2d_channel_mismatch", lambda lib: _conv(lib, (1, 4, 5, 5), (2, 3, 3, 3)),
              RuntimeError, r"tp\.conv2d: Given groups=1, weight of size \[2, 3, 3, 3\], expected "
                            r"input\[1, 4, 5, 5\] to have 3 channels, but got 4 channels instead"),
    ErrorCase("conv2d_groups_do_not_divide_out_channels",
              lambda lib: _conv(lib, (1, 4, 5, 5), (3, 2, 3, 3), groups=2), ValueError,
              r"expected weight to be divisible by 2 at dimension 0"),
    ErrorCase("conv2d_groups_exceed_out_channels",
              lambda lib: _conv(lib, (1, 4, 5, 5), (2, 2, 3, 3), groups=3), RuntimeError,
              r"Given groups=3, expected weight to be at least 3 at dimension 0"),
    ErrorCase("conv2d_input_channels_not_divisible_by_groups",
              lambda lib: _conv(lib, (1, 5, 5, 5), (4, 2, 3, 3), groups=2), RuntimeError,
              r"expected input\[1, 5, 5, 5\] to have 4 channels, but got 5 channels"),
    ErrorCase("conv2d_kernel_larger_than_padded_input",
              lambda lib: _conv(lib, (1, 1, 4, 4), (1, 1, 7, 7), padding=1), RuntimeError,
              r"Calculated padded input size per channel: \(6 x 6\)\. Kernel size: \(7 x 7\)\. "
              r"Kernel size can't be greater than actual input size"),
    ErrorCase("conv2d_dilated_kernel_too_large",
              lambda lib: _conv(lib, (1, 1, 4, 4), (1, 1, 3, 3), dilation=2), RuntimeError,
              r"Kernel size: \(5 x 5\)"),
    ErrorCase("conv2d_negative_padding", lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), padding=-1),
              RuntimeError, r"tp\.conv2d: negative padding is not supported"),
    ErrorCase("conv2d_zero_stride", lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), stride=0),
              RuntimeError, r"non-positive stride is not supported"),
    ErrorCase("conv2d_zero_groups", lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), groups=0),
              RuntimeError, r"non-positive groups is not supported"),
    ErrorCase("conv2d_same_with_stride",
              lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), padding="same", stride=2), ValueError,
              r"padding='same' is not supported for strided convolutions"),
    ErrorCase("conv2d_bad_padding_string",
              lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), padding="full"), ValueError,
              r"Invalid padding string: 'full'"),
    ErrorCase("conv2d_padding_of_three",
              lambda lib: _conv(lib, (1, 1, 5, 5), (1, 1, 3, 3), padding=(1, 2, 3)),
              ValueError, r"expected padding to be a single integer value or a list of 2 values"),
    ErrorCase("conv2d_2d_input", lambda lib: F(lib, "conv2d")(_x(lib, 5, 5), _x(lib, 1, 1, 3, 3)),
              RuntimeError, r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got "
                            r"input of size: \[5, 5\]"),
    ErrorCase("conv2d_3d_weight", lambda lib: F(lib, "conv2d")(_x(lib, 1, 1, 5, 5), _x(lib, 1, 1, 3)),
              RuntimeError, r"conv2d: expected a 4-D weight"),
    ErrorCase("conv2d_bias_size", lambda lib: F(lib, "conv2d")(_x(lib, 1, 4, 5, 5), _x(lib, 2, 4, 3, 3),
                                                                _x(lib, 3)),
              RuntimeError, r"expected bias to be 1-dimensional with 2 elements, but got bias of size \[3\]"),
    ErrorCase("conv2d_mixed_dtypes",
              lambda lib: F(lib, "conv2d")(_x(lib, 1, 1, 5, 5), _x(lib, 1, 1, 3, 3, dtype=lib.float64)),
              RuntimeError, r"Input type \(float32\) and weight type \(float64\) should be the same"),
    ErrorCase("conv2d_bool", lambda lib: F(lib, "conv2d")(_x(lib, 1, 1, 5, 5, dtype=lib.bool),
                                                           _x(lib, 1, 1, 3, 3, dtype=lib.bool)),
              TypeError, r"tp\.conv2d: not implemented for dtype bool"),
    ErrorCase("conv1d_kernel_larger_than_padded_input",
              lambda lib: F(lib, "conv1d")(_x(lib, 1, 2, 2), _x(lib, 1, 2, 3), padding=0, dilation=2),
              RuntimeError, r"Calculated padded input size per channel: \(2\)\. Kernel size: \(5\)\. "
                            r"Kernel size can't be greater than actual input size"),
    ErrorCase("conv1d_weight_rank", lambda lib: F(lib, "conv1d")(_x(lib, 1, 2, 5), _x(lib, 1, 2, 3, 3)),
              RuntimeError, r"conv1d: expected a 3-D weight"),
    ErrorCase("max_pool2d_pad_over_half_kernel",
              lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 5, 5), 3, padding=2), RuntimeError,
              r"tp\.max_pool2d: pad should be at most half of kernel size"),
    ErrorCase("max_pool2d_output_too_small", lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 2, 5, 5), 6),
              RuntimeError, r"Given input size: \(2x5x5\)\. Calculated output size: \(2x0x0\)\. Output "
                            r"size is too small"),
    ErrorCase("max_pool2d_negative_padding",
              lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 5, 5), 3, padding=-1), RuntimeError,
              r"pad must be non-negative"),
    ErrorCase("max_pool2d_zero_stride", lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 5, 5), 2, stride=0),
              RuntimeError, r"stride should be greater than zero"),
    ErrorCase("max_pool2d_zero_kernel", lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 5, 5), 0, stride=1),
              RuntimeError, r"kernel size should be greater than zero"),
    ErrorCase("max_pool2d_2d_input", lambda lib: F(lib, "max_pool2d")(_x(lib, 5, 5), 2), RuntimeError,
              r"Expected 3D \(unbatched\) or 4D \(batched\) input to max_pool2d"),
    ErrorCase("max_pool2d_empty_channels", lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 0, 4, 4), 2),
              RuntimeError, r"only the batch may be empty"),
    ErrorCase("max_pool2d_bool", lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 4, 4, dtype=lib.bool), 2),
              TypeError, r"tp\.max_pool2d: not implemented for dtype bool"),
    ErrorCase("max_pool2d_kernel_of_three",
              lambda lib: F(lib, "max_pool2d")(_x(lib, 1, 1, 4, 4), (2, 2, 2)), ValueError,
              r"expected kernel_size to be a single integer value or a list of 2 values"),
    ErrorCase("avg_pool2d_int32", lambda lib: F(lib, "avg_pool2d")(_x(lib, 1, 1, 4, 4, dtype=lib.int32), 2),
              TypeError, r"tp\.avg_pool2d: not implemented for dtype int32"),
    ErrorCase("avg_pool2d_zero_divisor",
              lambda lib: F(lib, "avg_pool2d")(_x(lib, 1, 1, 4, 4), 2, divisor_override=0), ValueError,
              r"divisor must be not zero"),
    ErrorCase("avg_pool2d_pad_over_half_kernel",
              lambda lib: F(lib, "avg_pool2d")(_x(lib, 1, 1, 5, 5), 2, padding=2), RuntimeError,
              r"pad should be at most half of kernel size"),
    ErrorCase("adaptive_avg_pool2d_int", lambda lib: F(lib, "adaptive_avg_pool2d")(
        _x(lib, 1, 1, 4, 4, dtype=lib.int64), 2), TypeError, r"not implemented for dtype int64"),
    ErrorCase("adaptive_avg_pool2d_three_sizes",
              lambda lib: F(lib, "adaptive_avg_pool2d")(_x(lib, 1, 1, 4, 4), (1, 2, 3)), ValueError,
              r"output_size must be 2"),
    ErrorCase("pad_odd_length", lambda lib: F(lib, "pad")(_x(lib, 2, 3), (1, 1, 1)), ValueError,
              r"Padding length must be divisible by 2"),
    ErrorCase("pad_too_long", lambda lib: F(lib, "pad")(_x(lib, 2, 3), (1, 1, 1, 1, 1, 1)), ValueError,
              r"Padding length should be less than or equal to two times the input dimension"),
    ErrorCase("pad_crop_below_zero", lambda lib: F(lib, "pad")(_x(lib, 2, 4), (-3, -2)), RuntimeError,
              r"tp\.pad: padding \(-3, -2\) at dimension 1 of input \[2, 4\] gives a negative size -1"),
    ErrorCase("pad_reflect_too_wide", lambda lib: F(lib, "pad")(_x(lib, 2, 3, 4), (4, 1), mode="reflect"),
              RuntimeError, r"Padding size should be less than the corresponding input dimension, but "
                            r"got: padding \(4, 1\) at dimension 2 of input \[2, 3, 4\]"),
    ErrorCase("pad_circular_wraps_twice",
              lambda lib: F(lib, "pad")(_x(lib, 2, 3, 4), (5, 1), mode="circular"), RuntimeError,
              r"Padding value causes wrapping around more than once"),
    ErrorCase("pad_reflect_rank", lambda lib: F(lib, "pad")(_x(lib, 4), (1, 1), mode="reflect"),
              RuntimeError, r"Padding size 2 is not supported for 1D input tensor"),
    ErrorCase("pad_reflect_bool", lambda lib: F(lib, "pad")(_x(lib, 1, 2, 3, dtype=lib.bool), (1, 1),
                                                            mode="reflect"),
              TypeError, r"tp\.pad: reflect padding is not implemented for dtype bool"),
    ErrorCase("pad_reflect_value", lambda lib: F(lib, "pad")(_x(lib, 1, 2, 3), (1, 1), mode="reflect",
                                                             value=1.0),
              ValueError, r"Padding mode \"reflect\" doesn't take in value argument"),
    ErrorCase("pad_unknown_mode", lambda lib: F(lib, "pad")(_x(lib, 1, 2, 3), (1, 1), mode="mirror"),
              ValueError, r"Unrecognised padding mode mirror"),
    ErrorCase("pad_value_overflows_int8",
              lambda lib: F(lib, "pad")(_x(lib, 3, dtype=lib.int8), (1, 1), value=1000), RuntimeError,
              r"value 1000 cannot be converted to type int8 without overflow"),
    ErrorCase("pad_replicate_crops_to_nothing",
              lambda lib: F(lib, "pad")(_x(lib, 2, 3, 4), (-2, -2), mode="replicate"), RuntimeError,
              r"input is too small"),
    ErrorCase("conv_transpose2d_channel_mismatch",
              lambda lib: F(lib, "conv_transpose2d")(_x(lib, 1, 3, 4, 4), _x(lib, 2, 2, 3, 3)), RuntimeError,
              r"Given transposed=1, weight of size \[2, 2, 3, 3\], expected input\[1, 3, 4, 4\] to have 2 "
              r"channels, but got 3 channels instead"),
    ErrorCase("conv_transpose2d_output_padding_too_large",
              lambda lib: F(lib, "conv_transpose2d")(_x(lib, 1, 2, 4, 4), _x(lib, 2, 2, 3, 3), stride=2,
                                                     output_padding=2),
              RuntimeError, r"output padding must be smaller than either stride or dilation"),
    ErrorCase("pixel_shuffle_channels_not_divisible",
              lambda lib: F(lib, "pixel_shuffle")(_x(lib, 1, 6, 2, 2), 2), RuntimeError,
              r"input.size\(-3\)=6 is not divisible by 4"),
    ErrorCase("interpolate_size_and_scale", lambda lib: F(lib, "interpolate")(_x(lib, 1, 2, 4, 4), size=3,
                                                                             scale_factor=2),
              ValueError, r"only one of size or scale_factor should be defined"),
    ErrorCase("adaptive_max_pool2d_rank", lambda lib: F(lib, "adaptive_max_pool2d")(_x(lib, 4, 4), 2),
              RuntimeError, r"adaptive_max_pool2d\(\): Expected 3D or 4D tensor"),
]


# --- 3-D convolution and pooling ------------------------------------------------------------

def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v) * (3 if len(v) == 1 else 1)


def _conv3d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """One einsum per output position over its (dilated) input box."""
    x, w = _f(x), _f(w)
    unbatched = x.ndim == 4
    if unbatched:
        x = x[None]
    st, dl = _triple(stride), _triple(dilation)
    ks = w.shape[2:]
    if padding == "same":
        pads = tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(ks, dl))
    else:
        pads = tuple((p, p) for p in _triple(0 if padding == "valid" else padding))
    x = np.pad(x, ((0, 0), (0, 0)) + pads)
    n, c = x.shape[:2]
    o = w.shape[0]
    out_sizes = [(s - d * (k - 1) - 1) // t + 1 for s, k, t, d in zip(x.shape[2:], ks, st, dl)]
    out = np.zeros((n, o) + tuple(out_sizes))
    cg, og = c // groups, o // groups
    for pos in np.ndindex(*out_sizes):
        box = tuple(slice(i * t, i * t + d * (k - 1) + 1, d) for i, t, d, k in zip(pos, st, dl, ks))
        for g in range(groups):
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + box]
            out[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.einsum(
                "ncdhw,ocdhw->no", patch, w[g * og:(g + 1) * og])
    if b is not None:
        out += _f(b)[None, :, None, None, None]
    return out[0] if unbatched else out


_CONV3D = [
    ((2, 3, 4, 5, 4), (4, 3, 2, 3, 2), True, {}),
    ((1, 4, 5, 5, 6), (6, 2, 3, 2, 3), False, dict(stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1),
                                                 groups=2)),
    ((2, 3, 4, 4), (2, 2, 3, 2, 3), True, dict(padding="same", dilation=(2, 1, 1))),  # unbatched
    ((0, 2, 3, 3, 3), (2, 2, 1, 1, 1), True, {}),  # empty batch
]


def _conv_transpose3d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input element's products with the kernel added into the output, then cropped."""
    x, w = _f(x), _f(w)
    unbatched = x.ndim == 4
    if unbatched:
        x = x[None]
    st, pd, op, dl = map(_triple, (stride, padding, output_padding, dilation))
    n, c = x.shape[:2]
    og, ks = w.shape[1], w.shape[2:]
    cg = c // groups
    full = np.zeros((n, og * groups) + tuple((s - 1) * t + d * (k - 1) + 1 + o
                                             for s, t, d, k, o in zip(x.shape[2:], st, dl, ks, op)))
    for pos in np.ndindex(*x.shape[2:]):
        for tap in np.ndindex(*ks):
            at = tuple(i * t + a * d for i, t, a, d in zip(pos, st, tap, dl))
            for g in range(groups):
                full[(slice(None), slice(g * og, (g + 1) * og)) + at] += np.einsum(
                    "nc,co->no", x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos],
                    w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap])
    out = full[(slice(None), slice(None)) + tuple(slice(p, s - p) for p, s in zip(pd, full.shape[2:]))]
    if b is not None:
        out = out + _f(b)[None, :, None, None, None]
    return out[0] if unbatched else out


_CONV_TRANSPOSE3D = [
    ((2, 3, 3, 2, 3), (3, 2, 3, 2, 2), True, dict(stride=2, padding=1, output_padding=1)),
    ((4, 2, 3, 2), (4, 1, 2, 2, 3), False, dict(stride=(1, 2, 1), padding=(0, 1, 1), groups=2,
                                                dilation=(2, 1, 1))),  # unbatched
]


def _pool3d_windows(sizes, ks, st, pd, dl, ceil_mode):
    """Per output position, the in-bounds input positions of its window along each dim (and
    the window's extent clipped to the padded input, for the average's divisor)."""
    outs = [_pool_out(s, k, t, p, d, ceil_mode) for s, k, t, p, d in zip(sizes, ks, st, pd, dl)]
    per_dim = []
    for s, k, t, p, d, o in zip(sizes, ks, st, pd, dl, outs):
        rows = []
        for i in range(o):
            start = i * t - p
            rows.append(([r for r in range(start, start + d * k, d) if 0 <= r < s],
                         min(start + k, s + p) - start))
        per_dim.append(rows)
    return outs, per_dim


def _max_pool3d_ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                    return_indices=False):
    x = np.asarray(x)
    unbatched = x.ndim == 4
    x = _f(x[None] if unbatched else x)
    ks, pd, dl = _triple(kernel_size), _triple(padding), _triple(dilation)
    st = _triple(stride if stride else kernel_size)
    n, c, d, h, w = x.shape
    outs, per_dim = _pool3d_windows((d, h, w), ks, st, pd, dl, ceil_mode)
    out, idx = np.zeros((n, c) + tuple(outs)), np.zeros((n, c) + tuple(outs), np.int64)
    for pos in np.ndindex(*outs):
        (ds, _), (hs, _), (ws, _) = (per_dim[k][pos[k]] for k in range(3))
        flat = np.array([a * h * w + b * w + q for a in ds for b in hs for q in ws])
        window = x.reshape(n, c, -1)[:, :, flat]
        first = np.argmax(window, axis=-1)  # the first maximum, or PyTorch's last NaN
        last_nan = window.shape[-1] - 1 - np.argmax(np.isnan(window[..., ::-1]), axis=-1)
        first = np.where(np.isnan(window).any(axis=-1), last_nan, first)
        out[(slice(None), slice(None)) + pos] = np.max(window, axis=-1)
        idx[(slice(None), slice(None)) + pos] = flat[first]
    if unbatched:
        out, idx = out[0], idx[0]
    return (out, idx) if return_indices else out


def _avg_pool3d_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
    x = np.asarray(x)
    integer = x.dtype.kind in "iu"
    unbatched = x.ndim == 4
    x = _f(x[None] if unbatched else x)
    ks, pd = _triple(kernel_size), _triple(padding)
    st = _triple(stride if stride else kernel_size)
    n, c = x.shape[:2]
    outs, per_dim = _pool3d_windows(x.shape[2:], ks, st, pd, (1, 1, 1), ceil_mode)
    out = np.zeros((n, c) + tuple(outs))
    for pos in np.ndindex(*outs):
        (ds, de), (hs, he), (ws, we) = (per_dim[k][pos[k]] for k in range(3))
        total = x[:, :, ds][:, :, :, hs][:, :, :, :, ws].sum(axis=(2, 3, 4))
        divisor = divisor_override or (de * he * we if count_include_pad else len(ds) * len(hs) * len(ws))
        out[(slice(None), slice(None)) + pos] = np.trunc(total / divisor) if integer else total / divisor
    return out[0] if unbatched else out


_MAX_POOL3D = [
    ((2, 2, 4, 4, 6), dict(kernel_size=2)),
    ((1, 2, 5, 6, 5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 5, 7, 5), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(2, 1, 2))),
]

_AVG_POOL3D = [
    ((2, 2, 4, 4, 6), dict(kernel_size=2)),
    ((1, 2, 5, 6, 5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ((2, 5, 4, 5), dict(kernel_size=(2, 3, 2), stride=(2, 1, 3), padding=1, divisor_override=5)),  # unbatched
]


def _pool3d_samples(cases, nan=False):
    def samples(rng, dtype):
        out = [Sample((make_arg(rng, shape, dtype),), dict(kw), desc=f"{shape} {kw}") for shape, kw in cases]
        if dtype.is_integer:  # ties: the index of the first maximum wins
            out.append(Sample((make_arg(rng, (1, 2, 4, 5, 4), dtype, low=0, high=2),),
                              dict(kernel_size=3, stride=2, padding=1), desc="ties"))
        if nan and dtype.is_floating_point:
            x = make_arg(rng, (1, 2, 4, 5, 4), dtype)
            x[0, 0, 1, 1, 1] = x[0, 0, 2, 0, 1] = x[0, 1, 3, 4, 2] = np.nan
            x[0, 1, 0] = -np.inf
            out.append(Sample((x,), dict(kernel_size=3, stride=2, padding=1), desc="nan and -inf"))
        return out

    return samples


def _adaptive3d_ref(x, output_size):
    x = _f(x)
    sizes = x.shape[-3:]
    outs = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    outs = tuple(o if o is not None else s for o, s in zip(outs, sizes))
    out = np.zeros(x.shape[:-3] + outs)
    for pos in np.ndindex(*outs):
        box = tuple(slice((i * s) // o, -((-(i + 1) * s) // o)) for i, s, o in zip(pos, sizes, outs))
        out[(Ellipsis,) + pos] = x[(Ellipsis,) + box].mean(axis=(-3, -2, -1))
    return out


_ADAPTIVE3D = [((2, 2, 4, 6, 4), (2, 3, 1)), ((1, 2, 5, 4, 7), (3, None, 4)), ((2, 3, 5, 4), 2)]

OPS += [
    OpInfo("conv3d", lambda lib, *a, **kw: F(lib, "conv3d")(*a, **kw), _conv3d_ref,
           _conv_samples(_CONV3D, 3), dtypes=FLOATS + CONV_INTS),
    OpInfo("conv_transpose3d", lambda lib, *a, **kw: F(lib, "conv_transpose3d")(*a, **kw),
           _conv_transpose3d_ref, _conv_transpose_samples(_CONV_TRANSPOSE3D),
           # float16 left out: PyTorch's CPU kernel rounds its partial sums (4 ulps off the
           # float64 result); int64 runs the ops conv3d's int64 case runs
           dtypes=(tp.float32, tp.float64, tp.bfloat16)),
    OpInfo("max_pool3d", lambda lib, x, **kw: F(lib, "max_pool3d")(x, **kw), _max_pool3d_ref,
           _pool3d_samples(_MAX_POOL3D, nan=True), dtypes=FLOATS + (tp.int32,)),
    OpInfo("max_pool3d_indices", lambda lib, x, **kw: F(lib, "max_pool3d")(x, return_indices=True, **kw),
           lambda x, **kw: _max_pool3d_ref(x, return_indices=True, **kw),
           _pool3d_samples(_MAX_POOL3D, nan=True), dtypes=(tp.float32, tp.float64, tp.int64)),
    OpInfo("avg_pool3d", lambda lib, x, **kw: F(lib, "avg_pool3d")(x, **kw), _avg_pool3d_ref,
           _pool3d_samples(_AVG_POOL3D), dtypes=FLOATS + (tp.int64,),
           torch_skip_dtypes=(tp.float16, tp.bfloat16)),  # PyTorch's CPU kernel lacks the half types
    OpInfo("adaptive_avg_pool3d", lambda lib, x, o: F(lib, "adaptive_avg_pool3d")(x, o), _adaptive3d_ref,
           lambda rng, d: [Sample((make_arg(rng, s, d), o), desc=f"{s} -> {o}") for s, o in _ADAPTIVE3D],
           dtypes=(tp.float32, tp.float64, tp.bfloat16)),
]
