"""Lowering of control flow: ``tp.scan`` to an ``scf.for`` over tensors.

The loop carries the carried values and one accumulator per stacked output; each step reads
its slices with a rank-reducing ``tensor.extract_slice`` at the step's index, calls the body
(``func.call``; the body is a private function IREE inlines) and writes each per-step output
with ``tensor.insert_slice``. The trip count is an ``index`` value when the length is
symbolic, so one compiled loop serves every length; the per-step work is the body's own
lowering (linalg on tensors), dispatched once per step.
"""

from __future__ import annotations

import itertools

from ...dialects.ir import arith, func, ir, scf, tensor
from ...dialects.tp.ops.control import scan_layout
from ...dialects.tp.registry import signature_of
from ...dialects.tp.types import TensorType
from . import LowerCtx, lowers
from ._builder import filled, ranked, tensor_type
from ._sizes import as_index, index_const, sizes_of, split_sizes


def _cast(value: ir.Value, want: ir.Type) -> ir.Value:
    return value if value.type == want else tensor.CastOp(want, value).result


#: numbers for the fills loops start from (see :func:`_scan`)
_FILLS = itertools.count()


def _unique_fill(sizes: list, dtype) -> ir.Value:
    """A fill of ``sizes`` with a number the last 100 such fills did not use (each exact in
    every dtype; bools alternate)."""
    n = next(_FILLS)
    return filled(sizes, dtype, bool(n % 2) if dtype.is_bool else 1 + n % 100)


def _tie_shape(value: ir.Value, sizes: list) -> ir.Value:
    """``value`` through ``flow.tensor.tie_shape`` with its dynamic sizes (``sizes`` holds ints
    and ``index`` values); itself when static."""
    dynamic = [d for d in sizes if not isinstance(d, int)]
    if not dynamic:
        return value
    return ir.Operation.create("flow.tensor.tie_shape", results=[value.type], operands=[value, *dynamic]).results[0]


@lowers("tp.scan", summary="`scf.for` over the steps carrying the carried values and the stacked outputs; "
                           "per step `tensor.extract_slice` of each sequence, `func.call` of the body, "
                           "`tensor.insert_slice` of each output")
