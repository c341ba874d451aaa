"""Convolution, pooling, padding and the other spatial layers' functions with
``torch.nn.functional``'s signatures.

Each function resolves PyTorch's argument conveniences (an int for a pair, ``'same'``
padding, unbatched inputs, the last-dim-first pad tuple) into the explicit geometry of one
tp op: ``tp.conv2d``, ``tp.max_pool2d`` (``_with_indices``), ``tp.avg_pool2d`` or
``tp.pad``. ``conv1d`` is ``conv2d`` over a height of 1; ``adaptive_avg_pool2d`` is
``avg_pool2d`` when the sizes divide, else two products with constant averaging matrices.
The rest are compositions of tp ops: ``conv_transpose1d/2d`` is ``conv2d`` of the input
spread out by the stride with the flipped kernel (the input gradient of a convolution);
1-D pooling is 2-D pooling over a height of 1; ``adaptive_max_pool2d`` is ``max_pool2d``
when the sizes divide, else a gather of every window and an argmax; ``interpolate`` picks
(nearest) or blends (linear) rows with ``index_select`` one spatial dim at a time;
``pixel_shuffle`` is a reshape and a permute; channel-wise dropout, instance normalization
and the distances are elementwise ops and reductions. ``conv3d`` is one ``conv2d`` whose input
channels are the input's depth windows (a strided depth slice per kernel depth tap, the output
depth folded into the batch); ``conv_transpose3d`` is ``conv3d`` of the spread input; the 3-D
pools are separable: a 2-D pool over (H, W) of every depth slice, then one over the depth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._dispatch import apply
from ..amp import autocast_mode as _amp
from .._tensor import Tensor
from ..dialects.tp.symbolic import SymInt
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import OpAttributeError, DTypeError, ShapeError
from ..dialects.tp.ops.conv import kernel_too_large
from ..dialects.tp.shapes import format_shape
from .shape import reshape_to
from ._public import exported, public


def _tensor(op: str, value: Any, name: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor._wrap(value)
    raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(value).__name__}")


def _ints(op: str, name: str, value: Any, n: int) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints (a 1-sequence repeats) as an ``n``-tuple."""
    if isinstance(value, Tensor):
        value = value.tolist()
    if isinstance(value, SymInt):
        value = int(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return (int(value),) * n
    if isinstance(value, (tuple, list)):
        # a symbolic size as a window size is made a constant (specialized)
        items = [int(v) if isinstance(v, SymInt) else v for v in value]
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items):
            if len(items) == 1:
                return (int(items[0]),) * n
            if len(items) == n:
                return tuple(int(v) for v in items)
            raise OpAttributeError(f"{op}: expected {name} to be a single integer value or a list "
                                  f"of {n} values, but got {name}={items}")
    raise TypeError(f"{op}(): argument '{name}' must be an int or a tuple of {n} ints, not "
                    f"{type(value).__name__}")


def _batched(op: str, x: Tensor, spatial: int) -> tuple[Tensor, bool]:
    """``x`` with a batch dim (added when unbatched) and whether one was added."""
    if x.ndim == spatial + 2:
        return x, False
    if x.ndim == spatial + 1:
        return reshape_to(x, (1,) + tuple(x.shape), op), True
    raise ShapeError(f"{op}: Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) "
                     f"input to {op}, but got input of size: {format_shape(x.shape)}")


def _unbatched(op: str, y: Tensor, added: bool) -> Tensor:
    return reshape_to(y, tuple(y.shape[1:]), op) if added else y


# --- convolution -------------------------------------------------------------------------

def _conv_padding(op: str, padding: Any, kernel: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Low and high padding per spatial dim for an int, a tuple, ``'valid'`` or ``'same'``."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * n, (0,) * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise OpAttributeError(f"{op}: padding='same' is not supported for strided "
                                      f"convolutions")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            # an odd total puts the extra element after, as PyTorch does
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        raise OpAttributeError(f"{op}: Invalid padding string: {padding!r}; expected 'valid' or "
                              f"'same'")
    pads = _ints(op, "padding", padding, n)
    return pads, pads


@public(functional=True)
@_amp.policy("lower")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of an NCHW or CHW input with an (O, C/groups, kH, kW) weight."""
    x, w = _tensor("conv2d", input, "input"), _tensor("conv2d", weight, "weight")
    b = None if bias is None else _tensor("conv2d", bias, "bias")
    x, added = _batched("conv2d", x, 2)
    if w.ndim != 4:
        raise ShapeError(f"conv2d: expected a 4-D weight (O, C/groups, kH, kW), but got weight of "
                         f"size {format_shape(w.shape)}")
    stride_ = _ints("conv2d", "stride", stride, 2)
    dilation_ = _ints("conv2d", "dilation", dilation, 2)
    low, high = _conv_padding("conv2d", padding, tuple(w.shape[2:]), stride_, dilation_)
    y = apply("tp.conv2d", x, w, b, stride=stride_, padding=low + high, dilation=dilation_,
              groups=groups)
    return _unbatched("conv2d", y, added)


@public(functional=True)
@_amp.policy("lower")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution of an NCL or CL input with an (O, C/groups, k) weight (a conv2d of height 1)."""
    x, w = _tensor("conv1d", input, "input"), _tensor("conv1d", weight, "weight")
    b = None if bias is None else _tensor("conv1d", bias, "bias")
    x, added = _batched("conv1d", x, 1)
    if w.ndim != 3:
        raise ShapeError(f"conv1d: expected a 3-D weight (O, C/groups, k), but got weight of size "
                         f"{format_shape(w.shape)}")
    stride_ = _ints("conv1d", "stride", stride, 1)
    dilation_ = _ints("conv1d", "dilation", dilation, 1)
    low, high = _conv_padding("conv1d", padding, tuple(w.shape[2:]), stride_, dilation_)
    n, c, length = x.shape
    padded, reach = length + low[0] + high[0], dilation_[0] * (w.shape[2] - 1) + 1
    if type(padded) is int and type(reach) is int and padded < reach:
        # (tp.conv2d would give the sizes of the height-1 image the convolution runs on)
        raise ShapeError(f"conv1d: {kernel_too_large((padded,), (reach,))}")
    x4 = reshape_to(x, (n, c, 1, length), "conv1d")
    w4 = reshape_to(w, tuple(w.shape[:2]) + (1, w.shape[2]), "conv1d")
    y = apply("tp.conv2d", x4, w4, b, stride=(1,) + stride_, padding=(0,) + low + (0,) + high,
              dilation=(1,) + dilation_, groups=groups)
    y = reshape_to(y, (y.shape[0], y.shape[1], y.shape[3]), "conv1d")
    return _unbatched("conv1d", y, added)


# --- pooling -----------------------------------------------------------------------------

def _pool_args(op: str, kernel_size: Any, stride: Any, padding: Any,
               n: int = 2) -> tuple[tuple[int, ...], ...]:
    kernel = _ints(op, "kernel_size", kernel_size, n)
    # no stride (None or an empty sequence) means non-overlapping windows
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    stride_ = kernel if empty else _ints(op, "stride", stride, n)
    return kernel, stride_, _ints(op, "padding", padding, n)


