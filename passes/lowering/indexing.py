"""Lowerings of the indexing family.

Gathers (``tp.gather``, ``tp.index_select``, ``tp.index``) are ``linalg.generic`` ops over
the result that read the input with ``tensor.extract``: negative indices wrap where the
reference wraps them, and every index is clamped into its dimension, so indices the
reference rejects never read outside the input. ``tp.index_put`` is an
``iree_linalg_ext.scatter`` with ordered updates (repeated indices: the last write wins,
or all add up with ``accumulate``, as in the reference). ``tp.nonzero`` numbers the
nonzero elements with an ``iree_linalg_ext.scan`` running count and scatters their
coordinates into a result of run-time size."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.ops.indexing import advanced_index_shape
from ...dialects.tp.registry import Op
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import cast_scalar, compute_dtype, const_scalar, dim_value, elem_type, index_const, ranked
from .shape import Size, cast_to, collapse, empty_of, expand, generic, index_of, loop_index, sizes_of, transpose

_I = arith.CmpIPredicate
_INDEX = ir.IndexType.get
_I64 = dt.int64


# --- helpers -----------------------------------------------------------------------------------

def _clamped(v: ir.Value, size: Size, *, wrap: bool, to: ir.Type | None = None) -> ir.Value:
    """Index scalar ``v`` (i32/i64) as a position in ``[0, size)`` (``to``: index by default):
    negative values count from the end when ``wrap``; anything still out of range is
    clamped (the reference raises there, so any in-bounds position will do)."""
    to = to or _INDEX()
    if isinstance(to, ir.IndexType):
        i = arith.IndexCastOp(to, v).result
        n = index_of(size)
        zero, last = index_const(0), (index_const(size - 1) if isinstance(size, int)
                                      else arith.SubIOp(n, index_const(1)).result)
    else:
        i = v if v.type == to else arith.ExtSIOp(to, v).result
        n = (arith.ConstantOp(to, ir.IntegerAttr.get(to, size)).result if isinstance(size, int)
             else arith.IndexCastOp(to, size).result)
        zero = arith.ConstantOp(to, ir.IntegerAttr.get(to, 0)).result
        last = arith.SubIOp(n, arith.ConstantOp(to, ir.IntegerAttr.get(to, 1)).result).result
    if wrap:
        negative = arith.CmpIOp(_I.slt, i, zero).result
        i = arith.SelectOp(negative, arith.AddIOp(i, n).result, i).result
    return arith.MaxSIOp(arith.MinSIOp(i, last).result, zero).result


def _scf_if(cond: ir.Value, result: ir.Type, then: Callable[[], ir.Value],
            otherwise: Callable[[], ir.Value]) -> ir.Value:
    op = ir.Operation.create("scf.if", results=[result], operands=[cond], regions=2)
    for region, build in zip(op.regions, (then, otherwise)):
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            ir.Operation.create("scf.yield", operands=[build()])
    return op.results[0]


def _condition(positive: Sequence[Size], equal: Sequence[tuple[Size, Size]]) -> ir.Value | None:
    """The run-time test that dynamic ``positive`` sizes are nonzero and the ``equal``
    pairs agree; None when every size involved is static."""
    tests = [arith.CmpIOp(_I.sgt, s, index_const(0)).result for s in positive if not isinstance(s, int)]
    tests += [arith.CmpIOp(_I.eq, index_of(a), index_of(b)).result
              for a, b in equal if not (isinstance(a, int) and isinstance(b, int))]
    cond = None
    for c in tests:
        cond = c if cond is None else arith.AndIOp(cond, c).result
    return cond


def _guarded(cond: ir.Value | None, out: TensorType, out_sizes: Sequence[Size],
             build: Callable[[], ir.Value]) -> ir.Value:
    """``build()``, a gather; under a run-time ``cond`` (see :func:`_condition`) when
    dynamic sizes could make it read outside its operands (only where the reference
    raises), with zeros standing in when ``cond`` fails."""
    if cond is None:
        return build()
    return _scf_if(cond, ranked(out), build, lambda: _zeros(out_sizes, out))


def _zeros(sizes: Sequence[Size], t: TensorType) -> ir.Value:
    return linalg.fill(const_scalar(0, t.dtype), outs=[empty_of(sizes, t)])


def _static_zero(sizes: Sequence[Size]) -> bool:
    return any(s == 0 for s in sizes if isinstance(s, int))


def _identity(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def _linalg_ext(name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
                attributes: dict[str, ir.Attribute], block_types: Sequence[ir.Type],
                combine: Callable[[list[ir.Value]], ir.Value]) -> ir.Operation:
    """An ``iree_linalg_ext`` op with a one-block region yielding ``combine(arguments)`` (the
    dialect has no Python builders, so it is created generically)."""
    op = ir.Operation.create(f"iree_linalg_ext.{name}", results=list(results), operands=list(operands),
                             attributes=attributes, regions=1)
    block = op.regions[0].blocks.append(*block_types)
    with ir.InsertionPoint(block):
        ir.Operation.create("iree_linalg_ext.yield", operands=[combine(list(block.arguments))])
    return op


def _scatter(updates: ir.Value, indices: ir.Value, original: ir.Value, dtype: dt.DType, depth: int,
             combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Ordered scatter: ``unique_indices(false)`` makes IREE apply the updates one after the
    other, so ``combine(update, current)`` sees repeated indices in order."""
    e = elem_type(dtype)
    op = _linalg_ext("scatter", [original.type], [updates, indices, original],
                     {"dimension_map": ir.DenseI64ArrayAttr.get(list(range(depth))),
                      "unique_indices": ir.BoolAttr.get(False)},
                     [e, e], lambda a: combine(a[0], a[1]))
    return op.results[0]


