"""Lowering of the linalg family: ``tp.matmul`` to ``linalg.matmul``/``linalg.batch_matmul``.

Operands keep their dtype and the accumulator has the compute dtype (float32 for half
types, rounded once at the end; integers accumulate in their own width and wrap around).
1-D operands become one-row/one-column matrices through ``tensor.expand_shape`` and the
unit dim is collapsed away afterwards. Batch dims are folded with ``tensor.collapse_shape``;
a batch-less (or all-ones) operand is read through a broadcasting indexing map of
``linalg.batch_matmul``, and only operands whose batch shape genuinely differs from the
result's are broadcast by a ``linalg.generic``.

The size and reshape helpers here (sizes as ``int`` when static, ``index`` values when
not) are shared with the conv family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import (broadcast_map, cast_scalar, compute_dtype, const_scalar, dim_value, elem_type,
                       elementwise, identity_map, index_const, ranked)

Size = Union[int, ir.Value]

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"


def sizes_of(value: ir.Value, t: TensorType) -> list[Size]:
    """The dims of ``value``: ints where ``t`` knows them, ``tensor.dim`` otherwise."""
    return [int(d) if is_static(d) else dim_value(value, i) for i, d in enumerate(t.shape)]


def tensor_of(sizes: Sequence[Size], elem: ir.Type) -> ir.RankedTensorType:
    dyn = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([s if isinstance(s, int) else dyn for s in sizes], elem)


def as_index(size: Size) -> ir.Value:
    return index_const(size) if isinstance(size, int) else size


def index_add(a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return arith.AddIOp(as_index(a), as_index(b)).result


def product(sizes: Sequence[Size]) -> Size:
    """The product of ``sizes``: an int when all are static."""
    static = 1
    dynamic: list[ir.Value] = []
    for s in sizes:
        if isinstance(s, int):
            static *= s
        else:
            dynamic.append(s)
    if not dynamic:
        return static
    value = dynamic[0]
    for s in dynamic[1:]:
        value = arith.MulIOp(value, s).result
    if static != 1:
        value = arith.MulIOp(value, index_const(static)).result
    return value


def _reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, i) for i in g]) for g in groups])


def _trivial(groups: Sequence[Sequence[int]], rank: int) -> bool:
    return len(groups) == rank and all(len(g) == 1 for g in groups)


def collapse(value: ir.Value, sizes: Sequence[Size], groups: Sequence[Sequence[int]],
             elem: ir.Type) -> tuple[ir.Value, list[Size]]:
    """``tensor.collapse_shape`` merging each group of dims into one."""
    new = [product([sizes[i] for i in g]) for g in groups]
    if _trivial(groups, len(sizes)):
        return value, new
    op = tensor.CollapseShapeOp(tensor_of(new, elem), value, _reassociation(groups))
    return op.result, new


def expand(value: ir.Value, sizes: Sequence[Size], groups: Sequence[Sequence[int]],
           elem: ir.Type) -> ir.Value:
    """``tensor.expand_shape`` splitting source dim ``i`` into the dims ``groups[i]`` of
    the result, whose sizes are ``sizes``."""
    if _trivial(groups, len(sizes)):
        return value
    dyn = ir.ShapedType.get_dynamic_size()
    static = [s if isinstance(s, int) else dyn for s in sizes]
    dynamic = [s for s in sizes if not isinstance(s, int)]
    return tensor.ExpandShapeOp(tensor_of(sizes, elem), value, _reassociation(groups), dynamic,
                                static).result


def drop_unit_dims(value: ir.Value, sizes: Sequence[Size], drop: set[int],
                   elem: ir.Type) -> tuple[ir.Value, list[Size]]:
    """Collapse the (size-1) dims in ``drop`` into their neighbours."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(len(sizes)):
        if i in drop:
            pending.append(i)
            continue
        groups.append(pending + [i])
        pending = []
    if pending and groups:
        groups[-1].extend(pending)
    return collapse(value, sizes, groups, elem)


def zeros(sizes: Sequence[Size], dtype) -> ir.Value:
    """A ``linalg.fill`` of zeros: the accumulator of a contraction."""
    empty = tensor.EmptyOp(list(sizes), elem_type(dtype)).result
    return linalg.fill(const_scalar(0, dtype), outs=[empty])


