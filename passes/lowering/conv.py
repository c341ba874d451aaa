"""Lowerings of the conv family over NCHW tensors.

``tp.conv2d`` pads with ``tensor.pad`` and runs ``linalg.conv_2d_nchw_fchw`` (grouped:
``linalg.depthwise_conv_2d_nchw_chw`` or ``linalg.conv_2d_ngchw_gfchw`` over expanded
shapes) into a zero accumulator of the compute dtype; with one input channel per group it
is an elementwise sum over the kernel taps instead (see ``_by_taps``), and on CPU targets a
strided one, or one over few output positions, is a matrix product of gathered columns (see
``_by_columns``); bias and the rounding of half types share one broadcasting ``linalg.generic``. Pooling pads with the reduction's identity and
uses ``linalg.pooling_nchw_max``/``pooling_nchw_sum``; ``tp.max_pool2d_with_indices`` is a
``linalg.generic`` reducing (value, flat index) pairs. ``tp.pad`` is ``tensor.pad`` (plus
``tensor.extract_slice`` for crops) or, in reflect, replicate and circular modes, a
``linalg.generic`` that reads its source element with ``tensor.extract``.

The padded input of a convolution or pool is cut to the rows and columns its windows reach
(``_cut_to_windows``): IREE rejects a window op with a unit output dim whose input is longer
than its windows read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.ops.conv import windows_may_miss_input
from ...dialects.tp.ops.elementwise import cast_array
from ...dialects.tp.types import is_static
from . import LowerCtx, lowers
from ._builder import (beats, fence, unpadded_strided_insert, cast_scalar, scalar_mul, collapse, const_scalar, dim_map, elem_type, empty, expand,
                       extremum_identity, filled, generic, identity_map, int_div, loop_index, match_type,
                       parallel, scalar_add, tensor_type)
from ._sizes import Size, as_index, has_static_zero, index_add, index_const, sizes_of, split_sizes
from ._target import target

_I = arith.CmpIPredicate


def _pad_constant(value: ir.Value, sizes: Sequence[Size], low: Sequence[int], high: Sequence[int],
                  fill: ir.Value, elem: ir.Type) -> tuple[ir.Value, list[Size]]:
    """``tensor.pad`` by static non-negative amounts with the scalar ``fill``."""
    new = [index_add(s, lo + hi) if lo + hi else s for s, lo, hi in zip(sizes, low, high)]
    if not any(low) and not any(high):
        return value, new
    value = unpadded_strided_insert(value)
    op = tensor.PadOp(tensor_type(new, elem), value, [], [], list(low), list(high))
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * len(sizes))
    with ir.InsertionPoint(block):
        tensor.YieldOp(fill)
    return op.result, new


def _window_out(size: Size, known, kernel: Size, stride: int, pad_lo: int, pad_hi: int,
                dilation: int, ceil_mode: bool) -> Size:
    """One spatial output size: the declared one when static, else computed like the op's
    inference (``pad_hi`` is the explicit high padding of conv; pooling passes ``None``)."""
    if is_static(known):
        return int(known)
    pad_total = pad_lo + (pad_lo if pad_hi is None else pad_hi)
    extra = stride - 1 if ceil_mode else 0
    if isinstance(kernel, int):
        numer = index_add(size, pad_total + extra - dilation * (kernel - 1) - 1)
    else:  # size + pads + extra - dilation * (kernel - 1) - 1
        reach = arith.MulIOp(kernel, index_const(dilation)).result
        numer = arith.SubIOp(index_add(size, pad_total + extra + dilation - 1), reach).result
    numer = as_index(numer)
    out = arith.AddIOp(arith.FloorDivSIOp(numer, index_const(stride)).result, index_const(1)).result
    if ceil_mode:
        # the last window must start inside the input or its left padding
        last = arith.MulIOp(arith.SubIOp(out, index_const(1)).result, index_const(stride)).result
        limit = as_index(index_add(size, pad_lo))
        over = arith.CmpIOp(_I.sge, last, limit).result
        out = arith.SelectOp(over, arith.SubIOp(out, index_const(1)).result, out).result
    return out


def _cut_to_windows(value: ir.Value, sizes: list[Size], out_sizes: Sequence[Size], kernel: Sequence[Size],
                    stride: Sequence[int], dilation: Sequence[int], elem: ir.Type) -> tuple[ir.Value, list[Size]]:
    """The padded NCHW ``value`` (of ``sizes``) cut to the rows and columns its windows read,
    ``(out - 1) * stride + dilation * (kernel - 1) + 1``, where that reach is static and the
    input may be longer (a stride leaves the last rows unread), and its new sizes. Where IREE
    drops an output dim of size 1 from a window op, it takes the window loop's trip count from
    the input: a longer input makes that loop longer than the kernel, and IREE rejects the op
    ("inferred input/output operand #1 has shape's dimension #2 to be 4, but found 3": a 3x3,
    stride-2 convolution of a 2x2 input padded by 1)."""
    new, cut = list(sizes), False
    for i in (2, 3):
        o, k = out_sizes[i - 2], kernel[i - 2]
        if not (isinstance(o, int) and isinstance(k, int) and o > 0 and k > 0):
            continue
        reach = (o - 1) * stride[i - 2] + dilation[i - 2] * (k - 1) + 1
        if not (isinstance(sizes[i], int) and sizes[i] <= reach):
            new[i], cut = reach, True
    if not cut:
        return value, sizes
    dynamic, static = split_sizes(new)
    op = tensor.ExtractSliceOp(tensor_type(new, elem), value, [], dynamic, [], [0] * 4, static, [1] * 4)
    return op.result, new


def _padded_pool_input(ctx: LowerCtx, fill: ir.Value, dilation: Sequence[int] = (1, 1),
                       ) -> tuple[ir.Value, list[Size], list[Size]]:
    """The input of a pooling op padded with ``fill`` (and cut to its windows' reach), its
    sizes and the output sizes. The high side covers ceil mode's last windows: exactly when
    the size is static, else by an upper bound (padding beyond the last window is never
    read)."""
    (x, tx), = ctx.inputs()
    kernel, stride, pad, ceil = (ctx.attrs["kernel_size"], ctx.attrs["stride"], ctx.attrs["padding"],
                                 ctx.attrs["ceil_mode"])
    sizes = sizes_of(x, tx)
    out_sizes = sizes[:2]
    high = []
    for i in range(2):
        size, k, s, p, d = sizes[2 + i], kernel[i], stride[i], pad[i], dilation[i]
        o = _window_out(size, ctx.out_types[0].shape[2 + i], k, s, p, None, d, ceil)
        out_sizes.append(o)
        if isinstance(size, int) and isinstance(o, int):
            high.append(max((o - 1) * s + d * (k - 1) + 1 - size - p, 0))
        else:
            high.append(p + (s - 1 if ceil else 0))
    elem = elem_type(tx.dtype)
    padded, padded_sizes = _pad_constant(x, sizes, [0, 0, pad[0], pad[1]], [0, 0, high[0], high[1]], fill, elem)
    cut, _ = _cut_to_windows(padded, padded_sizes, out_sizes[2:], kernel, stride, dilation, elem)
    return cut, sizes, out_sizes


def _window_generic(padded: ir.Value, dtype: dt.DType, kernel, stride, dilation, outs: list[ir.Value],
                    body: Callable[[list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """A ``linalg.generic`` over (n, c, oh, ow, kh, kw) reducing the windows of ``padded`` (of
    ``dtype``) into ``outs``; ``body`` gets (element, *accumulators) and yields the new
    accumulators."""
    d = [ir.AffineDimExpr.get(i) for i in range(6)]
    read = ir.AffineMap.get(6, 0, [d[0], d[1], d[2] * stride[0] + d[4] * dilation[0],
                                   d[3] * stride[1] + d[5] * dilation[1]])
    window = empty(list(kernel), dtype)  # only gives the window loops their sizes
    out_map = dim_map(6, range(4))
    return generic([(padded, read), (window, dim_map(6, [4, 5]))], [(o, out_map) for o in outs],
                   lambda args: body([args[0]] + args[2:]), reduced=(4, 5))


@lowers("tp.conv2d", summary="`tensor.pad` + `linalg.conv_2d_nchw_fchw` (groups: "
                             "`linalg.depthwise_conv_2d_nchw_chw` or `linalg.conv_2d_ngchw_gfchw` via "
                             "`tensor.expand_shape`) into a `linalg.fill` 0 accumulator (float32 for "
                             "half types); one input channel per group and at most 49 static kernel taps "
                             "(unit strides, or one group): a parallel `linalg.generic` summing one "
                             "`tensor.extract_slice` of the input per tap times its weights; on CPU "
                             "targets a one-group convolution that is strided or has at most 64 output "
                             "positions by columns: a `linalg.generic` gathering the windows, times the "
                             "filter matrix (`linalg.matmul` over [c*kh*kw, n*oh*ow] columns and a "
                             "transpose when c*kh*kw >= 256, else a contraction `linalg.generic`); bias "
                             "and rounding in one broadcasting `linalg.generic`")
def _conv2d(ctx: LowerCtx) -> list[ir.Value]:
    x, w, bias = ctx.operands
    tx, tw, tb = ctx.in_types
    out = ctx.out_types[0]
    dtype = tx.dtype
    acc_dtype = dtype.computes_in
    elem = elem_type(dtype)
    stride, dilation, groups = ctx.attrs["stride"], ctx.attrs["dilation"], ctx.attrs["groups"]
    top, left, bottom, right = ctx.attrs["padding"]
    x_sizes, w_sizes = sizes_of(x, tx), sizes_of(w, tw)
    # Input channels = groups * weight channels: where one side knows its size, the other
    # is cast to it, since expand_shape cannot split a static dim into a dynamic one.
    if not isinstance(x_sizes[1], int) and isinstance(w_sizes[1], int):
        x_sizes[1] = w_sizes[1] * groups
        x = tensor.CastOp(tensor_type(x_sizes, elem), x).result
    elif isinstance(x_sizes[1], int) and not isinstance(w_sizes[1], int):
        w_sizes[1] = x_sizes[1] // groups
        w = tensor.CastOp(tensor_type(w_sizes, elem), w).result
    x, x_sizes = _pad_constant(x, x_sizes, [0, 0, top, left], [0, 0, bottom, right],
                               const_scalar(0, dtype), elem)
    n, c = x_sizes[:2]
    o, cg, kh, kw = w_sizes
    oh = _window_out(x_sizes[2], out.shape[2], kh, stride[0], 0, 0, dilation[0], False)
    ow = _window_out(x_sizes[3], out.shape[3], kw, stride[1], 0, 0, dilation[1], False)
    x, x_sizes = _cut_to_windows(x, x_sizes, (oh, ow), (kh, kw), stride, dilation, elem)
    geometry = dict(strides=list(stride), dilations=list(dilation))
    if has_static_zero([cg, kh, kw]):
        # IREE 3.13 crashes compiling a contraction over a static empty dim; the sum is just 0.
        result = filled([n, o, oh, ow], acc_dtype, 0)
    elif _by_taps(cg, o, kh, kw, stride, groups, x_sizes):
        result = _conv_taps(x, w, [n, o, oh, ow], (kh, kw), groups, stride, dilation, dtype, acc_dtype)
    elif groups == 1 and target().conv_by_columns and _by_columns([n, c, o, kh, kw, oh, ow], stride):
        result = _conv_columns(x, w, [n, c, o, kh, kw, oh, ow], stride, dilation, dtype, acc_dtype)
    elif groups == 1:
        result = linalg.conv_2d_nchw_fchw(x, w, outs=[filled([n, o, oh, ow], acc_dtype, 0)], **geometry)
    elif cg == 1 and isinstance(o, int) and o == groups and target().depthwise_conv:
        # one filter per channel: depthwise
        w = collapse(w, [[0, 1], [2], [3]])
        result = linalg.depthwise_conv_2d_nchw_chw(x, w, outs=[filled([n, o, oh, ow], acc_dtype, 0)],
                                                   **geometry)
    else:
        per_group = o // groups if isinstance(o, int) else \
            arith.DivUIOp(o, index_const(groups)).result
        xg = expand(x, [[0], [1, 2], [3], [4]], [n, groups, cg] + x_sizes[2:])
        wg = expand(w, [[0, 1], [2], [3], [4]], [groups, per_group, cg, kh, kw])
        acc = filled([n, groups, per_group, oh, ow], acc_dtype, 0)
        grouped = linalg.conv_2d_ngchw_gfchw(xg, wg, outs=[acc], **geometry)
        result = collapse(grouped, [[0], [1, 2], [3], [4]])
    if bias is None and acc_dtype is dtype:
        return [match_type(result, out)]
    return [match_type(_bias_and_round(result, bias, [n, o, oh, ow], acc_dtype, dtype,
                                       None if tb is None else tb.dtype), out)]


#: the most kernel taps (kH * kW) a convolution with one input channel per group is unrolled to
TAPS_MAX = 49


def _by_taps(cg: Size, o: Size, kh: Size, kw: Size, stride: Sequence[int], groups: int,
             x_sizes: Sequence[Size]) -> bool:
    """Whether a convolution is lowered as one elementwise sum over its kernel taps: one input
    channel per group (a grayscale first layer, depthwise convolutions), a small static kernel,
    and unit strides unless there is a single group of static sizes. IREE 3.13's CPU code for
    such convolutions runs 6-16x slower than the elementwise form (strided depthwise ones run
    faster as convolutions)."""
    if not (cg == 1 and isinstance(o, int) and isinstance(kh, int) and isinstance(kw, int)):
        return False
    if kh * kw > TAPS_MAX or o % groups or has_static_zero(x_sizes):
        return False  # (MLIR rejects slicing a dim of static size 0)
    if tuple(stride) != (1, 1):
        return groups == 1 and all(isinstance(s, int) for s in x_sizes)
    return True


def _conv_taps(x: ir.Value, w: ir.Value, out_sizes: list[Size], kernel: tuple[int, int], groups: int,
               stride: Sequence[int], dilation: Sequence[int], dtype: dt.DType,
               acc_dtype: dt.DType) -> ir.Value:
    """A convolution with one input channel per group as a parallel ``linalg.generic`` over
    (n, group, multiplier, oh, ow) summing, tap by tap, a strided slice of the padded input
    times that tap's weights: no reduction loop, vectorized along the output width."""
    n, o, oh, ow = out_sizes
    kh, kw = kernel
    mult = o // groups
    elem = elem_type(dtype)
    slice_sizes = [n, groups, oh, ow]
    dynamic, static = split_sizes(slice_sizes)
    w_type = tensor_type([o], elem)
    x_map = dim_map(5, [0, 1, 3, 4])
    w_map = dim_map(5, [1, 2])
    ins = []
    taps = [(i, j) for i in range(kh) for j in range(kw)]
    for i, j in taps:
        tap = tensor.ExtractSliceOp(tensor_type(slice_sizes, elem), x, [], dynamic, [],
                                    [0, 0, i * dilation[0], j * dilation[1]], static,
                                    [1, 1, stride[0], stride[1]]).result
        ins.append((tap, x_map))
    for i, j in taps:
        weights = tensor.ExtractSliceOp(w_type, w, [], [], [], [0, 0, i, j], [o, 1, 1, 1], [1, 1, 1, 1]).result
        ins.append((expand(weights, [[0, 1]], [groups, mult]), w_map))

    def body(args: list[ir.Value]) -> ir.Value:
        total = None
        for a, b in zip(args[:len(taps)], args[len(taps):]):
            term = scalar_mul(cast_scalar(a, dtype, acc_dtype), cast_scalar(b, dtype, acc_dtype), acc_dtype)
            total = term if total is None else scalar_add(total, term, acc_dtype)
        return total

    result = parallel(empty([n, groups, mult, oh, ow], acc_dtype), ins, body)
    return collapse(result, [[0], [1, 2], [3], [4]])


#: the most output positions (oh * ow) a unit-stride convolution has to be lowered by columns
COLUMNS_MAX_POSITIONS = 64
#: the least reduction length (channels * kernel taps) for which the columns of a convolution
#: with a kernel larger than 1x1 are multiplied as one matrix (``linalg.matmul``)
MATMUL_MIN_REDUCTION = 256


def _by_columns(sizes: Sequence[Size], stride: Sequence[int]) -> bool:
    """Whether a one-group convolution of static sizes ``(n, c, o, kh, kw, oh, ow)`` is lowered
    as gathered columns times the filter matrix (im2col) rather than as
    ``linalg.conv_2d_nchw_fchw``. IREE 3.13's CPU code for the latter vectorizes along the
    output width: strided convolutions ran 2-4x slower than by columns (a 1x1 stride-2 one 150x
    slower) and unit-stride ones over a few output positions 2-5x slower, while unit-stride ones
    over wide images ran 1.5-2x faster as convolutions (benchmarks/conv_layouts.py)."""
    if not all(isinstance(s, int) for s in sizes):
        return False
    oh, ow = sizes[5], sizes[6]
    return tuple(stride) != (1, 1) or oh * ow <= COLUMNS_MAX_POSITIONS


def _conv_columns(x: ir.Value, w: ir.Value, sizes: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int], dtype: dt.DType, acc_dtype: dt.DType) -> ir.Value:
    """A one-group convolution of the padded input ``x`` [n, c, h, w] by ``w`` [o, c, kh, kw]
    as a matrix product: a parallel ``linalg.generic`` gathers each output position's window
    into columns, then the filter [o, c*kh*kw] multiplies them. With a long reduction over a
    kernel larger than 1x1 the columns are laid out [c*kh*kw, n*oh*ow] for one ``linalg.matmul``
    (data-tiled, microkernels) and the [o, n, oh*ow] product is transposed to NCHW; otherwise
    they are [n, c*kh*kw, oh*ow] and one contraction ``linalg.generic`` writes NCHW directly."""
    n, c, o, kh, kw, oh, ow = sizes
    k, positions = c * kh * kw, oh * ow
    d = [ir.AffineDimExpr.get(i) for i in range(6)]
    as_matmul = k >= MATMUL_MIN_REDUCTION and kh * kw > 1
    # iteration space (c, kh, kw, n, oh, ow) for the matmul layout, (n, c, kh, kw, oh, ow) otherwise
    cc, ii, jj, nn, hh, ww = (d[0], d[1], d[2], d[3], d[4], d[5]) if as_matmul else \
        (d[1], d[2], d[3], d[0], d[4], d[5])
    window = ir.AffineMap.get(6, 0, [nn, cc, hh * stride[0] + ii * dilation[0], ww * stride[1] + jj * dilation[1]])
    shape = [c, kh, kw, n, oh, ow] if as_matmul else [n, c, kh, kw, oh, ow]
    columns = parallel(empty(shape, dtype), [(x, window)], lambda args: args[0])
    filters = collapse(w, [[0], [1, 2, 3]])
    if as_matmul:
        product = linalg.matmul(filters, collapse(columns, [[0, 1, 2], [3, 4, 5]]),
                                outs=[filled([o, n * positions], acc_dtype, 0)])
        # fenced: IREE's global optimization would fold the transpose into the matmul, making
        # it a contraction generic that gets neither data tiling nor the microkernels (3-8x slower)
        by_image = expand(fence(product)[0], [[0], [1, 2]], [o, n, positions])
        nchw = parallel(empty([n, o, positions], acc_dtype), [(by_image, dim_map(3, [1, 0, 2]))],
                        lambda args: args[0])
        return expand(nchw, [[0], [1], [2, 3]], [n, o, oh, ow])

    def multiply_add(args: list[ir.Value]) -> list[ir.Value]:
        f, col, acc = args
        term = scalar_mul(cast_scalar(f, dtype, acc_dtype), cast_scalar(col, dtype, acc_dtype), acc_dtype)
        return [scalar_add(acc, term, acc_dtype)]

    # (n, o, position, k): out[n, o, p] += filters[o, k] * columns[n, k, p]
    ins = [(filters, dim_map(4, [1, 3])), (collapse(columns, [[0], [1, 2, 3], [4, 5]]), dim_map(4, [0, 3, 2]))]
    (product,) = generic(ins, [(filled([n, o, positions], acc_dtype, 0), dim_map(4, [0, 1, 2]))], multiply_add,
                         reduced=[3])
    return expand(product, [[0], [1], [2, 3]], [n, o, oh, ow])


