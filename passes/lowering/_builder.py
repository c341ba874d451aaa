"""Building blocks for tp→linalg lowerings: element and tensor types; scalars (constants,
conversions with PyTorch's semantics, the arithmetic several op families share); tensors
(empty, filled, reshaped, transposed, retyped); ``linalg.generic`` ops (indexing maps,
iterators, broadcasting elementwise ops) and fences against IREE's fusion. Sizes are
:data:`~._sizes.Size` values, with their helpers in ``_sizes.py``."""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...dialects.ir import arith, ir, linalg, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.types import TensorType, is_static
from ._mathlib import divrem_i64_narrow, f32_to_bf16
from ._sizes import Size, dim_value, index_const, sizes_of, split_sizes
from ._target import target

__all__ = ["elem_type", "tensor_type", "ranked", "const_scalar", "size_scalar", "cast_scalar", "int_div", "int_rem",
           "int_divrem", "arith_op", "scalar_add", "scalar_mul", "scalar_extremum", "extremum_identity", "beats",
           "empty", "filled", "match_type", "collapse", "expand", "unit_groups", "transpose", "identity_map",
           "dim_map", "broadcast_map", "iterators", "loop_index", "generic", "parallel", "linalg_ext", "elementwise",
           "fence", "unfused_strided_slice"]

_F = arith.CmpFPredicate
_I = arith.CmpIPredicate


# --- types -------------------------------------------------------------------------------------

def elem_type(dtype: dt.DType) -> ir.Type:
    """The signless element type linalg and arith work on (uint8 is stored as i8)."""
    if dtype.is_floating_point:
        return {"float16": ir.F16Type.get, "bfloat16": ir.BF16Type.get, "float32": ir.F32Type.get,
                "float64": ir.F64Type.get}[dtype.name]()
    return ir.IntegerType.get_signless(1 if dtype.is_bool else dtype.bits)


def tensor_type(sizes: Sequence[Size | None], elem: ir.Type) -> ir.RankedTensorType:
    """The ranked tensor type of ``sizes`` (dynamic where a size is not an int)."""
    return ir.RankedTensorType.get(split_sizes(sizes)[1], elem)


def ranked(t: TensorType) -> ir.RankedTensorType:
    """The MLIR type of ``t`` (``?`` where its size is not static)."""
    return tensor_type([int(d) if is_static(d) else None for d in t.shape], elem_type(t.dtype))


# --- scalars -----------------------------------------------------------------------------------

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


def size_scalar(size: Size, dtype: dt.DType) -> ir.Value:
    """A size (an int, or an ``index`` value) as a scalar of ``dtype``."""
    if isinstance(size, int):
        return const_scalar(size, dtype)
    return cast_scalar(arith.IndexCastOp(elem_type(dt.int64), size).result, dt.int64, dtype)


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


def _narrow_i64(dtype: dt.DType) -> bool:
    return dtype.bits == 64 and not target().int64_division


def int_div(a: ir.Value, b: ir.Value, dtype: dt.DType) -> ir.Value:
    """Truncating integer division of :func:`int_divrem`."""
    return int_divrem(a, b, dtype)[0]


def int_rem(a: ir.Value, b: ir.Value, dtype: dt.DType) -> ir.Value:
    """The remainder of :func:`int_div` (sign of ``a``)."""
    return int_divrem(a, b, dtype)[1]


def int_divrem(a: ir.Value, b: ir.Value, dtype: dt.DType) -> tuple[ir.Value, ir.Value]:
    """Truncating integer division and its remainder, defined for every pair: unsigned
    types divide unsigned; ``MIN / -1`` wraps to ``MIN`` (remainder 0) as in eager; a zero
    divisor, where eager raises, gives ``(a, 0)`` here (unspecified in the docs: the int64
    shift-and-subtract gives others). ``arith.divsi``/``remsi`` on a zero divisor
    or on ``MIN / -1`` is undefined and traps on x86 (SIGFPE, which ends the process), also
    in the padding lanes that a vectorized dynamic-shape loop computes and then drops. int64
    on a target without 64-bit division goes by shift-and-subtract, which never traps."""
    if _narrow_i64(dtype):
        return divrem_i64_narrow(a, b)
    zero, one = const_scalar(0, dtype), const_scalar(1, dtype)
    unsafe = arith.CmpIOp(_I.eq, b, zero).result
    if dtype.is_bool or not dtype.is_signed:
        safe = arith.SelectOp(unsafe, one, b).result
        return arith.DivUIOp(a, safe).result, arith.RemUIOp(a, safe).result
    minus_one = arith.CmpIOp(_I.eq, b, const_scalar(-1, dtype)).result
    safe = arith.SelectOp(arith.OrIOp(unsafe, minus_one).result, one, b).result
    q = arith.SelectOp(minus_one, arith.SubIOp(zero, a).result, arith.DivSIOp(a, safe).result).result
    return q, arith.RemSIOp(a, safe).result


