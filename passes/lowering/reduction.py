"""Lowerings of the reduction and normalization families.

A reduction is one ``linalg.generic`` whose reduced dims are ``reduction`` iterators and
whose output map drops them; its init is the identity (0 for sums, 1 for products, -inf or
the dtype's minimum for maxima). Statistics a later pass needs (a maximum, a sum) are read
back through indexing maps, never broadcast in memory, so IREE fuses each op into few
dispatches. ``keepdim`` adds the unit dims with ``tensor.expand_shape``. Half types
accumulate in float32 and round once, as the references do.

``tp.cumsum`` is a prefix sum, which ``linalg.generic`` cannot express in O(n); it lowers to
IREE's ``iree_linalg_ext.scan`` (every IREE target compiles it) rather than to a
triangular-mask reduction costing O(n^2) or a loop of one dispatch per step.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence

import numpy as np

from ...dialects.ir import arith, ir, linalg, math, tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.ops.reduction import reduced_shape
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import (cast_scalar, compute_dtype, const_scalar, dim_value, elem_type,
                       empty_like_type, identity_map, index_const, ranked)
from .linalg import collapse, expand, sizes_of, zeros

__all__: list[str] = []

_F = arith.CmpFPredicate
_I = arith.CmpIPredicate

Body = Callable[[list[ir.Value]], Sequence[ir.Value]]


# --- building blocks -------------------------------------------------------------------------

def _iterators(rank: int, reduced: Sequence[int]) -> ir.ArrayAttr:
    kinds = ["reduction" if i in reduced else "parallel" for i in range(rank)]
    return ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in kinds])


def _kept_map(rank: int, reduced: Sequence[int]) -> ir.AffineMap:
    """From the input's iteration space to a tensor without the reduced dims."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank) if i not in reduced])


def _trailing_map(rank: int, count: int) -> ir.AffineMap:
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank - count, rank)])


def _generic(ins: Sequence[tuple[ir.Value, ir.AffineMap]], outs: Sequence[tuple[ir.Value, ir.AffineMap]],
             rank: int, reduced: Sequence[int], body: Body) -> list[ir.Value]:
    """A ``linalg.generic`` over a ``rank``-d space whose ``reduced`` dims are reductions;
    ``body`` maps the scalar block arguments (inputs, then outputs) to the yielded values."""
    values = [v for v, _ in ins] + [v for v, _ in outs]
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for _, m in list(ins) + list(outs)])
    op = linalg.GenericOp([v.type for v, _ in outs], [v for v, _ in ins], [v for v, _ in outs],
                          maps, _iterators(rank, reduced))
    block = op.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v in values])
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(body(list(block.arguments))))
    return list(op.results)


def _elementwise(values: Sequence[tuple[ir.Value, TensorType]], out: TensorType,
                 fn: Callable[[list[ir.Value]], ir.Value]) -> ir.Value:
    """A parallel ``linalg.generic`` combining same-shaped ``values`` into ``out``."""
    src, t = values[0]
    init = empty_like_type(out, [(src, i) for i in range(t.rank)])
    ident = identity_map(t.rank)
    return _generic([(v, ident) for v, _ in values], [(init, ident)], t.rank, (),
                    lambda a: [fn(a[:-1])])[0]


def _reduced_type(t: TensorType, dims: Sequence[int], dtype: dt.DType) -> TensorType:
    return TensorType(reduced_shape(t.shape, dims, False), dtype)


def _filled(src: ir.Value, t: TensorType, dims: Sequence[int], dtype: dt.DType, value) -> ir.Value:
    """A tensor of ``t``'s shape without ``dims``, filled with ``value`` (the reduction's
    identity); dynamic sizes come from ``src``."""
    out = _reduced_type(t, dims, dtype)
    kept = [i for i in range(t.rank) if i not in dims]
    init = empty_like_type(out, [(src, i) for i in kept])
    return linalg.fill(const_scalar(value, dtype), outs=[init])


