"""Lowerings of the sorting family: ``tp.sort``, ``tp.topk`` and ``tp.kthvalue``.

``tp.sort`` is IREE's ``iree_linalg_ext.sort`` over the values and an int32 position
tensor together; its comparator is a total order (NaN above every number, then the
smaller position first among equal values), so the result is the stable order whatever
algorithm a target runs. ``tp.topk`` sorts the first ``k`` elements that way and feeds
the rest, with their positions, to ``iree_linalg_ext.topk`` (O(n k), where a whole sort
costs O(n^2) in IREE's CPU code): every slot of its output starts as a real element, and
its strict comparator keeps an earlier element ahead of a later equal one. int64 values
compare as two int32 halves (Vulkan's emulated 64-bit integers cannot be compared inside
a sort's region), and select by a sort. ``tp.kthvalue`` is slot ``k - 1`` of the smallest
``k``. Positions are int32 inside (a dimension of under 2^31 elements) and int64 outside.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ...dialects.ir import arith, ir, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType
from . import LowerCtx, lowers
from ._builder import (
    cast_scalar,
    collapse,
    const_scalar,
    elem_type,
    elementwise,
    empty,
    expand,
    filled,
    generic,
    identity_map,
    linalg_ext,
    loop_index,
    match_type,
    parallel,
    tensor_type,
)
from ._sizes import as_index, index_const, product, sizes_of, split_sizes

__all__: list[str] = []

_F = arith.CmpFPredicate
_I = arith.CmpIPredicate
_POS = dt.int32  # positions inside the sort
_LOW = "low"  # the kind of an int64's low half: unsigned 32 bits


def _segments(n_in: int, n_out: int) -> ir.Attribute:
    return ir.DenseI32ArrayAttr.get([n_in, n_out])


def _dim_attr(dim: int) -> ir.Attribute:
    return ir.IntegerAttr.get(elem_type(dt.int64), dim)


# --- the order ---------------------------------------------------------------------------------

def _key(v: ir.Value, d: dt.DType) -> ir.Value:
    """A scalar as it is compared: half types in float32 (exact)."""
    return cast_scalar(v, d, dt.float32) if d in (dt.float16, dt.bfloat16) else v


def _less(a: ir.Value, b: ir.Value, d: dt.DType | str) -> ir.Value:
    """``a`` strictly before ``b`` in ascending order, NaN the largest value."""
    if d == _LOW:
        return arith.CmpIOp(_I.ult, a, b).result
    if d.is_floating_point:
        a, b = _key(a, d), _key(b, d)
        lt = arith.CmpFOp(_F.OLT, a, b).result
        number_below_nan = arith.AndIOp(arith.CmpFOp(_F.ORD, a, a).result, arith.CmpFOp(_F.UNO, b, b).result).result
        return arith.OrIOp(lt, number_below_nan).result
    unsigned = d.is_bool or not d.is_signed
    return arith.CmpIOp(_I.ult if unsigned else _I.slt, a, b).result


def _equal(a: ir.Value, b: ir.Value, d: dt.DType | str) -> ir.Value:
    """``a`` and ``b`` tie: equal numbers (``-0.0`` and ``0.0`` too) or two NaNs."""
    if d != _LOW and d.is_floating_point:
        a, b = _key(a, d), _key(b, d)
        both_nan = arith.AndIOp(arith.CmpFOp(_F.UNO, a, a).result, arith.CmpFOp(_F.UNO, b, b).result).result
        return arith.OrIOp(arith.CmpFOp(_F.OEQ, a, b).result, both_nan).result
    return arith.CmpIOp(_I.eq, a, b).result


def _key_less(a: Sequence[ir.Value], b: Sequence[ir.Value], kinds: Sequence[dt.DType]) -> tuple[ir.Value, ir.Value]:
    """(less, equal) of two keys made of parts compared in turn (an int64 as its signed high
    and unsigned low halves)."""
    less, equal = _less(a[0], b[0], kinds[0]), _equal(a[0], b[0], kinds[0])
    for x, y, d in zip(a[1:], b[1:], kinds[1:]):
        less = arith.OrIOp(less, arith.AndIOp(equal, _less(x, y, d)).result).result
        equal = arith.AndIOp(equal, _equal(x, y, d)).result
    return less, equal


def _before(a: Sequence[ir.Value], b: Sequence[ir.Value], ia: ir.Value, ib: ir.Value,
            kinds: Sequence[dt.DType], descending: bool) -> ir.Value:
    """Whether element ``a`` at position ``ia`` goes before ``b`` at ``ib``: a total order."""
    less, equal = _key_less(b, a, kinds) if descending else _key_less(a, b, kinds)
    earlier = arith.CmpIOp(_I.slt, ia, ib).result
    return arith.OrIOp(less, arith.AndIOp(equal, earlier).result).result


# --- tensors -----------------------------------------------------------------------------------

def _positions(sizes: Sequence, dim: int, offset: int = 0) -> ir.Value:
    """int32 positions along ``dim`` (plus ``offset``) in a tensor of ``sizes``."""
    def body(_):
        i = arith.IndexCastOp(elem_type(_POS), loop_index(dim)).result
        return arith.AddIOp(i, const_scalar(offset, _POS)).result if offset else i

    return parallel(empty(sizes, _POS), [], body)


def _slice(value: ir.Value, sizes: Sequence, dim: int, start: int, length) -> ir.Value:
    """``value[..., start:start + length, ...]`` along ``dim``."""
    new = [length if i == dim else s for i, s in enumerate(sizes)]
    dynamic, static = split_sizes(new)
    offsets = [start if i == dim else 0 for i in range(len(sizes))]
    elem = ir.RankedTensorType(value.type).element_type
    return tensor.ExtractSliceOp(tensor_type(new, elem), value, [], dynamic, [], offsets, static,
                                 [1] * len(sizes)).result


_SORTED = itertools.count()


def _sort_operands(x: ir.Value, t: TensorType, sizes: Sequence, dim: int) -> list[ir.Value]:
    """What a sort permutes in place, made by one ``linalg.generic`` of its own: a copy of
    ``x`` (an int64 as its high (signed) and low (unsigned) int32 halves) and the int32
    positions along ``dim``. A mark unique to this sort keeps CSE from giving two sorts the
    same operands: IREE 3.13 then sorts the second one's positions already sorted by the first."""
    i32 = elem_type(dt.int32)
    wide = t.dtype is dt.int64
    part_types = [dt.int32, dt.int32] if wide else [t.dtype]

    def body(args):
        a = args[0]
        parts = [arith.TruncIOp(i32, arith.ShRSIOp(a, const_scalar(32, dt.int64)).result).result,
                 arith.TruncIOp(i32, a).result] if wide else [a]
        return parts + [arith.IndexCastOp(elem_type(_POS), loop_index(dim)).result]

    rank = t.rank
    outs = [(empty(sizes, d), identity_map(rank)) for d in part_types + [_POS]]
    results = generic([(x, identity_map(rank))], outs, body)
    op = results[0].owner
    op = op.operation if hasattr(op, "operation") else op
    op.attributes["tp.sort_operands"] = ir.IntegerAttr.get(elem_type(dt.int64), next(_SORTED))
    return results