def _bias_and_round(acc: ir.Value, bias: ir.Value | None, sizes: list[Size], acc_dtype: dt.DType,
                    dtype: dt.DType, bias_dtype: dt.DType | None) -> ir.Value:
    """acc + bias[channel] in the compute dtype, rounded to ``dtype``."""
    ins = [(acc, identity_map(4))] + ([] if bias is None else [(bias, dim_map(4, [1]))])

    def body(args: list[ir.Value]) -> ir.Value:
        v = args[0]
        if bias is not None:
            v = scalar_add(v, cast_scalar(args[1], bias_dtype, acc_dtype), acc_dtype)
        return cast_scalar(v, acc_dtype, dtype)

    return parallel(empty(sizes, dtype), ins, body)


@lowers("tp.max_pool2d", summary="`tensor.pad` with -inf (the dtype's minimum for ints) + "
                                 "`linalg.pooling_nchw_max` (uint8: a `linalg.generic` with "
                                 "`arith.maxui`) into a `linalg.fill` of the same value")
def _max_pool2d(ctx: LowerCtx) -> list[ir.Value]:
    dtype = ctx.in_types[0].dtype
    dilation = ctx.attrs["dilation"]
    lowest = extremum_identity(dtype, True)
    xp, _, out_sizes = _padded_pool_input(ctx, const_scalar(lowest, dtype), dilation)
    acc = filled(out_sizes, dtype, lowest)
    kernel, stride = ctx.attrs["kernel_size"], ctx.attrs["stride"]
    if dtype.is_signed or dtype.is_floating_point:
        window = empty(list(kernel), dtype)
        result = linalg.pooling_nchw_max(xp, window, outs=[acc], strides=list(stride),
                                         dilations=list(dilation))
    else:
        result, = _window_generic(xp, dtype, kernel, stride, dilation, [acc],
                                  lambda a: [arith.MaxUIOp(a[1], a[0]).result])
    return [match_type(result, ctx.out_types[0])]


