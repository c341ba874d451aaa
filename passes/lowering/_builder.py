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


def fence(value: ir.Value) -> tuple[ir.Value, list[ir.Operation]]:
    """``value`` through a ``util.optimization_barrier`` (IREE fuses nothing across it), its
    dynamic sizes tied to it again with ``flow.tensor.tie_shape``; and the ops made."""
    rtype = ir.RankedTensorType(value.type)
    dims = [dim_value(value, i) for i in range(rtype.rank) if rtype.is_dynamic_dim(i)]
    barrier = ir.Operation.create("util.optimization_barrier", results=[value.type], operands=[value])
    made = [barrier, *(d.owner.operation for d in dims)]
    if not dims:
        return barrier.results[0], made
    tied = ir.Operation.create("flow.tensor.tie_shape", results=[value.type], operands=[barrier.results[0], *dims])
    return tied.results[0], made + [tied]


def unfused_strided_slice(value: ir.Value) -> ir.Value:
    """``value``, behind a :func:`fence` when it is a strided ``tensor.extract_slice`` of
    dynamic sizes (or a reshape of one): IREE 3.13 cannot compile such a slice fused into a
    dispatch that reads it with ``tensor.extract`` (flips, sizes stretched at run time)."""
    source = value
    while True:
        op = getattr(source.owner, "operation", None)
        if op is None or op.name not in ("tensor.expand_shape", "tensor.collapse_shape", "tensor.cast"):
            break
        source = op.operands[0]
    if op is None or op.name != "tensor.extract_slice" or ir.RankedTensorType(source.type).has_static_shape:
        return value
    if all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])):
        return value
    return fence(value)[0]


def _stretched(operands: Sequence[tuple[ir.Value, TensorType]], out: TensorType,
               sym_in: Sequence[TensorType | None] | None, sym_out: TensorType | None) -> list[list[int]]:
    """For each operand, its dynamic dims that need not have the result's size: those whose
    result size is static (and not 1), or symbolic with another expression. Broadcasting
    makes such a size 1 or the result's at run time (``x[::3] + x`` has ``(s0 + 2) // 3``
    against ``s0``, equal or 1 by a guard of the capture)."""
    out_sym = sym_out.shape if sym_out is not None else None
    result = []
    for n, (_, t) in enumerate(operands):
        mine = sym_in[n].shape if sym_in is not None and sym_in[n] is not None else None
        dims = []
        for j, d in enumerate(t.shape):
            k = out.rank - t.rank + j
            if is_static(d):
                continue
            if is_static(out.shape[k]):
                if out.shape[k] != 1:
                    dims.append(j)
            elif mine is not None and out_sym is not None and mine[j] != out_sym[k]:
                dims.append(j)
        result.append(dims)
    return result


def _dynamic_sizes(out: TensorType, operands: Sequence[tuple[ir.Value, TensorType]],
                   stretched: Sequence[Sequence[int]]) -> list[Any]:
    """The result's sizes: static ones as ints, dynamic ones read from an operand that has
    the result's size there, or else the broadcast of the operands' run-time sizes."""
    sizes: list[Any] = []
    for k, d in enumerate(out.shape):
        if is_static(d):
            sizes.append(int(d))
            continue
        exact, maybe = None, []
        for (value, t), dims in zip(operands, stretched):
            j = k - (out.rank - t.rank)
            if j < 0 or is_static(t.shape[j]) and t.shape[j] == 1:
                continue
            if j in dims:
                maybe.append(dim_value(value, j))
            elif exact is None:
                exact = dim_value(value, j)
        if exact is None:
            if not maybe:
                raise ValueError(f"no source for the size of dynamic dimension {k} of {out}")
            exact = maybe[0]
            one = index_const(1)
            for other in maybe[1:]:  # 1 stretches to the other size
                exact = arith.SelectOp(arith.CmpIOp(arith.CmpIPredicate.eq, exact, one).result, other, exact).result
        sizes.append(exact)
    return sizes


def elementwise(operands: Sequence[tuple[ir.Value, TensorType]], out: TensorType,
                body: Callable[[list[ir.Value]], ir.Value], *,
                sym_in: Sequence[TensorType | None] | None = None, sym_out: TensorType | None = None) -> ir.Value:
    """A parallel ``linalg.generic`` over ``out``'s shape reading broadcast operands;
    ``body`` maps the scalar block arguments to the result scalar (of ``out``'s dtype).
    ``sym_in`` / ``sym_out`` are the symbolic types where the function has them: a dynamic
    operand size that may be a run-time 1 (see :func:`_stretched`) is read at index 0 or i,
    chosen at run time with ``tensor.extract``; every other operand through its indexing map."""
    stretched = _stretched(operands, out, sym_in, sym_out)
    operands = [(unfused_strided_slice(v), t) if dims else (v, t) for (v, t), dims in zip(operands, stretched)]
    init = tensor.EmptyOp(_dynamic_sizes(out, operands, stretched), elem_type(out.dtype)).result
    mapped = [n for n, dims in enumerate(stretched) if not dims]
    maps = [broadcast_map(operands[n][1].shape, out.rank, out.shape) for n in mapped] + [identity_map(out.rank)]
    iters = ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * out.rank)
    sizes = {(n, j): dim_value(operands[n][0], j) for n, dims in enumerate(stretched) for j in dims}
    op = linalg.GenericOp([ranked(out)], [operands[n][0] for n in mapped], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), iters)
    arg_types = [elem_type(operands[n][1].dtype) for n in mapped] + [elem_type(out.dtype)]
    block = op.regions[0].blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        args = dict(zip(mapped, block.arguments))
        for n, dims in enumerate(stretched):
            if not dims:
                continue
            one, zero = index_const(1), index_const(0)
            value, t = operands[n]
            idx = []
            for j, d in enumerate(t.shape):
                i = linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), out.rank - t.rank + j)).result
                if j in dims:
                    single = arith.CmpIOp(arith.CmpIPredicate.eq, sizes[n, j], one).result
                    i = arith.SelectOp(single, zero, i).result
                elif is_static(d) and d == 1:
                    i = zero
                idx.append(i)
            args[n] = tensor.ExtractOp(value, idx).result
        linalg.YieldOp([body([args[n] for n in range(len(operands))])])
    return op.result


del math, np