def _join_i64(hi: ir.Value, lo: ir.Value, t: TensorType) -> ir.Value:
    i64 = elem_type(dt.int64)

    def join(a):
        h = arith.ShLIOp(arith.ExtSIOp(i64, a[0]).result, const_scalar(32, dt.int64)).result
        return arith.OrIOp(h, arith.ExtUIOp(i64, a[1]).result).result

    half = t.with_dtype(dt.int32)
    return elementwise([(hi, half), (lo, half)], t, join)


def _widened(pos: ir.Value, t: TensorType) -> ir.Value:
    """int32 positions as the int64 indices of ``t``'s shape."""
    return elementwise([(pos, t.with_dtype(_POS))], t.with_dtype(dt.int64),
                       lambda a: cast_scalar(a[0], _POS, dt.int64))


def _sort(x: ir.Value, t: TensorType, dim: int, descending: bool) -> tuple[ir.Value, ir.Value]:
    """``x`` sorted along ``dim`` (stable, NaN largest) and the int32 positions."""
    sizes = sizes_of(x, t)
    kinds = [dt.int32, _LOW] if t.dtype is dt.int64 else [t.dtype]
    operands = _sort_operands(x, t, sizes, dim)
    elems = [ir.RankedTensorType(v.type).element_type for v in operands]
    block = [e for e in elems for _ in (0, 1)]

    def compare(args):
        a, b = args[0:-2:2], args[1:-2:2]
        return _before(a, b, args[-2], args[-1], kinds, descending)

    op = linalg_ext("sort", [v.type for v in operands], operands,
                    {"dimension": _dim_attr(dim), "operandSegmentSizes": _segments(0, len(operands))},
                    block, compare)
    results = list(op.results)
    values = _join_i64(results[0], results[1], t) if t.dtype is dt.int64 else results[0]
    return values, results[-1]


