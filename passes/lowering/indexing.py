"""Lowerings of the indexing family.

Gathers (``tp.gather``, ``tp.index_select``, ``tp.index``) are ``linalg.generic`` ops over
the result that read the input with ``tensor.extract``: negative indices wrap where the
reference wraps them, and every index is clamped into its dimension, so indices the
reference rejects never read outside the input. ``tp.index_put`` is an
``iree_linalg_ext.scatter`` with ordered updates (repeated indices: the last write wins,
or all add up with ``accumulate``, as in the reference). ``tp.nonzero`` numbers the
nonzero elements with an ``iree_linalg_ext.scan`` running count and scatters their
coordinates into a result of run-time size; ``tp.unique`` sorts (``iree_linalg_ext.sort``)
and compacts the first element of each run of equal values the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...dialects.ir import arith, ir, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.ops.indexing import advanced_index_shape
from ...dialects.tp.registry import Op
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import (cast_scalar, collapse, const_scalar, dim_map, elem_type, empty, expand, filled, generic,
                       identity_map, linalg_ext, loop_index, match_type, parallel, ranked, scalar_add, size_scalar,
                       tensor_type, transpose)
from ._sizes import Size, as_index, dim_value, has_static_zero, index_const, sizes_of, split_sizes

_I = arith.CmpIPredicate
_F = arith.CmpFPredicate
_INDEX = ir.IndexType.get
_I64 = dt.int64


# --- helpers -----------------------------------------------------------------------------------

def _clamped(v: ir.Value, size: Size, *, wrap: bool, to_i64: bool = False) -> ir.Value:
    """Index scalar ``v`` (i32/i64) as a position in ``[0, size)`` (an ``index``, or an i64
    with ``to_i64``): negative values count from the end when ``wrap``; anything still out
    of range is clamped (the reference raises there, so any in-bounds position will do)."""
    if not to_i64:
        i = arith.IndexCastOp(_INDEX(), v).result
        n = as_index(size)
        zero, last = index_const(0), (index_const(size - 1) if isinstance(size, int)
                                      else arith.SubIOp(n, index_const(1)).result)
    else:
        to = elem_type(_I64)
        i = v if v.type == to else arith.ExtSIOp(to, v).result
        n = const_scalar(size, _I64) if isinstance(size, int) else arith.IndexCastOp(to, size).result
        zero = const_scalar(0, _I64)
        last = arith.SubIOp(n, const_scalar(1, _I64)).result
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
    tests += [arith.CmpIOp(_I.eq, as_index(a), as_index(b)).result
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
    return _scf_if(cond, ranked(out), build, lambda: filled(out_sizes, out.dtype, 0))


def _scatter(updates: ir.Value, indices: ir.Value, original: ir.Value, dtype: dt.DType, depth: int,
             combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """Ordered scatter: ``unique_indices(false)`` makes IREE apply the updates one after the
    other, so ``combine(update, current)`` sees repeated indices in order."""
    e = elem_type(dtype)
    op = linalg_ext("scatter", [original.type], [updates, indices, original],
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
    if has_static_zero(isizes):
        return [empty(isizes, out.dtype)]
    if has_static_zero(sizes):
        return [filled(isizes, out.dtype, 0)]
    # Other dimensions are read at the loop position, which the index's size bounds only
    # when both sizes are static; otherwise it is clamped too.
    loose = [d for d in range(t.rank) if d != dim and not (is_static(t.shape[d]) and is_static(it.shape[d]))]

    def body(args: list[ir.Value]) -> ir.Value:
        coords = []
        for d in range(t.rank):
            if d == dim:
                coords.append(_clamped(args[0], sizes[d], wrap=False))
            elif d in loose:
                last = arith.SubIOp(as_index(sizes[d]), index_const(1)).result
                coords.append(arith.MinSIOp(loop_index(d), last).result)
            else:
                coords.append(loop_index(d))
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition([sizes[d] for d in [dim, *loose]], []), out, isizes,
                     lambda: parallel(empty(isizes, out.dtype), [(index, identity_map(it.rank))], body))]


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
    if has_static_zero(out_sizes):
        return [empty(out_sizes, out.dtype)]
    if sizes[dim] == 0:
        return [filled(out_sizes, out.dtype, 0)]
    index_map = dim_map(out.rank, [dim] if it.rank == 1 else [])

    def body(args: list[ir.Value]) -> ir.Value:
        coords = [_clamped(args[0], sizes[d], wrap=False) if d == dim else loop_index(d) for d in range(t.rank)]
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition([sizes[dim]], []), out, out_sizes,
                     lambda: parallel(empty(out_sizes, out.dtype), [(index, index_map)], body))]


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
    if has_static_zero(out_sizes):
        return [empty(out_sizes, out.dtype)]
    if has_static_zero([sizes[d] for d in layout.dims]):
        return [filled(out_sizes, out.dtype, 0)]
    inputs = [(v, layout.index_map(it, out.rank, layout.first)) for v, it in layout.indices]

    def body(args: list[ir.Value]) -> ir.Value:
        coords = []
        for d in range(t.rank):
            if d in layout.dims:
                coords.append(_clamped(args[layout.dims.index(d)], sizes[d], wrap=True))
            else:
                coords.append(loop_index(layout.position[d]))
        return tensor.ExtractOp(value, coords).result

    return [_guarded(_condition(*layout.checks(out_sizes)), out, out_sizes,
                     lambda: parallel(empty(out_sizes, out.dtype), inputs, body))]


# --- index_put ---------------------------------------------------------------------------------

def _accumulate(dtype: dt.DType) -> Callable[[ir.Value, ir.Value], ir.Value]:
    work = dtype.computes_in

    def add(update: ir.Value, current: ir.Value) -> ir.Value:
        a, b = cast_scalar(current, dtype, work), cast_scalar(update, dtype, work)
        return cast_scalar(scalar_add(a, b, work), work, dtype)

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
    if has_static_zero(vsizes) or has_static_zero([sizes[d] for d in dims]):
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
        if b == 0:
            groups = [[0, 1]] + [[j + 1] for j in range(1, vt.rank)] if vt.rank else []
            updates = expand(vfront, groups, [1] + list(vsizes))
        else:
            updates = collapse(vfront, [list(range(b))] + [[j] for j in range(b, vt.rank)])
        # index tuples [block..., depth] -> [K, depth], each wrapped and clamped into its dim
        init = empty([vsizes[p] for p in vperm[:b]] + [len(dims)], _I64)
        inputs = [(v, layout.index_map(it, b + 1, 0)) for v, it in layout.indices]

        def body(args: list[ir.Value]) -> ir.Value:
            which = loop_index(b)
            picked = _clamped(args[0], sizes[dims[0]], wrap=True, to_i64=True)
            for j in range(1, len(dims)):
                v = _clamped(args[j], sizes[dims[j]], wrap=True, to_i64=True)
                picked = arith.SelectOp(arith.CmpIOp(_I.eq, which, index_const(j)).result, v, picked).result
            return picked

        tuples = parallel(init, inputs, body)
        if b == 0:
            flat = expand(tuples, [[0, 1]], [1, len(dims)])
        else:
            flat = collapse(tuples, [list(range(b)), [b]])
        scattered = _scatter(updates, flat, front, t.dtype, len(dims), combine)
        return transpose(scattered, front_t, [perm.index(d) for d in range(t.rank)])

    if cond is None:
        return [build()]
    return [_scf_if(cond, ranked(t), build, lambda: value)]


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

        return [parallel(empty(sizes_of(value, t), t.dtype), [(value, identity_map(r))], body)]

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
    i64 = elem_type(_I64)
    sizes = sizes_of(value, t)
    if has_static_zero(sizes):
        return [match_type(empty([0, r], out.dtype), out)]
    # The nonzero test runs in a linalg op even for rank 0: IREE's host code has no f16/bf16 scalars.
    mask = parallel(empty(sizes, _I64), [(value, identity_map(r))],
                    lambda a: arith.ExtUIOp(i64, cast_scalar(a[0], t.dtype, dt.bool_)).result)
    if r == 0:
        n = arith.IndexCastOp(_INDEX(), tensor.ExtractOp(mask, []).result).result
        return [empty([n, 0], out.dtype)]
    numel = t.numel()
    flat_t = TensorType((numel if is_static(numel) else None,), _I64)
    flat = mask if r == 1 else collapse(mask, [list(range(r))])
    flat_sizes = sizes_of(flat, flat_t)
    # An inclusive running count numbers the nonzero elements: element i goes to row running[i] - 1.
    total0 = filled([], _I64, 0)
    scan = linalg_ext("scan", [ranked(flat_t), ranked(TensorType((), _I64))],
                      [flat, empty(flat_sizes, _I64), total0],
                      {"dimension": ir.IntegerAttr.get(i64, 0), "inclusive": ir.BoolAttr.get(True)},
                      [i64, i64], lambda a: arith.AddIOp(a[0], a[1]).result)
    running = scan.results[0]
    # IREE leaves the scan's accumulator at its initial value when the scanned dimension
    # has size 1, so the count is a reduction of its own.
    n64 = tensor.ExtractOp(_sum_1d(flat, total0), []).result
    n = arith.IndexCastOp(_INDEX(), n64).result
    # Zero elements all go to a spare last row, cut off below.
    row_map = dim_map(2, [0])

    def row(args: list[ir.Value]) -> ir.Value:
        taken = arith.CmpIOp(_I.ne, args[0], const_scalar(0, _I64)).result
        return arith.SelectOp(taken, arith.SubIOp(args[1], const_scalar(1, _I64)).result, n64).result

    rows = parallel(empty(flat_sizes + [1], _I64), [(flat, row_map), (running, row_map)], row)

    def coordinate(_: list[ir.Value]) -> ir.Value:
        which = loop_index(r)
        picked = arith.IndexCastOp(i64, loop_index(0)).result
        for k in range(1, r):
            is_k = arith.CmpIOp(_I.eq, which, index_const(k)).result
            picked = arith.SelectOp(is_k, arith.IndexCastOp(i64, loop_index(k)).result, picked).result
        return picked

    coords = parallel(empty(sizes + [r], _I64), [], coordinate)
    updates = coords if r == 1 else collapse(coords, [list(range(r)), [r]])
    spare = arith.AddIOp(n, index_const(1)).result
    dest = empty([spare, r], out.dtype)
    scattered = _scatter(updates, rows, dest, _I64, 1, lambda update, current: update)
    dynamic, static = split_sizes([n, r])
    return [tensor.ExtractSliceOp(ranked(out), scattered, [], dynamic, [], [0, 0], static, [1, 1]).result]


# --- unique --------------------------------------------------------------------------------------

def _before(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    """``a`` sorts before ``b``: ascending, NaNs last (a strict weak order)."""
    if d.is_floating_point:
        less = arith.CmpFOp(_F.OLT, a, b).result
        number_before_nan = arith.AndIOp(arith.CmpFOp(_F.ORD, a, a).result, arith.CmpFOp(_F.UNO, b, b).result).result
        return arith.OrIOp(less, number_before_nan).result
    return arith.CmpIOp(_I.slt if d.is_signed else _I.ult, a, b).result


def _differs(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    """``a != b`` as unique compares: a NaN differs from everything, itself included."""
    if d.is_floating_point:
        return arith.CmpFOp(_F.UNE, a, b).result
    return arith.CmpIOp(_I.ne, a, b).result


def _compact(updates: ir.Value, rows: ir.Value, count: ir.Value, spare: ir.Value, dtype: dt.DType) -> ir.Value:
    """The ``(count,)`` tensor holding each ``updates`` element (``(n, 1)``) at its row of
    ``rows`` (``(n, 1)``, row ``count`` for the ones dropped): a scatter into ``count + 1``
    rows, cut to ``count``."""
    scattered = _scatter(updates, rows, empty([spare, 1], dtype), dtype, 1, lambda update, current: update)
    part = tensor.ExtractSliceOp(tensor_type([None, 1], elem_type(dtype)), scattered, [], [count], [],
                                 [0, 0], [ir.ShapedType.get_dynamic_size(), 1], [1, 1]).result
    return collapse(part, [[0, 1]])


def _running_count(flags: ir.Value, sizes: list[Size]) -> ir.Value:
    """The inclusive running sum of the 1-D int64 ``flags`` (an ``iree_linalg_ext.scan``)."""
    i64 = elem_type(_I64)
    n = sizes[0]
    scan = linalg_ext("scan", [ranked(TensorType((n if isinstance(n, int) else None,), _I64)),
                               ranked(TensorType((), _I64))],
                      [flags, empty(sizes, _I64), filled([], _I64, 0)],
                      {"dimension": ir.IntegerAttr.get(i64, 0), "inclusive": ir.BoolAttr.get(True)},
                      [i64, i64], lambda a: arith.AddIOp(a[0], a[1]).result)
    return scan.results[0]


@lowers("tp.unique", summary="`iree_linalg_ext.sort` of the values (with their positions when the "
                             "inverse is read); a first-of-its-group mask from adjacent differences "
                             "numbered by an `iree_linalg_ext.scan` running count; "
                             "`iree_linalg_ext.scatter` of each group's first value and sorted "
                             "position into count-sized results (counts: next start minus start), "
                             "and of each element's group to its original position (inverse); "
                             "results nobody reads are not computed")
def _unique(ctx: LowerCtx) -> list[ir.Value]:
    value, t = ctx.operands[0], ctx.in_types[0]
    vt, it, ct = ctx.out_types
    used = [any(True for _ in r.uses) for r in ctx.op.results]
    r = t.rank
    i64 = elem_type(_I64)
    sizes = sizes_of(value, t)
    if has_static_zero(sizes):
        return [match_type(empty([0], vt.dtype), vt), match_type(empty(sizes, _I64), it),
                match_type(empty([0], _I64), ct)]
    # keys sort and compare in the dtype the values compute in: halves as float32, bool and
    # narrow ints as int32 (SPIR-V emulates narrow ints, and not their unsigned comparisons)
    kd = dt.int32 if t.dtype.is_bool or (t.dtype.is_integer and t.dtype.bits < 32) else t.dtype.computes_in
    flat = expand(value, [], [1]) if r == 0 else (value if r == 1 else collapse(value, [list(range(r))]))
    numel = t.numel()
    n_sizes = sizes_of(flat, TensorType((numel if is_static(numel) else None,), t.dtype))
    n = n_sizes[0]
    line, column = identity_map(1), dim_map(2, [0])
    keys = flat if kd is t.dtype else parallel(empty(n_sizes, kd), [(flat, line)],
                                               lambda a: cast_scalar(a[0], t.dtype, kd))
    ke = elem_type(kd)
    sort_attrs = {"dimension": ir.IntegerAttr.get(i64, 0)}
    if used[1]:
        # the inverse needs each sorted element's position: sorted along, ties by position.
        # (IREE 3.13 sorts the positions in place: nothing else may read that iota, and a
        # sort result nobody reads becomes an unbounded stack buffer under dynamic sizes,
        # hence the plain sort below when the inverse is not read)
        positions = parallel(empty(n_sizes, _I64), [], lambda _: arith.IndexCastOp(i64, loop_index(0)).result)
        true = const_scalar(True, dt.bool_)

        def order(a: list[ir.Value]) -> ir.Value:  # (key, key', position, position')
            tied = arith.XOrIOp(_before(a[1], a[0], kd), true).result
            earlier = arith.CmpIOp(_I.slt, a[2], a[3]).result
            return arith.OrIOp(_before(a[0], a[1], kd), arith.AndIOp(tied, earlier).result).result

        sort = linalg_ext("sort", [keys.type, positions.type], [keys, positions],
                          {**sort_attrs, "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 2])},
                          [ke, ke, i64, i64], order)
        ordered, perm = sort.results
    else:
        sort = linalg_ext("sort", [keys.type], [keys],
                          {**sort_attrs, "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1])},
                          [ke, ke], lambda a: _before(a[0], a[1], kd))
        ordered, perm = sort.results[0], None

    def first_of_group(a: list[ir.Value]) -> ir.Value:
        i = loop_index(0)
        prev = tensor.ExtractOp(ordered, [arith.MaxSIOp(arith.SubIOp(i, index_const(1)).result,
                                                         index_const(0)).result]).result
        first = arith.CmpIOp(_I.eq, i, index_const(0)).result
        return arith.ExtUIOp(i64, arith.OrIOp(first, _differs(a[0], prev, kd)).result).result

    flags = parallel(empty(n_sizes, _I64), [(ordered, line)], first_of_group)
    running = _running_count(flags, n_sizes)  # the 1-based group of each sorted element
    u64 = tensor.ExtractOp(_sum_1d(flags, filled([], _I64, 0)), []).result  # (see tp.nonzero)
    u = arith.IndexCastOp(_INDEX(), u64).result
    spare = arith.AddIOp(u, index_const(1)).result

    def row(a: list[ir.Value]) -> ir.Value:  # a group's first element goes to the group's row
        taken = arith.CmpIOp(_I.ne, a[0], const_scalar(0, _I64)).result
        return arith.SelectOp(taken, arith.SubIOp(a[1], const_scalar(1, _I64)).result, u64).result

    rows = parallel(empty(n_sizes + [1], _I64), [(flags, column), (running, column)], row)
    values = _compact(expand(ordered, [[0, 1]], n_sizes + [1]), rows, u, spare, kd)
    if kd is not t.dtype:
        values = parallel(empty([u], t.dtype), [(values, line)], lambda a: cast_scalar(a[0], kd, t.dtype))
    results = [match_type(values, vt)]
    if used[1]:  # each element's group, scattered to its original position
        groups = parallel(empty(n_sizes + [1], _I64), [(running, column)],
                          lambda a: arith.SubIOp(a[0], const_scalar(1, _I64)).result)
        at = expand(perm, [[0, 1]], n_sizes + [1])
        inverse = collapse(_scatter(groups, at, empty(n_sizes + [1], _I64), _I64, 1,
                                    lambda update, current: update), [[0, 1]])
        inverse = collapse(inverse, []) if r == 0 else (inverse if r == 1 else
                                                        expand(inverse, [list(range(r))], sizes))
        results.append(match_type(inverse, it))
    else:
        results.append(match_type(empty(sizes, _I64), it))
    if used[2]:
        # each group's first sorted position (-1 elsewhere, dropped anyway: a plain iota here
        # would be merged with the one the sort sorted in place)
        def position(a: list[ir.Value]) -> ir.Value:
            first = arith.CmpIOp(_I.ne, a[0], const_scalar(0, _I64)).result
            return arith.SelectOp(first, arith.IndexCastOp(i64, loop_index(0)).result, const_scalar(-1, _I64)).result

        firsts = parallel(empty(n_sizes + [1], _I64), [(flags, column)], position)
        starts = _compact(firsts, rows, u, spare, _I64)
        end = size_scalar(n, _I64)

        def count(a: list[ir.Value]) -> ir.Value:  # the next group's start (or n + 1) minus this one's
            nxt = arith.AddIOp(loop_index(0), index_const(1)).result
            has_next = arith.CmpIOp(_I.slt, nxt, u).result
            later = tensor.ExtractOp(starts, [arith.MinSIOp(nxt, arith.SubIOp(u, index_const(1)).result).result]).result
            return arith.SubIOp(arith.SelectOp(has_next, later, end).result, a[0]).result

        results.append(match_type(parallel(empty([u], _I64), [(starts, line)], count), ct))
    else:
        results.append(match_type(empty([0], _I64), ct))
    return results


def _sum_1d(values: ir.Value, init: ir.Value) -> ir.Value:
    """Sum of a 1-D integer tensor into the 0-D ``init`` (a reduction ``linalg.generic``)."""
    return generic([(values, identity_map(1))], [(init, dim_map(1, []))],
                   lambda a: [arith.AddIOp(a[0], a[1]).result], reduced=(0,))[0]