def arith_op(d: dt.DType, fop: Any, iop: Any, bop: Any = None) -> Any:
    """The ``arith`` op class for scalars of dtype ``d``: ``fop`` for floats, ``bop`` for bool
    (``iop`` when there is none), ``iop`` for integers."""
    if d.is_floating_point:
        return fop
    return bop if d.is_bool and bop is not None else iop


def scalar_add(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    """``a + b`` in dtype ``d`` (or, for bool)."""
    return arith_op(d, arith.AddFOp, arith.AddIOp, arith.OrIOp)(a, b).result


def scalar_mul(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    """``a * b`` in dtype ``d`` (and, for bool)."""
    return arith_op(d, arith.MulFOp, arith.MulIOp, arith.AndIOp)(a, b).result


def scalar_extremum(a: ir.Value, b: ir.Value, d: dt.DType, largest: bool) -> ir.Value:
    """The larger (``largest``) or the smaller of two scalars of dtype ``d``; NaN wins for
    floats."""
    if d.is_floating_point:
        return (arith.MaximumFOp if largest else arith.MinimumFOp)(a, b).result
    if d.is_bool or not d.is_signed:
        return (arith.MaxUIOp if largest else arith.MinUIOp)(a, b).result
    return (arith.MaxSIOp if largest else arith.MinSIOp)(a, b).result


def extremum_identity(d: dt.DType, largest: bool) -> Any:
    """The identity of a max (``largest``) or a min in dtype ``d``: -inf or inf, the dtype's
    minimum or maximum, false or true."""
    if d.is_floating_point:
        return -pymath.inf if largest else pymath.inf
    if d.is_bool:
        return not largest
    info = np.iinfo(d.np_dtype)
    return int(info.min) if largest else int(info.max)


def beats(v: ir.Value, i: ir.Value, cur: ir.Value, cur_i: ir.Value, d: dt.DType, largest: bool,
          last_nan: bool = False) -> ir.Value:
    """Whether (value, index) ``(v, i)`` replaces ``(cur, cur_i)`` in an arg-max (``largest``)
    or an arg-min: a strictly better value, or an equal one at a smaller index; NaN beats
    every number, and of two NaNs the earlier wins (the later with ``last_nan``, as PyTorch's
    max pooling picks). A total order, so the result does not depend on the order IREE
    combines partial reductions in."""
    earlier = arith.CmpIOp(_I.slt, i, cur_i).result
    if d.is_floating_point:
        better = arith.CmpFOp(_F.OGT if largest else _F.OLT, v, cur).result
        equal = arith.CmpFOp(_F.OEQ, v, cur).result
        v_nan = arith.CmpFOp(_F.UNO, v, v).result
        cur_nan = arith.CmpFOp(_F.UNO, cur, cur).result
        only_v_nan = arith.AndIOp(v_nan, arith.XOrIOp(cur_nan, const_scalar(True, dt.bool_)).result).result
        both_nan = arith.AndIOp(v_nan, cur_nan).result
        better = arith.OrIOp(better, only_v_nan).result
        if last_nan:
            later = arith.CmpIOp(_I.sgt, i, cur_i).result
            return arith.OrIOp(better, arith.OrIOp(arith.AndIOp(equal, earlier).result,
                                                   arith.AndIOp(both_nan, later).result).result).result
        tie = arith.OrIOp(equal, both_nan).result
    else:
        unsigned = d.is_bool or not d.is_signed
        pred = (_I.ugt if unsigned else _I.sgt) if largest else (_I.ult if unsigned else _I.slt)
        better = arith.CmpIOp(pred, v, cur).result
        tie = arith.CmpIOp(_I.eq, v, cur).result
    return arith.OrIOp(better, arith.AndIOp(tie, earlier).result).result


# --- tensors -----------------------------------------------------------------------------------

def empty(sizes: Sequence[Size], dtype: dt.DType) -> ir.Value:
    """``tensor.empty`` with ``sizes`` and ``dtype``'s element type."""
    return tensor.EmptyOp(list(sizes), elem_type(dtype)).result


def filled(sizes: Sequence[Size], dtype: dt.DType, value: Any) -> ir.Value:
    """A ``linalg.fill`` with the Python number ``value`` (an accumulator's or a reduction's
    initial value)."""
    init = empty(sizes, dtype)
    return linalg.fill(const_scalar(value, dtype), outs=[init])


def match_type(value: ir.Value, t: TensorType) -> ir.Value:
    """``value`` with exactly the type of ``t`` (a ``tensor.cast`` when only static and
    dynamic sizes differ: a lowering may know a size statically that the op's type leaves
    dynamic, or the other way round)."""
    want = ranked(t)
    return value if value.type == want else tensor.CastOp(want, value).result


def _reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def _trivial(groups: Sequence[Sequence[int]], rank: int) -> bool:
    return len(groups) == rank and all(len(g) == 1 for g in groups)


def collapse(value: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """``tensor.collapse_shape`` merging each group of dims of ``value`` into one (``value``
    itself when every group is one dim)."""
    src = ir.RankedTensorType(value.type)
    if _trivial(groups, src.rank):
        return value
    shape = [ir.ShapedType.get_dynamic_size() if any(src.is_dynamic_dim(i) for i in g)
             else pymath.prod(src.shape[i] for i in g) for g in groups]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, src.element_type), value,
                                  _reassociation(groups)).result


def expand(value: ir.Value, groups: Sequence[Sequence[int]], sizes: Sequence[Size]) -> ir.Value:
    """``tensor.expand_shape`` splitting dim ``i`` of ``value`` into the dims ``groups[i]`` of
    the result, whose sizes are ``sizes`` (``value`` itself when every group is one dim)."""
    if _trivial(groups, len(sizes)):
        return value
    dynamic, static = split_sizes(sizes)
    return tensor.ExpandShapeOp(tensor_type(sizes, ir.RankedTensorType(value.type).element_type), value,
                                _reassociation(groups), dynamic, static).result


def unit_groups(rank: int, units: Sequence[int]) -> list[list[int]]:
    """The reassociation between ``rank`` dims and the same dims without the size-1 dims
    ``units``: each other dim takes the unit dims after it, the first one also those before
    it (no groups when all are unit dims)."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(rank):
        if i not in units:
            groups.append(pending + [i])
            pending = []
        elif groups:
            groups[-1].append(i)
        else:
            pending.append(i)
    return groups


def transpose(value: ir.Value, src: TensorType, perm: Sequence[int]) -> ir.Value:
    """``linalg.transpose``: result dimension i is ``src`` dimension ``perm[i]``."""
    if list(perm) == list(range(src.rank)):
        return value
    sizes = sizes_of(value, src)
    init = empty([sizes[p] for p in perm], src.dtype)
    return linalg.transpose(value, outs=[init], permutation=list(perm)).results[0]


# --- linalg.generic ----------------------------------------------------------------------------

def identity_map(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def dim_map(rank: int, dims: Sequence[int]) -> ir.AffineMap:
    """From a ``rank``-d iteration space to its dims ``dims`` (the kept dims of a reduction,
    the trailing dims of a parameter, the dims a matmul operand is read at)."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in dims])


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


def iterators(rank: int, reduced: Sequence[int] = ()) -> ir.ArrayAttr:
    """The iterator types of a ``rank``-d ``linalg.generic``: the ``reduced`` dims are
    reductions, the others parallel."""
    kinds = ["reduction" if i in reduced else "parallel" for i in range(rank)]
    return ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in kinds])