def _scan(ctx: LowerCtx) -> list[ir.Value]:
    body = signature_of(ctx.attrs["body"])
    operands = [v for v in ctx.operands if v is not None]
    nc, nx, _ = scan_layout(len(operands), ctx.attrs)
    length = ctx.size(ctx.attrs["length"])
    n_out = len(body.outputs) - nc
    in_types = [ranked(t) for t in body.inputs]
    out_types = [ranked(t) for t in body.outputs]
    carries = [_cast(v, ranked(t)) for v, t in zip(operands[:nc], ctx.out_types[:nc])]
    # IREE 3.13 mishandles a loop's initial values: it loses the offset of one that shares an
    # allocation with other values made before the loop (the first step then reads, and the
    # in-place updates write, another value's memory: an LSTM's zero state read the input
    # projections), and it lets loop values that start from one value (a fill or an empty
    # tensor that CSE merged) share one buffer. So every loop value starts from a placeholder of
    # its own that nothing reads (a fill with a number no other fill has, so none is merged).
    # The first step takes the initial carried values as loop invariants (``arith.select`` on
    # the step number: a copy of each small carried value per step) and makes each stacked
    # output's buffer (a fill, of a number of its own, in an ``scf.if`` that IREE runs as a
    # branch: the later steps update the buffer in place, with no copy).
    starts = carries
    carry_sizes = [sizes_of(c, t) for c, t in zip(carries, ctx.out_types[:nc])]
    carries = [_cast(_unique_fill(sizes, t.dtype), c.type)
               for c, sizes, t in zip(carries, carry_sizes, ctx.out_types[:nc])]
    # the stacked outputs' sizes: dim 0 the length, the rest the body's per-step sizes (read from
    # the op's result types where static or symbolic; the body's own otherwise)
    accs: list[ir.Value] = []
    acc_sizes: list[list] = []
    for k in range(n_out):
        sizes = ctx.out_sizes(nc + k)
        sizes[0] = length
        if any(s is None for s in sizes):
            raise ValueError(f"stacked output {k} has a size the loop cannot compute before it runs "
                             f"({ctx.out_types[nc + k]}); give the body's outputs sizes of its inputs")
        accs.append(_unique_fill(sizes, ctx.out_types[nc + k].dtype))
        acc_sizes.append(sizes)
    acc_types = [ranked(t) for t in ctx.out_types[nc:]]
    accs = [_cast(a, t) for a, t in zip(accs, acc_types)]
    invariants = operands[nc + nx:]
    xs = operands[nc:nc + nx]
    x_types = ctx.in_types[nc:nc + nx]
    loop = scf.ForOp(index_const(0), as_index(length), index_const(1), carries + accs)
    with ir.InsertionPoint(loop.body):
        step = loop.induction_variable
        if ctx.attrs["reverse"]:  # step i runs index length - 1 - i
            last = arith.SubIOp(as_index(length), index_const(1)).result
            step = arith.SubIOp(last, step).result
        first = arith.CmpIOp(arith.CmpIPredicate.eq, loop.induction_variable, index_const(0)).result
        state = list(loop.inner_iter_args)
        state[:nc] = [arith.SelectOp(first, _cast(start, v.type), v).result for start, v in zip(starts, state[:nc])]
        if n_out:
            made = scf.IfOp(first, [v.type for v in state[nc:]], has_else=True)
            with ir.InsertionPoint(made.then_block):
                scf.YieldOp([_cast(_unique_fill(sizes, t.dtype), v.type)
                             for sizes, t, v in zip(acc_sizes, ctx.out_types[nc:], state[nc:])])
            with ir.InsertionPoint(made.else_block):
                scf.YieldOp(state[nc:])
            state[nc:] = [_tie_shape(v, sizes) for v, sizes in zip(made.results, acc_sizes)]
        args = [_cast(c, t) for c, t in zip(state[:nc], in_types[:nc])]
        for x, xt, want in zip(xs, x_types, in_types[nc:nc + nx]):
            sizes = [1] + sizes_of(x, xt)[1:]
            dynamic, static = split_sizes(sizes)
            offsets, s_offsets = split_sizes([step] + [0] * (xt.rank - 1))
            piece_type = tensor_type(sizes[1:], ir.RankedTensorType(want).element_type)
            piece = tensor.ExtractSliceOp(piece_type, x, offsets, dynamic, [], s_offsets, static,
                                          [1] * xt.rank).result
            args.append(_cast(piece, want))
        args += [_cast(v, want) for v, want in zip(invariants, in_types[nc + nx:])]
        call = func.CallOp(out_types, ir.FlatSymbolRefAttr.get(body.name), args)
        results = list(call.results)
        new_carries = [_cast(r, c.type) for r, c in zip(results[:nc], carries)]
        new_accs = []
        for acc, y, yt, known in zip(state[nc:], results[nc:], ctx.out_types[nc:], acc_sizes):
            per_step = TensorType(tuple(yt.shape[1:]), yt.dtype)
            sizes = [1] + list(known[1:])  # (not tensor.dim of the scf.if's result: IREE cannot resolve it)
            y = _cast(y, tensor_type(sizes[1:], ranked(per_step).element_type))
            dynamic, static = split_sizes(sizes)
            offsets, s_offsets = split_sizes([step] + [0] * per_step.rank)
            new_accs.append(tensor.InsertSliceOp(y, acc, offsets, dynamic, [], s_offsets, static,
                                                 [1] * (per_step.rank + 1)).result)
        scf.YieldOp(new_carries + new_accs)
    # the results' sizes are the initial values' (IREE cannot follow a tensor.dim of them back
    # through the stacked outputs' scf.if)
    outs = [_tie_shape(v, sizes) for v, sizes in zip(loop.results, carry_sizes + acc_sizes)]
    return [_cast(v, ranked(t)) for v, t in zip(outs, ctx.out_types)]