def _keepdim(value: ir.Value, t: TensorType, dims: Sequence[int], out: TensorType, src: ir.Value) -> ir.Value:
    """``value`` (``t`` without ``dims``) reshaped to ``out`` when ``out`` keeps the reduced
    dims with size 1."""
    if out.rank == t.rank - len(dims):
        return value
    # each kept dim's group takes the unit dims after it (the first also those before it)
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(t.rank):
        if i not in dims:
            groups.append(pending + [i])
            pending = []
        elif groups:
            groups[-1].append(i)
        else:
            pending.append(i)
    dyn = ir.ShapedType.get_dynamic_size()
    static = [1 if i in dims else (int(d) if is_static(d) else dyn) for i, d in enumerate(t.shape)]
    sizes = [dim_value(src, i) for i, d in enumerate(t.shape) if i not in dims and not is_static(d)]
    return tensor.expand_shape(ranked(out), value, groups, sizes, static)


def _count(src: ir.Value, t: TensorType, dims: Sequence[int]) -> int | ir.Value:
    """How many elements each reduction combines: a Python int for static sizes, else an
    index value computed from ``tensor.dim``."""
    n, dynamic = 1, None
    for d in dims:
        if is_static(t.shape[d]):
            n *= int(t.shape[d])
        else:
            size = dim_value(src, d)
            dynamic = size if dynamic is None else arith.MulIOp(dynamic, size).result
    if dynamic is None:
        return n
    return arith.MulIOp(dynamic, index_const(n)).result if n != 1 else dynamic


def _float_of(n: int | ir.Value, dtype: dt.DType) -> ir.Value:
    if isinstance(n, int):
        return const_scalar(float(n), dtype)
    i64 = arith.IndexCastOp(elem_type(dt.int64), n).result
    return arith.SIToFPOp(elem_type(dtype), i64).result


def _read(x: ir.Value, src: dt.DType, dst: dt.DType, work: dt.DType) -> ir.Value:
    """A scalar as the references read it: converted to ``dst``, then widened to ``work``."""
    return cast_scalar(cast_scalar(x, src, dst), dst, work)


def _finite_or_zero(m: ir.Value, d: dt.DType) -> ir.Value:
    """The max-shift of the stable softmax family: infinities and NaN become 0."""
    finite = arith.CmpFOp(_F.ONE, math.AbsFOp(m).result, const_scalar(float("inf"), d)).result
    return arith.SelectOp(finite, m, const_scalar(0.0, d)).result


def _max_identity(d: dt.DType, largest: bool):
    """The init of a max (``largest``) or min reduction in dtype ``d``."""
    if d.is_floating_point:
        return -pymath.inf if largest else pymath.inf
    if d.is_bool:
        return not largest
    info = np.iinfo(d.np_dtype)
    return int(info.min) if largest else int(info.max)


def _max_combine(a: ir.Value, b: ir.Value, d: dt.DType, largest: bool) -> ir.Value:
    """max/min of two scalars; NaN wins for floats."""
    if d.is_floating_point:
        return (arith.MaximumFOp if largest else arith.MinimumFOp)(a, b).result
    if d.is_bool or not d.is_signed:
        return (arith.MaxUIOp if largest else arith.MinUIOp)(a, b).result
    return (arith.MaxSIOp if largest else arith.MinSIOp)(a, b).result


