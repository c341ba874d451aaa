"""Lowerings of the reduction and normalization families.

A reduction is one ``linalg.generic`` whose reduced dims are ``reduction`` iterators and
whose output map drops them; its init is the identity (0 for sums, 1 for products, -inf or
the dtype's minimum for maxima). Statistics a later pass needs (a maximum, a sum) are read
back through indexing maps, never broadcast in memory, so IREE fuses each op into few
dispatches. ``keepdim`` adds the unit dims with ``tensor.expand_shape``. Half types
accumulate in float32 and round once, as the references do. Float32 sums of many elements
accumulate in float64 on the CPU targets (``_sum_dtype``).

``tp.cumsum`` is a prefix sum, which ``linalg.generic`` cannot express in O(n); it lowers to
IREE's ``iree_linalg_ext.scan`` (every IREE target compiles it) rather than to a
triangular-mask reduction costing O(n^2) or a loop of one dispatch per step. ``tp.cumprod``
and ``tp.logcumsumexp`` are the same scan with another combiner (multiplication, a stable
logaddexp).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence

import numpy as np

from ...dialects.ir import arith, ir, math
from ...dialects.tp import dtypes as dt
from ...dialects.tp.ops.reduction import reduced_shape
from ...dialects.tp.shapes import normalize_dim
from ...dialects.tp.types import TensorType, is_static
from . import LowerCtx, lowers
from ._builder import (beats, cast_scalar, fence, collapse, const_scalar, dim_map, elem_type, elementwise, empty, expand,
                       extremum_identity, filled, generic, identity_map, linalg_ext, loop_index, scalar_add,
                       scalar_extremum, scalar_mul, size_scalar, unit_groups)
from ._target import target
from ._sizes import as_index, dim_value, index_const, product, sizes_of

__all__: list[str] = []

_F = arith.CmpFPredicate


# --- building blocks -------------------------------------------------------------------------

def _kept(rank: int, reduced: Sequence[int]) -> list[int]:
    """The dims of a ``rank``-d input that a reduction over ``reduced`` keeps."""
    return [i for i in range(rank) if i not in reduced]


def _kept_map(rank: int, reduced: Sequence[int]) -> ir.AffineMap:
    """From the input's iteration space to a tensor without the reduced dims."""
    return dim_map(rank, _kept(rank, reduced))


def _reduced_type(t: TensorType, dims: Sequence[int], dtype: dt.DType) -> TensorType:
    return TensorType(reduced_shape(t.shape, dims, False), dtype)


def _reduced_filled(src: ir.Value, t: TensorType, dims: Sequence[int], dtype: dt.DType, value) -> ir.Value:
    """A tensor of ``t``'s shape without ``dims``, filled with ``value`` (the reduction's
    identity); dynamic sizes come from ``src``."""
    return filled(sizes_of(src, t, _kept(t.rank, dims)), dtype, value)


def _keepdim(value: ir.Value, t: TensorType, dims: Sequence[int], out: TensorType, src: ir.Value) -> ir.Value:
    """``value`` (``t`` without ``dims``) reshaped to ``out`` when ``out`` keeps the reduced
    dims with size 1."""
    if out.rank == t.rank - len(dims):
        return value
    return expand(value, unit_groups(t.rank, dims), sizes_of(src, out))


def _read(x: ir.Value, src: dt.DType, dst: dt.DType, work: dt.DType) -> ir.Value:
    """A scalar as the references read it: converted to ``dst``, then widened to ``work``."""
    return cast_scalar(cast_scalar(x, src, dst), dst, work)


def _finite_or_zero(m: ir.Value, d: dt.DType) -> ir.Value:
    """The max-shift of the stable softmax family: infinities and NaN become 0."""
    finite = arith.CmpFOp(_F.ONE, math.AbsFOp(m).result, const_scalar(float("inf"), d)).result
    return arith.SelectOp(finite, m, const_scalar(0.0, d)).result


