"""Convolution, pooling and padding ops over NCHW tensors.

The ops take explicit, fully normalized geometry (per-dim stride, dilation, padding); the
frontend resolves PyTorch's conveniences (ints for pairs, ``padding='same'``, unbatched
CHW inputs, the reversed pad tuple of ``F.pad``). Output sizes follow PyTorch: floor
division, and with ``ceil_mode`` the last window must start inside the input or its left
padding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..errors import OpAttributeError, DTypeError, ShapeError
from . import _grad
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import format_shape
from .._lazy import lazy

from .. import symbolic as sym
from ..types import Dim, TensorType
from .elementwise import cast_array

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

sympy = lazy("sympy")

__all__ = ["Conv2d", "MaxPool2d", "MaxPool2dWithIndices", "AvgPool2d", "Pad", "pool_output_size",
           "kernel_too_large", "windows_may_miss_input"]


def _sizes(shape: tuple[Dim, ...]) -> str:
    return "x".join(sym.size_text(d) for d in shape)


def _windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
             dilation: tuple[int, int], out: tuple[int, int]) -> np.ndarray:
    """A read-only (N, C, outH, outW, kH, kW) view of the windows of an NCHW array."""
    s = x.strides
    shape = x.shape[:2] + tuple(out) + tuple(kernel)
    strides = (s[0], s[1], s[2] * stride[0], s[3] * stride[1], s[2] * dilation[0], s[3] * dilation[1])
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


def windows_may_miss_input(sizes: tuple, attrs: dict[str, Any]) -> bool:
    """Whether a max pool window may hold no input element: only a dilated one can, its taps
    stepping over a small input (a 2-tap window of dilation 2 and padding 1 reads elements -1
    and 1 of a one-element dim). Exact for static sizes, else whether the pool is dilated."""
    dilation = attrs.get("dilation", (1, 1))
    if all(d == 1 for d in dilation):
        return False
    if not all(type(s) is int for s in sizes):
        return True
    for size, k, s, p, d in zip(sizes, attrs["kernel_size"], attrs["stride"], attrs["padding"], dilation):
        taps = (np.arange(pool_output_size(size, k, s, p, d, attrs["ceil_mode"]))[:, None] * s - p
                + np.arange(k)[None, :] * d)
        if not ((taps >= 0) & (taps < size)).any(axis=1).all():
            return True
    return False


def _scatter_to_indices(ctx: RuleContext, g: Any, indices: Any) -> Any:
    """A max pool's gradient added back at the input elements its ``indices`` (flat per
    channel, as ``max_pool2d_with_indices`` gives) name; a window without input elements
    (index -1) gives none."""
    (n, c, h, w), _ = ctx.input_meta[0]
    if windows_may_miss_input((h, w), ctx.attrs):
        missing = ctx.apply_op("tp.lt", indices, _grad.scalar(ctx, 0, indices))
        g = _grad.where(ctx, missing, 0.0, g)
        indices = _grad.where(ctx, missing, 0, indices)
    batch = _grad.arange(ctx, n, dt.int64, g).reshape(n, 1, 1, 1)
    channel = _grad.arange(ctx, c, dt.int64, g).reshape(1, c, 1, 1)
    shape = tuple(indices.shape)
    zero = ctx.zeros((n, c, h * w), g.dtype, g)
    out = ctx.apply_op("tp.index_put", zero, g, batch.expand(shape), channel.expand(shape), indices,
                       dims=(0, 1, 2), accumulate=True)
    return out.reshape(n, c, h, w)


def _tiled_windows(shape: tuple, attrs: dict[str, Any]) -> bool:
    """Whether pooling windows tile the input: stride equal to the kernel, no padding or
    dilation, static height and width (``MaxPool2d(2)``)."""
    return (tuple(attrs["stride"]) == tuple(attrs["kernel_size"]) and not any(attrs["padding"])
            and tuple(attrs.get("dilation", (1, 1))) == (1, 1) and not attrs["ceil_mode"]
            and all(type(d) is int for d in shape[2:]))


def _tiled_max_grad(ctx: RuleContext, x: Any, y: Any, g: Any, kernel: tuple[int, int]) -> Any:
    """A max pool's input gradient where the windows tile the input: each window's first
    element equal to its maximum (of a window with NaNs, its last NaN) takes the window's gradient. Two
    fused elementwise/reduction passes over the input, instead of a second pool that tracks
    indices and a scatter."""
    n, c, h, w = x.shape
    (kh, kw), (oh, ow) = kernel, tuple(y.shape[2:])
    cropped = (oh * kh, ow * kw) != (h, w)  # floor mode leaves rows or columns out
    if cropped:
        x = ctx.apply_op("tp.slice", x, starts=(0, 0, 0, 0), ends=(n, c, oh * kh, ow * kw), steps=(1, 1, 1, 1))
    xw = x.reshape(n, c, oh, kh, ow, kw)
    yw = y.reshape(n, c, oh, 1, ow, 1)
    hit = ctx.apply_op("tp.eq", xw, yw)
    tap = (_grad.arange(ctx, kh, dt.int32, g).reshape(1, 1, 1, kh, 1, 1) * kw
           + _grad.arange(ctx, kw, dt.int32, g).reshape(1, 1, 1, 1, 1, kw))
    first = ctx.apply_op("tp.amin", _grad.where(ctx, hit, tap, kh * kw), dims=(3, 5), keepdim=True)
    last_nan = ctx.apply_op("tp.amax", _grad.where(ctx, ctx.apply_op("tp.isnan", xw), tap, -1), dims=(3, 5),
                            keepdim=True)
    first = ctx.apply_op("tp.where", ctx.apply_op("tp.ge", last_nan, _grad.scalar(ctx, 0, last_nan)), last_nan, first)
    gw = _grad.where(ctx, ctx.apply_op("tp.eq", tap, first), g.reshape(n, c, oh, 1, ow, 1), 0.0)
    gx = gw.reshape(n, c, oh * kh, ow * kw)
    if cropped:
        gx = ctx.apply_op("tp.pad", gx, low=(0, 0, 0, 0), high=(0, 0, h - oh * kh, w - ow * kw))
    return gx


def kernel_too_large(padded: Any, kernel: Any) -> str:
    """PyTorch's message for a convolution whose (dilated) kernel reaches past its padded
    input, given the sizes of each spatial dim."""
    return (f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size")


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int,
                     ceil_mode: bool) -> int:
    """PyTorch's pooling output size along one dim (symmetric padding ``pad``)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = sym.as_size(sym.floordiv(sym.as_size(span), stride) + 1)
    if ceil_mode and sym.ge(sym.as_size((out - 1) * stride), sym.as_size(size + pad), "pooling output size"):
        out = sym.as_size(out - 1)  # the last window would start in the right padding
    return out