@lowers("tp.max_pool2d_with_indices",
        summary="`tensor.pad` + `linalg.generic` (reduction over the window) carrying (value, flat "
                "index) pairs: the larger value, NaN first (the last of several NaNs, as PyTorch), ties to "
                "the smaller index, padding skipped; where a dilated window may hold only padding, a "
                "`linalg.generic` giving such windows the index -1")
def _max_pool2d_with_indices(ctx: LowerCtx) -> list[ir.Value]:
    dtype = ctx.in_types[0].dtype
    kernel, stride, pad, dilation = (ctx.attrs["kernel_size"], ctx.attrs["stride"], ctx.attrs["padding"],
                                     ctx.attrs["dilation"])
    lowest = extremum_identity(dtype, True)
    xp, sizes, out_sizes = _padded_pool_input(ctx, const_scalar(lowest, dtype), dilation)
    values = filled(out_sizes, dtype, lowest)
    indices = filled(out_sizes, dt.int64, np.iinfo(np.int64).max)
    height, width = as_index(sizes[2]), as_index(sizes[3])
    i64 = ir.IntegerType.get_signless(64)

    def position(dim: int, window_dim: int, i: int) -> ir.Value:
        o, k = loop_index(dim), loop_index(window_dim)
        at = arith.AddIOp(arith.MulIOp(o, index_const(stride[i])).result,
                          arith.MulIOp(k, index_const(dilation[i])).result).result
        return arith.SubIOp(at, index_const(pad[i])).result

    def body(args: list[ir.Value]) -> list[ir.Value]:
        v, best, best_at = args
        ih, iw = position(2, 4, 0), position(3, 5, 1)
        zero = index_const(0)
        inside = const_scalar(True, dt.bool_)
        for at, extent in ((ih, height), (iw, width)):
            within = arith.AndIOp(arith.CmpIOp(_I.sge, at, zero).result,
                                  arith.CmpIOp(_I.slt, at, extent).result).result
            inside = arith.AndIOp(inside, within).result
        flat = arith.IndexCastOp(i64, arith.AddIOp(arith.MulIOp(ih, width).result, iw).result).result
        # An order-independent choice, so the reduction may be split (the first maximum).
        take = arith.AndIOp(beats(v, flat, best, best_at, dtype, True, last_nan=True), inside).result
        return [arith.SelectOp(take, v, best).result, arith.SelectOp(take, flat, best_at).result]

    result, where = _window_generic(xp, dtype, kernel, stride, dilation, [values, indices], body)
    if windows_may_miss_input(tuple(ctx.in_types[0].shape[2:]), ctx.attrs):
        # a window of padding only took nothing: its index is -1
        unset = const_scalar(np.iinfo(np.int64).max, dt.int64)
        where = parallel(empty(out_sizes, dt.int64), [(where, identity_map(4))],
                         lambda a: arith.SelectOp(arith.CmpIOp(_I.eq, a[0], unset).result,
                                                  const_scalar(-1, dt.int64), a[0]).result)
    return [match_type(result, ctx.out_types[0]), match_type(where, ctx.out_types[1])]


