"""Lowerings of the creation family: constants, fills and ranges."""

from __future__ import annotations

import numpy as np

from ...dialects.ir import arith, ir, linalg
from ...dialects.tp import dtypes as dt
from ...dialects.tp import mlir as M
from . import LowerCtx, lowers
from ._builder import cast_scalar, const_scalar, elem_type, empty_like_type, ranked


@lowers("tp.constant", summary="`arith.constant` with a dense elements attribute")
def _constant(ctx: LowerCtx) -> list[ir.Value]:
    value: np.ndarray = ctx.attrs["value"]
    out = ctx.out_types[0]
    if out.dtype is dt.uint8:
        value = value.view(np.int8)
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(value), type=ranked(out))
    else:
        attr = M.dense_attr(value)
    return [arith.ConstantOp(ranked(out), attr).result]


@lowers("tp.full", summary="`linalg.fill` of a `tensor.empty`")
def _full(ctx: LowerCtx) -> list[ir.Value]:
    out = ctx.out_types[0]
    value = ctx.attrs["value"]
    if out.dtype.is_bool:
        value = value != 0
    elif not out.dtype.is_floating_point:
        value = int(value)
    scalar = const_scalar(value, out.dtype)
    return [linalg.fill(scalar, outs=[empty_like_type(out)])]


@lowers("tp.arange", summary="`linalg.generic` over `linalg.index`: start + i * step")
def _arange(ctx: LowerCtx) -> list[ir.Value]:
    out = ctx.out_types[0]
    start, step = ctx.attrs["start"], ctx.attrs["step"]
    init = empty_like_type(out)
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))])
    iters = ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")])
    op = linalg.GenericOp([ranked(out)], [], [init], maps, iters)
    block = op.regions[0].blocks.append(elem_type(out.dtype))
    with ir.InsertionPoint(block):
        i = linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)).result
        i64 = arith.IndexCastOp(ir.IntegerType.get_signless(64), i).result
        if out.dtype.is_floating_point:
            # computed in float64 like the reference, then rounded once
            f = arith.SIToFPOp(ir.F64Type.get(), i64).result
            v = arith.AddFOp(const_scalar(start, dt.float64),
                             arith.MulFOp(f, const_scalar(step, dt.float64)).result).result
            value = cast_scalar(v, dt.float64, out.dtype)
        else:
            v = arith.AddIOp(const_scalar(int(start), dt.int64),
                             arith.MulIOp(i64, const_scalar(int(step), dt.int64)).result).result
            value = cast_scalar(v, dt.int64, out.dtype)
        linalg.YieldOp([value])
    return [op.result]