# --- gathers -----------------------------------------------------------------------------------

@lowers("tp.gather", summary="`linalg.generic` over the index reading the input with "
                             "`tensor.extract` at the clamped index")
def _gather(ctx: LowerCtx) -> list[ir.Value]:
    value, index = ctx.operands
    t, it = ctx.in_types
    out = ctx.out_types[0]
    if t.rank == 0:
        return [value]
    dim = normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank)
    sizes, isizes = sizes_of(value, t), sizes_of(index, it)
    if _static_zero(isizes):
        return [empty_of(isizes, out)]
    if _static_zero(sizes):
        return [_zeros(isizes, out)]
    # Other dimensions are read at the loop position, which the index's size bounds only
    # when both sizes are static; otherwise it is clamped too.
    loose = [d for d in range(t.rank) if d != dim and not (is_static(t.shape[d]) and is_static(it.shape[d]))]

    def body(args: list[ir.Value]) -> ir.Value:
        coords = []
        for d in range(t.rank):
            if d == dim:
                coords.append(_clamped(args[0], sizes[d], wrap=False))
            elif d in loose:
                last = arith.SubIOp(index_of(sizes[d]), index_const(1)).result
                coords.append(arith.MinSIOp(loop_index(d), last).result)
            else:
                coords.append(loop_index(d))
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition([sizes[d] for d in [dim, *loose]], []), out, isizes,
                     lambda: generic(out, empty_of(isizes, out), [(index, _identity(it.rank), it)], body))]


@lowers("tp.index_select", summary="`linalg.generic` over the result reading the input with "
                                   "`tensor.extract` at the clamped index")