@lowers("tp.avg_pool2d", summary="`tensor.pad` with 0 + `linalg.pooling_nchw_sum` (float32 for half "
                                 "types), then a `linalg.generic` dividing by the per-window divisor "
                                 "computed from `linalg.index` (padding, ceil-mode clipping, override)")
def _avg_pool2d(ctx: LowerCtx) -> list[ir.Value]:
    out = ctx.out_types[0]
    dtype = out.dtype
    acc_dtype = dtype.computes_in
    kernel, stride, pad = ctx.attrs["kernel_size"], ctx.attrs["stride"], ctx.attrs["padding"]
    override, include_pad = ctx.attrs["divisor_override"], ctx.attrs["count_include_pad"]
    xp, sizes, out_sizes = _padded_pool_input(ctx, const_scalar(0, dtype))
    window = empty(list(kernel), dtype)
    sums = linalg.pooling_nchw_sum(xp, window, outs=[filled(out_sizes, acc_dtype, 0)], strides=list(stride),
                                   dilations=[1, 1])
    i64 = ir.IntegerType.get_signless(64)
    extents = [as_index(s) for s in sizes[2:]]

    def count(dim: int, i: int) -> ir.Value:
        """The number of elements the window at output position ``dim`` divides by."""
        o = loop_index(dim)
        start = arith.SubIOp(arith.MulIOp(o, index_const(stride[i])).result, index_const(pad[i])).result
        limit = arith.AddIOp(extents[i], index_const(pad[i])).result
        end = arith.MinSIOp(arith.AddIOp(start, index_const(kernel[i])).result, limit).result
        if not include_pad:
            start = arith.MaxSIOp(start, index_const(0)).result
            end = arith.MinSIOp(end, extents[i]).result
        return arith.SubIOp(end, start).result

    def mean(args: list[ir.Value]) -> ir.Value:
        if override is not None:
            divisor = const_scalar(override, dt.int64)
        else:
            divisor = arith.IndexCastOp(i64, arith.MulIOp(count(2, 0), count(3, 1)).result).result
        total = args[0]
        if acc_dtype.is_floating_point:
            value = arith.DivFOp(total, cast_scalar(divisor, dt.int64, acc_dtype)).result
        else:
            value = int_div(total, cast_scalar(divisor, dt.int64, acc_dtype), acc_dtype)
        return cast_scalar(value, acc_dtype, dtype)

    return [match_type(parallel(empty(out_sizes, dtype), [(sums, identity_map(4))], mean), out)]


