"""Lowerings of the shape family to tensor ops: reshapes as ``tensor.collapse_shape`` /
``tensor.expand_shape``, permutes as ``linalg.transpose``, slices as
``tensor.extract_slice`` / ``tensor.insert_slice``, concatenation as ``tensor.concat``;
broadcasts and flips are ``linalg.generic`` ops whose indexing maps do the work.

Dynamic dimensions take their sizes from ``tensor.dim``; slice bounds over them are
normalized at run time with Python's slice rules, as the reference does."""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence
from typing import Any

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp.ops.shape import Flip
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import dim_value, elem_type, fence, index_const, ranked, unfused_strided_slice

__all__ = ["Size", "sizes_of", "index_of", "empty_of", "generic", "loop_index", "cast_to", "collapse", "expand",
           "reshape", "transpose"]

_DYN = ir.ShapedType.get_dynamic_size()
Size = Any  # int | ir.Value of index type


# --- helpers shared with the indexing lowerings ------------------------------------------------

def sizes_of(value: ir.Value, t: TensorType) -> list[Size]:
    """Each dimension's size: an int when static, else a ``tensor.dim`` value."""
    return [int(d) if is_static(d) else dim_value(value, i) for i, d in enumerate(t.shape)]


def index_of(size: Size) -> ir.Value:
    return index_const(size) if isinstance(size, int) else size


def empty_of(sizes: Sequence[Size], t: TensorType) -> ir.Value:
    """``tensor.empty`` with ``sizes`` and ``t``'s element type."""
    return tensor.EmptyOp(list(sizes), elem_type(t.dtype)).result


def _parallel(rank: int) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank)