def _index_select(ctx: LowerCtx) -> list[ir.Value]:
    value, index = ctx.operands
    t, it = ctx.in_types
    out = ctx.out_types[0]
    if t.rank == 0:
        return [value]
    dim = normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank)
    sizes = sizes_of(value, t)
    out_sizes = list(sizes)
    out_sizes[dim] = sizes_of(index, it)[0] if it.rank == 1 else 1
    if _static_zero(out_sizes):
        return [empty_of(out_sizes, out)]
    if sizes[dim] == 0:
        return [_zeros(out_sizes, out)]
    index_map = ir.AffineMap.get(out.rank, 0, [ir.AffineDimExpr.get(dim)] if it.rank == 1 else [])

    def body(args: list[ir.Value]) -> ir.Value:
        coords = [_clamped(args[0], sizes[d], wrap=False) if d == dim else loop_index(d) for d in range(t.rank)]
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition([sizes[dim]], []), out, out_sizes,
                     lambda: generic(out, empty_of(out_sizes, out), [(index, index_map, it)], body))]


class _Advanced:
    """Where advanced indexing puts things: the broadcast index block occupies result
    dimensions ``[first, first + rank)``; every other input dimension keeps its order."""

    def __init__(self, opdef: Op, value: ir.Value, t: TensorType,
                 indices: Sequence[tuple[ir.Value, TensorType]], dims: Sequence[int]):
        self.dims = list(dims)
        self.indices = list(indices)
        self.sizes = sizes_of(value, t)
        self.result = advanced_index_shape(opdef, t.shape, [it.shape for _, it in indices], dims)
        self.rank = len(self.result) - (t.rank - len(self.dims))
        adjacent = self.dims == list(range(self.dims[0], self.dims[0] + len(self.dims)))
        self.first = self.dims[0] if adjacent else 0
        self.block = tuple(self.result[self.first:self.first + self.rank])
        self.position: dict[int, int] = {}
        rest = [d for d in range(t.rank) if d not in self.dims]
        for n, d in enumerate(rest):
            if adjacent:
                self.position[d] = d if d < self.dims[0] else d - len(self.dims) + self.rank
            else:
                self.position[d] = self.rank + n

    def index_map(self, it: TensorType, total_rank: int, offset: int) -> ir.AffineMap:
        """How an index tensor is read from a loop nest whose dims ``offset...`` run over
        the broadcast index block (broadcast like the elementwise ops)."""
        exprs = []
        lead = self.rank - it.rank
        for m, d in enumerate(it.shape):
            k = lead + m
            if self._stretched(d, k):
                exprs.append(ir.AffineConstantExpr.get(0))
            else:
                exprs.append(ir.AffineDimExpr.get(offset + k))
        return ir.AffineMap.get(total_rank, 0, exprs)

    def _stretched(self, d: object, k: int) -> bool:
        return is_static(d) and d == 1 and not (is_static(self.block[k]) and self.block[k] == 1)

    def result_sizes(self, shape: Sequence[object]) -> list[Size]:
        """Sizes of a result of ``shape`` (static where known, else from the input or the
        first index tensor that is not stretched there)."""
        res: list[Size] = [int(d) if is_static(d) else None for d in shape]
        for d, p in self.position.items():
            if res[p] is None:
                res[p] = self.sizes[d]
        for k in range(self.rank):
            p = self.first + k
            if res[p] is None:
                for v, it in self.indices:
                    m = k - (self.rank - it.rank)
                    if m >= 0 and not (is_static(it.shape[m]) and it.shape[m] == 1):
                        res[p] = dim_value(v, m)
                        break
        return res

    def checks(self, result_sizes: Sequence[Size]) -> tuple[list[Size], list[tuple[Size, Size]]]:
        """What :func:`_condition` must test: indexed input sizes are nonzero, and each
        index tensor dimension read at the loop position spans its block dimension."""
        equal: list[tuple[Size, Size]] = []
        for v, it in self.indices:
            lead = self.rank - it.rank
            for m, d in enumerate(it.shape):
                if not self._stretched(d, lead + m):
                    equal.append((int(d) if is_static(d) else dim_value(v, m), result_sizes[self.first + lead + m]))
        return [self.sizes[d] for d in self.dims], equal


