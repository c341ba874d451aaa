"""Lowering of the linalg family: ``tp.matmul`` to ``linalg.matmul``/``linalg.batch_matmul``.

Operands keep their dtype and the accumulator has the compute dtype (float32 for half
types, rounded once at the end; integers accumulate in their own width and wrap around).
1-D operands become one-row/one-column matrices through ``tensor.expand_shape`` and the
unit dim is collapsed away afterwards. Batch dims are folded with ``tensor.collapse_shape``;
a batch-less (or all-ones) operand is read through a broadcasting indexing map of
``linalg.batch_matmul``, and only operands whose batch shape genuinely differs from the
result's are broadcast by a ``linalg.generic``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, _map_dims, lowers
from ._builder import (_dynamic_sizes, _stretched, broadcast_map, cast_scalar, collapse, const_scalar, dim_map,
                       elementwise, empty, expand, filled, match_type, parallel, size_scalar, unit_groups)
from ._sizes import Size, as_index, dim_value, has_static_zero, index_const, product, sizes_of


def _broadcast_batch(value: ir.Value, sizes: list[Size], batch: list[Size], dtype: dt.DType) -> ir.Value:
    """Materialize ``value`` (batch dims + 2 matrix dims) at the full batch shape."""
    out_sizes = batch + sizes[-2:]
    in_shape = [s if isinstance(s, int) else None for s in sizes]
    out_shape = [s if isinstance(s, int) else None for s in out_sizes]
    read = broadcast_map(in_shape, len(out_sizes), out_shape)
    return parallel(empty(out_sizes, dtype), [(value, read)], lambda args: args[0])


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


def _stretch_batches(ctx: LowerCtx, operands: list[tuple[ir.Value, TensorType]],
                     sizes: list[list[Size]], nb: int) -> list[Size] | None:
    """With symbolic shapes, the batch sizes of the result when an operand's dynamic batch
    size has another expression than the result's (``x[:(s0 + 1) // 2] @ x``: 1 or the
    result's size by a guard of the capture, and only the run time knows which), with such
    operands broadcast to them in place (``operands`` and ``sizes`` updated); None when
    there are none."""
    sym_in, sym_out = ctx.sym_inputs(), ctx.sym_output()
    if sym_in is None or sym_out is None or any(t.rank < 3 for _, t in operands):
        return None

    def batch_of(t: TensorType | None, rank: int) -> TensorType | None:
        return None if t is None else TensorType(tuple(t.shape[:rank]), t.dtype)

    heads = [(v, batch_of(t, t.rank - 2)) for v, t in operands]
    out_head = batch_of(ctx.out_types[0], nb)
    stretched = _stretched(heads, out_head, [batch_of(t, t.rank - 2) for t in sym_in], batch_of(sym_out, nb))
    if not any(stretched):
        return None
    batch = _dynamic_sizes(out_head, heads, stretched)
    for n, ((value, t), dims) in enumerate(zip(operands, stretched)):
        if not dims:
            continue
        full = TensorType(tuple(out_head.shape) + tuple(t.shape[-2:]), t.dtype)
        sym_full = TensorType(tuple(sym_out.shape[:nb]) + tuple(sym_in[n].shape[-2:]), t.dtype)
        sizes[n] = batch + sizes[n][-2:]
        operands[n] = (elementwise([(value, t)], full, lambda args: args[0], sym_in=[sym_in[n]],
                                   sym_out=sym_full, sizes=sizes[n]), full)
    return batch


_RESHAPES = ("tensor.cast", "tensor.expand_shape", "tensor.collapse_shape")
#: ops that move a tensor's elements around: the result of a splat is the same splat
_MOVES = _RESHAPES + ("linalg.transpose",)


def _splat(value: ir.Value) -> ir.Value | None:
    """The scalar of a ``linalg.fill`` result (seen through reshapes, casts and transposes),
    else None."""
    while True:
        op = getattr(value.owner, "operation", None)
        if op is None:  # a block argument
            return None
        if op.name == "linalg.fill":
            return op.operands[0]
        if op.name not in _MOVES:
            return None
        value = op.operands[0]


def _splat_product(a: ir.Value, b: ir.Value, k: Size, dtype, acc_dtype) -> ir.Value:
    """The one value of a product of two splats: ``k * a * b`` (0 when ``k`` is 0, also for
    NaN or infinite splats, as an empty sum is)."""
    va, vb = (cast_scalar(v, dtype, acc_dtype) for v in (a, b))
    count = size_scalar(k, acc_dtype)
    if acc_dtype.is_floating_point:
        total = arith.MulFOp(count, arith.MulFOp(va, vb).result).result
        none = arith.CmpIOp(arith.CmpIPredicate.eq, as_index(k), index_const(0)).result
        total = arith.SelectOp(none, const_scalar(0, acc_dtype), total).result
    else:
        total = arith.MulIOp(count, arith.MulIOp(va, vb).result).result
    return total


def _swapped_source(value: ir.Value) -> ir.Value | None:
    """The input of the ``linalg.transpose`` that made ``value`` when it swaps only the last
    two dims (``w.t()``, ``k.transpose(-2, -1)``); None otherwise. A matmul reads that input
    with swapped indexing maps instead: IREE then sees one contraction whose operand layout it
    chooses (packing it for data tiling) rather than a transpose it must run, or fuse into a
    pack whose vectors exceed its limits."""
    owner = value.owner
    op = getattr(owner, "operation", owner)
    if not isinstance(op, ir.Operation) or op.name != "linalg.transpose":
        return None
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    rank = len(perm)
    if rank < 2 or perm != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return None
    return op.operands[0]


def transposed_product(value: ir.Value, t: TensorType) -> ir.Value | None:
    """``value.T`` computed as its own product when ``value`` (of type ``t``) is the result of a
    2-D ``linalg.matmul`` used only here: ``(A B)^T`` as ``B^T A^T``, the same operands read
    through swapped maps, in the opposite order; None otherwise.

    A weight's gradient is such a transpose (``(x^T g)^T`` through ``x @ w.t()``). IREE folds a
    transpose into the contraction by swapping its result dims, which leaves the first operand
    indexed by the result's columns; its CPU code for that order runs 3.3x slower than for the
    same product with the operands in the other order (512x512x64, one thread: 0.71 vs 0.22 ms)."""
    owner = value.owner
    op = getattr(owner, "operation", owner)
    if (not isinstance(op, ir.Operation) or op.name != "linalg.matmul" or t.rank != 2
            or sum(1 for _ in value.uses) != 1):
        return None
    if "indexing_maps" in op.attributes:
        maps = [_map_dims(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    else:
        maps = [[0, 2], [2, 1], [0, 1]]
    if maps[2] != [0, 1] or any(d is None for m in maps[:2] for d in m):
        return None
    swap = {0: 1, 1: 0, 2: 2}
    lhs_map, rhs_map = ([swap[d] for d in maps[1]], [swap[d] for d in maps[0]])
    zero = op.operands[2].owner  # the accumulator's linalg.fill: the same value, swapped sizes
    zero = getattr(zero, "operation", zero)
    if zero.name != "linalg.fill":
        return None
    acc_type = ir.RankedTensorType(value.type)
    init = zero.operands[1]  # (its sizes, read from the fill's tensor.empty rather than the product)
    sizes = [acc_type.shape[i] if not acc_type.is_dynamic_dim(i) else dim_value(init, i) for i in (1, 0)]
    init = linalg.fill(zero.operands[0], outs=[tensor.EmptyOp(sizes, acc_type.element_type).result])
    return linalg.matmul(op.operands[1], op.operands[0], outs=[init],
                         indexing_maps=[dim_map(3, lhs_map), dim_map(3, rhs_map), dim_map(3, [0, 1])])


@lowers("tp.matmul", summary="`linalg.matmul` (rhs without batch: lhs batch folded into rows) or "
                             "`linalg.batch_matmul` (batch-less operands through broadcasting "
                             "indexing maps); 1-D operands via `tensor.expand_shape`/`collapse_shape`, "
                             "accumulator `linalg.fill` 0, float32 for half types")
def _matmul(ctx: LowerCtx) -> list[ir.Value]:
    (a, ta), (b, tb) = ctx.inputs()
    out = ctx.out_types[0]
    dtype = ta.dtype
    acc_dtype = dtype.computes_in
    a_sizes, b_sizes = sizes_of(a, ta), sizes_of(b, tb)
    if ta.rank == 1:
        a_sizes = [1] + a_sizes
        a = expand(a, [[0, 1]], a_sizes)
    if tb.rank == 1:
        b_sizes = b_sizes + [1]
        b = expand(b, [[0, 1]], b_sizes)
    nb = max(len(a_sizes), len(b_sizes)) - 2
    operands, sizes = [(a, ta), (b, tb)], [a_sizes, b_sizes]
    batch = _stretch_batches(ctx, operands, sizes, nb)
    if batch is None:
        batch = _result_batch(out, a_sizes, b_sizes, nb)
    else:
        (a, ta), (b, tb) = operands
        a_sizes, b_sizes = sizes
    m, n = a_sizes[-2], b_sizes[-1]
    drop = ({nb} if ta.rank == 1 else set()) | ({nb + 1} if tb.rank == 1 else set())
    splats = _splat(a), _splat(b)
    if all(s is not None for s in splats):
        # IREE 3.13 cannot compile a contraction of two splats with dynamic sizes (its CPU
        # codegen asks for too large vectors): every element is the same sum, filled.
        sizes = [s for i, s in enumerate(batch + [m, n]) if i not in drop]

        def splat(_: list[ir.Value]) -> ir.Value:  # computed in the dispatch: the host has no half types
            return cast_scalar(_splat_product(*splats, a_sizes[-1], dtype, acc_dtype), acc_dtype, dtype)

        return [match_type(parallel(empty(sizes, dtype), [], splat), out)]
    a_unit = all(isinstance(s, int) and s == 1 for s in a_sizes[:-2])
    b_unit = all(isinstance(s, int) and s == 1 for s in b_sizes[:-2])
    # IREE 3.13 crashes compiling a contraction over a static empty dim; the sum is just 0.
    empty_sum = has_static_zero([a_sizes[-1], b_sizes[-2]])

    def matrix(value, sizes):  # all-ones batch dims dropped: a plain matrix
        lead = len(sizes) - 2
        return collapse(value, [list(range(lead + 1)), [lead + 1]])

    def batched(value, sizes):  # batch dims folded into one
        lead = len(sizes) - 2
        return collapse(value, [list(range(lead)), [lead], [lead + 1]])

    # an operand made by swapping its last two dims is read in place through the maps
    a_src = _swapped_source(a) if ta.rank >= 2 else None
    b_src = _swapped_source(b) if tb.rank >= 2 else None

    def swapped(sizes):
        return sizes[:-2] + [sizes[-1], sizes[-2]]

    if b_unit:
        # The lhs batch dims are just more rows: one (batch*M, K) x (K, N) product.
        count = product(a_sizes[:-1])
        rows = matrix(a, a_sizes)
        acc = filled([count, n], acc_dtype, 0)
        swap_a = a_src is not None and len(a_sizes) == 2  # (a 2-d lhs only: batch dims fold into its rows)
        if swap_a:
            rows = a_src
        rhs = matrix(b, b_sizes) if b_src is None else matrix(b_src, swapped(b_sizes))
        maps = {} if not swap_a and b_src is None else {"indexing_maps": [
            dim_map(3, [2, 0] if swap_a else [0, 2]), dim_map(3, [2, 1] if b_src is None else [1, 2]),
            dim_map(3, [0, 1])]}
        result = acc if empty_sum else linalg.matmul(rows, rhs, outs=[acc], **maps)
        result = expand(result, [list(range(nb + 1)), [nb + 1]], batch + [m, n])
    else:
        acc = filled([product(batch), m, n], acc_dtype, 0)
        if empty_sum:
            result = acc
        elif a_unit:
            result = linalg.batch_matmul(matrix(a, a_sizes), batched(b, b_sizes), outs=[acc],
                                         indexing_maps=[dim_map(4, [1, 3]), dim_map(4, [0, 3, 2]),
                                                        dim_map(4, [0, 1, 2])])
        else:
            ops, maps = [], []
            for value, src, sizes, plain, flipped in ((a, a_src, a_sizes, [0, 1, 3], [0, 3, 1]),
                                                      (b, b_src, b_sizes, [0, 3, 2], [0, 2, 3])):
                if not _covers(sizes[:-2], batch):
                    value = _broadcast_batch(value, sizes, batch, dtype)
                    sizes, src = batch + sizes[-2:], None
                if src is not None:
                    ops.append(batched(src, swapped(sizes)))
                    maps.append(dim_map(4, flipped))
                else:
                    ops.append(batched(value, sizes))
                    maps.append(dim_map(4, plain))
            result = linalg.batch_matmul(*ops, outs=[acc], indexing_maps=[*maps, dim_map(4, [0, 1, 2])])
        result = expand(result, [list(range(nb)), [nb], [nb + 1]], batch + [m, n])
    result = collapse(result, unit_groups(nb + 2, drop))
    if acc_dtype is not dtype:
        acc_t = out.with_dtype(acc_dtype)
        result = elementwise([(match_type(result, acc_t), acc_t)], out,
                             lambda args: cast_scalar(args[0], acc_dtype, dtype))
    return [match_type(result, out)]