def _crop(value: ir.Value, sizes: list[Size], low: Sequence[int], high: Sequence[int],
          elem: ir.Type) -> tuple[ir.Value, list[Size]]:
    """``tensor.extract_slice`` removing the negative amounts of ``low``/``high``."""
    cut_lo = [max(-lo, 0) for lo in low]
    cut_hi = [max(-hi, 0) for hi in high]
    if not any(cut_lo) and not any(cut_hi):
        return value, sizes
    new = [s if not (a or b) else index_add(s, -(a + b)) for s, a, b in zip(sizes, cut_lo, cut_hi)]
    dynamic, static = split_sizes(new)
    # MLIR wants every offset inside its dim, even of an empty slice (a crop of all of it)
    offsets = [0 if isinstance(n, int) and n == 0 else lo for n, lo in zip(new, cut_lo)]
    op = tensor.ExtractSliceOp(tensor_type(new, elem), value, [], dynamic, [], offsets, static, [1] * len(sizes))
    return op.result, new


def _source_index(i: ir.Value, size: Size, lo: int, hi: int, mode: str) -> ir.Value:
    """The input index that output index ``i`` of one padded dim reads."""
    n = as_index(size)
    zero = index_const(0)
    if mode == "circular":
        # crop first, then wrap around the kept range [cut, cut + kept)
        cut = max(-lo, 0)
        kept = arith.AddIOp(n, index_const(min(lo, 0) + min(hi, 0))).result
        u = arith.SubIOp(i, index_const(max(lo, 0))).result
        u = arith.SelectOp(arith.CmpIOp(_I.slt, u, zero).result, arith.AddIOp(u, kept).result, u).result
        u = arith.SelectOp(arith.CmpIOp(_I.sge, u, kept).result, arith.SubIOp(u, kept).result, u).result
        return arith.AddIOp(u, index_const(cut)).result
    # reflect and replicate pad first and crop after: output i is padded position i - lo
    t = arith.SubIOp(i, index_const(lo)).result
    last = arith.SubIOp(n, index_const(1)).result
    if mode == "replicate":
        return arith.MaxSIOp(arith.MinSIOp(t, last).result, zero).result
    t = arith.SelectOp(arith.CmpIOp(_I.slt, t, zero).result, arith.SubIOp(zero, t).result, t).result
    beyond = arith.CmpIOp(_I.sgt, t, last).result
    return arith.SelectOp(beyond, arith.SubIOp(arith.AddIOp(last, last).result, t).result, t).result