def _reduce(src: ir.Value, t: TensorType, dims: Sequence[int], work: dt.DType, init,
            step: Callable[[ir.Value, ir.Value], ir.Value],
            extra: Sequence[tuple[ir.Value, ir.AffineMap]] = ()) -> ir.Value:
    """Reduce ``dims`` of ``src``: ``step(args, acc)`` folds one element into the
    accumulator (of dtype ``work``, starting at ``init``); ``args`` are the scalars of
    ``src`` and of the ``extra`` inputs (read through their maps)."""
    acc = _reduced_filled(src, t, dims, work, init)
    ins = [(src, identity_map(t.rank))] + list(extra)
    return generic(ins, [(acc, _kept_map(t.rank, dims))], lambda a: [step(a[:-1], a[-1])], reduced=dims)[0]


#: a float32 sum of more elements than this accumulates in float64 where the target allows it
#: (``float64`` and ``wide_float_sums``: the CPU targets) and is rounded once. IREE's CPU code adds
#: each vector lane's share of the elements one after another, so the rounding error of a float32
#: accumulator grows with the count: measured on iree-cpu, summing uniform(1, 2) values of shape
#: (8, 64, 112, 112) over all dims but the channels (batch norm's statistics at ResNet-18's first
#: layer) was 4.7e-6 off relative (numpy's pairwise sum: 1.4e-7), (100352, 64) over dim 0
#: 1.6e-5, and a float32 ResNet-18 trained compiled drifted from float64 several times as far as
#: PyTorch's float32 does (tests/compiler/test_training_precision.py). The float64 accumulator is
#: exact to float32's precision at any of these counts. Below the threshold (layer norm over a
#: model's width, softmax over a sequence, the classes of a loss) the float32 error stays under
#: 256 roundings and the accumulator stays float32.
WIDE_SUMS_FROM = 256


def _sum_dtype(work: dt.DType, t: TensorType, dims: Sequence[int]) -> dt.DType:
    """The accumulator of a sum in ``work`` over ``dims`` of ``t``: float64 for a float32 sum
    of more than ``WIDE_SUMS_FROM`` (or a dynamic number of) elements where the target has
    cheap float64, else ``work``."""
    traits = target()
    if work is not dt.float32 or not (traits.float64 and traits.wide_float_sums):
        return work
    count = 1
    for d in dims:
        if not is_static(t.shape[d]):
            return dt.float64
        count *= int(t.shape[d])
    return dt.float64 if count > WIDE_SUMS_FROM else work


# --- sum, prod, mean -------------------------------------------------------------------------

def _accumulate(ctx: LowerCtx, combine, identity, wide: bool = False) -> tuple[ir.Value, tuple[int, ...], dt.DType]:
    """The sum or product over the reduced dims in the compute dtype (for a ``wide`` sum, the
    accumulator ``_sum_dtype`` picks); returns it with the dims and that dtype."""
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = out.dtype.computes_in
    if wide:
        work = _sum_dtype(work, t, dims)
    if (not target().fuse_wide_inner_reductions and t.rank - 1 in dims and not t.has_static_shape
            and work.bits == 64 and t.dtype is not work):
        # widened by an op of its own, which the lowering keeps apart from the reduction: IREE
        # 3.13's CUDA codegen cannot distribute a dynamic 64-bit inner reduction that widens
        wide = t.with_dtype(work)
        x, t = elementwise([(x, t)], wide, lambda a: _read(a[0], t.dtype, out.dtype, work)), wide

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
        value = elementwise([(value, rt)], rt.with_dtype(out.dtype), lambda a: cast_scalar(f(a[0]), work, out.dtype))
        if rt.rank == 0 and work is not out.dtype:
            # IREE 3.13 rejects a whole-tensor reduction rounded to a narrower dtype whose 0-d
            # result is returned and also cast back ("'iree_tensor_ext.compute_barrier.end' op
            # value and result types must match": `s = x.half().sum(); return s, s.float()`):
            # the rounded scalar leaves its dispatch through a fence
            value = fence(value)[0]
    return _keepdim(value, t, dims, out, x)


@lowers("tp.sum", summary="`linalg.generic` with reduction iterators, init 0, accumulating in "
                          "int64 (integers) or float32 (half types)")
def _sum(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, scalar_add, 0, wide=True)
    return [_rounded(ctx, total, dims, work)]