@lowers("tp.index", summary="`linalg.generic` over the result reading the broadcast index "
                            "tensors through indexing maps and the input with `tensor.extract` "
                            "(negative indices wrapped, then clamped)")
def _index(ctx: LowerCtx) -> list[ir.Value]:
    value, *index_values = ctx.operands
    t, *index_types = ctx.in_types
    out = ctx.out_types[0]
    layout = _Advanced(ctx.opdef, value, t, list(zip(index_values, index_types)), ctx.attrs["dims"])
    sizes = layout.sizes
    out_sizes = layout.result_sizes(out.shape)
    if _static_zero(out_sizes):
        return [empty_of(out_sizes, out)]
    if _static_zero([sizes[d] for d in layout.dims]):
        return [_zeros(out_sizes, out)]
    inputs = [(v, layout.index_map(it, out.rank, layout.first), it) for v, it in layout.indices]

    def body(args: list[ir.Value]) -> ir.Value:
        coords = []
        for d in range(t.rank):
            if d in layout.dims:
                coords.append(_clamped(args[layout.dims.index(d)], sizes[d], wrap=True))
            else:
                coords.append(loop_index(layout.position[d]))
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition(*layout.checks(out_sizes)), out, out_sizes,
                     lambda: generic(out, empty_of(out_sizes, out), inputs, body))]


# --- index_put ---------------------------------------------------------------------------------

def _accumulate(dtype: dt.DType) -> Callable[[ir.Value, ir.Value], ir.Value]:
    work = compute_dtype(dtype)

    def add(update: ir.Value, current: ir.Value) -> ir.Value:
        if dtype.is_bool:
            return arith.OrIOp(current, update).result
        if not dtype.is_floating_point:
            return arith.AddIOp(current, update).result
        a, b = cast_scalar(current, dtype, work), cast_scalar(update, dtype, work)
        return cast_scalar(arith.AddFOp(a, b).result, work, dtype)

    return add


@lowers("tp.index_put", summary="`iree_linalg_ext.scatter` (ordered updates; the indexed "
                                "dimensions transposed to the front) of the flattened values at "
                                "wrapped, clamped index tuples")
def _index_put(ctx: LowerCtx) -> list[ir.Value]:
    value, values, *index_values = ctx.operands
    t, vt, *index_types = ctx.in_types
    layout = _Advanced(ctx.opdef, value, t, list(zip(index_values, index_types)), ctx.attrs["dims"])
    sizes, dims = layout.sizes, layout.dims
    vsizes = sizes_of(values, vt)
    if _static_zero(vsizes) or _static_zero([sizes[d] for d in dims]):
        return [value]
    combine = _accumulate(t.dtype) if ctx.attrs["accumulate"] else (lambda update, current: update)
    # Under dynamic sizes the values must also have the indexing result's shape: the
    # scatter runs over the values and writes their rows into the input.
    expected = layout.result_sizes(layout.result)
    positive, equal = layout.checks(expected)
    cond = _condition(positive, equal + list(zip(vsizes, expected)))

    def build() -> ir.Value:
        rest = [d for d in range(t.rank) if d not in dims]
        perm = dims + rest
        front = transpose(value, t, perm)
        front_t = t.with_shape(tuple(t.shape[p] for p in perm))
        # values: the index block first, then the remaining dims, flattened to [K, rest...]
        b, first = layout.rank, layout.first
        vperm = list(range(first, first + b)) + [p for p in range(vt.rank) if not first <= p < first + b]
        vfront = transpose(values, vt, vperm)
        vfront_t = vt.with_shape(tuple(vt.shape[p] for p in vperm))
        block_shape = vfront_t.shape[:b]
        count = _prod(block_shape) if all(is_static(d) for d in block_shape) else None
        updates_t = vt.with_shape((count,) + tuple(vfront_t.shape[b:]))
        if b == 0:
            groups = [[0, 1]] + [[j + 1] for j in range(1, vt.rank)] if vt.rank else []
            updates = expand(vfront, groups, updates_t, [1] + list(vsizes))
        else:
            updates = collapse(vfront, [list(range(b))] + [[j] for j in range(b, vt.rank)], updates_t)
        # index tuples [block..., depth] -> [K, depth], each wrapped and clamped into its dim
        tuples_t = TensorType(tuple(block_shape) + (len(dims),), _I64)
        init = empty_of([vsizes[p] for p in vperm[:b]] + [len(dims)], tuples_t)
        inputs = [(v, layout.index_map(it, b + 1, 0), it) for v, it in layout.indices]
        i64 = ir.IntegerType.get_signless(64)

        def body(args: list[ir.Value]) -> ir.Value:
            which = loop_index(b)
            picked = _clamped(args[0], sizes[dims[0]], wrap=True, to=i64)
            for j in range(1, len(dims)):
                v = _clamped(args[j], sizes[dims[j]], wrap=True, to=i64)
                picked = arith.SelectOp(arith.CmpIOp(_I.eq, which, index_const(j)).result, v, picked).result
            return picked

        tuples = generic(tuples_t, init, inputs, body)
        flat_t = TensorType((count, len(dims)), _I64)
        if b == 0:
            flat = expand(tuples, [[0, 1]], flat_t, [1, len(dims)])
        else:
            flat = collapse(tuples, [list(range(b)), [b]], flat_t)
        scattered = _scatter(updates, flat, front, t.dtype, len(dims), combine)
        return transpose(scattered, front_t, [perm.index(d) for d in range(t.rank)])

    if cond is None:
        return [build()]
    return [_scf_if(cond, ranked(t), build, lambda: value)]


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# --- triangles and nonzero ---------------------------------------------------------------------