def generic(out: TensorType, init: ir.Value, inputs: Sequence[tuple[ir.Value, ir.AffineMap, TensorType]],
            body: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A parallel ``linalg.generic`` over ``out`` (written through the identity map) reading
    ``inputs`` through their maps; ``body`` maps the input scalars to the result scalar and
    may use ``linalg.index`` and ``tensor.extract``."""
    maps = [m for _, m, _ in inputs] + [ir.AffineMap.get_identity(out.rank)]
    op = linalg.GenericOp([ranked(out)], [v for v, _, _ in inputs], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), _parallel(out.rank))
    block = op.regions[0].blocks.append(*[elem_type(t.dtype) for _, _, t in inputs], elem_type(out.dtype))
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(list(block.arguments)[:-1])])
    return op.result


def loop_index(dim: int) -> ir.Value:
    return linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)).result


def cast_to(value: ir.Value, t: TensorType) -> ir.Value:
    """``value`` as type ``t`` (a ``tensor.cast`` when only static/dynamic sizes differ)."""
    want = ranked(t)
    return value if value.type == want else tensor.CastOp(want, value).result


def _reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def collapse(value: ir.Value, groups: Sequence[Sequence[int]], out: TensorType) -> ir.Value:
    return tensor.CollapseShapeOp(ranked(out), value, _reassociation(groups)).result


def expand(value: ir.Value, groups: Sequence[Sequence[int]], out: TensorType,
            sizes: Sequence[Size]) -> ir.Value:
    dynamic = [s for s in sizes if not isinstance(s, int)]
    static = [s if isinstance(s, int) else _DYN for s in sizes]
    return tensor.ExpandShapeOp(ranked(out), value, _reassociation(groups), dynamic, static).result


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
    if src.has_static_shape and dst.has_static_shape:
        if src.rank == 0:
            return expand(value, [], dst, list(dst.shape))
        if dst.rank == 0:
            return collapse(value, [], dst)
        groups = _groups(src.shape, dst.shape)
        if groups is not None:
            if all(len(gi) == 1 for gi, _ in groups):
                return expand(value, [gj for _, gj in groups], dst, list(dst.shape))
            if all(len(gj) == 1 for _, gj in groups):
                return collapse(value, [gi for gi, _ in groups], dst)
            mid = TensorType(tuple(pymath.prod(src.shape[d] for d in gi) for gi, _ in groups), src.dtype)
            collapsed = collapse(value, [gi for gi, _ in groups], mid)
            return expand(collapsed, [gj for _, gj in groups], dst, list(dst.shape))
    return _reshape_through_flat(value, src, dst, sizes)


def _reshape_through_flat(value: ir.Value, src: TensorType, dst: TensorType,
                          sizes: Sequence[Size | None] | None = None) -> ir.Value:
    """Dynamic (or zero-size) reshapes: collapse to one dimension, then expand, with the
    sizes given, or the one inferred size computed as numel / (product of the known sizes)."""
    if src.rank == 0:  # static by definition: one element
        flat = expand(value, [], TensorType((1,), src.dtype), [1])
        flat_t = TensorType((1,), src.dtype)
    else:
        n = src.numel()
        flat_t = TensorType((n if is_static(n) else None,), src.dtype)
        flat = value if src.rank == 1 else collapse(value, [list(range(src.rank))], flat_t)
    if dst.rank == 0:
        ones = TensorType((1,), dst.dtype)
        return collapse(cast_to(flat, ones), [], dst)
    if dst.has_static_shape:
        flat = cast_to(flat, TensorType((pymath.prod(dst.shape),), dst.dtype))
        if dst.rank == 1:
            return flat
        return expand(flat, [list(range(dst.rank))], dst, list(dst.shape))
    if sizes is None or any(s is None for s in sizes):
        known = pymath.prod(int(d) for d in dst.shape if is_static(d)) or 1
        numel = dim_value(flat, 0)
        inferred = arith.DivUIOp(numel, index_const(known)).result
        sizes = [int(d) if is_static(d) else (inferred if sizes is None or sizes[i] is None else sizes[i])
                 for i, d in enumerate(dst.shape)]
    if dst.rank == 1:
        return cast_to(flat, dst)
    return expand(flat, [list(range(dst.rank))], dst, list(sizes))


def transpose(value: ir.Value, src: TensorType, perm: Sequence[int]) -> ir.Value:
    """``linalg.transpose``: result dimension i is ``src`` dimension ``perm[i]``."""
    if list(perm) == list(range(src.rank)):
        return value
    sizes = sizes_of(value, src)
    out = src.with_shape(tuple(src.shape[p] for p in perm))
    init = empty_of([sizes[p] for p in perm], out)
    return linalg.transpose(value, outs=[init], permutation=list(perm)).results[0]


# --- lowerings ---------------------------------------------------------------------------------

@lowers("tp.reshape", summary="`tensor.collapse_shape` / `tensor.expand_shape` over the finest "
                              "matching dimension groups (through one flat dimension when sizes "
                              "are dynamic)")
def _reshape(ctx: LowerCtx) -> list[ir.Value]:
    sizes = ctx.out_sizes(0) if ctx.sym_out_types is not None else None
    return [reshape(ctx.operands[0], ctx.in_types[0], ctx.out_types[0], sizes)]


@lowers("tp.permute", summary="`linalg.transpose`")
def _permute(ctx: LowerCtx) -> list[ir.Value]:
    t = ctx.in_types[0]
    perm = [normalize_dim(ctx.op.name, d, t.rank) for d in ctx.attrs["dims"]]
    return [transpose(ctx.operands[0], t, perm)]


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
    init = empty_of(out_sizes, out)
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
        exprs = [ir.AffineConstantExpr.get(0)
                 if is_static(d) and d == 1 and out.shape[lead + j] != 1 else ir.AffineDimExpr.get(lead + j)
                 for j, d in enumerate(t.shape)]
        return [generic(out, init, [(value, ir.AffineMap.get(out.rank, 0, exprs), t)], lambda a: a[0])]
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

    return [generic(out, init, [], body)]


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
    size = index_of(size) if isinstance(size, int) else size

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


def _mixed(values: Sequence[Size]) -> tuple[list[ir.Value], list[int]]:
    return ([v for v in values if not isinstance(v, int)],
            [v if isinstance(v, int) else _DYN for v in values])


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
    return offsets, lengths, list(attrs["steps"])


@lowers("tp.slice", summary="`tensor.extract_slice` (bounds normalized like Python slices, at "
                            "run time for dynamic sizes)")
def _slice(ctx: LowerCtx) -> list[ir.Value]:
    value, t, out = ctx.operands[0], ctx.in_types[0], ctx.out_types[0]
    offsets, lengths, steps = _box(value, t, ctx.attrs, ctx)
    if t.has_static_shape and all(o == 0 for o in offsets) and list(lengths) == list(t.shape):
        return [value]
    if any(n == 0 for n in lengths if isinstance(n, int)):
        return [cast_to(empty_of(lengths, out), out)]
    if out.has_static_shape and out.numel() == 1 and out.rank:
        # IREE 3.13 cannot compile a one-element extract_slice whose result gets two or more
        # unit dims (x[1:2, None], a 1-d operand of matmul) and is also used as it is: the one
        # element is read by a generic instead
        at = [index_const(o) if isinstance(o, int) else o for o in offsets]
        return [generic(out, empty_of(list(out.shape), out), [], lambda _: tensor.ExtractOp(value, at).result)]
    do, so = _mixed(offsets)
    dl, sl = _mixed(lengths)
    if (not t.has_static_shape and not t.dtype.is_bool and any(st != 1 for st in steps)
            and not isinstance(value.owner, ir.Block)):
        # IREE 3.13 cannot compile a strided slice of dynamic sizes fused with a producer that
        # reads i1 and a reduction after it (a stack allocation overflows): the source is
        # computed apart. Not for i1 sources, which need no barrier on the CPU and whose
        # strided reads of a materialized i1 tensor SPIR-V code gets wrong.
        value = fence(value)[0]
    op = tensor.ExtractSliceOp(ranked(out.with_shape(tuple(None if not isinstance(n, int) else n
                                                           for n in lengths))),
                               value, do, dl, [], so, sl, steps)
    return [cast_to(op.result, out)]


@lowers("tp.slice_update", summary="`tensor.insert_slice` into the input")
def _slice_update(ctx: LowerCtx) -> list[ir.Value]:
    value, update = ctx.operands
    t, ut = ctx.in_types
    offsets, lengths, steps = _box(value, t, ctx.attrs, ctx)
    if any(n == 0 for n in lengths if isinstance(n, int)):
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
    update = cast_to(update, ut.with_shape(tuple(s if isinstance(s, int) else None for s in sizes)))
    do, so = _mixed(offsets)
    ds, ss = _mixed(sizes)
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
    last = {k: arith.SubIOp(index_of(sizes[k]), one).result for k in dims}
    value = unfused_strided_slice(value)

    def body(_: list[ir.Value]) -> ir.Value:
        idx = [arith.SubIOp(last[k], loop_index(k)).result if k in dims else loop_index(k)
               for k in range(t.rank)]
        return tensor.ExtractOp(value, idx).result

    return [generic(t, empty_of(sizes, t), [], body)]