@lowers("tp.pad", summary="constant: `tensor.extract_slice` for crops + `tensor.pad`; reflect, "
                          "replicate, circular: `linalg.generic` reading `tensor.extract` at the "
                          "mirrored, clamped or wrapped index")
def _pad(ctx: LowerCtx) -> list[ir.Value]:
    (x, tx), = ctx.inputs()
    out = ctx.out_types[0]
    low, high, mode = ctx.attrs["low"], ctx.attrs["high"], ctx.attrs["mode"]
    elem = elem_type(tx.dtype)
    sizes = sizes_of(x, tx)
    if tx.rank == 0:
        return [x]
    if mode == "constant":
        fill = cast_array(np.array(ctx.attrs["value"], np.float64), tx.dtype)
        value = fill.item()  # a Python bool, int or float of the dtype's exact value
        cropped, sizes = _crop(x, sizes, low, high, elem)
        grow_lo, grow_hi = [max(lo, 0) for lo in low], [max(hi, 0) for hi in high]
        padded, _ = _pad_constant(cropped, sizes, grow_lo, grow_hi, const_scalar(value, tx.dtype), elem)
        return [match_type(padded, out)]
    out_sizes = [index_add(s, lo + hi) if lo + hi else s for s, lo, hi in zip(sizes, low, high)]

    def read(_: list[ir.Value]) -> ir.Value:
        at = []
        for d in range(tx.rank):
            i = loop_index(d)
            if low[d] or high[d]:
                i = _source_index(i, sizes[d], low[d], high[d], mode)
            at.append(i)
        return tensor.ExtractOp(x, at).result

    return [match_type(parallel(empty(out_sizes, tx.dtype), [], read), out)]
