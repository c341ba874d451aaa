"""Lowerings of the shape family to tensor ops: reshapes as ``tensor.collapse_shape`` /
``tensor.expand_shape``, permutes as ``linalg.transpose``, slices as
``tensor.extract_slice`` / ``tensor.insert_slice``, concatenation as ``tensor.concat``;
broadcasts and flips are ``linalg.generic`` ops whose indexing maps do the work.

Dynamic dimensions take their sizes from ``tensor.dim``; slice bounds over them are
normalized at run time with Python's slice rules, as the reference does."""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence
from typing import Any

from ...dialects.ir import arith, ir, tensor
from ...dialects.tp.ops.shape import Flip
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from .linalg import transposed_product
from ._builder import (broadcast_map, collapse, elem_type, empty, expand, fence, loop_index, match_type, parallel,
                       ranked, tensor_type, transpose, unfused_strided_slice)
from ._sizes import Size, as_index, dim_value, has_static_zero, index_const, sizes_of, split_sizes

__all__: list[str] = []


def _groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """The finest pairing of consecutive source and result dimensions with equal products
    (a reshape is then a collapse of each source group and an expansion into its result
    group); None when a zero size makes products meaningless."""
    if 0 in src or 0 in dst or not src or not dst:
        return None
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        gi, gj = [i], [j]
        pi, pj = src[i], dst[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                gi.append(i)
                pi *= src[i]
                i += 1
            else:
                gj.append(j)
                pj *= dst[j]
                j += 1
        groups.append((gi, gj))
    groups[-1][0].extend(range(i, len(src)))  # trailing size-1 dimensions
    groups[-1][1].extend(range(j, len(dst)))
    return groups


def reshape(value: ir.Value, src: TensorType, dst: TensorType,
            sizes: Sequence[Size | None] | None = None) -> ir.Value:
    """``value`` (of type ``src``) with ``dst``'s shape, same elements in row-major order.
    ``sizes`` gives the result sizes where known (run-time values of symbolic sizes)."""
    if src.shape == dst.shape and src.has_static_shape:
        return value
    if dst.has_static_shape and dst.rank > 1 and _read_from_fewer_dims(value, dst.rank):
        # IREE 3.13 folds the unit dims added to a one-element read of a tensor of lower
        # rank into an extract_slice of more dims than its source, which it then rejects
        # ("expected rank to be smaller or equal to the other rank"; x[:1] returned and
        # reshaped to (1, 1, 1, 1) and reduced, program fuzzer seed 0, 2077). Reshapes see
        # through a compute barrier; a util.optimization_barrier (a host-side value) stops them.
        value = ir.Operation.create("util.optimization_barrier", results=[value.type], operands=[value]).result
    if src.has_static_shape and dst.has_static_shape:
        if src.rank == 0:
            return expand(value, [], list(dst.shape))
        if dst.rank == 0:
            return collapse(value, [])
        groups = _groups(src.shape, dst.shape)
        if groups is not None:
            if all(len(gi) == 1 for gi, _ in groups):
                return expand(value, [gj for _, gj in groups], list(dst.shape))
            if all(len(gj) == 1 for _, gj in groups):
                return collapse(value, [gi for gi, _ in groups])
            collapsed = collapse(value, [gi for gi, _ in groups])
            return expand(collapsed, [gj for _, gj in groups], list(dst.shape))
    return _reshape_through_flat(value, src, dst, sizes)


def _read_from_fewer_dims(value: ir.Value, rank: int) -> bool:
    """Whether ``value`` is the one element that :func:`_slice` reads from a tensor of fewer
    than ``rank`` dims (a 0-d ``linalg.generic`` around one ``tensor.extract``, given unit dims
    by a ``tensor.expand_shape``)."""
    op = getattr(value.owner, "operation", None)
    if op is not None and op.name == "tensor.expand_shape":
        op = getattr(op.operands[0].owner, "operation", None)
    if op is None or op.name != "linalg.generic" or ir.RankedTensorType(op.results[0].type).rank != 0:
        return False
    return any(inner.operation.name == "tensor.extract"
               and ir.RankedTensorType(inner.operation.operands[0].type).rank < rank
               for inner in op.regions[0].blocks[0].operations)


def _reshape_through_flat(value: ir.Value, src: TensorType, dst: TensorType,
                          sizes: Sequence[Size | None] | None = None) -> ir.Value:
    """Dynamic (or zero-size) reshapes: collapse to one dimension, then expand, with the
    sizes given, or the one inferred size computed as numel / (product of the known sizes).
    A result with a static 0 among run-time sizes has no elements to move: it is a new empty
    tensor of those sizes (expanding a flat empty tensor, IREE infers a run-time size from the
    static ones, and a (0, s0, s1) -> (0, s1) reshape came out as (0, s0 * s1))."""
    if (sizes is not None and dst.rank > 0 and all(s is not None for s in sizes)
            and any(is_static(d) and int(d) == 0 for d in dst.shape)):
        return match_type(empty(list(sizes), dst.dtype), dst)
    if src.rank == 0:  # static by definition: one element
        flat = expand(value, [], [1])
    else:
        flat = value if src.rank == 1 else collapse(value, [list(range(src.rank))])
    if dst.rank == 0:
        return collapse(match_type(flat, TensorType((1,), dst.dtype)), [])
    if dst.has_static_shape:
        flat = match_type(flat, TensorType((pymath.prod(dst.shape),), dst.dtype))
        if dst.rank == 1:
            return flat
        return expand(flat, [list(range(dst.rank))], list(dst.shape))
    if sizes is None or any(s is None for s in sizes):
        known = pymath.prod(int(d) for d in dst.shape if is_static(d)) or 1
        numel = dim_value(flat, 0)
        inferred = arith.DivUIOp(numel, index_const(known)).result
        sizes = [int(d) if is_static(d) else (inferred if sizes is None or sizes[i] is None else sizes[i])
                 for i, d in enumerate(dst.shape)]
    if dst.rank == 1:
        return match_type(flat, dst)
    # (an expansion to run-time sizes needs a flat size known at run time too: a static one,
    # from a static source, is cast to it)
    flat = match_type(flat, TensorType((None,), dst.dtype))
    return expand(flat, [list(range(dst.rank))], list(sizes))


# --- lowerings ---------------------------------------------------------------------------------

@lowers("tp.reshape", summary="`tensor.collapse_shape` / `tensor.expand_shape` over the finest "
                              "matching dimension groups (through one flat dimension when sizes "
                              "are dynamic)")
def _reshape(ctx: LowerCtx) -> list[ir.Value]:
    sizes = ctx.out_sizes(0) if ctx.sym_out_types is not None else None
    return [reshape(ctx.operands[0], ctx.in_types[0], ctx.out_types[0], sizes)]


@lowers("tp.permute", summary="`linalg.transpose`; the 2-D transpose of a product used only there is "
                              "the product of its operands in the other order (`linalg.matmul` through "
                              "swapped maps), and a transpose of another product's result is fenced "
                              "from it (`iree_tensor_ext.compute_barrier.start`)")
def _permute(ctx: LowerCtx) -> list[ir.Value]:
    t = ctx.in_types[0]
    perm = [normalize_dim(ctx.op.name, d, t.rank) for d in ctx.attrs["dims"]]
    value = ctx.operands[0]
    if perm == [1, 0]:
        product = transposed_product(value, t)
        if product is not None:
            return [product]
    if perm != list(range(t.rank)) and _made_by_a_product(value):
        # IREE folds a transpose of a product into the contraction, which then writes its
        # result through the permuted dims: attention's (att @ v).transpose(1, 2) ran 4x slower
        # (7x with data tiling) than the plain batched product followed by its transpose
        value = fence(value)[0]
    return [transpose(value, t, perm)]


def _made_by_a_product(value: ir.Value) -> bool:
    """Whether ``value`` is the result of a ``linalg.matmul`` / ``linalg.batch_matmul``,
    directly or through reshapes."""
    for _ in range(4):
        op = getattr(value.owner, "operation", value.owner)
        if not isinstance(op, ir.Operation):
            return False
        if op.name in ("linalg.matmul", "linalg.batch_matmul"):
            return True
        if op.name not in ("tensor.expand_shape", "tensor.collapse_shape"):
            return False
        value = op.operands[0]
    return False


@lowers("tp.broadcast_to", summary="`linalg.generic` reading the input through a broadcasting "
                                   "indexing map")
def _broadcast_to(ctx: LowerCtx) -> list[ir.Value]:
    value, t, out = ctx.operands[0], ctx.in_types[0], ctx.out_types[0]
    if t.shape == out.shape and t.has_static_shape:
        return [value]
    lead = out.rank - t.rank
    in_sizes = sizes_of(value, t)
    known = ctx.out_sizes(0) if ctx.sym_out_types is not None else [None] * out.rank
    out_sizes = [int(d) if is_static(d) else known[k] if known[k] is not None else in_sizes[k - lead]
                 for k, d in enumerate(out.shape)]
    init = empty(out_sizes, out.dtype)
    # A dynamic input size stretched to a static target other than 1, or to a symbolic one of
    # another expression, is 1 or the target at run time: those dimensions read index 0 or
    # i, chosen at run time.
    sym_in, sym_out = ctx.sym_inputs(), ctx.sym_output()

    def stretched(j: int) -> bool:
        target = out.shape[lead + j]
        if is_static(target):
            return target != 1
        return sym_in is not None and sym_out is not None and sym_in[0].shape[j] != sym_out.shape[lead + j]

    runtime = [j for j, d in enumerate(t.shape) if not is_static(d) and stretched(j)]
    if not runtime:
        return [parallel(init, [(value, broadcast_map(t.shape, out.rank, out.shape))], lambda a: a[0])]
    one = index_const(1)
    zero = index_const(0)
    value = unfused_strided_slice(value)

    def body(_: list[ir.Value]) -> ir.Value:
        idx = []
        for j, d in enumerate(t.shape):
            i = loop_index(lead + j)
            if j in runtime:
                single = arith.CmpIOp(arith.CmpIPredicate.eq, in_sizes[j], one).result
                i = arith.SelectOp(single, zero, i).result
            elif is_static(d) and d == 1:
                i = zero
            idx.append(i)
        return tensor.ExtractOp(value, idx).result

    return [parallel(init, [], body)]


@lowers("tp.concat", summary="`tensor.concat`")
def _concat(ctx: LowerCtx) -> list[ir.Value]:
    inputs = [v for v in ctx.operands if v is not None]
    if len(inputs) == 1:
        return [inputs[0]]
    out = ctx.out_types[0]
    dim = normalize_dim(ctx.op.name, ctx.attrs["dim"], out.rank)
    return [tensor.ConcatOp(ranked(out), dim, inputs).result]


def _bounds(size: Size, start: Size, end: Size, step: int) -> tuple[Size, Size]:
    """Offset and length of ``range(size)[start:end:step]`` (positive ``step``), folded
    when ``size`` and the bounds are static, else computed with arith on index values (a
    bound known only at run time may be negative: its sign is tested then)."""
    if isinstance(size, int) and isinstance(start, int) and isinstance(end, int):
        r = range(*slice(start, end, step).indices(size))
        return (r.start if len(r) else 0), len(r)
    zero = index_const(0)
    size = as_index(size)

    def clamp(bound: Size) -> ir.Value:
        if not isinstance(bound, int):
            negative = arith.CmpIOp(arith.CmpIPredicate.slt, bound, zero).result
            below = arith.MaxSIOp(arith.AddIOp(size, bound).result, zero).result
            return arith.SelectOp(negative, below, arith.MinSIOp(bound, size).result).result
        if bound >= 0:
            return arith.MinSIOp(index_const(min(bound, 2**62)), size).result
        return arith.MaxSIOp(arith.AddIOp(size, index_const(bound)).result, zero).result

    first, last = clamp(start), clamp(end)
    span = arith.MaxSIOp(arith.SubIOp(last, first).result, zero).result
    length = span if step == 1 else arith.DivUIOp(arith.AddIOp(span, index_const(step - 1)).result,
                                                  index_const(step)).result
    return first, length


def _box(value: ir.Value, t: TensorType, attrs: dict[str, Any],
         ctx: LowerCtx | None = None) -> tuple[list[Size], list[Size], list[int]]:
    """Offsets, lengths and strides of the strided box ``attrs`` addresses in ``value``
    (symbolic bounds are computed through ``ctx``)."""
    offsets, lengths = [], []
    for size, b, e, s in zip(sizes_of(value, t), attrs["starts"], attrs["ends"], attrs["steps"]):
        if ctx is not None:
            b, e = ctx.size(b), ctx.size(e)
        o, n = _bounds(size, b, e, s)
        offsets.append(o)
        lengths.append(n)
    # a step over one element is no step: IREE 3.13's SPIR-V code rejects a strided slice of
    # unit dims moved by a transpose (the gradient of a convolution of a 1x1 output)
    steps = [1 if isinstance(n, int) and n <= 1 else s for n, s in zip(lengths, attrs["steps"])]
    return offsets, lengths, steps


@lowers("tp.slice", summary="`tensor.extract_slice` (bounds normalized like Python slices, at "
                            "run time for dynamic sizes)")
def _slice(ctx: LowerCtx) -> list[ir.Value]:
    value, t, out = ctx.operands[0], ctx.in_types[0], ctx.out_types[0]
    offsets, lengths, steps = _box(value, t, ctx.attrs, ctx)
    if t.has_static_shape and all(o == 0 for o in offsets) and list(lengths) == list(t.shape):
        return [value]
    if has_static_zero(lengths):
        return [match_type(empty(lengths, out.dtype), out)]
    if out.has_static_shape and out.numel() == 1 and out.rank:
        # IREE 3.13 cannot compile a one-element extract_slice whose result gets two or more
        # unit dims (x[1:2, None], a 1-d operand of matmul) and is also used as it is: the one
        # element is read by a 0-d generic and given its unit dims by an expand_shape (a
        # generic with the unit dims, returned and broadcast, became a rank-changing slice
        # IREE rejects: "expected rank to be smaller or equal to the other rank")
        at = [as_index(o) for o in offsets]
        one = parallel(empty([], out.dtype), [], lambda _: tensor.ExtractOp(value, at).result)
        return [expand(one, [], [1] * out.rank)]
    do, so = split_sizes(offsets)
    dl, sl = split_sizes(lengths)
    if (not t.has_static_shape and not t.dtype.is_bool and any(st != 1 for st in steps)
            and not isinstance(value.owner, ir.Block)):
        # IREE 3.13 cannot compile a strided slice of dynamic sizes fused with a producer that
        # reads i1 and a reduction after it (a stack allocation overflows): the source is
        # computed apart. Not for i1 sources, which need no barrier on the CPU and whose
        # strided reads of a materialized i1 tensor SPIR-V code gets wrong.
        value = fence(value)[0]
    op = tensor.ExtractSliceOp(tensor_type(lengths, elem_type(out.dtype)), value, do, dl, [], so, sl, steps)
    return [match_type(op.result, out)]


@lowers("tp.slice_update", summary="`tensor.insert_slice` into the input")
def _slice_update(ctx: LowerCtx) -> list[ir.Value]:
    value, update = ctx.operands
    t, ut = ctx.in_types
    offsets, lengths, steps = _box(value, t, ctx.attrs, ctx)
    if has_static_zero(lengths):
        return [value]
    # Sizes from the box where static, else from the update (the reference checks they agree).
    sizes: list[Size] = []
    for j, n in enumerate(lengths):
        if isinstance(n, int):
            sizes.append(n)
        elif is_static(ut.shape[j]):
            sizes.append(int(ut.shape[j]))
        else:
            sizes.append(dim_value(update, j))
    update = match_type(update, ut.with_shape(tuple(s if isinstance(s, int) else None for s in sizes)))
    do, so = split_sizes(offsets)
    ds, ss = split_sizes(sizes)
    return [tensor.InsertSliceOp(update, value, do, ds, [], so, ss, steps).result]


@lowers("tp.flip", summary="`linalg.generic` reading the input with `tensor.extract` at "
                           "size-1-i on flipped dims (`linalg.index`)")
def _flip(ctx: LowerCtx) -> list[ir.Value]:
    value, t = ctx.operands[0], ctx.in_types[0]
    opdef: Flip = ctx.opdef  # type: ignore[assignment]
    dims = [d for d in opdef.flip_dims(ctx.attrs, t.rank) if not (is_static(t.shape[d]) and t.shape[d] <= 1)]
    if not dims:
        return [value]
    sizes = sizes_of(value, t)
    # Not an indexing map d -> size-1-d: IREE 3.13's CPU tiling rejects such maps whenever
    # the tile size does not divide the dimension.
    one = index_const(1)
    last = {k: arith.SubIOp(as_index(sizes[k]), one).result for k in dims}
    value = unfused_strided_slice(value)

    def body(_: list[ir.Value]) -> ir.Value:
        idx = [arith.SubIOp(last[k], loop_index(k)).result if k in dims else loop_index(k)
               for k in range(t.rank)]
        return tensor.ExtractOp(value, idx).result

    return [parallel(empty(sizes, t.dtype), [], body)]
