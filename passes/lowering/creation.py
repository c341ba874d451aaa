"""Lowerings of the creation family: constants, fills and ranges."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dialects.ir import arith, ir, linalg, math
from ...dialects.tp import dtypes as dt
from ...dialects.tp import mlir
from ...dialects.tp import symbolic as sym
from . import LowerCtx, lowers
from ._builder import cast_scalar, const_scalar, elem_type, empty, loop_index, parallel, ranked, size_scalar
from ._target import target


@lowers("tp.constant", summary="`arith.constant` with a dense elements attribute")
def _constant(ctx: LowerCtx) -> list[ir.Value]:
    value: np.ndarray = ctx.attrs["value"]
    out = ctx.out_types[0]
    if out.dtype is dt.uint8:
        value = value.view(np.int8)
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(value), type=ranked(out))
    else:
        attr = mlir.dense_attr(value)
    return [arith.ConstantOp(ranked(out), attr).result]


@lowers("tp.full", summary="`linalg.fill` of a `tensor.empty`")
def _full(ctx: LowerCtx) -> list[ir.Value]:
    out = ctx.out_types[0]
    value = ctx.attrs["value"]
    if sym.is_symbolic(value):  # a size computed at run time
        scalar = size_scalar(ctx.size(value), out.dtype)
    else:
        if out.dtype.is_bool:
            value = value != 0
        elif not out.dtype.is_floating_point:
            value = int(value)
        scalar = const_scalar(value, out.dtype)
    return [linalg.fill(scalar, outs=[empty(_out_sizes(ctx), out.dtype)])]


def _out_sizes(ctx: LowerCtx) -> list[Any]:
    """The sizes of the result: static, or computed from their symbolic expressions."""
    sizes = ctx.out_sizes(0)
    if any(d is None for d in sizes):
        raise ValueError(f"{ctx.op.name}: a result size is known only at run time and has no expression")
    return sizes


@lowers("tp.arange", summary="`linalg.generic` over `linalg.index`: start + i * step")
def _arange(ctx: LowerCtx) -> list[ir.Value]:
    out = ctx.out_types[0]
    start, step = ctx.attrs["start"], ctx.attrs["step"]
    init = empty(_out_sizes(ctx), out.dtype)
    # symbolic start/step (sizes): int64 values computed before the loop
    i64t = ir.IntegerType.get_signless(64)
    start_v = arith.IndexCastOp(i64t, ctx.size(start)).result if sym.is_symbolic(start) else None
    step_v = arith.IndexCastOp(i64t, ctx.size(step)).result if sym.is_symbolic(step) else None

    def body(_: list[ir.Value]) -> ir.Value:
        i64 = arith.IndexCastOp(i64t, loop_index(0)).result
        if out.dtype.is_floating_point:
            # computed in float64 like the reference, then rounded once; in float32 (one
            # fused multiply-add) on a target without float64
            work = dt.float64 if out.dtype is dt.float64 or target().float64 else dt.float32
            ft = elem_type(work)
            f = arith.SIToFPOp(ft, i64).result
            a = arith.SIToFPOp(ft, start_v).result if start_v is not None else const_scalar(start, work)
            b = arith.SIToFPOp(ft, step_v).result if step_v is not None else const_scalar(step, work)
            v = math.FmaOp(f, b, a).result if work is dt.float32 else arith.AddFOp(a, arith.MulFOp(f, b).result).result
            value = cast_scalar(v, work, out.dtype)
        else:
            a = start_v if start_v is not None else const_scalar(int(start), dt.int64)
            b = step_v if step_v is not None else const_scalar(int(step), dt.int64)
            v = arith.AddIOp(a, arith.MulIOp(i64, b).result).result
            value = cast_scalar(v, dt.int64, out.dtype)
        return value

    return [parallel(init, [], body)]