@public(functional=True)
def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over 2-D windows of an NCHW or CHW input; with ``return_indices`` also the
    flat ``h * W + w`` position of each maximum."""
    x, added = _batched("max_pool2d", _tensor("max_pool2d", input, "input"), 2)
    kernel, stride_, pad = _pool_args("max_pool2d", kernel_size, stride, padding)
    attrs = dict(kernel_size=kernel, stride=stride_, padding=pad,
                 dilation=_ints("max_pool2d", "dilation", dilation, 2), ceil_mode=ceil_mode)
    if return_indices:
        y, idx = apply("tp.max_pool2d_with_indices", x, **attrs)
        return _unbatched("max_pool2d", y, added), _unbatched("max_pool2d", idx, added)
    return _unbatched("max_pool2d", apply("tp.max_pool2d", x, **attrs), added)


@public(top=False, functional=True)
def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over 2-D windows of an NCHW or CHW input."""
    x, added = _batched("avg_pool2d", _tensor("avg_pool2d", input, "input"), 2)
    kernel, stride_, pad = _pool_args("avg_pool2d", kernel_size, stride, padding)
    y = apply("tp.avg_pool2d", x, kernel_size=kernel, stride=stride_, padding=pad,
              ceil_mode=ceil_mode, count_include_pad=count_include_pad,
              divisor_override=divisor_override)
    return _unbatched("avg_pool2d", y, added)


def _averaging_matrix(size: int, out: int, dtype: dt.DType) -> Tensor:
    """(out, size) matrix whose row i averages the adaptive window ``[i*size//out, ceil((i+1)*size/out))``."""
    m = np.zeros((out, size), np.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return apply("tp.constant", value=m.astype(dtype.np_dtype))


@public(top=False, functional=True)
def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Mean over the windows that split H and W into ``output_size`` near-equal parts
    (``None`` keeps that size)."""
    x = _tensor("adaptive_avg_pool2d", input, "input")
    if x.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                         f"{format_shape(x.shape)}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"adaptive_avg_pool2d: not implemented for dtype {x.dtype.name}")
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise OpAttributeError("adaptive_avg_pool2d: output_size must be 2")
        sizes = list(output_size)
    else:
        sizes = [output_size, output_size]
    h, w = x.shape[-2:]
    out = tuple(int(s) if s is not None else d for s, d in zip(sizes, (h, w)))
    if any(o < 0 for o in out):
        raise OpAttributeError(f"adaptive_avg_pool2d: elements of output_size must be greater "
                              f"than or equal to 0 but received {list(out)}")
    if all(o > 0 and d % o == 0 for o, d in zip(out, (h, w))):
        kernel = (h // out[0], w // out[1])
        return avg_pool2d(x, kernel, kernel)
    # out = A_h @ x @ A_w^T with A the (out, in) averaging matrices
    rows = _averaging_matrix(h, out[0], x.dtype)
    cols = _averaging_matrix(w, out[1], x.dtype)
    cols_t = apply("tp.permute", cols, dims=(1, 0))
    return apply("tp.matmul", rows, apply("tp.matmul", x, cols_t))


# --- padding -----------------------------------------------------------------------------

_MODES = ("constant", "reflect", "replicate", "circular")


def _fill_value(x: Tensor, value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise TypeError(f"pad(): argument 'value' must be a number, not {type(value).__name__}")
    if x.dtype.is_integer and not isinstance(value, (bool, np.bool_)):
        info = np.iinfo(x.dtype.np_dtype)
        if not info.min <= int(value) <= info.max:
            raise OpAttributeError(f"pad: value {value} cannot be converted to type "
                                  f"{x.dtype.name} without overflow")
    return float(value)


@public(top=False, functional=True)
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (negative amounts crop) the last ``len(pad) // 2`` dims; ``pad`` lists the last dim
    first: ``(left, right, top, bottom, ...)``.

    >>> import tensorplay as tp
    >>> tp.nn.functional.pad(tp.ones(2, 3), (1, 2)).shape
    tensorplay.Size([2, 6])
    """
    x = _tensor("pad", input, "input")
    amounts = _ints_list("pad", pad)
    if len(amounts) % 2:
        raise OpAttributeError("pad: Padding length must be divisible by 2")
    n = len(amounts) // 2
    if n > x.ndim:
        raise OpAttributeError(f"pad: Padding length should be less than or equal to two times "
                              f"the input dimension but got padding length {len(amounts)} and "
                              f"input of dimension {x.ndim}")
    if mode not in _MODES:
        raise OpAttributeError(f"pad: Unrecognised padding mode {mode}; expected one of "
                              f"{', '.join(_MODES)}")
    if mode != "constant":
        if value is not None and value != 0:
            raise OpAttributeError(f'pad: Padding mode "{mode}" doesn\'t take in value argument')
        if not (1 <= n <= 3 and x.ndim in (n + 1, n + 2)):
            raise ShapeError(f"pad: Padding size {len(amounts)} is not supported for {x.ndim}D "
                             f"input tensor; {mode} padding pads the last 1, 2 or 3 dims of a "
                             f"tensor with 1 or 2 more dims")
        if mode in ("reflect", "replicate") and any(d == 0 for d in x.shape[1:]):
            raise ShapeError(f"pad: Expected a tensor with possibly 0 batch size and other "
                             f"non-zero dimensions for input, but got: {format_shape(x.shape)}")
    low, high = [0] * x.ndim, [0] * x.ndim
    for i in range(n):
        low[x.ndim - 1 - i], high[x.ndim - 1 - i] = amounts[2 * i], amounts[2 * i + 1]
    fill = _fill_value(x, value) if mode == "constant" else 0.0
    return apply("tp.pad", x, low=low, high=high, mode=mode, value=fill)


def _ints_list(op: str, value: Any) -> list[int]:
    if isinstance(value, Tensor):
        value = value.tolist()
    if not isinstance(value, (tuple, list)) or any(
            isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) for v in value):
        raise TypeError(f"{op}(): argument 'pad' must be a tuple of ints, got {value!r}")
    return [int(v) for v in value]


# --- transposed convolution ----------------------------------------------------------------

_KERNEL_DIMS = {1: "k", 2: "kH, kW", 3: "kD, kH, kW"}