def _topk(x: ir.Value, t: TensorType, dim: int, k: int, largest: bool) -> tuple[ir.Value, ir.Value]:
    """The ``k`` largest (smallest) of ``x`` along ``dim``, in order, and their int32 positions."""
    sizes = sizes_of(x, t)
    n = sizes[dim]
    if t.dtype is dt.int64 or (isinstance(n, int) and n == k):
        values, pos = _sort(x, t, dim, largest)
        if isinstance(n, int) and n == k:
            return values, pos
        return _slice(values, sizes, dim, 0, k), _slice(pos, sizes, dim, 0, k)
    head = _slice(x, sizes, dim, 0, k)
    head_t = TensorType(tuple(k if i == dim else d for i, d in enumerate(t.shape)), t.dtype)
    values, pos = _sort(head, head_t, dim, largest)
    rest_n = n - k if isinstance(n, int) else arith.SubIOp(as_index(n), index_const(k)).result
    rest_sizes = [rest_n if i == dim else s for i, s in enumerate(sizes)]
    rest = _slice(x, sizes, dim, k, rest_n)
    rest_pos = _positions(rest_sizes, dim, offset=k)
    e = elem_type(t.dtype)

    def better(args):  # strict: an equal later element never displaces an earlier one
        a, b = args
        return _less(b, a, t.dtype) if largest else _less(a, b, t.dtype)

    op = linalg_ext("topk", [values.type, pos.type], [rest, rest_pos, values, pos],
                    {"dimension": _dim_attr(dim), "operandSegmentSizes": _segments(2, 2)}, [e, e], better)
    return op.results[0], op.results[1]


def _view(x: ir.Value, t: TensorType, dim: int) -> tuple[ir.Value, TensorType, int, list | None, list]:
    """Above rank 3, ``x`` as (before, dim, after) (IREE 3.13's tiling of these ops asks for
    stack buffers past its limit with many dynamic dims, as its scan's does): the view, its
    type, its dim, the groups (None when unchanged) and the original sizes."""
    sizes = sizes_of(x, t)
    if t.rank <= 3:
        return x, t, dim, None, sizes
    groups = [g for g in (list(range(dim)), [dim], list(range(dim + 1, t.rank))) if g]
    view_sizes = [product([sizes[i] for i in g]) for g in groups]
    vt = TensorType(tuple(s if isinstance(s, int) else None for s in view_sizes), t.dtype)
    return collapse(x, groups), vt, groups.index([dim]), groups, sizes


def _unview(v: ir.Value, groups: list | None, sizes: list, dim: int, length=None) -> ir.Value:
    if groups is None:
        return v
    full = [length if (i == dim and length is not None) else s for i, s in enumerate(sizes)]
    return expand(v, groups, full)