def _add(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    if d.is_floating_point:
        return arith.AddFOp(a, b).result
    if d.is_bool:
        return arith.OrIOp(a, b).result
    return arith.AddIOp(a, b).result


def _mul(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    if d.is_floating_point:
        return arith.MulFOp(a, b).result
    if d.is_bool:
        return arith.AndIOp(a, b).result
    return arith.MulIOp(a, b).result


def _reduce(src: ir.Value, t: TensorType, dims: Sequence[int], work: dt.DType, init,
            step: Callable[[ir.Value, ir.Value], ir.Value],
            extra: Sequence[tuple[ir.Value, ir.AffineMap]] = ()) -> ir.Value:
    """Reduce ``dims`` of ``src``: ``step(args, acc)`` folds one element into the
    accumulator (of dtype ``work``, starting at ``init``); ``args`` are the scalars of
    ``src`` and of the ``extra`` inputs (read through their maps)."""
    acc = _filled(src, t, dims, work, init)
    ins = [(src, identity_map(t.rank))] + list(extra)
    return _generic(ins, [(acc, _kept_map(t.rank, dims))], t.rank, dims,
                    lambda a: [step(a[:-1], a[-1])])[0]


# --- sum, prod, mean -------------------------------------------------------------------------

def _accumulate(ctx: LowerCtx, combine, identity) -> tuple[ir.Value, tuple[int, ...], dt.DType]:
    """The sum or product over the reduced dims in the compute dtype; returns it with the
    dims and the compute dtype."""
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = compute_dtype(out.dtype)

    def step(args, acc):
        return combine(_read(args[0], t.dtype, out.dtype, work), acc, work)

    return _reduce(x, t, dims, work, identity, step), dims, work


def _rounded(ctx: LowerCtx, value: ir.Value, dims: Sequence[int], work: dt.DType,
             fn: Callable[[ir.Value], ir.Value] | None = None) -> ir.Value:
    """A reduction's ``value`` (compute dtype ``work``) through ``fn``, rounded to the result
    dtype and given ``keepdim``'s unit dims."""
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    if fn is not None or work is not out.dtype:
        rt = _reduced_type(t, dims, work)
        f = fn or (lambda v: v)
        value = _elementwise([(value, rt)], rt.with_dtype(out.dtype),
                             lambda a: cast_scalar(f(a[0]), work, out.dtype))
    return _keepdim(value, t, dims, out, x)


@lowers("tp.sum", summary="`linalg.generic` with reduction iterators, init 0, accumulating in "
                          "int64 (integers) or float32 (half types)")
def _sum(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, _add, 0)
    return [_rounded(ctx, total, dims, work)]


@lowers("tp.prod", summary="`linalg.generic` with reduction iterators, init 1")
def _prod(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, _mul, 1)
    return [_rounded(ctx, total, dims, work)]


@lowers("tp.mean", summary="sum as `linalg.generic` (init 0, float32 for half types), then a "
                           "parallel generic dividing by the element count")
def _mean(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, _add, 0)
    x, t = ctx.inputs()[0]
    n = _float_of(_count(x, t, dims), work)
    return [_rounded(ctx, total, dims, work, lambda v: arith.DivFOp(v, n).result)]


# --- extrema and their indices ---------------------------------------------------------------

def _extremum(ctx: LowerCtx, largest: bool) -> list[ir.Value]:
    x, t = ctx.inputs()[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = compute_dtype(t.dtype)

    def step(args, acc):
        return _max_combine(cast_scalar(args[0], t.dtype, work), acc, work, largest)

    value = _reduce(x, t, dims, work, _max_identity(work, largest), step)
    return [_rounded(ctx, value, dims, work)]


@lowers("tp.amax", summary="`linalg.generic` with reduction iterators and `arith.maximumf` "
                           "(NaN wins), init -inf or the integer dtype's minimum")
def _amax(ctx: LowerCtx) -> list[ir.Value]:
    return _extremum(ctx, True)


@lowers("tp.amin", summary="`linalg.generic` with reduction iterators and `arith.minimumf` "
                           "(NaN wins), init +inf or the integer dtype's maximum")
def _amin(ctx: LowerCtx) -> list[ir.Value]:
    return _extremum(ctx, False)


def _arg_extremum(ctx: LowerCtx, largest: bool) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = compute_dtype(t.dtype)
    i64 = elem_type(dt.int64)
    # Strides of the flattened input (dim=None) or of the one searched dim.
    strides: dict[int, int | ir.Value] = {}
    stride: int | ir.Value = 1
    for d in reversed(dims):
        strides[d] = stride
        size = t.shape[d]
        if is_static(size) and isinstance(stride, int):
            stride = stride * int(size)
        else:
            size_v = index_const(int(size)) if is_static(size) else dim_value(x, d)
            stride_v = index_const(stride) if isinstance(stride, int) else stride
            stride = arith.MulIOp(stride_v, size_v).result
    best = _filled(x, t, dims, work, _max_identity(work, largest))
    index = _filled(x, t, dims, dt.int64, np.iinfo(np.int64).max)
    kept = _kept_map(t.rank, dims)

    def body(args):
        v, cur, cur_i = cast_scalar(args[0], t.dtype, work), args[1], args[2]
        lin = None
        for d in dims:
            term = linalg.IndexOp(ir.IntegerAttr.get(i64, d)).result
            s = strides[d]
            if not (isinstance(s, int) and s == 1):
                term = arith.MulIOp(term, index_const(s) if isinstance(s, int) else s).result
            lin = term if lin is None else arith.AddIOp(lin, term).result
        i = arith.IndexCastOp(i64, lin).result if lin is not None else const_scalar(0, dt.int64)
        wins = _beats(v, i, cur, cur_i, work, largest)
        return [arith.SelectOp(wins, v, cur).result, arith.SelectOp(wins, i, cur_i).result]

    _, found = _generic([(x, identity_map(t.rank))], [(best, kept), (index, kept)], t.rank, dims, body)
    return [_keepdim(found, t, dims, out, x)]


def _beats(v: ir.Value, i: ir.Value, cur: ir.Value, cur_i: ir.Value, d: dt.DType, largest: bool) -> ir.Value:
    """Whether (value, index) ``(v, i)`` replaces ``(cur, cur_i)``: a strictly better value,
    or an equal one at a smaller index; NaN beats every number. A total order, so the
    result does not depend on the order IREE combines partial reductions in."""
    earlier = arith.CmpIOp(_I.slt, i, cur_i).result
    if d.is_floating_point:
        better = arith.CmpFOp(_F.OGT if largest else _F.OLT, v, cur).result
        equal = arith.CmpFOp(_F.OEQ, v, cur).result
        v_nan = arith.CmpFOp(_F.UNO, v, v).result
        cur_nan = arith.CmpFOp(_F.UNO, cur, cur).result
        only_v_nan = arith.AndIOp(v_nan, arith.XOrIOp(cur_nan, const_scalar(True, dt.bool_)).result).result
        tie = arith.OrIOp(equal, arith.AndIOp(v_nan, cur_nan).result).result
        better = arith.OrIOp(better, only_v_nan).result
    else:
        unsigned = d.is_bool or not d.is_signed
        pred = (_I.ugt if unsigned else _I.sgt) if largest else (_I.ult if unsigned else _I.slt)
        better = arith.CmpIOp(pred, v, cur).result
        tie = arith.CmpIOp(_I.eq, v, cur).result
    return arith.OrIOp(better, arith.AndIOp(tie, earlier).result).result


@lowers("tp.argmax", summary="two-result `linalg.generic` (value, int64 index) with reduction "
                             "iterators; a total order (NaN beats every number, ties go to the "
                             "smaller index) picks the first maximum, whatever order IREE "
                             "combines partial results in")
def _argmax(ctx: LowerCtx) -> list[ir.Value]:
    return _arg_extremum(ctx, True)


@lowers("tp.argmin", summary="two-result `linalg.generic` (value, int64 index) with reduction "
                             "iterators; a total order (NaN beats every number, ties go to the "
                             "smaller index) picks the first minimum")
def _argmin(ctx: LowerCtx) -> list[ir.Value]:
    return _arg_extremum(ctx, False)


# --- variance, all/any, logsumexp ------------------------------------------------------------

@lowers("tp.var", summary="two `linalg.generic` reductions (sum, then squared deviations from "
                          "the mean read through an indexing map), divided by max(0, N - correction)")
def _var(ctx: LowerCtx) -> list[ir.Value]:
    (x, t) = ctx.inputs()[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = compute_dtype(t.dtype)
    count = _count(x, t, dims)
    n = _float_of(count, work)
    total = _reduce(x, t, dims, work, 0.0,
                    lambda a, acc: arith.AddFOp(cast_scalar(a[0], t.dtype, work), acc).result)

    def squares(args, acc):
        dev = arith.SubFOp(cast_scalar(args[0], t.dtype, work), arith.DivFOp(args[1], n).result).result
        return arith.AddFOp(arith.MulFOp(dev, dev).result, acc).result

    sq = _reduce(x, t, dims, work, 0.0, squares, [(total, _kept_map(t.rank, dims))])
    correction = ctx.attrs["correction"]
    if isinstance(count, int):
        dof = const_scalar(max(0.0, count - correction), work)
    else:
        # computed in float64 like the reference's Python float, then rounded once;
        # maxnumf keeps 0 for a NaN correction as Python's max() does
        diff = arith.SubFOp(_float_of(count, dt.float64), const_scalar(correction, dt.float64)).result
        dof = cast_scalar(arith.MaxNumFOp(const_scalar(0.0, dt.float64), diff).result, dt.float64, work)
    return [_rounded(ctx, sq, dims, work, lambda v: arith.DivFOp(v, dof).result)]


def _logical(ctx: LowerCtx, every: bool) -> list[ir.Value]:
    (x, t) = ctx.inputs()[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)

    def step(args, acc):
        b = cast_scalar(args[0], t.dtype, dt.bool_)
        return (arith.AndIOp if every else arith.OrIOp)(b, acc).result

    value = _reduce(x, t, dims, dt.bool_, every, step)
    return [_rounded(ctx, value, dims, dt.bool_)]


@lowers("tp.all", summary="`linalg.generic` with reduction iterators: nonzero tests and-ed, init "
                          "true (uint8 inputs give uint8)")
def _all(ctx: LowerCtx) -> list[ir.Value]:
    return _logical(ctx, True)


@lowers("tp.any", summary="`linalg.generic` with reduction iterators: nonzero tests or-ed, init "
                          "false (uint8 inputs give uint8)")
def _any(ctx: LowerCtx) -> list[ir.Value]:
    return _logical(ctx, False)


def _shifted_exp_sum(x: ir.Value, t: TensorType, dims: Sequence[int], dst: dt.DType,
                     work: dt.DType) -> tuple[ir.Value, ir.Value]:
    """The stable softmax statistics over ``dims``: the maximum, and the sum of
    ``exp(x - shift)`` where ``shift`` is the maximum with non-finite values made 0."""
    largest = _reduce(x, t, dims, work, -pymath.inf,
                      lambda a, acc: arith.MaximumFOp(_read(a[0], t.dtype, dst, work), acc).result)

    def step(args, acc):
        shift = _finite_or_zero(args[1], work)
        e = math.ExpOp(arith.SubFOp(_read(args[0], t.dtype, dst, work), shift).result).result
        return arith.AddFOp(e, acc).result

    total = _reduce(x, t, dims, work, 0.0, step, [(largest, _kept_map(t.rank, dims))])
    return largest, total


@lowers("tp.logsumexp", summary="max reduction, then sum of exp(x - max) (`linalg.generic` "
                                "reading the max through an indexing map), then log(sum) + max")
def _logsumexp(ctx: LowerCtx) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = compute_dtype(out.dtype)
    largest, total = _shifted_exp_sum(x, t, dims, out.dtype, work)
    rt = _reduced_type(t, dims, work)

    def fn(args):
        shift = _finite_or_zero(args[0], work)
        return cast_scalar(arith.AddFOp(math.LogOp(args[1]).result, shift).result, work, out.dtype)

    value = _elementwise([(largest, rt), (total, rt)], rt.with_dtype(out.dtype), fn)
    return [_keepdim(value, t, dims, out, x)]


# --- along one dim: cumsum, softmax, log_softmax ---------------------------------------------

def _along(ctx: LowerCtx, t: TensorType) -> tuple[int, ...]:
    """The dim a same-shape op works along; none for a 0-d input (its one element)."""
    return (normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank),) if t.rank else ()


@lowers("tp.cumsum", summary="`iree_linalg_ext.scan` (inclusive, addition) along `dim` in the "
                             "accumulation dtype (int64 for integers, float32 for half types): "
                             "O(n) and parallel over the other dims, where a triangular-mask "
                             "`linalg.generic` would cost O(n^2)")
def _cumsum(ctx: LowerCtx) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    work = compute_dtype(out.dtype)
    wt = t.with_dtype(work)
    src = x
    if t.dtype is not work or out.dtype is not work:
        src = _elementwise([(x, t)], wt, lambda a: _read(a[0], t.dtype, out.dtype, work))
    if t.rank:
        dim = _along(ctx, t)[0]
        w = elem_type(work)
        # IREE 3.13 cannot compile a scan of more than three dynamic dims (its tiling asks for
        # a stack buffer past the limit), so higher ranks scan a (before, dim, after) view.
        sizes = sizes_of(x, t)
        groups = [g for g in (list(range(dim)), [dim], list(range(dim + 1, t.rank))) if g]
        if t.rank > 3:
            src, view = collapse(src, sizes, groups, w)
            along = groups.index([dim])
        else:
            view, along = sizes, dim
        init = tensor.EmptyOp(view, w).result
        carry = zeros([s for i, s in enumerate(view) if i != along], work)
        scan = ir.Operation.create(
            "iree_linalg_ext.scan", results=[init.type, carry.type], operands=[src, init, carry],
            attributes={"dimension": ir.IntegerAttr.get(elem_type(dt.int64), along),
                        "inclusive": ir.BoolAttr.get(True)}, regions=1)
        block = scan.regions[0].blocks.append(w, w)
        with ir.InsertionPoint(block):
            a, b = block.arguments
            ir.Operation.create("iree_linalg_ext.yield", operands=[_add(a, b, work)])
        src = scan.results[0]
        if t.rank > 3:
            src = expand(src, sizes, groups, w)
    if work is not out.dtype:
        src = _elementwise([(src, wt)], out, lambda a: cast_scalar(a[0], work, out.dtype))
    return [src]


def _softmax_family(ctx: LowerCtx, log: bool) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = _along(ctx, t)
    work = compute_dtype(out.dtype)
    largest, total = _shifted_exp_sum(x, t, dims, out.dtype, work)
    kept = _kept_map(t.rank, dims)
    init = empty_like_type(out, [(x, i) for i in range(t.rank)])
    ident = identity_map(t.rank)

    def body(args):
        shift = _finite_or_zero(args[1], work)
        shifted = arith.SubFOp(_read(args[0], t.dtype, out.dtype, work), shift).result
        if log:
            r = arith.SubFOp(shifted, math.LogOp(args[2]).result).result
        else:
            r = arith.DivFOp(math.ExpOp(shifted).result, args[2]).result
        return [cast_scalar(r, work, out.dtype)]

    return _generic([(x, ident), (largest, kept), (total, kept)], [(init, ident)], t.rank, (), body)


@lowers("tp.softmax", summary="max and sum-of-exp reductions (`linalg.generic`), then a parallel "
                              "generic exp(x - max) / sum reading both through indexing maps")
def _softmax(ctx: LowerCtx) -> list[ir.Value]:
    return _softmax_family(ctx, False)


@lowers("tp.log_softmax", summary="max and sum-of-exp reductions (`linalg.generic`), then a "
                                  "parallel generic (x - max) - log(sum)")
def _log_softmax(ctx: LowerCtx) -> list[ir.Value]:
    return _softmax_family(ctx, True)


# --- layer norm ------------------------------------------------------------------------------

@lowers("tp.layer_norm", summary="sum and squared-deviation reductions over the trailing dims "
                                 "(`linalg.generic`), then one parallel generic normalizing, "
                                 "scaling and shifting (weight/bias through indexing maps)")
def _layer_norm(ctx: LowerCtx) -> list[ir.Value]:
    x, weight, bias = ctx.operands
    t, wt, bt = ctx.in_types
    out = ctx.out_types[0]
    k = len(ctx.attrs["normalized_shape"])
    dims = tuple(range(t.rank - k, t.rank))
    work = compute_dtype(t.dtype)
    n = const_scalar(float(np.prod(ctx.attrs["normalized_shape"])), work)
    eps = const_scalar(ctx.attrs["eps"], work)
    kept = _kept_map(t.rank, dims)
    total = _reduce(x, t, dims, work, 0.0,
                    lambda a, acc: arith.AddFOp(cast_scalar(a[0], t.dtype, work), acc).result)

    def deviation(xv, s):
        return arith.SubFOp(cast_scalar(xv, t.dtype, work), arith.DivFOp(s, n).result).result

    def squares(args, acc):
        dev = deviation(args[0], args[1])
        return arith.AddFOp(arith.MulFOp(dev, dev).result, acc).result

    sq = _reduce(x, t, dims, work, 0.0, squares, [(total, kept)])
    ins = [(x, identity_map(t.rank)), (total, kept), (sq, kept)]
    params = [(p, pt) for p, pt in ((weight, wt), (bias, bt)) if p is not None]
    ins += [(p, _trailing_map(t.rank, k)) for p, _ in params]
    init = empty_like_type(out, [(x, i) for i in range(t.rank)])

    def body(args):
        var = arith.DivFOp(args[2], n).result
        r = arith.DivFOp(deviation(args[0], args[1]), math.SqrtOp(arith.AddFOp(var, eps).result).result).result
        rest = args[3:-1]
        if weight is not None:
            r = arith.MulFOp(r, cast_scalar(rest.pop(0), wt.dtype, work)).result
        if bias is not None:
            r = arith.AddFOp(r, cast_scalar(rest.pop(0), bt.dtype, work)).result
        return [cast_scalar(r, work, out.dtype)]

    return _generic(ins, [(init, identity_map(t.rank))], t.rank, (), body)