def _triangle(keep: arith.CmpIPredicate) -> Callable[[LowerCtx], list[ir.Value]]:
    def lower(ctx: LowerCtx) -> list[ir.Value]:
        value, t = ctx.operands[0], ctx.in_types[0]
        r = t.rank
        diagonal = index_const(ctx.attrs["diagonal"])
        zero = const_scalar(0, t.dtype)

        def body(args: list[ir.Value]) -> ir.Value:
            offset = arith.SubIOp(loop_index(r - 1), loop_index(r - 2)).result
            inside = arith.CmpIOp(keep, offset, diagonal).result
            return arith.SelectOp(inside, args[0], zero).result

        return [generic(t, empty_of(sizes_of(value, t), t), [(value, _identity(r), t)], body)]

    return lower


lowers("tp.tril", summary="`linalg.generic` keeping elements with column - row <= diagonal "
                          "(`linalg.index`)")(_triangle(_I.sle))
lowers("tp.triu", summary="`linalg.generic` keeping elements with column - row >= diagonal "
                          "(`linalg.index`)")(_triangle(_I.sge))


@lowers("tp.nonzero", summary="nonzero mask; each element's row from an `iree_linalg_ext.scan` "
                              "running count, the count from a sum; `iree_linalg_ext.scatter` of "
                              "the coordinates into a count-sized result")