@lowers("tp.prod", summary="`linalg.generic` with reduction iterators, init 1")
def _prod(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, scalar_mul, 1)
    return [_rounded(ctx, total, dims, work)]


@lowers("tp.mean", summary="sum as `linalg.generic` (init 0, float32 for half types), then a "
                           "parallel generic dividing by the element count")
def _mean(ctx: LowerCtx) -> list[ir.Value]:
    total, dims, work = _accumulate(ctx, scalar_add, 0, wide=True)
    x, t = ctx.inputs()[0]
    n = size_scalar(product(sizes_of(x, t, dims)), work)
    return [_rounded(ctx, total, dims, work, lambda v: arith.DivFOp(v, n).result)]


# --- extrema and their indices ---------------------------------------------------------------

def _extremum(ctx: LowerCtx, largest: bool) -> list[ir.Value]:
    x, t = ctx.inputs()[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = t.dtype.computes_in

    def step(args, acc):
        return scalar_extremum(cast_scalar(args[0], t.dtype, work), acc, work, largest)

    value = _reduce(x, t, dims, work, extremum_identity(work, largest), step)
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
    work = t.dtype.computes_in
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
            stride = arith.MulIOp(as_index(stride), size_v).result
    best = _reduced_filled(x, t, dims, work, extremum_identity(work, largest))
    index = _reduced_filled(x, t, dims, dt.int64, np.iinfo(np.int64).max)
    kept = _kept_map(t.rank, dims)

    def body(args):
        v, cur, cur_i = cast_scalar(args[0], t.dtype, work), args[1], args[2]
        lin = None
        for d in dims:
            term = loop_index(d)
            s = strides[d]
            if not (isinstance(s, int) and s == 1):
                term = arith.MulIOp(term, as_index(s)).result
            lin = term if lin is None else arith.AddIOp(lin, term).result
        i = arith.IndexCastOp(elem_type(dt.int64), lin).result if lin is not None else const_scalar(0, dt.int64)
        wins = beats(v, i, cur, cur_i, work, largest)
        return [arith.SelectOp(wins, v, cur).result, arith.SelectOp(wins, i, cur_i).result]

    _, found = generic([(x, identity_map(t.rank))], [(best, kept), (index, kept)], body, reduced=dims)
    if not t.has_static_shape and dims and max(dims) < t.rank - 1:
        # IREE 3.13's transpose propagation crashes (a null attribute in reifyResultShapes) on
        # the index result of a two-result reduction over an inner dim, sizes known only at run
        # time, when a concat reads it: the index leaves its dispatch through a fence
        found, _ = fence(found)
    return [_keepdim(found, t, dims, out, x)]


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
    work = _sum_dtype(t.dtype.computes_in, t, dims)
    count = product(sizes_of(x, t, dims))
    n = size_scalar(count, work)
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
        diff = arith.SubFOp(size_scalar(count, dt.float64), const_scalar(correction, dt.float64)).result
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
                     work: dt.DType) -> tuple[ir.Value, ir.Value, dt.DType]:
    """The stable softmax statistics over ``dims``: the maximum, and the sum of
    ``exp(x - shift)`` where ``shift`` is the maximum with non-finite values made 0, with the
    dtype that sum is in (``_sum_dtype``; read it back with ``cast_scalar``)."""
    largest = _reduce(x, t, dims, work, -pymath.inf,
                      lambda a, acc: arith.MaximumFOp(_read(a[0], t.dtype, dst, work), acc).result)
    acc_dtype = _sum_dtype(work, t, dims)

    def step(args, acc):
        shift = _finite_or_zero(args[1], work)
        e = math.ExpOp(arith.SubFOp(_read(args[0], t.dtype, dst, work), shift).result).result
        return arith.AddFOp(cast_scalar(e, work, acc_dtype), acc).result

    total = _reduce(x, t, dims, acc_dtype, 0.0, step, [(largest, _kept_map(t.rank, dims))])
    return largest, total, acc_dtype


@lowers("tp.logsumexp", summary="max reduction, then sum of exp(x - max) (`linalg.generic` "
                                "reading the max through an indexing map), then log(sum) + max")