def _conv_transpose_nd(op: str, input: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                       output_padding: Any, groups: int, dilation: Any, spatial: int) -> Tensor:
    """The transposed convolution as the input gradient of a convolution: the input spread out
    by the stride, correlated with the flipped kernel (channels swapped per group)."""
    x, w = _tensor(op, input, "input"), _tensor(op, weight, "weight")
    b = None if bias is None else _tensor(op, bias, "bias")
    x, added = _batched(op, x, spatial)
    if w.ndim != spatial + 2:
        raise ShapeError(f"{op}: expected a {spatial + 2}-D weight (C_in, C_out/groups, "
                         f"{_KERNEL_DIMS[spatial]}), but got weight of size {format_shape(w.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'groups' must be int, not {type(groups).__name__}")
    if groups < 1:
        raise OpAttributeError(f"{op}: non-positive groups is not supported, got groups={groups}")
    stride_ = _ints(op, "stride", stride, spatial)
    pad = _ints(op, "padding", padding, spatial)
    out_pad = _ints(op, "output_padding", output_padding, spatial)
    dilation_ = _ints(op, "dilation", dilation, spatial)
    if any(s < 1 for s in stride_):
        raise OpAttributeError(f"{op}: non-positive stride is not supported")
    if any(d < 1 for d in dilation_):
        raise OpAttributeError(f"{op}: dilation should be greater than zero")
    if any(p < 0 for p in pad):
        raise OpAttributeError(f"{op}: negative padding is not supported")
    if any(o < 0 or (o >= s and o >= d) for o, s, d in zip(out_pad, stride_, dilation_)):
        raise OpAttributeError(f"{op}: output padding must be smaller than either stride or "
                              f"dilation, but got output_padding={list(out_pad)}, "
                              f"stride={list(stride_)} and dilation={list(dilation_)}")
    cin, cout_g = w.shape[0], w.shape[1]
    kernel = tuple(w.shape[2:])
    if cin % groups:
        raise ShapeError(f"{op}: Given groups={groups}, expected weight to be divisible by "
                         f"{groups} at dimension 0, but got weight of size "
                         f"{format_shape(w.shape)} instead")
    if x.shape[1] != cin:
        raise ShapeError(f"{op}: Given transposed=1, weight of size {format_shape(w.shape)}, "
                         f"expected input{format_shape(x.shape)} to have {cin} channels, but got "
                         f"{x.shape[1]} channels instead")
    if b is not None and (b.ndim != 1 or b.shape[0] != cout_g * groups):
        raise ShapeError(f"{op}: Given transposed=1, weight of size {format_shape(w.shape)}, "
                         f"expected bias to be 1-dimensional with {cout_g * groups} elements, but "
                         f"got bias of size {format_shape(b.shape)} instead")
    sizes = tuple(x.shape[2:])
    out = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1
                for n, s, p, d, k, o in zip(sizes, stride_, pad, dilation_, kernel, out_pad))
    if any(o < 1 for o in out):
        raise ShapeError(f"{op}: Given input size per channel: ({' x '.join(map(str, sizes))}). "
                         f"Calculated output size per channel: ({' x '.join(map(str, out))}). "
                         f"Output size is too small")
    if spatial == 1:  # as a transposed conv2d over a height of 1
        x = reshape_to(x, tuple(x.shape[:2]) + (1, sizes[0]), op)
        w = reshape_to(w, tuple(w.shape[:2]) + (1, kernel[0]), op)
        stride_, pad, out_pad, dilation_ = ((1,) + stride_, (0,) + pad, (0,) + out_pad,
                                            (1,) + dilation_)
        kernel = (1,) + kernel
    if any(s != 1 for s in stride_):
        # zeros between the input's elements: each element followed by stride - 1 zeros, the
        # zeros after the last one cropped again
        lead, sizes = tuple(x.shape[:2]), tuple(x.shape[2:])
        apart = lead + tuple(d for size in sizes for d in (size, 1))
        spread = apply("tp.pad", reshape_to(x, apart, op), low=(0,) * len(apart),
                       high=(0, 0) + tuple(d for s in stride_ for d in (0, s - 1)),
                       mode="constant", value=0.0)
        spread = reshape_to(spread, lead + tuple(size * s for size, s in zip(sizes, stride_)), op)
        x = apply("tp.pad", spread, low=(0,) * x.ndim, high=(0, 0) + tuple(1 - s for s in stride_),
                  mode="constant", value=0.0)
    og, k = cout_g, len(kernel)
    wt = apply("tp.permute", reshape_to(w, (groups, cin // groups, og) + kernel, op),
               dims=(0, 2, 1) + tuple(range(3, 3 + k)))
    wt = apply("tp.flip", reshape_to(wt, (groups * og, cin // groups) + kernel, op),
               dims=tuple(range(2, 2 + k)))
    conv_low, conv_high, crop_low, crop_high = [], [], [], []
    for k, p, d, o in zip(kernel, pad, dilation_, out_pad):
        reach = d * (k - 1)
        # the convolution pads what it can; padding beyond the kernel's reach is cropped after
        lo, hi = reach - p, reach - p + o
        conv_low.append(lo if lo >= 0 else reach)
        crop_low.append(0 if lo >= 0 else lo - reach)
        conv_high.append(hi if hi >= 0 else reach)
        crop_high.append(0 if hi >= 0 else hi - reach)
    if spatial == 3:
        y = _conv3d_padded(op, x, wt, b, (1, 1, 1), tuple(conv_low), tuple(conv_high), dilation_,
                           groups)
    else:
        y = apply("tp.conv2d", x, wt, b, stride=(1, 1), padding=tuple(conv_low) + tuple(conv_high),
                  dilation=dilation_, groups=groups)
    if any(crop_low) or any(crop_high):
        y = apply("tp.pad", y, low=(0, 0) + tuple(crop_low), high=(0, 0) + tuple(crop_high),
                  mode="constant", value=0.0)
    if spatial == 1:
        y = reshape_to(y, (y.shape[0], y.shape[1], y.shape[3]), op)
    return _unbatched(op, y, added)


@public(functional=True)
@_amp.policy("lower")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """2-D transposed convolution of an NCHW or CHW input with a (C_in, C_out/groups, kH, kW)
    weight: the gradient of ``conv2d`` with respect to its input."""
    return _conv_transpose_nd("conv_transpose2d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation, 2)


@public(functional=True)
@_amp.policy("lower")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """1-D transposed convolution of an NCL or CL input with a (C_in, C_out/groups, k) weight."""
    return _conv_transpose_nd("conv_transpose1d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation, 1)


# --- 1-D pooling ---------------------------------------------------------------------------

def _as_2d(op: str, input: Any) -> tuple[Tensor, bool]:
    """An NCL or CL input as an N, C, 1, L image, and whether a batch dim was added."""
    x, added = _batched(op, _tensor(op, input, "input"), 1)
    return reshape_to(x, (x.shape[0], x.shape[1], 1, x.shape[2]), op), added


def _from_2d(op: str, y: Tensor, added: bool) -> Tensor:
    return _unbatched(op, reshape_to(y, (y.shape[0], y.shape[1], y.shape[3]), op), added)


def _pool1d_args(op: str, kernel_size: Any, stride: Any, padding: Any) -> tuple[tuple[int, int], ...]:
    kernel = _ints(op, "kernel_size", kernel_size, 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    stride_ = kernel if empty else _ints(op, "stride", stride, 1)
    return (1,) + kernel, (1,) + stride_, (0,) + _ints(op, "padding", padding, 1)


@public(functional=True)
def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over 1-D windows of an NCL or CL input; with ``return_indices`` also the
    position of each maximum along L."""
    x, added = _as_2d("max_pool1d", input)
    kernel, stride_, pad = _pool1d_args("max_pool1d", kernel_size, stride, padding)
    attrs = dict(kernel_size=kernel, stride=stride_, padding=pad,
                 dilation=(1,) + _ints("max_pool1d", "dilation", dilation, 1), ceil_mode=ceil_mode)
    if return_indices:
        y, idx = apply("tp.max_pool2d_with_indices", x, **attrs)
        return _from_2d("max_pool1d", y, added), _from_2d("max_pool1d", idx, added)
    return _from_2d("max_pool1d", apply("tp.max_pool2d", x, **attrs), added)


@public(functional=True)
def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Mean over 1-D windows of an NCL or CL input."""
    x, added = _as_2d("avg_pool1d", input)
    kernel, stride_, pad = _pool1d_args("avg_pool1d", kernel_size, stride, padding)
    y = apply("tp.avg_pool2d", x, kernel_size=kernel, stride=stride_, padding=pad,
              ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=None)
    return _from_2d("avg_pool1d", y, added)


def _adaptive_sizes(op: str, x: Tensor, output_size: Any, spatial: int) -> tuple[int, ...]:
    """``output_size`` (an int, or a sequence with ``None`` for "keep") as ints."""
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(f"{op}(): Expected {spatial + 1}D or {spatial + 2}D tensor, but got "
                         f"{format_shape(x.shape)}")
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * spatial
    if len(sizes) != spatial:
        raise OpAttributeError(f"{op}: output_size must be {spatial}")
    for s in sizes:
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, np.integer, SymInt))):
            raise TypeError(f"{op}(): argument 'output_size' must be an int or a tuple of "
                            f"{spatial} ints, not {type(s).__name__}")
    dims = tuple(x.shape[-spatial:])
    out = tuple(int(s) if s is not None else d for s, d in zip(sizes, dims))
    if any(o < 0 for o in out):
        raise OpAttributeError(f"{op}: elements of output_size must be greater than or equal to 0 "
                              f"but received {list(out)}")
    return out


@public(functional=True)
def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Mean over the windows that split L into ``output_size`` near-equal parts."""
    x = _tensor("adaptive_avg_pool1d", input, "input")
    (size,) = _adaptive_sizes("adaptive_avg_pool1d", x, output_size, 1)
    x4 = reshape_to(x, tuple(x.shape[:-1]) + (1, x.shape[-1]), "adaptive_avg_pool1d")
    y = adaptive_avg_pool2d(x4, (1, size))
    return reshape_to(y, tuple(y.shape[:-2]) + (y.shape[-1],), "adaptive_avg_pool1d")


def _adaptive_windows(size: int, out: int) -> tuple[np.ndarray, int]:
    """(out, widest) positions of each adaptive window ``[i*size//out, ceil((i+1)*size/out))``,
    narrower windows padded with their last position, and the widest window's width."""
    starts = (np.arange(out) * size) // out
    ends = -((-(np.arange(out) + 1) * size) // out)
    widest = int((ends - starts).max()) if out else 1
    taps = np.minimum(starts[:, None] + np.arange(widest)[None, :], ends[:, None] - 1)
    return taps.astype(np.int64), widest


@public(top=False, functional=True)
def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Maximum over the windows that split H and W into ``output_size`` near-equal parts
    (``None`` keeps that size); with ``return_indices`` also the flat ``h * W + w`` position
    of each maximum."""
    op = "adaptive_max_pool2d"
    x = _tensor(op, input, "input")
    oh, ow = _adaptive_sizes(op, x, output_size, 2)
    if x.dtype.is_bool:
        raise DTypeError(f"{op}: not implemented for dtype {x.dtype.name}")
    x, added = _batched(op, x, 2)
    n, c, h, w = x.shape
    if any(d == 0 for d in (c, h, w)):
        raise ShapeError(f"{op}(): Expected input to have non-zero size for non-batch "
                         f"dimensions, but input has sizes {format_shape(x.shape)}")
    if oh > 0 and ow > 0 and h % oh == 0 and w % ow == 0:
        kernel = (h // oh, w // ow)
        y, idx = apply("tp.max_pool2d_with_indices", x, kernel_size=kernel, stride=kernel,
                       padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    else:  # the window tables are constants: the spatial sizes are specialized
        h, w = int(h), int(w)
        rows, kh = _adaptive_windows(h, oh)
        cols, kw = _adaptive_windows(w, ow)
        # every window gathered to (N, C, oh, ow, kh * kw); its first maximum's tap picked
        from . import indexing
        from . import reduction
        win = indexing.index_select(x, 2, apply("tp.constant", value=rows.reshape(-1)))
        win = indexing.index_select(win, 3, apply("tp.constant", value=cols.reshape(-1)))
        win = apply("tp.permute", reshape_to(win, (n, c, oh, kh, ow, kw), op), dims=(0, 1, 2, 4, 3, 5))
        win = reshape_to(win, (n, c, oh, ow, kh * kw), op)
        tap = reduction.argmax(win, -1, keepdim=True)
        if x.dtype.is_floating_point:  # a window with NaNs: its last NaN, as PyTorch's kernel
            from . import elementwise

            nan = elementwise.cast(elementwise.isnan(win), dt.int32)
            last = elementwise.sub(kh * kw - 1, reduction.argmax(apply("tp.flip", nan, dims=(4,)), -1, keepdim=True))
            tap = elementwise.where(reduction.amax(nan, -1, keepdim=True) > 0, last, tap)
        flat = (rows[:, None, :, None] * w + cols[None, :, None, :]).reshape(oh, ow, kh * kw)
        table = apply("tp.broadcast_to", apply("tp.constant", value=flat), shape=(n, c, oh, ow, kh * kw))
        idx = reshape_to(indexing.gather(table, 4, tap), (n, c, oh, ow), op)
        y = reshape_to(indexing.gather(reshape_to(x, (n, c, h * w), op), 2,
                                reshape_to(idx, (n, c, oh * ow), op)), (n, c, oh, ow), op)
    if return_indices:
        return _unbatched(op, y, added), _unbatched(op, idx, added)
    return _unbatched(op, y, added)


@public(top=False, functional=True)
def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Maximum over the windows that split L into ``output_size`` near-equal parts; with
    ``return_indices`` also the position of each maximum along L."""
    op = "adaptive_max_pool1d"
    x = _tensor(op, input, "input")
    (size,) = _adaptive_sizes(op, x, output_size, 1)
    x4 = reshape_to(x, tuple(x.shape[:-1]) + (1, x.shape[-1]), op)
    res = adaptive_max_pool2d(x4, (1, size), return_indices)

    def back(t: Tensor) -> Tensor:
        return reshape_to(t, tuple(t.shape[:-2]) + (t.shape[-1],), op)

    return (back(res[0]), back(res[1])) if return_indices else back(res)


# --- resampling ----------------------------------------------------------------------------

_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")
_LINEAR_RANK = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _interp_sizes(x: Tensor, size: Any, scale_factor: Any, recompute: bool | None
                  ) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    """Output sizes and the scale factors the source positions use (``None``: in / out)."""
    op, spatial = "interpolate", x.ndim - 2
    if size is not None and scale_factor is not None:
        raise OpAttributeError(f"{op}: only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (tuple, list)) and len(size) != spatial:
            raise OpAttributeError(f"{op}: Input and output must have the same number of spatial "
                                  f"dimensions, but got input with spatial dimensions of "
                                  f"{list(x.shape[2:])} and output size of {list(size)}. Please "
                                  f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                  f"output size in (o1, o2, ...,oK) format.")
        out = _ints(op, "size", size, spatial)
        if any(o < 1 for o in out):
            raise OpAttributeError(f"{op}: output sizes must be positive, but got size={list(out)}")
        return out, (None,) * spatial
    if scale_factor is None:
        raise OpAttributeError(f"{op}: either size or scale_factor should be defined")
    if isinstance(scale_factor, (tuple, list)):
        if len(scale_factor) != spatial:
            raise OpAttributeError(f"{op}: Input and scale_factor must have the same number of "
                                  f"spatial dimensions, but got input with spatial dimensions of "
                                  f"{list(x.shape[2:])} and scale_factor of shape "
                                  f"{list(scale_factor)}. Please provide input tensor in (N, C, "
                                  f"d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                                  f"format.")
        scales = tuple(scale_factor)
    else:
        scales = (scale_factor,) * spatial
    for s in scales:
        if isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
            raise TypeError(f"{op}(): argument 'scale_factor' must be a number or a tuple of "
                            f"numbers, not {type(s).__name__}")
    scales = tuple(float(s) for s in scales)
    if any(s <= 0 for s in scales):
        raise OpAttributeError(f"{op}: scale_factor must be positive, but got {list(scales)}")
    out = tuple(math.floor(float(d) * s) for d, s in zip(x.shape[2:], scales))
    if any(o < 1 for o in out):
        raise OpAttributeError(f"{op}: the output size {list(out)} of input sizes "
                              f"{list(x.shape[2:])} and scale_factor {list(scales)} is not "
                              f"positive")
    return out, ((None,) * spatial if recompute else scales)


def _step(size: int, out: int, scale: float | None, align_corners: bool, np_dtype: Any) -> Any:
    """The distance between source positions of neighbouring outputs, in the compute dtype."""
    if align_corners:
        return np_dtype.type((size - 1) / (out - 1) if out > 1 else 0.0)
    if scale is not None and scale > 0:
        return np_dtype.type(1.0 / scale)
    return np_dtype.type(size) / np_dtype.type(out)


def _nearest_dim(x: Tensor, dim: int, out: int, scale: float | None, exact: bool) -> Tensor:
    from . import indexing

    size = x.shape[dim]
    f32 = np.dtype(np.float32)
    step = _step(size, out, scale, False, f32)
    dst = np.arange(out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * step if exact else dst * step).astype(np.int64)
    src = np.minimum(src, size - 1)
    if out == size and not exact:
        return x
    return indexing.index_select(x, dim, apply("tp.constant", value=src))


def _linear_dim(x: Tensor, dim: int, out: int, scale: float | None, align_corners: bool) -> Tensor:
    """Linear interpolation along ``dim``: ``w0 * x[i0] + w1 * x[i1]`` per output position, the
    positions and weights computed in the compute dtype as PyTorch's kernels do."""
    from . import elementwise
    from . import indexing

    size = x.shape[dim]
    cdt = np.dtype(x.dtype.np_dtype)
    step = _step(size, out, scale, align_corners, cdt)
    dst = np.arange(out, dtype=cdt)
    if align_corners:
        src = dst * step
    else:
        src = np.maximum((dst + cdt.type(0.5)) * step - cdt.type(0.5), cdt.type(0))
    i0 = np.minimum(src.astype(np.int64), size - 1)
    i1 = i0 + (i0 < size - 1)
    w1 = np.minimum(src - i0.astype(cdt), cdt.type(1))
    w0 = cdt.type(1) - w1
    shape = [1] * x.ndim
    shape[dim] = out
    lo = indexing.index_select(x, dim, apply("tp.constant", value=i0))
    hi = indexing.index_select(x, dim, apply("tp.constant", value=i1))
    return elementwise.add(elementwise.mul(apply("tp.constant", value=w0.reshape(shape)), lo),
                 elementwise.mul(apply("tp.constant", value=w1.reshape(shape)), hi))


@public(top=False, functional=True)
def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resample the spatial dims of an (N, C, ...) input to ``size`` or by ``scale_factor``:
    ``nearest``, ``nearest-exact``, ``linear`` (3-D), ``bilinear`` (4-D), ``trilinear`` (5-D)
    or ``area`` (adaptive average pooling)."""
    op = "interpolate"
    x = _tensor(op, input, "input")
    if mode not in _INTERP_MODES:
        raise OpAttributeError(f"{op}: unsupported mode {mode!r}; expected one of "
                              f"{', '.join(_INTERP_MODES)}")
    if mode in _LINEAR_RANK:
        if x.ndim != _LINEAR_RANK[mode]:
            raise ShapeError(f"{op}: Got {x.ndim}D input, but {mode} mode needs "
                             f"{_LINEAR_RANK[mode]}D input")
        if align_corners is None:
            align_corners = False
    else:
        if align_corners is not None:
            raise OpAttributeError(f"{op}: align_corners option can only be set with the "
                                  f"interpolating modes: linear | bilinear | bicubic | trilinear")
        if x.ndim not in (3, 4, 5):
            raise ShapeError(f"{op}: Input Error: Only 3D, 4D and 5D input Tensors supported "
                             f"(got {x.ndim}D) for the modes: nearest | linear | bilinear | "
                             f"bicubic | trilinear | area | nearest-exact (got {mode})")
    if antialias:
        raise OpAttributeError(f"{op}: antialias=True is not supported")
    if mode == "area" and recompute_scale_factor is None and scale_factor is not None:
        recompute_scale_factor = True
    out, scales = _interp_sizes(x, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return (adaptive_avg_pool1d(x, out) if x.ndim == 3 else adaptive_avg_pool2d(x, out)
                if x.ndim == 4 else _adaptive_avg_pool3d(x, out))
    if mode.startswith("nearest"):
        y = x
        for k in reversed(range(len(out))):
            y = _nearest_dim(y, k + 2, out[k], scales[k], mode == "nearest-exact")
        return y
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: {mode} mode is not implemented for dtype {x.dtype.name}")
    from . import elementwise

    work = x.dtype.computes_in
    y = elementwise.cast(x, work) if work is not x.dtype else x
    for k in reversed(range(len(out))):  # the last dim first, as PyTorch's kernels combine them
        y = _linear_dim(y, k + 2, out[k], scales[k], align_corners)
    return elementwise.cast(y, x.dtype) if work is not x.dtype else y


def _adaptive_avg_pool3d(x: Tensor, out: tuple[int, ...]) -> Tensor:
    """``area`` resampling of a 5-D input: averaging matrices along each spatial dim."""
    from . import linalg

    y = x
    for k in (2, 3, 4):
        m = _averaging_matrix(x.shape[k], out[k - 2], x.dtype)
        y = apply("tp.permute", y, dims=tuple(d for d in range(5) if d != k) + (k,))
        y = linalg.matmul(y, apply("tp.permute", m, dims=(1, 0)))
        back = list(range(4))
        back.insert(k, 4)
        y = apply("tp.permute", y, dims=tuple(back))
    return y


@public(top=False, functional=True)
def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated name of :func:`interpolate`."""
    import warnings

    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def _shuffle_check(op: str, x: Tensor, factor: Any, name: str) -> int:
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type(factor).__name__}")
    if factor <= 0:
        raise OpAttributeError(f"{op}: {name} must be greater than 0, but got {factor}")
    if x.ndim < 3:
        raise ShapeError(f"{op} expects its input to have at least 3 dimensions, but got input "
                         f"with {x.ndim} dimension(s)")
    return int(factor)


@public(functional=True)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C·r², H, W) → (*, C, H·r, W·r): each group of r² channels spread over an r × r block."""
    op = "pixel_shuffle"
    x = _tensor(op, input, "input")
    r = _shuffle_check(op, x, upscale_factor, "upscale_factor")
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(f"{op} expects its input's 'channel' dimension to be divisible by the "
                         f"square of upscale_factor, but input.size(-3)={c} is not divisible by "
                         f"{r * r}")
    k = len(lead)
    y = reshape_to(x, tuple(lead) + (c // (r * r), r, r, h, w), op)
    y = apply("tp.permute", y, dims=tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return reshape_to(y, tuple(lead) + (c // (r * r), h * r, w * r), op)


@public(functional=True)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H·r, W·r) → (*, C·r², H, W): the inverse of :func:`pixel_shuffle`."""
    op = "pixel_unshuffle"
    x = _tensor(op, input, "input")
    r = _shuffle_check(op, x, downscale_factor, "downscale_factor")
    *lead, c, h, w = x.shape
    if h % r or w % r:
        which = "height" if h % r else "width"
        raise ShapeError(f"{op} expects {which} to be divisible by downscale_factor, but "
                         f"input.size({-2 if h % r else -1})={h if h % r else w} is not "
                         f"divisible by {r}")
    k = len(lead)
    y = reshape_to(x, tuple(lead) + (c, h // r, r, w // r, r), op)
    y = apply("tp.permute", y, dims=tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return reshape_to(y, tuple(lead) + (c * r * r, h // r, w // r), op)


# --- channel-wise dropout, instance normalization, distances -------------------------------

def _feature_dropout(op: str, input: Any, p: float, training: bool, inplace: bool,
                     mask_shape: tuple[Any, ...]) -> Tensor:
    from . import creation
    from . import elementwise
    from . import random

    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}(): argument 'p' must be a number, not {type(p).__name__}")
    if p < 0.0 or p > 1.0:
        raise OpAttributeError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = _tensor(op, input, "input")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        out = elementwise.mul(x, creation.zeros((), dtype=x.dtype))
    else:
        keep = elementwise.lt(random.rand(mask_shape, dtype=dt.float32, device=creation._device_like(x, None)), 1.0 - p)
        out = elementwise.mul(x, elementwise.div(elementwise.cast(keep, x.dtype), 1.0 - p))
    return x._assign(out) if inplace else out


@public(top=False, functional=True)
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p`` during
    training, scaling the rest by ``1 / (1 - p)``."""
    x = _tensor("dropout1d", input, "input")
    if x.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D input. "
                         f"Note that dropout1d exists to provide channel-wise dropout on inputs "
                         f"with 1 spatial dimension, a channel dimension, and an optional batch "
                         f"dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout("dropout1d", x, p, training, inplace,
                            tuple(x.shape[:-1]) + (1,))


@public(top=False, functional=True)
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, H, W) input with probability ``p`` during training,
    scaling the rest by ``1 / (1 - p)``. A 3-D input is taken as (N, C, L), as PyTorch does."""
    x = _tensor("dropout2d", input, "input")
    if x.ndim not in (3, 4):
        raise ShapeError(f"dropout2d: Expected 3D or 4D input, but received a {x.ndim}D input")
    if x.ndim == 3:
        import warnings

        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, "
                      "H, W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", stacklevel=2)
    return _feature_dropout("dropout2d", x, p, training, inplace,
                            tuple(x.shape[:2]) + (1,) * (x.ndim - 2))


@public(top=False, functional=True)
def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample over its spatial positions (``use_input_stats``,
    which also moves the running statistics, averaged over the batch, in place) or by the
    running statistics."""
    from .._grad_mode import no_grad
    from . import elementwise
    from . import reduction

    op = "instance_norm"
    x = _tensor(op, input, "input")
    if x.ndim < 3:
        raise ShapeError(f"{op}: expected an (N, C, *) input with at least one spatial dim, but "
                         f"got input of size {format_shape(x.shape)}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: not implemented for dtype {x.dtype.name}")
    c = x.shape[1]
    cshape = (1, c) + (1,) * (x.ndim - 2)
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"{op}: expected {name} of size [{c}] (one per channel), but got "
                             f"{format_shape(t.shape)}")
    work = x.dtype.computes_in
    y = elementwise.cast(x, work) if work is not x.dtype else x
    dims = tuple(range(2, x.ndim))
    if use_input_stats:
        count = 1
        for d in x.shape[2:]:
            count *= d
        if count <= 1:
            raise OpAttributeError(f"Expected more than 1 spatial element when training, got "
                                  f"input size {format_shape(x.shape)}")
        mean = reduction.mean(y, dims, keepdim=True)
        centered = elementwise.sub(y, mean)
        var = reduction.mean(elementwise.mul(centered, centered), dims, keepdim=True)
        with no_grad():
            if running_mean is not None:
                batch_mean = reduction.mean(reshape_to(mean, tuple(x.shape[:2]), op), 0)
                running_mean._assign(elementwise.cast(elementwise.add(elementwise.mul(running_mean, 1 - momentum),
                                                  elementwise.mul(batch_mean, momentum)), running_mean.dtype))
            if running_var is not None:
                unbiased = elementwise.mul(reduction.mean(reshape_to(var, tuple(x.shape[:2]), op), 0),
                                 count / (count - 1))
                running_var._assign(elementwise.cast(elementwise.add(elementwise.mul(running_var, 1 - momentum),
                                                 elementwise.mul(unbiased, momentum)), running_var.dtype))
    else:
        if running_mean is None or running_var is None:
            raise OpAttributeError(f"{op}: Expected running_mean and running_var to be defined "
                                  f"when use_input_stats is false")
        centered = elementwise.sub(y, reshape_to(elementwise.cast(running_mean, work), cshape, op))
        var = reshape_to(elementwise.cast(running_var, work), cshape, op)
    out = elementwise.mul(centered, elementwise.rsqrt(elementwise.add(var, eps)))
    if weight is not None:
        out = elementwise.mul(out, reshape_to(elementwise.cast(weight, work), cshape, op))
    if bias is not None:
        out = elementwise.add(out, reshape_to(elementwise.cast(bias, work), cshape, op))
    return elementwise.cast(out, x.dtype) if work is not x.dtype else out


@public(functional=True)
@_amp.policy("fp32", cpu=False)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` along ``dim`` (the inputs broadcast)."""
    from . import elementwise
    from . import reduction
    from ._helpers import sqrt_zero_grad
    from .shape import broadcast_tensors

    op = "cosine_similarity"
    a, b = _tensor(op, x1, "x1"), _tensor(op, x2, "x2")
    for t in (a, b):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{op}: expected floating point inputs, but got {t.dtype.name}")
    a, b = broadcast_tensors(a, b)
    na = elementwise.clamp(sqrt_zero_grad(reduction.sum(elementwise.mul(a, a), dim, keepdim=True)), min=eps)
    nb = elementwise.clamp(sqrt_zero_grad(reduction.sum(elementwise.mul(b, b), dim, keepdim=True)), min=eps)
    return reduction.sum(elementwise.mul(elementwise.div(a, na), elementwise.div(b, nb)), dim)


@public(functional=True)
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim."""
    from . import elementwise
    from . import reduction
    from ._helpers import sqrt_zero_grad

    op = "pairwise_distance"
    a, b = _tensor(op, x1, "x1"), _tensor(op, x2, "x2")
    for t in (a, b):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{op}: expected floating point inputs, but got {t.dtype.name}")
    diff = elementwise.add(elementwise.sub(a, b), eps)
    if p == math.inf:
        return reduction.amax(elementwise.abs(diff), -1, keepdim)
    if p == -math.inf:
        return reduction.amin(elementwise.abs(diff), -1, keepdim)
    if p == 0:
        return reduction.sum(elementwise.cast(elementwise.ne(diff, 0), diff.dtype), -1, keepdim)
    if p == 2:
        return sqrt_zero_grad(reduction.sum(elementwise.mul(diff, diff), -1, keepdim))
    if p == 1:
        return reduction.sum(elementwise.abs(diff), -1, keepdim)
    return elementwise.pow(reduction.sum(elementwise.pow(elementwise.abs(diff), p), -1, keepdim), 1.0 / p)


# --- 3-D convolution and pooling ---------------------------------------------------------------

def _at_least(op: str, name: str, values: tuple[int, ...], minimum: int, what: str) -> tuple[int, ...]:
    """``values``, checked to be ``minimum`` or more (else ``what``, naming them)."""
    if any(v < minimum for v in values):
        raise OpAttributeError(f"{op}: {what}, but got {name}={list(values)}")
    return values


def _conv3d_padded(op: str, x: Tensor, w: Tensor, b: Tensor | None, stride: tuple[int, ...],
                   low: tuple[int, ...], high: tuple[int, ...], dilation: tuple[int, ...],
                   groups: int) -> Tensor:
    """The convolution of an (N, C, D, H, W) input padded by ``low``/``high`` (checked sizes):
    the input's depth windows unfolded into the channels (one strided depth slice per kernel
    depth tap, the output depth folded into the batch), then one ``tp.conv2d`` with the
    kernel's depth taps moved into its input channels."""
    from .shape import slice_dim

    n, c, d, h, wd = x.shape
    o, cg, kd = w.shape[0], w.shape[1], w.shape[2]
    sd, dd = stride[0], dilation[0]
    od = (d + low[0] + high[0] - dd * (kd - 1) - 1) // sd + 1
    xt = apply("tp.permute", x, dims=(0, 2, 1, 3, 4))  # (N, D, C, H, W)
    if low[0] or high[0]:
        xt = apply("tp.pad", xt, low=(0, low[0], 0, 0, 0), high=(0, high[0], 0, 0, 0),
                   mode="constant", value=0.0)
    taps = []
    for k in range(kd):
        part = xt if (kd, sd) == (1, 1) and not (low[0] or high[0]) else \
            slice_dim(xt, 1, k * dd, k * dd + (od - 1) * sd + 1, sd)
        taps.append(reshape_to(part, (n, od, 1, c, h, wd), op))
    cols = taps[0] if kd == 1 else apply("tp.concat", *taps, dim=2)  # (N, oD, kD, C, H, W)
    if groups > 1 and kd > 1:  # each group's channels together: (group, depth tap, channel)
        cols = apply("tp.permute", reshape_to(cols, (n, od, kd, groups, cg, h, wd), op),
                     dims=(0, 1, 3, 2, 4, 5, 6))
    cols = reshape_to(cols, (n * od, kd * c, h, wd), op)
    w2 = apply("tp.permute", w, dims=(0, 2, 1, 3, 4)) if kd > 1 else w
    w2 = reshape_to(w2, (o, kd * cg) + tuple(w.shape[3:]), op)
    y = apply("tp.conv2d", cols, w2, b, stride=stride[1:], padding=low[1:] + high[1:],
              dilation=dilation[1:], groups=groups)
    y = reshape_to(y, (n, od, o) + tuple(y.shape[2:]), op)
    return apply("tp.permute", y, dims=(0, 2, 1, 3, 4))


@public(functional=True)
@_amp.policy("lower")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-D convolution (cross-correlation) of an NCDHW or CDHW input with an
    (O, C/groups, kD, kH, kW) weight."""
    op = "conv3d"
    x, w = _tensor(op, input, "input"), _tensor(op, weight, "weight")
    b = None if bias is None else _tensor(op, bias, "bias")
    x, added = _batched(op, x, 3)
    if w.ndim != 5:
        raise ShapeError(f"{op}: expected a 5-D weight (O, C/groups, kD, kH, kW), but got weight "
                         f"of size {format_shape(w.shape)}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and t.dtype is not x.dtype:
            raise DTypeError(f"{op}: Input type ({x.dtype.name}) and {name} type "
                             f"({t.dtype.name}) should be the same")
    if x.dtype.is_bool:
        raise DTypeError(f"{op}: not implemented for dtype bool")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'groups' must be int, not {type(groups).__name__}")
    if groups < 1:
        raise OpAttributeError(f"{op}: non-positive groups is not supported, got groups={groups}")
    stride_ = _at_least(op, "stride", _ints(op, "stride", stride, 3), 1,
                        "non-positive stride is not supported")
    dilation_ = _at_least(op, "dilation", _ints(op, "dilation", dilation, 3), 1,
                          "dilation should be greater than zero")
    kernel = tuple(w.shape[2:])
    low, high = _conv_padding(op, padding, kernel, stride_, dilation_)
    _at_least(op, "padding", low, 0, "negative padding is not supported")
    o, cg = w.shape[:2]
    if o < groups or o % groups:
        raise ShapeError(f"{op}: Given groups={groups}, expected weight to be "
                         f"{'at least' if o < groups else 'divisible by'} {groups} at dimension "
                         f"0, but got weight of size {format_shape(w.shape)} instead")
    if x.shape[1] != cg * groups:
        raise ShapeError(f"{op}: Given groups={groups}, weight of size {format_shape(w.shape)}, "
                         f"expected input{format_shape(x.shape)} to have {cg * groups} channels, "
                         f"but got {x.shape[1]} channels instead")
    if b is not None and (b.ndim != 1 or b.shape[0] != o):
        raise ShapeError(f"{op}: Given weight of size {format_shape(w.shape)}, expected bias to "
                         f"be 1-dimensional with {o} elements, but got bias of size "
                         f"{format_shape(b.shape)} instead")
    padded = tuple(s + lo + hi for s, lo, hi in zip(x.shape[2:], low, high))
    reach = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation_))
    if any(p < r for p, r in zip(padded, reach)):
        raise ShapeError(f"{op}: {kernel_too_large(padded, reach)}")
    y = _conv3d_padded(op, x, w, b, stride_, low, high, dilation_, groups)
    return _unbatched(op, y, added)


@public(functional=True)
@_amp.policy("lower")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """3-D transposed convolution of an NCDHW or CDHW input with a
    (C_in, C_out/groups, kD, kH, kW) weight: the gradient of ``conv3d`` with respect to its input."""
    return _conv_transpose_nd("conv_transpose3d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation, 3)


def _pool3d_geometry(op: str, x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...],
                     pad: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool
                     ) -> tuple[int, ...]:
    """Checks of a 3-D pool's arguments against an (N, C, D, H, W) input; its output sizes."""
    from ..dialects.tp import symbolic as sym
    from ..dialects.tp.ops.conv import pool_output_size

    _at_least(op, "kernel_size", kernel, 1, "kernel size should be greater than zero")
    _at_least(op, "stride", stride, 1, "stride should be greater than zero")
    _at_least(op, "padding", pad, 0, "pad must be non-negative")
    _at_least(op, "dilation", dilation, 1, "dilation should be greater than zero")
    if any(2 * p > k for p, k in zip(pad, kernel)):
        raise OpAttributeError(f"{op}: pad should be at most half of kernel size, but got "
                              f"padding={list(pad)} and kernel_size={list(kernel)}")
    c, sizes = x.shape[1], tuple(x.shape[2:])
    if c == 0 or any(s == 0 for s in sizes):
        raise ShapeError(f"{op}: expected an input with non-zero channels, depth, height and "
                         f"width (only the batch may be empty), but got {format_shape(x.shape)}")
    out = tuple(sym.as_user_size(pool_output_size(sym.as_size(s), k, st, p, d, ceil_mode))
                for s, k, st, p, d in zip(sizes, kernel, stride, pad, dilation))
    if any(o < 1 for o in out):
        raise ShapeError(f"{op}: Given input size: ({'x'.join(map(str, (c,) + sizes))}). "
                         f"Calculated output size: ({'x'.join(map(str, (c,) + out))}). Output "
                         f"size is too small")
    return out


def _pool3d_stages(kernel: tuple[int, ...], stride: tuple[int, ...], pad: tuple[int, ...],
                   **attrs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attributes of the two 2-D pools a separable 3-D pool is: over (H, W) of each depth
    slice, then over the depth of the (D, oH * oW) image this gives."""
    plane = dict(kernel_size=kernel[1:], stride=stride[1:], padding=pad[1:])
    depth = dict(kernel_size=(kernel[0], 1), stride=(stride[0], 1), padding=(pad[0], 0))
    for name, value in attrs.items():
        if name == "dilation":
            plane[name], depth[name] = value[1:], (value[0], 1)
        else:
            plane[name] = depth[name] = value
    return plane, depth


@public(functional=True)
@_amp.policy("fp32", cuda=False)
def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over 3-D windows of an NCDHW or CDHW input; with ``return_indices`` also the
    flat ``d * H * W + h * W + w`` position of each maximum. Computed as a 2-D max pool over
    (H, W) followed by one over the depth."""
    op = "max_pool3d"
    x, added = _batched(op, _tensor(op, input, "input"), 3)
    kernel, stride_, pad = _pool_args(op, kernel_size, stride, padding, 3)
    dilation_ = _ints(op, "dilation", dilation, 3)
    if x.dtype.is_bool:
        raise DTypeError(f"{op}: not implemented for dtype bool")
    od, oh, ow = _pool3d_geometry(op, x, kernel, stride_, pad, dilation_, ceil_mode)
    n, c, d, h, w = x.shape
    plane, depth = _pool3d_stages(kernel, stride_, pad, dilation=dilation_, ceil_mode=ceil_mode)
    x4 = reshape_to(x, (n, c * d, h, w), op)
    if not return_indices:
        y = apply("tp.max_pool2d", x4, **plane)
        y = apply("tp.max_pool2d", reshape_to(y, (n, c, d, oh * ow), op), **depth)
        return _unbatched(op, reshape_to(y, (n, c, od, oh, ow), op), added)
    from . import elementwise
    from . import indexing

    y, inner = apply("tp.max_pool2d_with_indices", x4, **plane)  # inner: h * W + w
    y, outer = apply("tp.max_pool2d_with_indices", reshape_to(y, (n, c, d, oh * ow), op), **depth)
    # outer = depth * (oH * oW) + the output column: the depth each maximum came from, and
    # its (h, w) position read from the first pool's indices at that depth
    missing = elementwise.lt(outer, 0)  # dilated windows holding no input element give -1
    src = elementwise.floor_divide(elementwise.clamp(outer, min=0), oh * ow)
    inner = indexing.gather(reshape_to(inner, (n, c, d, oh * ow), op), 2, src)
    idx = elementwise.add(elementwise.mul(src, h * w), inner)
    if any(dl > 1 for dl in dilation_):
        idx = elementwise.where(elementwise.logical_or(missing, elementwise.lt(inner, 0)), -1, idx)
    shape = (n, c, od, oh, ow)
    return (_unbatched(op, reshape_to(y, shape, op), added),
            _unbatched(op, reshape_to(idx, shape, op), added))


def _avg_pool3d_divisors(sizes: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, ...],
                         stride: tuple[int, ...], pad: tuple[int, ...],
                         count_include_pad: bool) -> np.ndarray:
    """The (oD, oH, oW) number of elements each window averages (padding included or not,
    never the overhang ceil mode adds)."""
    counts = []
    for size, o, k, s, p in zip(sizes, out, kernel, stride, pad):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        counts.append(end - start if count_include_pad
                      else np.minimum(end, size) - np.maximum(start, 0))
    return counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]


@public(top=False, functional=True)
@_amp.policy("fp32", cuda=False)
def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over 3-D windows of an NCDHW or CDHW input: the window sums (a 2-D sum pool over
    (H, W), then one over the depth) over each window's divisor."""
    from . import elementwise

    op = "avg_pool3d"
    x, added = _batched(op, _tensor(op, input, "input"), 3)
    kernel, stride_, pad = _pool_args(op, kernel_size, stride, padding, 3)
    if not (x.dtype.is_floating_point or x.dtype is dt.int64):
        raise DTypeError(f"{op}: not implemented for dtype {x.dtype.name}")
    if divisor_override is not None and (isinstance(divisor_override, bool) or
                                         not isinstance(divisor_override, (int, np.integer))):
        raise TypeError(f"{op}(): argument 'divisor_override' must be int, not "
                        f"{type(divisor_override).__name__}")
    if divisor_override == 0:
        raise OpAttributeError(f"{op}: divisor must be not zero")
    out = _pool3d_geometry(op, x, kernel, stride_, pad, (1, 1, 1), ceil_mode)
    n, c, d, h, w = x.shape
    work = x.dtype.computes_in
    xw = elementwise.cast(x, work) if work is not x.dtype else x
    plane, depth = _pool3d_stages(kernel, stride_, pad, ceil_mode=ceil_mode,
                                  count_include_pad=True, divisor_override=1)
    sums = apply("tp.avg_pool2d", reshape_to(xw, (n, c * d, h, w), op), **plane)
    sums = apply("tp.avg_pool2d", reshape_to(sums, (n, c, d, out[1] * out[2]), op), **depth)
    sums = reshape_to(sums, (n, c) + out, op)
    if divisor_override is not None:
        divisor: Any = int(divisor_override)
    elif not ceil_mode and (count_include_pad or not any(pad)):  # every window a whole kernel
        divisor = int(np.prod(kernel))
    else:  # (sizes known: a symbolic one is specialized)
        counts = _avg_pool3d_divisors((int(d), int(h), int(w)), tuple(int(o) for o in out), kernel,
                                      stride_, pad, count_include_pad)
        same = bool((counts == counts.flat[0]).all())
        divisor = int(counts.flat[0]) if same else apply(
            "tp.constant", value=counts.astype(work.np_dtype if work.is_floating_point else np.int64))
    y = elementwise.div(sums, divisor, rounding_mode="trunc") if work.is_integer else elementwise.div(sums, divisor)
    if work is not x.dtype:
        y = elementwise.cast(y, x.dtype)
    return _unbatched(op, y, added)


@public(top=False, functional=True)
@_amp.policy("fp32", cuda=False)
def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Mean over the windows that split D, H and W into ``output_size`` near-equal parts
    (``None`` keeps that size)."""
    op = "adaptive_avg_pool3d"
    x = _tensor(op, input, "input")
    out = _adaptive_sizes(op, x, output_size, 3)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: not implemented for dtype {x.dtype.name}")
    x, added = _batched(op, x, 3)
    sizes = tuple(x.shape[2:])
    if all(o > 0 and s % o == 0 for o, s in zip(out, sizes)):
        kernel = tuple(s // o for s, o in zip(sizes, out))
        y = avg_pool3d(x, kernel, kernel)
    else:
        y = _adaptive_avg_pool3d(x, out)
    return _unbatched(op, y, added)


@public(top=False, functional=True)
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability ``p``
    during training, scaling the rest by ``1 / (1 - p)``. Other ranks warn and drop along
    their first dim, as PyTorch does."""
    x = _tensor("dropout3d", input, "input")
    if x.ndim not in (4, 5):
        if x.ndim == 0:
            raise ShapeError("dropout3d: Expected 4D or 5D input, but received a 0D input")
        import warnings

        warnings.warn(f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is deprecated "
                      f"and will result in an error in a future release. To retain the behavior "
                      f"and silence this warning, please use dropout instead. Note that dropout3d "
                      f"exists to provide channel-wise dropout on inputs with 3 spatial "
                      f"dimensions, a channel dimension, and an optional batch dimension (i.e. 4D "
                      f"or 5D inputs).", stacklevel=2)
    mask = tuple(x.shape[:2]) + (1,) * 3 if x.ndim == 5 else (x.shape[0],) + (1,) * (x.ndim - 1)
    return _feature_dropout("dropout3d", x, p, training, inplace, mask)


__all__ = exported(__name__)  # the names declared @public above