class _Spatial(Op):
    """Family base: checks shared by the NCHW ops."""

    family = "conv"

    def ints(self, attrs: dict[str, Any], name: str, length: int, minimum: int, what: str) -> tuple[int, ...]:
        values = attrs[name]
        if len(values) != length:
            raise self.error(OpAttributeError, f"attribute '{name}' needs {length} ints, got "
                                              f"{list(values)}")
        if any(v < minimum for v in values):
            raise self.error(OpAttributeError, f"{what}, but got {name}={list(values)}")
        return values

    def check_input(self, t: TensorType) -> None:
        if t.rank != 4:
            raise self.error(ShapeError, f"expected a 4-D (N, C, H, W) input, got input of size: "
                                         f"{format_shape(t.shape)}")


@register
class Conv2d(_Spatial):
    """2-D cross-correlation of an NCHW ``input`` with an (O, C/groups, kH, kW) ``weight``, plus ``bias``.

    ``padding`` is explicit per side as ``(top, left, bottom, right)``. Operands share one
    dtype (floats or ints; half types accumulate in float32, integers wrap around).
    """

    name = "tp.conv2d"
    operands = (Operand("input"), Operand("weight"), Operand("bias", optional=True))
    attributes = (
        Attr("stride", AttrKind.INTS, (1, 1), doc="(sH, sW)"),
        Attr("padding", AttrKind.INTS, (0, 0, 0, 0), doc="(top, left, bottom, right)"),
        Attr("dilation", AttrKind.INTS, (1, 1), doc="(dH, dW)"),
        Attr("groups", AttrKind.INT, 1),
    )

    def vjp(self, ctx: RuleContext, grads):
        g, x, w = grads[0], ctx.input(0), ctx.input(1)
        (sh, sw), (pt, pl, pb, pr) = ctx.attrs["stride"], ctx.attrs["padding"]
        (dh, dw), groups = ctx.attrs["dilation"], ctx.attrs["groups"]
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh, ow = g.shape[2], g.shape[3]
        gx = gw = gb = None
        if ctx.needs(0):
            # the transposed convolution: the gradient spread out by the stride, correlated with the
            # flipped kernel (input and output channels swapped per group), fitted to the input
            gd = g
            if (sh, sw) != (1, 1):
                gd = ctx.zeros((n, o, (oh - 1) * sh + 1, (ow - 1) * sw + 1), g.dtype, g)
                gd = ctx.apply_op("tp.slice_update", gd, g, starts=(0, 0, 0, 0), ends=tuple(gd.shape),
                                  steps=(1, 1, sh, sw))
            wt = w.reshape(groups, o // groups, cg, kh, kw).permute(0, 2, 1, 3, 4)
            wt = wt.reshape(groups * cg, o // groups, kh, kw).flip((2, 3))
            eh, ew = dh * (kh - 1), dw * (kw - 1)
            full = ctx.apply_op("tp.conv2d", gd, wt, None, stride=(1, 1), padding=(eh, ew, eh, ew),
                                dilation=(dh, dw), groups=groups)
            extra_h = h + pt + pb - full.shape[2]
            extra_w = wd + pl + pr - full.shape[3]
            gx = ctx.apply_op("tp.pad", full, low=(0, 0, -pt, -pl), high=(0, 0, extra_h - pb, extra_w - pr))
        if ctx.needs(1):
            xp = ctx.apply_op("tp.pad", x, low=(0, 0, pt, pl), high=(0, 0, pb, pr))
            if _weight_grad_by_taps(x.shape, w.shape, oh, ow):
                gw = _weight_grad_taps(ctx, xp, g, w.shape, groups, (sh, sw), (dh, dw), (oh, ow))
            else:
                # per group: the padded input's channels as the batch, the gradient's as the kernel
                og, parts = o // groups, []
                for k in range(groups):
                    xk = xp.narrow(1, k * cg, cg).permute(1, 0, 2, 3)
                    gk = g.narrow(1, k * og, og).permute(1, 0, 2, 3)
                    part = ctx.apply_op("tp.conv2d", xk, gk, None, stride=(dh, dw), padding=(0, 0, 0, 0),
                                        dilation=(sh, sw), groups=1)
                    parts.append(part.narrow(2, 0, kh).narrow(3, 0, kw).permute(1, 0, 2, 3))
                gw = parts[0] if groups == 1 else ctx.apply_op("tp.concat", *parts, dim=0)
        if ctx.needs(2):
            gb = g.sum(dim=(0, 2, 3))
        return gx, gw, gb

    def infer(self, types, attrs):
        x, w, b = types
        self.check_input(x)
        if w.rank != 4:
            raise self.error(ShapeError, f"expected a 4-D (O, C/groups, kH, kW) weight, got weight "
                                         f"of size {format_shape(w.shape)}")
        if x.dtype is not w.dtype:
            raise self.error(DTypeError, f"Input type ({x.dtype.name}) and weight type "
                                         f"({w.dtype.name}) should be the same")
        if b is not None and b.dtype is not x.dtype:
            raise self.error(DTypeError, f"Input type ({x.dtype.name}) and bias type "
                                         f"({b.dtype.name}) should be the same")
        if x.dtype.is_bool:
            raise self.error(DTypeError, "not implemented for dtype bool")
        stride = self.ints(attrs, "stride", 2, 1, "non-positive stride is not supported")
        pad = self.ints(attrs, "padding", 4, 0, "negative padding is not supported")
        dilation = self.ints(attrs, "dilation", 2, 1, "dilation should be greater than zero")
        groups = attrs["groups"]
        if groups < 1:
            raise self.error(OpAttributeError, f"non-positive groups is not supported, got "
                                              f"groups={groups}")
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        if o is not None and sym.lt(o, groups, f"{self.name} groups"):
            raise self.error(ShapeError, f"Given groups={groups}, expected weight to be at least "
                                         f"{groups} at dimension 0, but got weight of size "
                                         f"{format_shape(w.shape)} instead")
        if o is not None and groups != 1 and sym.eq(sym.as_size(o % groups if type(o) is int else
                                                              sympy.Mod(o, groups)), 0, "groups") is False:
            raise self.error(ShapeError, f"Given groups={groups}, expected weight to be divisible "
                                         f"by {groups} at dimension 0, but got weight of size "
                                         f"{format_shape(w.shape)} instead")
        if c is not None and cg is not None and sym.eq(c, cg * groups, f"{self.name} channels") is False:
            raise self.error(ShapeError, f"Given groups={groups}, weight of size "
                                         f"{format_shape(w.shape)}, expected input"
                                         f"{format_shape(x.shape)} to have {cg * groups} channels, "
                                         f"but got {c} channels instead")
        if b is not None and (b.rank != 1 or (o is not None and b.shape[0] is not None
                                              and sym.eq(b.shape[0], o, f"{self.name} bias") is False)):
            raise self.error(ShapeError, f"Given weight of size {format_shape(w.shape)}, expected "
                                         f"bias to be 1-dimensional with {o} elements, but got bias "
                                         f"of size {format_shape(b.shape)} instead")
        out = []
        padded = []
        for size, k, s, d, lo, hi in ((h, kh, stride[0], dilation[0], pad[0], pad[2]),
                                      (wd, kw, stride[1], dilation[1], pad[1], pad[3])):
            if size is None or k is None:
                padded.append(None)
                out.append(None)
                continue
            padded.append(sym.as_size(size + lo + hi))
            out.append(sym.as_size(sym.floordiv(sym.as_size(size + lo + hi - d * (k - 1) - 1), s) + 1))
        if any(p is not None and sym.lt(p, d * (k - 1) + 1, f"{self.name} kernel size")
               for p, k, d in zip(padded, (kh, kw), dilation)):
            kernel = tuple(None if k is None else d * (k - 1) + 1 for k, d in zip((kh, kw), dilation))
            raise self.error(ShapeError, kernel_too_large(padded, kernel))
        return (TensorType((n, o, out[0], out[1]), x.dtype),)

    def reference(self, arrays, attrs):
        x, w, b = arrays
        cdt = dt.from_numpy_dtype(x.dtype).computes_in.np_dtype
        top, left, bottom, right = attrs["padding"]
        x = np.pad(x.astype(cdt, copy=False), ((0, 0), (0, 0), (top, bottom), (left, right)))
        w = w.astype(cdt, copy=False)
        (sh, sw), (dh, dw), g = attrs["stride"], attrs["dilation"], attrs["groups"]
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
        win = _windows(x, (kh, kw), (sh, sw), (dh, dw), (oh, ow))
        # im2col per group: (g, O/g, C/g*kh*kw) @ (g, C/g*kh*kw, N*oh*ow). The columns are copied
        # with the output width innermost, as the input has it: 2-3x faster than the
        # (N*oh*ow, C/g*kh*kw) layout, whose copy reads kernel rows of kw elements
        cols = win.reshape(n, g, cg, oh, ow, kh, kw).transpose(1, 2, 5, 6, 0, 3, 4)
        cols = cols.reshape(g, cg * kh * kw, n * oh * ow)
        kernels = w.reshape(g, o // g, cg * kh * kw)
        out = np.matmul(kernels, cols).reshape(g, o // g, n, oh, ow)
        out = out.transpose(2, 0, 1, 3, 4).reshape(n, o, oh, ow)
        if b is not None:
            out = out + b.astype(cdt, copy=False).reshape(1, o, 1, 1)
        return out


#: the most elements the kernel-tap copies of a convolution's input may hold for its weight
#: gradient to be a matmul over them (64 MiB of float32)
TAPS_GRAD_MAX = 1 << 24


def _weight_grad_by_taps(x_shape: tuple, w_shape: tuple, oh: Dim, ow: Dim) -> bool:
    """Whether a convolution's weight gradient is a matmul over copies of the input, one per
    kernel tap: static sizes, at most TAPS_GRAD_MAX elements copied."""
    sizes = tuple(x_shape) + tuple(w_shape) + (oh, ow)
    if not all(type(d) is int for d in sizes):
        return False
    n, c = x_shape[:2]
    kh, kw = w_shape[2:]
    return n * c * kh * kw * oh * ow <= TAPS_GRAD_MAX


def _weight_grad_taps(ctx: RuleContext, xp: Any, g: Any, w_shape: tuple, groups: int, stride: tuple[int, int],
                      dilation: tuple[int, int], out: tuple[int, int]) -> Any:
    """dL/dweight as one (batched over groups) matmul: the output gradient, (O/g, N*oH*oW) per
    group, times the padded input's windows laid out tap by tap, (C/g*kH*kW, N*oH*oW). IREE
    runs this 3-10x faster than the convolution of the transposed input by the gradient,
    whose transposes it folds into a contraction it tiles poorly."""
    o, cg, kh, kw = w_shape
    n = xp.shape[0]
    oh, ow = out
    taps = []
    for i in range(kh):
        for j in range(kw):
            top, left = i * dilation[0], j * dilation[1]
            box = dict(starts=(0, 0, top, left), ends=(n, groups * cg, top + (oh - 1) * stride[0] + 1,
                                                       left + (ow - 1) * stride[1] + 1),
                       steps=(1, 1, stride[0], stride[1]))
            taps.append(ctx.apply_op("tp.slice", xp, **box).reshape(n, groups * cg, 1, oh * ow))
    cols = taps[0] if len(taps) == 1 else ctx.apply_op("tp.concat", *taps, dim=2)
    k = kh * kw
    cols = cols.reshape(n, groups, cg * k, oh * ow).permute(1, 2, 0, 3).reshape(groups, cg * k, n * oh * ow)
    gg = g.reshape(n, groups, o // groups, oh * ow).permute(1, 2, 0, 3).reshape(groups, o // groups, n * oh * ow)
    return ctx.apply_op("tp.matmul", gg, cols.transpose(1, 2)).reshape(o, cg, kh, kw)


class _Pool2d(_Spatial):
    """Family base of the pooling ops: window geometry, checks and output size."""

    operands = (Operand("input"),)
    has_dilation = False

    def geometry(self, t: TensorType, attrs: dict[str, Any]) -> tuple[Dim, Dim]:
        self.check_input(t)
        kernel = self.ints(attrs, "kernel_size", 2, 1, "kernel size should be greater than zero")
        stride = self.ints(attrs, "stride", 2, 1, "stride should be greater than zero")
        pad = self.ints(attrs, "padding", 2, 0, "pad must be non-negative")
        dilation = self.ints(attrs, "dilation", 2, 1, "dilation should be greater than zero") \
            if self.has_dilation else (1, 1)
        if any(2 * p > k for p, k in zip(pad, kernel)):
            raise self.error(OpAttributeError, f"pad should be at most half of kernel size, but got "
                                              f"padding={list(pad)} and kernel_size={list(kernel)}")
        n, c, h, w = t.shape
        if any(d is not None and sym.eq(d, 0, f"{self.name} input size") for d in (c, h, w)):
            raise self.error(ShapeError, f"expected an input with non-zero channels, height and "
                                         f"width (only the batch may be empty), but got "
                                         f"{format_shape(t.shape)}")
        out = tuple(None if size is None else
                    pool_output_size(size, k, s, p, d, attrs["ceil_mode"])
                    for size, k, s, p, d in zip((h, w), kernel, stride, pad, dilation))
        if any(o is not None and sym.lt(o, 1, f"{self.name} output size") for o in out):
            raise self.error(ShapeError, f"Given input size: ({_sizes((c, h, w))}). Calculated "
                                         f"output size: ({_sizes((c,) + out)}). Output size is "
                                         f"too small")
        return out

    def padded_windows(self, x: np.ndarray, attrs: dict[str, Any], fill: Any,
                       out: tuple[int, int]) -> np.ndarray:
        """Windows of ``x`` padded with ``fill``, extended on the right as far as ceil mode needs."""
        kernel, stride, pad = attrs["kernel_size"], attrs["stride"], attrs["padding"]
        dilation = attrs["dilation"] if self.has_dilation else (1, 1)
        widths = [(0, 0), (0, 0)]
        for size, o, k, s, p, d in zip(x.shape[2:], out, kernel, stride, pad, dilation):
            reach = (o - 1) * s + d * (k - 1) + 1
            widths.append((p, max(reach - size - p, 0)))
        xp = np.pad(x, widths, constant_values=fill)
        return _windows(xp, kernel, stride, dilation, out)

    def infer_shape(self, types, attrs) -> tuple[Dim, ...]:
        t = types[0]
        return t.shape[:2] + self.geometry(t, attrs)


_POOL_ATTRS = (
    Attr("kernel_size", AttrKind.INTS, doc="(kH, kW)"),
    Attr("stride", AttrKind.INTS, doc="(sH, sW)"),
    Attr("padding", AttrKind.INTS, (0, 0), doc="(pH, pW), applied on both sides"),
)


class _MaxPoolBase(_Pool2d):
    attributes = _POOL_ATTRS + (
        Attr("dilation", AttrKind.INTS, (1, 1), doc="(dH, dW)"),
        Attr("ceil_mode", AttrKind.BOOL, False),
    )
    has_dilation = True

    def check_dtype(self, t: TensorType) -> None:
        if t.dtype.is_bool:
            raise self.error(DTypeError, "not implemented for dtype bool")

    def max_windows(self, x: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
        x = x.astype(dt.from_numpy_dtype(x.dtype).computes_in.np_dtype, copy=False)
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        out = tuple(pool_output_size(size, k, s, p, d, attrs["ceil_mode"]) for size, k, s, p, d in
                    zip(x.shape[2:], attrs["kernel_size"], attrs["stride"], attrs["padding"],
                        attrs["dilation"]))
        return self.padded_windows(x, attrs, fill, out)


@register
class MaxPool2d(_MaxPoolBase):
    """Maximum over (dilated) windows of an NCHW input; padding never wins and NaN propagates."""

    name = "tp.max_pool2d"

    def vjp(self, ctx: RuleContext, grads):  # to the element each window's maximum came from (the first of ties)
        if _tiled_windows(ctx.input_meta[0][0], ctx.attrs):
            return (_tiled_max_grad(ctx, ctx.input(0), ctx.output(0), grads[0], ctx.attrs["kernel_size"]),)
        _, indices = ctx.apply_op("tp.max_pool2d_with_indices", ctx.input(0), **ctx.attrs)
        return (_scatter_to_indices(ctx, grads[0], indices),)

    def infer(self, types, attrs):
        self.check_dtype(types[0])
        return (TensorType(self.infer_shape(types, attrs), types[0].dtype),)

    def reference(self, arrays, attrs):
        win = self.max_windows(arrays[0], attrs)
        kh, kw = win.shape[4:]
        if kh * kw > MAX_TAPS_ONE_BY_ONE or win[..., 0, 0].size == 0:
            return win.max(axis=(4, 5))
        # tap by tap over the whole output: each np.maximum reads one strided slice with the
        # output width innermost (a 3x3 pool of 8x64x112x112: 178 ms as a reduction over the
        # window axes, 34 ms so, PyTorch 29 ms); NaNs propagate as in the reduction
        out = win[..., 0, 0].copy()
        for i in range(kh):
            for j in range(kw):
                if i or j:
                    np.maximum(out, win[..., i, j], out=out)
        return out


#: the most window taps a max pool's reference takes one np.maximum each over the output
MAX_TAPS_ONE_BY_ONE = 64


@register
class MaxPool2dWithIndices(_MaxPoolBase):
    """``tp.max_pool2d`` plus, per output, the flat ``h * W + w`` input index of its first maximum
    (of a window with NaNs: its last NaN, as PyTorch's CPU kernel).

    A dilated window may hold no input element (its taps step over a small input): its value
    is -inf (the dtype's minimum for ints) and its index -1, and it passes no gradient on.
    PyTorch gives such a window an index outside it, and its gradient to that element.
    """

    name = "tp.max_pool2d_with_indices"
    results = ("result", "indices")

    def vjp(self, ctx: RuleContext, grads):
        return (_scatter_to_indices(ctx, grads[0], ctx.output(1)),)

    def infer(self, types, attrs):
        self.check_dtype(types[0])
        shape = self.infer_shape(types, attrs)
        return (TensorType(shape, types[0].dtype), TensorType(shape, dt.int64))

    def reference(self, arrays, attrs):
        x = arrays[0]
        h, w = x.shape[2:]
        win = self.max_windows(x, attrs)
        n, c, oh, ow, kh, kw = win.shape
        best = win.max(axis=(4, 5))
        (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
        rows = np.arange(oh)[:, None] * sh + np.arange(kh)[None, :] * dh - ph  # (oh, kh)
        cols = np.arange(ow)[:, None] * sw + np.arange(kw)[None, :] * dw - pw  # (ow, kw)
        inside = (((rows >= 0) & (rows < h))[:, None, :, None]
                  & ((cols >= 0) & (cols < w))[None, :, None, :])
        # the first in-bounds element equal to the maximum, or PyTorch's last NaN
        hits = (win == best[..., None, None]) & inside
        first = hits.reshape(n, c, oh, ow, kh * kw).argmax(axis=-1)
        nans = ((win != win) & inside).reshape(n, c, oh, ow, kh * kw)
        last_nan = kh * kw - 1 - nans[..., ::-1].argmax(axis=-1)
        first = np.where(nans.any(axis=-1), last_nan, first)
        ki, kj = first // kw, first % kw
        ih = np.arange(oh)[:, None] * sh + ki * dh - ph
        iw = np.arange(ow)[None, :] * sw + kj * dw - pw
        empty = ~inside.any(axis=(2, 3))  # (oh, ow): windows of padding only
        return best, np.where(empty, -1, ih * w + iw).astype(np.int64)


@register
class AvgPool2d(_Pool2d):
    """Mean over windows of an NCHW input, with PyTorch's divisor rules (padding, ceil mode, override).

    The divisor counts padding when ``count_include_pad`` (never the overhang that ceil
    mode adds), else only input elements; ``divisor_override`` replaces it. int64 inputs
    divide with truncation toward zero.
    """

    name = "tp.avg_pool2d"
    attributes = _POOL_ATTRS + (
        Attr("ceil_mode", AttrKind.BOOL, False),
        Attr("count_include_pad", AttrKind.BOOL, True),
        Attr("divisor_override", AttrKind.INT, None, optional=True),
    )

    def vjp(self, ctx: RuleContext, grads):
        # each window's gradient over its divisor, added back at every kernel offset
        g = grads[0]
        (n, c, h, w), _ = ctx.input_meta[0]
        (kh, kw), (sh, sw), (ph, pw) = ctx.attrs["kernel_size"], ctx.attrs["stride"], ctx.attrs["padding"]
        oh, ow = g.shape[2], g.shape[3]
        # (made in the gradient's dtype: a float64 constant would not compile for Vulkan)
        div = self.divisors((h, w), (oh, ow), ctx.attrs).astype(g.dtype.np_dtype)
        share = g / _grad.on(ctx.apply_op("tp.constant", value=div), g)
        hp = max(h + 2 * ph, (oh - 1) * sh + kh)
        wp = max(w + 2 * pw, (ow - 1) * sw + kw)
        acc = ctx.zeros((n, c, hp, wp), g.dtype, g)
        for a in range(kh):
            for b in range(kw):
                box = dict(starts=(0, 0, a, b), ends=(n, c, a + (oh - 1) * sh + 1, b + (ow - 1) * sw + 1),
                           steps=(1, 1, sh, sw))
                acc = ctx.apply_op("tp.slice_update", acc, ctx.apply_op("tp.slice", acc, **box) + share, **box)
        return (ctx.apply_op("tp.pad", acc, low=(0, 0, -ph, -pw), high=(0, 0, h + ph - hp, w + pw - wp)),)

    def infer(self, types, attrs):
        t = types[0]
        if not (t.dtype.is_floating_point or t.dtype is dt.int64):
            raise self.error(DTypeError, f"not implemented for dtype {t.dtype.name}")
        if attrs["divisor_override"] == 0:
            raise self.error(OpAttributeError, "divisor must be not zero")
        return (TensorType(self.infer_shape(types, attrs), t.dtype),)

    def reference(self, arrays, attrs):
        x = arrays[0]
        cdt = dt.from_numpy_dtype(x.dtype).computes_in.np_dtype
        x = x.astype(cdt, copy=False)
        sizes = x.shape[2:]
        out = tuple(pool_output_size(size, k, s, p, 1, attrs["ceil_mode"]) for size, k, s, p in
                    zip(sizes, attrs["kernel_size"], attrs["stride"], attrs["padding"]))
        sums = self.padded_windows(x, attrs, 0, out).sum(axis=(4, 5), dtype=cdt)
        divisor = self.divisors(sizes, out, attrs)
        if cdt.kind in "iu":
            quotient = np.abs(sums) // np.abs(divisor)
            return np.where((sums < 0) != (divisor < 0), -quotient, quotient)
        return sums / divisor

    @staticmethod
    def divisors(sizes, out, attrs) -> np.ndarray:
        """The (outH, outW) divisor of each window."""
        if attrs["divisor_override"] is not None:
            return np.full(out, attrs["divisor_override"], np.int64)
        counts = []
        for size, o, k, s, p in zip(sizes, out, attrs["kernel_size"], attrs["stride"], attrs["padding"]):
            start = np.arange(o) * s - p
            end = np.minimum(start + k, size + p)
            if attrs["count_include_pad"]:
                counts.append(end - start)
            else:
                counts.append(np.minimum(end, size) - np.maximum(start, 0))
        return counts[0][:, None] * counts[1][None, :]


@register
class Pad(Op):
    """Pad each dim by ``low``/``high`` elements (negative amounts crop), with ``value`` or input elements.

    Modes: ``constant`` fills with ``value`` (converted to the input dtype like a cast);
    ``reflect`` mirrors without repeating the edge; ``replicate`` repeats the edge;
    ``circular`` wraps around. Reflect and replicate pad before cropping; circular crops
    first and wraps the cropped tensor, as PyTorch does.
    """

    name = "tp.pad"
    family = "conv"
    operands = (Operand("input"),)
    attributes = (
        Attr("low", AttrKind.INTS, doc="elements added before each dim"),
        Attr("high", AttrKind.INTS, doc="elements added after each dim"),
        Attr("mode", AttrKind.STR, "constant", choices=("constant", "reflect", "replicate", "circular")),
        Attr("value", AttrKind.FLOAT, 0.0, doc="fill value of constant mode"),
    )

    def vjp(self, ctx: RuleContext, grads):
        # each output element is a copy of one input element or the fill value: where each came
        # from is the pad of the input's element numbers, and the gradient is added back there
        g = grads[0]
        shape, _ = ctx.input_meta[0]
        count = int(np.prod(shape)) if shape else 1
        if count == 0:
            return (ctx.zeros(shape, g.dtype, g),)
        numbers = _grad.on(ctx.apply_op("tp.constant", value=np.arange(count, dtype=np.int64).reshape(shape)), g)
        attrs = dict(ctx.attrs, value=-1.0)
        source = ctx.apply_op("tp.pad", numbers, **attrs).reshape(-1)
        filled = source < 0
        flat = _grad.where(ctx, filled, 0.0, g.reshape(-1))
        source = ctx.apply_op("tp.where", filled, ctx.apply_op("tp.full", shape=(), value=0.0, dtype=source.dtype),
                              source)
        zero = ctx.zeros((count,), g.dtype, g)
        out = ctx.apply_op("tp.index_put", zero, flat, source, dims=(0,), accumulate=True)
        return (out.reshape(shape),)

    def infer(self, types, attrs):
        t = types[0]
        low, high, mode = attrs["low"], attrs["high"], attrs["mode"]
        if len(low) != t.rank or len(high) != t.rank:
            raise self.error(OpAttributeError, f"'low' and 'high' need one entry per dim ({t.rank}), "
                                              f"got low={list(low)} and high={list(high)}")
        if mode in ("reflect", "replicate") and t.dtype.is_bool:
            raise self.error(DTypeError, f"{mode} padding is not implemented for dtype bool")
        shape = []
        for dim, (size, lo, hi) in enumerate(zip(t.shape, low, high)):
            if size is None:
                shape.append(None)
                continue
            where = (f"padding ({lo}, {hi}) at dimension {dim} of input "
                     f"{format_shape(t.shape)}")
            if mode == "reflect" and sym.ge(max(lo, hi), size, "reflect padding"):
                raise self.error(ShapeError, f"Padding size should be less than the corresponding "
                                             f"input dimension, but got: {where}")
            if mode == "replicate" and max(lo, hi) > 0 and sym.eq(size, 0, "replicate padding"):
                raise self.error(ShapeError, f"cannot replicate the edge of an empty dim: {where}")
            if mode == "circular":
                kept = sym.as_size(size + min(lo, 0) + min(hi, 0))
                if sym.gt(max(lo, hi), kept, "circular padding"):
                    raise self.error(ShapeError, f"Padding value causes wrapping around more than "
                                                 f"once: {where}")
            if mode in ("reflect", "replicate") and (lo or hi) and sym.lt(sym.as_size(size + lo + hi), 1, "padding"):
                raise self.error(ShapeError, f"input is too small: {where} gives an output size "
                                             f"of {size + lo + hi}")
            if sym.lt(sym.as_size(size + lo + hi), 0, "padding"):
                raise self.error(ShapeError, f"{where} gives a negative size {size + lo + hi}")
            shape.append(sym.as_size(size + lo + hi))
        return (TensorType(tuple(shape), t.dtype),)

    def reference(self, arrays, attrs):
        x = arrays[0]
        low, high, mode = attrs["low"], attrs["high"], attrs["mode"]
        if x.ndim == 0:
            return x.copy()
        grow = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)]

        def crop(a: np.ndarray) -> np.ndarray:
            return a[tuple(slice(max(-lo, 0), a.shape[i] - max(-hi, 0))
                           for i, (lo, hi) in enumerate(zip(low, high)))]

        if mode == "constant":
            fill = cast_array(np.array(attrs["value"], np.float64), dt.from_numpy_dtype(x.dtype))
            return np.pad(crop(x), grow, constant_values=fill)
        if mode == "circular":
            return np.pad(crop(x), grow, mode="wrap")
        return crop(np.pad(x, grow, mode="reflect" if mode == "reflect" else "edge"))