def match_type(value: ir.Value, t: TensorType) -> ir.Value:
    """``value`` with exactly the result type the tp op declared (a ``tensor.cast`` when
    this lowering knows a size statically that the declaration leaves dynamic)."""
    want = ranked(t)
    return value if value.type == want else tensor.CastOp(want, value).result


def parallel_iterators(rank: int) -> list[ir.Attribute]:
    return [ir.Attribute.parse(_PARALLEL)] * rank


def reduction_iterators(rank: int) -> list[ir.Attribute]:
    return [ir.Attribute.parse(_REDUCTION)] * rank


def _broadcast_batch(value: ir.Value, sizes: list[Size], batch: list[Size], elem: ir.Type) -> ir.Value:
    """Materialize ``value`` (batch dims + 2 matrix dims) at the full batch shape."""
    out_sizes = batch + sizes[-2:]
    rank = len(out_sizes)
    in_shape = [s if isinstance(s, int) else None for s in sizes]
    out_shape = [s if isinstance(s, int) else None for s in out_sizes]
    maps = [broadcast_map(in_shape, rank, out_shape), identity_map(rank)]
    init = tensor.EmptyOp(out_sizes, elem).result
    op = linalg.GenericOp([tensor_of(out_sizes, elem)], [value], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get(parallel_iterators(rank)))
    block = op.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(block):
        linalg.YieldOp([block.arguments[0]])
    return op.result


def _covers(sizes: Sequence[Size], batch: Sequence[Size]) -> bool:
    """Whether an operand's batch dims already have the result's batch shape."""
    if len(sizes) != len(batch):
        return False
    return all(not isinstance(s, int) or (isinstance(b, int) and s == b) for s, b in zip(sizes, batch))


def _result_batch(out: TensorType, a_sizes: list[Size], b_sizes: list[Size], nb: int) -> list[Size]:
    batch: list[Size] = []
    for j in range(nb):
        d = out.shape[j]
        if is_static(d):
            batch.append(int(d))
            continue
        found: Size | None = None
        for sizes in (a_sizes, b_sizes):
            k = j - (nb - (len(sizes) - 2))
            if k >= 0 and not (isinstance(sizes[k], int) and sizes[k] == 1):
                found = sizes[k]
                break
        batch.append(1 if found is None else found)
    return batch


def _map(*dims: int) -> ir.AffineMap:
    return ir.AffineMap.get(4, 0, [ir.AffineDimExpr.get(d) for d in dims])


_RESHAPES = ("tensor.cast", "tensor.expand_shape", "tensor.collapse_shape")


def _splat(value: ir.Value) -> ir.Value | None:
    """The scalar of a ``linalg.fill`` result (seen through reshapes and casts), else None."""
    while True:
        op = getattr(value.owner, "operation", None)
        if op is None:  # a block argument
            return None
        if op.name == "linalg.fill":
            return op.operands[0]
        if op.name not in _RESHAPES:
            return None
        value = op.operands[0]


def _splat_product(a: ir.Value, b: ir.Value, k: Size, dtype, acc_dtype) -> ir.Value:
    """The one value of a product of two splats: ``k * a * b`` (0 when ``k`` is 0, also for
    NaN or infinite splats, as an empty sum is)."""
    va, vb = (cast_scalar(v, dtype, acc_dtype) for v in (a, b))
    if isinstance(k, int):
        count = const_scalar(k, acc_dtype)
    else:
        count = arith.IndexCastOp(ir.IntegerType.get_signless(64), k).result
        count = cast_scalar(count, dt.int64, acc_dtype)
    if acc_dtype.is_floating_point:
        total = arith.MulFOp(count, arith.MulFOp(va, vb).result).result
        empty = arith.CmpIOp(arith.CmpIPredicate.eq, as_index(k), index_const(0)).result
        total = arith.SelectOp(empty, const_scalar(0, acc_dtype), total).result
    else:
        total = arith.MulIOp(count, arith.MulIOp(va, vb).result).result
    return total


@lowers("tp.matmul", summary="`linalg.matmul` (rhs without batch: lhs batch folded into rows) or "
                             "`linalg.batch_matmul` (batch-less operands through broadcasting "
                             "indexing maps); 1-D operands via `tensor.expand_shape`/`collapse_shape`, "
                             "accumulator `linalg.fill` 0, float32 for half types")
