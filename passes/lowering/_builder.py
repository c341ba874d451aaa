"""Building blocks for tp→linalg lowerings: element types, scalar conversions with
PyTorch's semantics, empty tensors with dynamic sizes, broadcasting ``linalg.generic``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...dialects.ir import arith, ir, linalg, math, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.types import TensorType, is_static
from ._mathlib import divrem_i64_narrow, f32_to_bf16
from ._target import target

__all__ = ["elem_type", "ranked", "const_scalar", "cast_scalar", "empty_like_type", "dim_value",
           "broadcast_map", "elementwise", "compute_dtype", "identity_map", "index_const", "int_div", "int_rem",
           "int_divrem"]


def elem_type(dtype: dt.DType) -> ir.Type:
    """The signless element type linalg and arith work on (uint8 is stored as i8)."""
    if dtype.is_floating_point:
        return {"float16": ir.F16Type.get, "bfloat16": ir.BF16Type.get, "float32": ir.F32Type.get,
                "float64": ir.F64Type.get}[dtype.name]()
    return ir.IntegerType.get_signless(1 if dtype.is_bool else dtype.bits)


def _narrow_i64(dtype: dt.DType) -> bool:
    return dtype.bits == 64 and not target().int64_division


def int_div(a: ir.Value, b: ir.Value, dtype: dt.DType) -> ir.Value:
    """Truncating signed integer division (``arith.divsi``, or shift-and-subtract for int64
    on a target without 64-bit division)."""
    return divrem_i64_narrow(a, b)[0] if _narrow_i64(dtype) else arith.DivSIOp(a, b).result


def int_rem(a: ir.Value, b: ir.Value, dtype: dt.DType) -> ir.Value:
    """The remainder of :func:`int_div` (sign of ``a``)."""
    return divrem_i64_narrow(a, b)[1] if _narrow_i64(dtype) else arith.RemSIOp(a, b).result


def int_divrem(a: ir.Value, b: ir.Value, dtype: dt.DType) -> tuple[ir.Value, ir.Value]:
    """:func:`int_div` and :func:`int_rem` together (one shift-and-subtract where it is used)."""
    if _narrow_i64(dtype):
        return divrem_i64_narrow(a, b)
    return arith.DivSIOp(a, b).result, arith.RemSIOp(a, b).result


def ranked(t: TensorType) -> ir.RankedTensorType:
    dyn = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([int(d) if is_static(d) else dyn for d in t.shape], elem_type(t.dtype))


def compute_dtype(dtype: dt.DType) -> dt.DType:
    """Half types compute in float32 and round once, as the reference does."""
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype


def const_scalar(value: Any, dtype: dt.DType) -> ir.Value:
    t = elem_type(dtype)
    if dtype.is_floating_point:
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(value))).result
    if dtype.is_bool:
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, 1 if value else 0)).result
    v = int(value)
    if not dtype.is_signed and v >= 2 ** (dtype.bits - 1):
        v -= 2 ** dtype.bits
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, v)).result


def index_const(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), ir.IntegerAttr.get(ir.IndexType.get(), value)).result


def cast_scalar(v: ir.Value, src: dt.DType, dst: dt.DType) -> ir.Value:
    """Convert a scalar with PyTorch's rules: float→int truncates toward zero, anything→bool
    tests for nonzero, bool→number is 0/1."""
    if src is dst:
        return v
    tdst = elem_type(dst)
    if dst.is_bool:
        zero = const_scalar(0, src)
        if src.is_floating_point:
            return arith.CmpFOp(arith.CmpFPredicate.UNE, v, zero).result
        return arith.CmpIOp(arith.CmpIPredicate.ne, v, zero).result
    if src.is_floating_point and dst.is_floating_point:
        if dst.bits > src.bits or (dst.bits == src.bits and dst is dt.float32):
            return arith.ExtFOp(tdst, v).result
        if dst is dt.bfloat16:
            # IREE's CPU backend cannot link the f32→bf16 builtin: round on the bits. As in
            # PyTorch, float64 and float16 go through float32 first.
            f32 = ir.F32Type.get()
            wide = v if src is dt.float32 else (arith.TruncFOp if src.bits > 32 else arith.ExtFOp)(f32, v).result
            return f32_to_bf16(wide)
        if {src, dst} == {dt.float16, dt.bfloat16}:
            return arith.TruncFOp(tdst, arith.ExtFOp(ir.F32Type.get(), v).result).result
        return arith.TruncFOp(tdst, v).result
    if src.is_floating_point:
        return (arith.FPToSIOp if dst.is_signed else arith.FPToUIOp)(tdst, v).result
    if dst.is_floating_point:
        unsigned = src.is_bool or not src.is_signed
        convert = arith.UIToFPOp if unsigned else arith.SIToFPOp
        if dst is dt.bfloat16:  # through float32 (as PyTorch): the direct one needs __truncsfbf2
            return f32_to_bf16(convert(ir.F32Type.get(), v).result)
        return convert(tdst, v).result
    sbits = 1 if src.is_bool else src.bits
    if dst.bits > sbits:
        unsigned = src.is_bool or not src.is_signed
        return (arith.ExtUIOp if unsigned else arith.ExtSIOp)(tdst, v).result
    if dst.bits < sbits:
        return arith.TruncIOp(tdst, v).result
    return v  # same width, signedness differs: the bits are the same


def dim_value(value: ir.Value, index: int) -> ir.Value:
    return tensor.DimOp(value, index_const(index)).result


def empty_like_type(t: TensorType, dynamic_from: Sequence[tuple[ir.Value, int] | None] = ()) -> ir.Value:
    """``tensor.empty`` of type ``t``; each dynamic dim i takes its size from
    ``dynamic_from[i] = (value, dim)``."""
    sizes: list[Any] = []
    for i, d in enumerate(t.shape):
        if is_static(d):
            sizes.append(int(d))
        else:
            src = dynamic_from[i] if i < len(dynamic_from) else None
            if src is None:
                raise ValueError(f"no source for the size of dynamic dimension {i} of {t}")
            sizes.append(dim_value(*src))
    return tensor.EmptyOp(sizes, elem_type(t.dtype)).result


def identity_map(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def broadcast_map(in_shape: Sequence[Any], out_rank: int, out_shape: Sequence[Any]) -> ir.AffineMap:
    """Map from the output iteration space to an operand broadcast into it: leading dims
    are dropped, size-1 dims read index 0 (no materialized broadcast)."""
    lead = out_rank - len(in_shape)
    exprs = []
    for j, d in enumerate(in_shape):
        k = lead + j
        if is_static(d) and d == 1 and not (is_static(out_shape[k]) and out_shape[k] == 1):
            exprs.append(ir.AffineConstantExpr.get(0))
        else:
            exprs.append(ir.AffineDimExpr.get(k))
    return ir.AffineMap.get(out_rank, 0, exprs)


def _dynamic_sources(out: TensorType, operands: Sequence[tuple[ir.Value, TensorType]]):
    sources: list[tuple[ir.Value, int] | None] = []
    for k, d in enumerate(out.shape):
        if is_static(d):
            sources.append(None)
            continue
        found = None
        for value, t in operands:
            j = k - (out.rank - t.rank)
            if j >= 0 and not (is_static(t.shape[j]) and t.shape[j] == 1):
                found = (value, j)
                break
        sources.append(found)
    return sources


def elementwise(operands: Sequence[tuple[ir.Value, TensorType]], out: TensorType,
                body: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A parallel ``linalg.generic`` over ``out``'s shape reading broadcast operands;
    ``body`` maps the scalar block arguments to the result scalar (of ``out``'s dtype)."""
    init = empty_like_type(out, _dynamic_sources(out, operands))
    maps = [broadcast_map(t.shape, out.rank, out.shape) for _, t in operands] + [identity_map(out.rank)]
    iters = ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * out.rank)
    op = linalg.GenericOp([ranked(out)], [v for v, _ in operands], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), iters)
    arg_types = [elem_type(t.dtype) for _, t in operands] + [elem_type(out.dtype)]
    block = op.regions[0].blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(list(block.arguments)[:-1])])
    return op.result


del math, np