def loop_index(dim: int) -> ir.Value:
    """``linalg.index``: the iteration's position in dim ``dim`` of the enclosing linalg op."""
    return linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)).result


def generic(ins: Sequence[tuple[ir.Value, ir.AffineMap]], outs: Sequence[tuple[ir.Value, ir.AffineMap]],
            body: Callable[[list[ir.Value]], Sequence[ir.Value]], *, reduced: Sequence[int] = ()) -> list[ir.Value]:
    """A ``linalg.generic`` reading ``ins`` and writing ``outs`` (each a value and its indexing
    map) over one iteration space, whose ``reduced`` dims are reductions; ``body`` maps the
    scalar block arguments (inputs, then outputs) to the yielded values."""
    values = [v for v, _ in ins] + [v for v, _ in outs]
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in list(ins) + list(outs)])
    op = linalg.GenericOp([v.type for v, _ in outs], [v for v, _ in ins], [v for v, _ in outs],
                          maps, iterators(outs[0][1].n_dims, reduced))
    block = op.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v in values])
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(body(list(block.arguments))))
    return list(op.results)


def parallel(init: ir.Value, ins: Sequence[tuple[ir.Value, ir.AffineMap]],
             body: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A parallel ``linalg.generic`` writing ``init`` through the identity map and reading
    ``ins`` through their maps; ``body`` maps the input scalars to the result scalar and may
    use :func:`loop_index` and ``tensor.extract``."""
    rank = ir.RankedTensorType(init.type).rank
    return generic(ins, [(init, identity_map(rank))], lambda args: [body(args[:-1])])[0]


def linalg_ext(name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
               attributes: dict[str, ir.Attribute], block_types: Sequence[ir.Type],
               combine: Callable[[list[ir.Value]], ir.Value]) -> ir.Operation:
    """An ``iree_linalg_ext`` op (``scan``, ``scatter``) with a one-block region yielding
    ``combine(arguments)`` (the dialect has no Python builders, so it is created generically)."""
    op = ir.Operation.create(f"iree_linalg_ext.{name}", results=list(results), operands=list(operands),
                             attributes=attributes, regions=1)
    block = op.regions[0].blocks.append(*block_types)
    with ir.InsertionPoint(block):
        ir.Operation.create("iree_linalg_ext.yield", operands=[combine(list(block.arguments))])
    return op


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
                exact = arith.SelectOp(arith.CmpIOp(_I.eq, exact, one).result, other, exact).result
        sizes.append(exact)
    return sizes


def elementwise(operands: Sequence[tuple[ir.Value, TensorType]], out: TensorType,
                body: Callable[[list[ir.Value]], ir.Value], *,
                sym_in: Sequence[TensorType | None] | None = None, sym_out: TensorType | None = None,
                sizes: Sequence[Any] | None = None) -> ir.Value:
    """A parallel ``linalg.generic`` over ``out``'s shape reading broadcast operands;
    ``body`` maps the operands' scalars to the result scalar (of ``out``'s dtype).
    ``sym_in`` / ``sym_out`` are the symbolic types where the function has them: a dynamic
    operand size that may be a run-time 1 (see :func:`_stretched`) is read at index 0 or i,
    chosen at run time with ``tensor.extract``; every other operand through its indexing map.
    ``sizes`` are the result's, where the operands alone do not give them."""
    stretched = _stretched(operands, out, sym_in, sym_out)
    operands = [(unfused_strided_slice(v), t) if dims else (v, t) for (v, t), dims in zip(operands, stretched)]
    init = empty(list(sizes) if sizes is not None else _dynamic_sizes(out, operands, stretched), out.dtype)
    mapped = [n for n, dims in enumerate(stretched) if not dims]
    ins = [(operands[n][0], broadcast_map(operands[n][1].shape, out.rank, out.shape)) for n in mapped]
    stretched_sizes = {(n, j): dim_value(operands[n][0], j) for n, dims in enumerate(stretched) for j in dims}

    def scalars(block_args: list[ir.Value]) -> ir.Value:
        args = dict(zip(mapped, block_args))
        for n, dims in enumerate(stretched):
            if not dims:
                continue
            one, zero = index_const(1), index_const(0)
            value, t = operands[n]
            idx = []
            for j, d in enumerate(t.shape):
                i = loop_index(out.rank - t.rank + j)
                if j in dims:
                    single = arith.CmpIOp(_I.eq, stretched_sizes[n, j], one).result
                    i = arith.SelectOp(single, zero, i).result
                elif is_static(d) and d == 1:
                    i = zero
                idx.append(i)
            args[n] = tensor.ExtractOp(value, idx).result
        return body([args[n] for n in range(len(operands))])

    return parallel(init, ins, scalars)