def _matmul(ctx: LowerCtx) -> list[ir.Value]:
    (a, ta), (b, tb) = ctx.inputs()
    out = ctx.out_types[0]
    dtype = ta.dtype
    acc_dtype = compute_dtype(dtype)
    elem, acc_elem = elem_type(dtype), elem_type(acc_dtype)
    a_sizes, b_sizes = sizes_of(a, ta), sizes_of(b, tb)
    if ta.rank == 1:
        a_sizes = [1] + a_sizes
        a = expand(a, a_sizes, [[0, 1]], elem)
    if tb.rank == 1:
        b_sizes = b_sizes + [1]
        b = expand(b, b_sizes, [[0, 1]], elem)
    nb = max(len(a_sizes), len(b_sizes)) - 2
    batch = _result_batch(out, a_sizes, b_sizes, nb)
    m, n = a_sizes[-2], b_sizes[-1]
    drop = ({nb} if ta.rank == 1 else set()) | ({nb + 1} if tb.rank == 1 else set())
    splats = _splat(a), _splat(b)
    if all(s is not None for s in splats):
        # IREE 3.13 cannot compile a contraction of two splats with dynamic sizes (its CPU
        # codegen asks for too large vectors): every element is the same sum, filled.
        sizes = [s for i, s in enumerate(batch + [m, n]) if i not in drop]
        op = linalg.GenericOp([tensor_of(sizes, elem)], [], [tensor.EmptyOp(sizes, elem).result],
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(identity_map(len(sizes)))]),
                              ir.ArrayAttr.get(parallel_iterators(len(sizes))))
        block = op.regions[0].blocks.append(elem)
        with ir.InsertionPoint(block):  # computed in the dispatch: the host has no half types
            value = _splat_product(*splats, a_sizes[-1], dtype, acc_dtype)
            linalg.YieldOp([cast_scalar(value, acc_dtype, dtype)])
        return [match_type(op.result, out)]
    a_unit = all(isinstance(s, int) and s == 1 for s in a_sizes[:-2])
    b_unit = all(isinstance(s, int) and s == 1 for s in b_sizes[:-2])
    # IREE 3.13 crashes compiling a contraction over a static empty dim; the sum is just 0.
    empty_sum = any(isinstance(k, int) and k == 0 for k in (a_sizes[-1], b_sizes[-2]))

    def matrix(value, sizes):  # all-ones batch dims dropped: a plain matrix
        lead = len(sizes) - 2
        return collapse(value, sizes, [list(range(lead + 1)), [lead + 1]], elem)[0]

    def batched(value, sizes):  # batch dims folded into one
        lead = len(sizes) - 2
        return collapse(value, sizes, [list(range(lead)), [lead], [lead + 1]], elem)[0]

    if b_unit:
        # The lhs batch dims are just more rows: one (batch*M, K) x (K, N) product.
        lead = len(a_sizes) - 2
        rows, rows_sizes = collapse(a, a_sizes, [list(range(lead + 1)), [lead + 1]], elem)
        acc = zeros([rows_sizes[0], n], acc_dtype)
        result = acc if empty_sum else linalg.matmul(rows, matrix(b, b_sizes), outs=[acc])
        result = expand(result, batch + [m, n], [list(range(nb + 1)), [nb + 1]], acc_elem)
    else:
        flat = product(batch)
        acc = zeros([flat, m, n], acc_dtype)
        if empty_sum:
            result = acc
        elif a_unit:
            result = linalg.batch_matmul(matrix(a, a_sizes), batched(b, b_sizes), outs=[acc],
                                         indexing_maps=[_map(1, 3), _map(0, 3, 2), _map(0, 1, 2)])
        else:
            ops = []
            for value, sizes in ((a, a_sizes), (b, b_sizes)):
                if not _covers(sizes[:-2], batch):
                    value = _broadcast_batch(value, sizes, batch, elem)
                    sizes = batch + sizes[-2:]
                ops.append(batched(value, sizes))
            result = linalg.batch_matmul(*ops, outs=[acc])
        result = expand(result, batch + [m, n], [list(range(nb)), [nb], [nb + 1]], acc_elem)
    result, _ = drop_unit_dims(result, batch + [m, n], drop, acc_elem)
    if acc_dtype is not dtype:
        acc_t = out.with_dtype(acc_dtype)
        result = elementwise([(match_type(result, acc_t), acc_t)], out,
                             lambda args: cast_scalar(args[0], acc_dtype, dtype))
    return [match_type(result, out)]