def _nonzero(ctx: LowerCtx) -> list[ir.Value]:
    value, t = ctx.operands[0], ctx.in_types[0]
    out = ctx.out_types[0]
    r = t.rank
    i64 = ir.IntegerType.get_signless(64)
    sizes = sizes_of(value, t)
    if _static_zero(sizes):
        return [cast_to(empty_of([0, r], out), out)]
    # The nonzero test runs in a linalg op even for rank 0: IREE's host code has no f16/bf16 scalars.
    mask_t = t.with_dtype(_I64)
    mask = generic(mask_t, empty_of(sizes, mask_t), [(value, _identity(r), t)],
                   lambda a: arith.ExtUIOp(i64, _nonzero_flag(a[0], t.dtype)).result)
    if r == 0:
        n = arith.IndexCastOp(_INDEX(), tensor.ExtractOp(mask, []).result).result
        return [empty_of([n, 0], out)]
    numel = t.numel()
    flat_t = TensorType((numel if is_static(numel) else None,), _I64)
    flat = mask if r == 1 else collapse(mask, [list(range(r))], flat_t)
    flat_sizes = sizes_of(flat, flat_t)
    # An inclusive running count numbers the nonzero elements: element i goes to row running[i] - 1.
    total0 = linalg.fill(const_scalar(0, _I64), outs=[empty_of([], TensorType((), _I64))])
    scan = _linalg_ext("scan", [ranked(flat_t), ranked(TensorType((), _I64))],
                       [flat, empty_of(flat_sizes, flat_t), total0],
                       {"dimension": ir.IntegerAttr.get(i64, 0), "inclusive": ir.BoolAttr.get(True)},
                       [i64, i64], lambda a: arith.AddIOp(a[0], a[1]).result)
    running = scan.results[0]
    # IREE leaves the scan's accumulator at its initial value when the scanned dimension
    # has size 1, so the count is a reduction of its own.
    n64 = tensor.ExtractOp(_sum_1d(flat, total0), []).result
    n = arith.IndexCastOp(_INDEX(), n64).result
    # Zero elements all go to a spare last row, cut off below.
    rows_t = TensorType((flat_t.shape[0], 1), _I64)
    row_map = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0)])

    def row(args: list[ir.Value]) -> ir.Value:
        taken = arith.CmpIOp(_I.ne, args[0], const_scalar(0, _I64)).result
        return arith.SelectOp(taken, arith.SubIOp(args[1], const_scalar(1, _I64)).result, n64).result

    rows = generic(rows_t, empty_of(flat_sizes + [1], rows_t),
                   [(flat, row_map, flat_t), (running, row_map, flat_t)], row)
    coords_t = TensorType(tuple(t.shape) + (r,), _I64)

    def coordinate(_: list[ir.Value]) -> ir.Value:
        which = loop_index(r)
        picked = arith.IndexCastOp(i64, loop_index(0)).result
        for k in range(1, r):
            is_k = arith.CmpIOp(_I.eq, which, index_const(k)).result
            picked = arith.SelectOp(is_k, arith.IndexCastOp(i64, loop_index(k)).result, picked).result
        return picked

    coords = generic(coords_t, empty_of(sizes + [r], coords_t), [], coordinate)
    updates_t = TensorType((flat_t.shape[0], r), _I64)
    updates = coords if r == 1 else collapse(coords, [list(range(r)), [r]], updates_t)
    spare = arith.AddIOp(n, index_const(1)).result
    dest = empty_of([spare, r], out)
    scattered = _scatter(updates, rows, dest, _I64, 1, lambda update, current: update)
    return [tensor.ExtractSliceOp(ranked(out), scattered, [], [n], [], [0, 0],
                                  [ir.ShapedType.get_dynamic_size(), r], [1, 1]).result]


def _sum_1d(values: ir.Value, init: ir.Value) -> ir.Value:
    """Sum of a 1-D integer tensor into the 0-D ``init`` (a reduction ``linalg.generic``)."""
    maps = [ir.AffineMap.get_identity(1), ir.AffineMap.get(1, 0, [])]
    op = linalg.GenericOp([init.type], [values], [init], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<reduction>")]))
    e = ir.RankedTensorType(init.type).element_type
    block = op.regions[0].blocks.append(e, e)
    with ir.InsertionPoint(block):
        linalg.YieldOp([arith.AddIOp(block.arguments[0], block.arguments[1]).result])
    return op.result


def _nonzero_flag(x: ir.Value, dtype: dt.DType) -> ir.Value:
    if dtype.is_bool:
        return x
    zero = const_scalar(0, dtype)
    if dtype.is_floating_point:
        return arith.CmpFOp(arith.CmpFPredicate.UNE, x, zero).result
    return arith.CmpIOp(_I.ne, x, zero).result