def _logsumexp(ctx: LowerCtx) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = ctx.opdef.reduced(t, ctx.attrs)
    work = out.dtype.computes_in
    largest, total, acc_dtype = _shifted_exp_sum(x, t, dims, out.dtype, work)
    rt = _reduced_type(t, dims, work)

    def fn(args):
        shift = _finite_or_zero(args[0], work)
        log = math.LogOp(args[1]).result
        return cast_scalar(arith.AddFOp(cast_scalar(log, acc_dtype, work), shift).result, work, out.dtype)

    value = elementwise([(largest, rt), (total, rt.with_dtype(acc_dtype))], rt.with_dtype(out.dtype), fn)
    return [_keepdim(value, t, dims, out, x)]


# --- along one dim: cumsum, softmax, log_softmax ---------------------------------------------

def _along(ctx: LowerCtx, t: TensorType) -> tuple[int, ...]:
    """The dim a same-shape op works along; none for a 0-d input (its one element)."""
    return (normalize_dim(ctx.op.name, ctx.attrs["dim"], t.rank),) if t.rank else ()


def _logaddexp(a: ir.Value, b: ir.Value, d: dt.DType) -> ir.Value:
    """``log(exp(a) + exp(b))`` as the references compute it: the larger plus log1p(exp of the
    difference); equal infinities give themselves (not NaN) and a NaN gives NaN."""
    from .elementwise import _TABLE

    larger = arith.MaximumFOp(a, b).result  # NaN-propagating
    smaller = arith.MinimumFOp(a, b).result
    differ = arith.CmpFOp(_F.UNE, smaller, larger).result
    finite = arith.CmpFOp(_F.ONE, math.AbsFOp(smaller).result, const_scalar(float("inf"), d)).result
    e = _TABLE["tp.exp"][0]([arith.SubFOp(smaller, larger).result], d, {})
    summed = arith.AddFOp(larger, _TABLE["tp.log1p"][0]([e], d, {})).result
    return arith.SelectOp(arith.OrIOp(differ, finite).result, summed, a).result


def _scan(ctx: LowerCtx, combine: Callable[[ir.Value, ir.Value, dt.DType], ir.Value], init) -> list[ir.Value]:
    """An inclusive ``iree_linalg_ext.scan`` along ``dim`` combining with ``combine`` (whose
    identity is ``init``) in the compute dtype of the result."""
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    work = out.dtype.computes_in
    wt = t.with_dtype(work)
    src = x
    if t.dtype is not work or out.dtype is not work:
        src = elementwise([(x, t)], wt, lambda a: _read(a[0], t.dtype, out.dtype, work))
    if t.rank:
        dim = _along(ctx, t)[0]
        w = elem_type(work)
        # IREE 3.13 cannot compile a scan of more than three dynamic dims (its tiling asks for
        # a stack buffer past the limit), so higher ranks scan a (before, dim, after) view.
        sizes = sizes_of(x, t)
        groups = [g for g in (list(range(dim)), [dim], list(range(dim + 1, t.rank))) if g]
        if t.rank > 3:
            src = collapse(src, groups)
            view = [product([sizes[i] for i in g]) for g in groups]
            along = groups.index([dim])
        else:
            view, along = sizes, dim
        empty_init = empty(view, work)
        carry = filled([s for i, s in enumerate(view) if i != along], work, init)
        scan = linalg_ext("scan", [empty_init.type, carry.type], [src, empty_init, carry],
                          {"dimension": ir.IntegerAttr.get(elem_type(dt.int64), along),
                           "inclusive": ir.BoolAttr.get(True)},
                          [w, w], lambda a: combine(a[0], a[1], work))
        src = scan.results[0]
        if t.rank > 3:
            src = expand(src, groups, sizes)
    if work is not out.dtype:
        src = elementwise([(src, wt)], out, lambda a: cast_scalar(a[0], work, out.dtype))
    return [src]