# --- fences ------------------------------------------------------------------------------------

def fence(value: ir.Value) -> tuple[ir.Value, list[ir.Operation]]:
    """``value`` through an ``iree_tensor_ext.compute_barrier.start`` (its dynamic sizes as
    operands), and the ops made: IREE forms no dispatch across it and erases it once its
    dispatches are formed. (A ``util.optimization_barrier`` also stops fusion, but it stays in
    the program as a host-side value: each one cost a queue submission and a host wait per
    call, 21 of them in the example GPT's training step.)"""
    rtype = ir.RankedTensorType(value.type)
    dims = [dim_value(value, i) for i in range(rtype.rank) if rtype.is_dynamic_dim(i)]
    barrier = ir.Operation.create("iree_tensor_ext.compute_barrier.start", results=[value.type],
                                  operands=[value, *dims])
    return barrier.results[0], [barrier, *(d.owner.operation for d in dims)]


def unpadded_strided_insert(value: ir.Value) -> ir.Value:
    """``value``, behind a :func:`fence` when it is made by a strided ``tensor.insert_slice``
    and is about to be padded: IREE 3.13 folds ``tensor.pad`` of such an insert into one
    insert that drops the strides (the elements land packed, in the wrong places), whenever
    two or more of the outer dims exceed 1 (the gradient of a strided convolution)."""
    op = getattr(value.owner, "operation", None)
    if op is None or op.name != "tensor.insert_slice":
        return value
    if all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])):
        return value
    return fence(value)[0]


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
