"""Convolution, pooling and padding with ``torch.nn.functional``'s signatures.

Each function resolves PyTorch's argument conveniences (an int for a pair, ``'same'``
padding, unbatched inputs, the last-dim-first pad tuple) into the explicit geometry of one
tp op: ``tp.conv2d``, ``tp.max_pool2d`` (``_with_indices``), ``tp.avg_pool2d`` or
``tp.pad``. ``conv1d`` is ``conv2d`` over a height of 1; ``adaptive_avg_pool2d`` is
``avg_pool2d`` when the sizes divide, else two products with constant averaging matrices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp.symbolic import SymInt
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import AttributeError_, DTypeError, ShapeError
from ..dialects.tp.ops.conv import kernel_too_large
from ..dialects.tp.shapes import format_shape
from .shape import reshape_to

__all__ = ["conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "pad"]


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
            raise AttributeError_(f"{op}: expected {name} to be a single integer value or a list "
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
                raise AttributeError_(f"{op}: padding='same' is not supported for strided "
                                      f"convolutions")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            # an odd total puts the extra element after, as PyTorch does
            return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        raise AttributeError_(f"{op}: Invalid padding string: {padding!r}; expected 'valid' or "
                              f"'same'")
    pads = _ints(op, "padding", padding, n)
    return pads, pads


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

def _pool_args(op: str, kernel_size: Any, stride: Any, padding: Any) -> tuple[tuple[int, ...], ...]:
    kernel = _ints(op, "kernel_size", kernel_size, 2)
    # no stride (None or an empty sequence) means non-overlapping windows
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    stride_ = kernel if empty else _ints(op, "stride", stride, 2)
    return kernel, stride_, _ints(op, "padding", padding, 2)


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
            raise AttributeError_("adaptive_avg_pool2d: output_size must be 2")
        sizes = list(output_size)
    else:
        sizes = [output_size, output_size]
    h, w = x.shape[-2:]
    out = tuple(int(s) if s is not None else d for s, d in zip(sizes, (h, w)))
    if any(o < 0 for o in out):
        raise AttributeError_(f"adaptive_avg_pool2d: elements of output_size must be greater "
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
            raise AttributeError_(f"pad: value {value} cannot be converted to type "
                                  f"{x.dtype.name} without overflow")
    return float(value)


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
        raise AttributeError_("pad: Padding length must be divisible by 2")
    n = len(amounts) // 2
    if n > x.ndim:
        raise AttributeError_(f"pad: Padding length should be less than or equal to two times "
                              f"the input dimension but got padding length {len(amounts)} and "
                              f"input of dimension {x.ndim}")
    if mode not in _MODES:
        raise AttributeError_(f"pad: Unrecognised padding mode {mode}; expected one of "
                              f"{', '.join(_MODES)}")
    if mode != "constant":
        if value is not None and value != 0:
            raise AttributeError_(f'pad: Padding mode "{mode}" doesn\'t take in value argument')
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