@lowers("tp.cumsum", summary="`iree_linalg_ext.scan` (inclusive, addition) along `dim` in the "
                             "accumulation dtype (int64 for integers, float32 for half types): "
                             "O(n) and parallel over the other dims, where a triangular-mask "
                             "`linalg.generic` would cost O(n^2)")
def _cumsum(ctx: LowerCtx) -> list[ir.Value]:
    return _scan(ctx, scalar_add, 0)


@lowers("tp.cumprod", summary="`iree_linalg_ext.scan` (inclusive, multiplication) along `dim` in "
                              "the accumulation dtype (int64 for integers, float32 for half types)")
def _cumprod(ctx: LowerCtx) -> list[ir.Value]:
    return _scan(ctx, scalar_mul, 1)


@lowers("tp.logcumsumexp", summary="`iree_linalg_ext.scan` (inclusive) along `dim` whose step is a "
                                   "stable logaddexp: max + log1p(exp(min - max)), equal infinities "
                                   "kept; float32 for half types")
def _logcumsumexp(ctx: LowerCtx) -> list[ir.Value]:
    return _scan(ctx, _logaddexp, -pymath.inf)


def _softmax_family(ctx: LowerCtx, log: bool) -> list[ir.Value]:
    (x, t), out = ctx.inputs()[0], ctx.out_types[0]
    dims = _along(ctx, t)
    work = out.dtype.computes_in
    largest, total, acc_dtype = _shifted_exp_sum(x, t, dims, out.dtype, work)
    kept = _kept_map(t.rank, dims)
    init = empty(sizes_of(x, out), out.dtype)
    ident = identity_map(t.rank)

    def body(args):
        shift = _finite_or_zero(args[1], work)
        shifted = arith.SubFOp(_read(args[0], t.dtype, out.dtype, work), shift).result
        total = cast_scalar(args[2], acc_dtype, work)
        if log:
            r = arith.SubFOp(shifted, math.LogOp(total).result).result
        else:
            r = arith.DivFOp(math.ExpOp(shifted).result, total).result
        return [cast_scalar(r, work, out.dtype)]

    return generic([(x, ident), (largest, kept), (total, kept)], [(init, ident)], body)


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
    work = t.dtype.computes_in
    # the statistics in the sums' dtype, the normalization in work
    acc_dtype = _sum_dtype(work, t, dims)
    n = const_scalar(float(np.prod(ctx.attrs["normalized_shape"])), acc_dtype)
    eps = const_scalar(ctx.attrs["eps"], work)
    kept = _kept_map(t.rank, dims)
    total = _reduce(x, t, dims, acc_dtype, 0.0,
                    lambda a, acc: arith.AddFOp(cast_scalar(a[0], t.dtype, acc_dtype), acc).result)

    def mean(s):
        return arith.DivFOp(s, n).result

    def squares(args, acc):
        dev = arith.SubFOp(cast_scalar(args[0], t.dtype, acc_dtype), mean(args[1])).result
        return arith.AddFOp(arith.MulFOp(dev, dev).result, acc).result

    sq = _reduce(x, t, dims, acc_dtype, 0.0, squares, [(total, kept)])
    ins = [(x, identity_map(t.rank)), (total, kept), (sq, kept)]
    params = [(p, pt) for p, pt in ((weight, wt), (bias, bt)) if p is not None]
    ins += [(p, dim_map(t.rank, range(t.rank - k, t.rank))) for p, _ in params]
    init = empty(sizes_of(x, out), out.dtype)

    def body(args):
        var = cast_scalar(arith.DivFOp(args[2], n).result, acc_dtype, work)
        dev = arith.SubFOp(cast_scalar(args[0], t.dtype, work), cast_scalar(mean(args[1]), acc_dtype, work)).result
        r = arith.DivFOp(dev, math.SqrtOp(arith.AddFOp(var, eps).result).result).result
        rest = args[3:-1]
        if weight is not None:
            r = arith.MulFOp(r, cast_scalar(rest.pop(0), wt.dtype, work)).result
        if bias is not None:
            r = arith.AddFOp(r, cast_scalar(rest.pop(0), bt.dtype, work)).result
        return [cast_scalar(r, work, out.dtype)]

    return generic(ins, [(init, identity_map(t.rank))], body)