def _scalar_results(ctx: LowerCtx) -> list[ir.Value]:
    """A 0-d input: itself, at index 0."""
    x = ctx.inputs()[0][0]
    return [x, filled([], dt.int64, 0)]


@lowers("tp.sort", summary="`iree_linalg_ext.sort` of the values and an int32 position tensor "
                           "together; the comparator is a total order (NaN largest, equal values "
                           "by position), so the result is stable on every target; int64 values "
                           "sort as two int32 halves")
def _sort_op(ctx: LowerCtx) -> list[ir.Value]:
    (x, t) = ctx.inputs()[0]
    if not t.rank:
        return _scalar_results(ctx)
    dim = normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank)
    v, vt, vdim, groups, sizes = _view(x, t, dim)
    values, pos = _sort(v, vt, vdim, ctx.attrs["descending"])
    values, pos = _unview(values, groups, sizes, dim), _unview(pos, groups, sizes, dim)
    out_v, out_i = ctx.out_types
    return [match_type(values, out_v), match_type(_widened(pos, out_i.with_dtype(_POS)), out_i)]


def _selected(ctx: LowerCtx, k: int, largest: bool) -> tuple[ir.Value, ir.Value, TensorType, int, list | None, list]:
    (x, t) = ctx.inputs()[0]
    dim = normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank)
    v, vt, vdim, groups, sizes = _view(x, t, dim)
    values, pos = _topk(v, vt, vdim, k, largest)
    return values, pos, t, dim, groups, sizes


@lowers("tp.topk", summary="the first `k` elements sorted (`iree_linalg_ext.sort`, stable total "
                           "order), then `iree_linalg_ext.topk` over the rest with their positions "
                           "(strict comparator, NaN largest: earlier equal elements stay ahead); "
                           "int64 values: a sort and a slice")
def _topk_op(ctx: LowerCtx) -> list[ir.Value]:
    t = ctx.in_types[0]
    if not t.rank:
        return _scalar_results(ctx)
    k = ctx.attrs["k"]
    out_v, out_i = ctx.out_types
    if k == 0:
        sizes = ctx.out_sizes(0)
        return [empty(sizes, out_v.dtype), empty(sizes, dt.int64)]
    values, pos, t, dim, groups, sizes = _selected(ctx, k, ctx.attrs["largest"])
    values, pos = _unview(values, groups, sizes, dim, k), _unview(pos, groups, sizes, dim, k)
    return [match_type(values, out_v), match_type(_widened(pos, out_i.with_dtype(_POS)), out_i)]


@lowers("tp.kthvalue", summary="the smallest `k` as `tp.topk` lowers them, then slot `k - 1` "
                               "(`tensor.extract_slice`, `tensor.collapse_shape` without keepdim)")
def _kthvalue_op(ctx: LowerCtx) -> list[ir.Value]:
    t = ctx.in_types[0]
    if not t.rank:
        return _scalar_results(ctx)
    k = ctx.attrs["k"]
    values, pos, t, dim, groups, sizes = _selected(ctx, k, False)
    values, pos = _unview(values, groups, sizes, dim, k), _unview(pos, groups, sizes, dim, k)
    picked_sizes = [k if i == dim else s for i, s in enumerate(sizes)]
    values = _slice(values, picked_sizes, dim, k - 1, 1)
    pos = _slice(pos, picked_sizes, dim, k - 1, 1)
    if not ctx.attrs["keepdim"]:
        groups = [[i] for i in range(t.rank) if i != dim]
        if groups:
            groups[max(dim - 1, 0)] = sorted(groups[max(dim - 1, 0)] + [dim])
        values, pos = collapse(values, groups), collapse(pos, groups)
    out_v, out_i = ctx.out_types
    return [match_type(values, out_v), match_type(_widened(pos, out_i.with_dtype(_POS)), out_i)]
