"""Reduction and normalization ops: sums, products, means, extrema and their indices,
variance, logical all/any, logsumexp, cumulative sums, products and logsumexps, softmax and
layer normalization.

Reductions take ``dims`` (``None`` reduces every dimension, an empty list none) and
``keepdim``. Half types accumulate in float32 and round once, as PyTorch's CPU kernels do.
Softmax, log-softmax, logsumexp and layer norm subtract the maximum (or the mean) first,
so large inputs do not overflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from .. import symbolic as sym
from ..errors import OpAttributeError, DimError, DTypeError, ShapeError
from . import _grad
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import format_shape, normalize_dim, same_dim
from ..types import Dim, TensorType, is_static, type_of_array
from ._common import upcast
from .elementwise import cast_array

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext


def reduction_dims(op: str, dims: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """``dims`` made non-negative and sorted; ``None`` means every dimension. A 0-d input
    accepts dims 0 and -1 and has nothing to reduce."""
    if dims is None:
        return tuple(range(rank))
    out = [normalize_dim(op, d, rank) for d in dims]
    for d in out:
        if out.count(d) > 1:
            raise DimError(f"{op}: dim {d} appears multiple times in the list of dims")
    return tuple(sorted(out)) if rank > 0 else ()


def reduced_shape(shape: Sequence[Dim], dims: Sequence[int], keepdim: bool) -> tuple[Dim, ...]:
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


def _count(shape: Sequence[int], dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def _converted(x: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """``x`` converted to ``dtype`` (PyTorch's casting rules), then widened to the dtype's
    compute precision."""
    if x.dtype != dtype.np_dtype:
        x = cast_array(x, dtype)
    return upcast(x, dtype)


def _int_to_int64(t: TensorType) -> dt.DType:
    """Sums of bool and integer tensors accumulate in int64, as in PyTorch."""
    return t.dtype if t.dtype.is_floating_point else dt.int64


class Reduction(Op):
    """Family base: reduce ``dims`` of the input (all when ``None``), keeping them as size 1
    when ``keepdim``."""

    family = "reduction"
    operands = (Operand("input"),)
    attributes: tuple[Attr, ...] = (
        Attr("dims", AttrKind.INTS, None, optional=True, doc="dimensions to reduce; None: all"),
        Attr("keepdim", AttrKind.BOOL, False, doc="keep reduced dimensions with size 1"),
    )

    def reduced(self, t: TensorType, attrs: dict[str, Any]) -> tuple[int, ...]:
        return reduction_dims(self.name, attrs["dims"], t.rank)

    def result_dtype(self, t: TensorType, attrs: dict[str, Any]) -> dt.DType:
        return t.dtype

    def check(self, t: TensorType, dims: tuple[int, ...], attrs: dict[str, Any]) -> None:
        """Extra verification of the input against the reduced dims."""

    def result_shape(self, t: TensorType, dims: tuple[int, ...],
                     attrs: dict[str, Any]) -> tuple[Dim, ...]:
        return reduced_shape(t.shape, dims, attrs["keepdim"])

    def infer(self, types, attrs):
        (t,) = types
        dims = self.reduced(t, attrs)
        self.check(t, dims, attrs)
        return (TensorType(self.result_shape(t, dims, attrs), self.result_dtype(t, attrs)),)

    def reference(self, arrays, attrs):
        (x,) = arrays
        t = type_of_array(x)
        dims = self.reduced(t, attrs)
        out_dtype = self.result_dtype(t, attrs)
        out = np.asarray(self.compute(x, dims, attrs["keepdim"], out_dtype, attrs))
        return out.astype(out_dtype.np_dtype, copy=False)

    def compute(self, x: np.ndarray, dims: tuple[int, ...], keepdim: bool, out_dtype: dt.DType,
                attrs: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError


class Accumulating(Reduction):
    """Sum-like reductions: an optional ``dtype`` converts the input before accumulating;
    without it bool and integer inputs accumulate in int64."""

    attributes = Reduction.attributes + (
        Attr("dtype", AttrKind.DTYPE, None, optional=True, doc="convert the input to this first"),)

    def result_dtype(self, t, attrs):
        return attrs["dtype"] or _int_to_int64(t)


@register
class Sum(Accumulating):
    """Sum over ``dims``; an empty reduction gives 0."""

    name = "tp.sum"

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        return (_grad.unreduce(grads[0], shape, dims, ctx.attrs["keepdim"]),)

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = _converted(x, out_dtype)
        if x.dtype == np.bool_:
            return np.any(x, axis=dims, keepdims=keepdim)
        return np.sum(x, axis=dims, keepdims=keepdim, dtype=x.dtype)


@register
class Prod(Accumulating):
    """Product over ``dims``; an empty reduction gives 1."""

    name = "tp.prod"

    def vjp(self, ctx: RuleContext, grads):
        # the product of the other elements: out / x where x != 0; where x is the one zero of its
        # slice, the product of the rest; 0 where the slice has two or more zeros
        x = ctx.input(0)
        shape = tuple(x.shape)
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        keep = ctx.attrs["keepdim"]
        g = _grad.unreduce(grads[0], shape, dims, keep)
        out = _grad.unreduce(ctx.output().to(x.dtype), shape, dims, keep)
        zero = x == 0
        rest = ctx.apply_op("tp.prod", _grad.where(ctx, zero, 1.0, x), dims=dims, keepdim=True) if dims else x
        zeros = _grad.mask(zero, x).sum(dim=dims, keepdim=True) if dims else _grad.mask(zero, x)
        others = _grad.where(ctx, zero, _grad.where(ctx, zeros == 1, rest.expand(shape), 0.0), out / _grad.where(ctx, zero, 1.0, x))
        return (g * others,)

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = _converted(x, out_dtype)
        if x.dtype == np.bool_:
            return np.all(x, axis=dims, keepdims=keepdim)
        return np.prod(x, axis=dims, keepdims=keepdim, dtype=x.dtype)


@register
class Mean(Reduction):
    """Arithmetic mean over ``dims`` of a floating-point input (NaN when empty)."""

    name = "tp.mean"
    attributes = Reduction.attributes + (
        Attr("dtype", AttrKind.DTYPE, None, optional=True, doc="convert the input to this first"),)

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        return (_grad.unreduce(grads[0], shape, dims, ctx.attrs["keepdim"]) / _grad.at_least_one(_grad.count(shape, dims)),)

    def result_dtype(self, t, attrs):
        return attrs["dtype"] or t.dtype

    def check(self, t, dims, attrs):
        given = attrs["dtype"]
        out = given or t.dtype
        if not out.is_floating_point:
            which = "Optional dtype" if given is not None else "Input dtype"
            raise self.error(DTypeError, f"could not infer output dtype. {which} must be either a "
                                         f"floating point or complex dtype. Got: {out.name}")

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = _converted(x, out_dtype)
        total = np.sum(x, axis=dims, keepdims=keepdim, dtype=x.dtype)
        return total / x.dtype.type(_count(x.shape, dims))


class Extremum(Reduction):
    """Maximum or minimum: no identity, so every reduced dimension must be non-empty."""

    def check(self, t, dims, attrs):
        _check_nonempty(self, t, dims, attrs["dims"] is None)

    def vjp(self, ctx: RuleContext, grads):  # shared evenly by the elements equal to the extremum, as PyTorch
        x = ctx.input(0)
        shape = tuple(x.shape)
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        keep = ctx.attrs["keepdim"]
        hit = _grad.mask(x == _grad.unreduce(ctx.output(), shape, dims, keep), x)
        ties = hit.sum(dim=dims, keepdim=True) if dims else hit
        return (_grad.unreduce(grads[0], shape, dims, keep) * hit / ties,)


def _check_nonempty(op: Op, t: TensorType, dims: Sequence[int], all_dims: bool) -> None:
    if all_dims and t.has_static_shape and t.numel() == 0:
        raise op.error(ShapeError, "Expected reduction dim to be specified for input.numel() == 0. "
                                   "Specify the reduction dim with the 'dim' argument.")
    for d in dims:
        if is_static(t.shape[d]) and t.shape[d] == 0:
            raise op.error(DimError, f"Expected reduction dim {d} to have non-zero size.")


@register
class Amax(Extremum):
    """Largest value over ``dims``; NaN wins."""

    name = "tp.amax"

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        return np.max(upcast(x, out_dtype), axis=dims, keepdims=keepdim)


@register
class Amin(Extremum):
    """Smallest value over ``dims``; NaN wins."""

    name = "tp.amin"

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        return np.min(upcast(x, out_dtype), axis=dims, keepdims=keepdim)


class ArgExtremum(Reduction):
    """Index (int64) of the extreme value along ``dim``, or in the flattened input when
    ``dim`` is None. Ties and NaN pick the first occurrence."""

    attributes = (
        Attr("dim", AttrKind.INT, None, optional=True, doc="dimension to search; None: flattened"),
        Attr("keepdim", AttrKind.BOOL, False, doc="keep the searched dimension(s) with size 1"),
    )

    def reduced(self, t, attrs):
        if attrs["dim"] is None:
            return tuple(range(t.rank))
        return reduction_dims(self.name, (attrs["dim"],), t.rank)

    def check(self, t, dims, attrs):
        if attrs["dim"] is None and t.has_static_shape and t.numel() == 0:
            raise self.error(DimError, "Expected reduction dim to be specified for "
                                       "input.numel() == 0.")
        _check_nonempty(self, t, dims, False)

    def result_dtype(self, t, attrs):
        return dt.int64

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = upcast(x, type_of_array(x).dtype)
        if x.ndim == 0:
            return np.zeros((), np.int64)
        if attrs["dim"] is None:
            flat = self.search(x.reshape(-1), 0)
            return np.reshape(flat, (1,) * x.ndim if keepdim else ())
        out = self.search(x, dims[0])
        return np.expand_dims(out, dims[0]) if keepdim else out

    def search(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError


@register
class Argmax(ArgExtremum):
    """Index of the largest value along ``dim`` (flattened when None); first on ties and NaN."""

    name = "tp.argmax"
    differentiable = False

    def search(self, x, axis):
        return np.argmax(x, axis=axis)


@register
class Argmin(ArgExtremum):
    """Index of the smallest value along ``dim`` (flattened when None); first on ties and NaN."""

    name = "tp.argmin"
    differentiable = False

    def search(self, x, axis):
        return np.argmin(x, axis=axis)


@register
class Var(Reduction):
    """Variance over ``dims``: squared deviations summed, divided by ``max(0, N - correction)``."""

    name = "tp.var"
    attributes = Reduction.attributes + (
        Attr("correction", AttrKind.FLOAT, 1.0,
             doc="subtracted from the element count (Bessel: 1)"),)

    def vjp(self, ctx: RuleContext, grads):
        x = ctx.input(0)
        shape = tuple(x.shape)
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        n = _grad.count(shape, dims)
        centered = x - x.mean(dim=dims, keepdim=True) if dims else x - x
        if isinstance(n, sym.SymInt):  # a symbolic count (one the data decides): the program computes the scale
            dof = ctx.apply_op("tp.full", shape=(), value=n, dtype=x.dtype) - ctx.attrs["correction"]
            scale = 2.0 / dof  # (inf without degrees of freedom, as below)
        else:
            n = n - ctx.attrs["correction"]
            scale = 2.0 / n if n != 0 else math.inf  # no degrees of freedom: NaN, as PyTorch's
        return (_grad.unreduce(grads[0], shape, dims, ctx.attrs["keepdim"]) * centered * scale,)

    def check(self, t, dims, attrs):
        if not t.dtype.is_floating_point:
            raise self.error(DTypeError, f"std and var only support floating point and complex "
                                         f"dtypes, got {t.dtype.name}")

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = upcast(x, out_dtype)
        n = _count(x.shape, dims)
        mean = np.sum(x, axis=dims, keepdims=True, dtype=x.dtype) / x.dtype.type(n)
        dev = x - mean
        squares = np.sum(dev * dev, axis=dims, keepdims=keepdim, dtype=x.dtype)
        # max() keeps 0 for a NaN correction, as PyTorch's does (giving inf)
        dof = max(0.0, n - attrs["correction"])
        return squares / x.dtype.type(dof)


class Logical(Reduction):
    """all/any: bool results, except that uint8 inputs give uint8 (PyTorch's legacy rule)."""

    def result_dtype(self, t, attrs):
        return dt.uint8 if t.dtype is dt.uint8 else dt.bool_


@register
class ReduceAll(Logical):
    """True where every element over ``dims`` is nonzero (true when empty)."""

    name = "tp.all"
    differentiable = False

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        return np.all(x, axis=dims, keepdims=keepdim)


@register
class ReduceAny(Logical):
    """True where some element over ``dims`` is nonzero (false when empty)."""

    name = "tp.any"
    differentiable = False

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        return np.any(x, axis=dims, keepdims=keepdim)


def _float_result(t: TensorType) -> dt.DType:
    return t.dtype if t.dtype.is_floating_point else dt.get_default_dtype()


def _stable_shift(x: np.ndarray, axis: Any) -> np.ndarray:
    """The maximum over ``axis`` (kept), with infinities and empty slices replaced by 0 so
    that subtracting it never makes NaN out of finite values."""
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return np.where(np.isfinite(m), m, np.zeros((), x.dtype))


@register
class Logsumexp(Reduction):
    """``log(sum(exp(input)))`` over ``dims``, computed with the maximum subtracted first."""

    name = "tp.logsumexp"

    def vjp(self, ctx: RuleContext, grads):
        x = ctx.input(0)
        shape = tuple(x.shape)
        dims = _grad.reduced_dims(ctx.attrs["dims"], len(shape))
        keep = ctx.attrs["keepdim"]
        return (_grad.unreduce(grads[0], shape, dims, keep) * (x - _grad.unreduce(ctx.output(), shape, dims, keep)).exp(),)

    def result_dtype(self, t, attrs):
        return _float_result(t)

    def compute(self, x, dims, keepdim, out_dtype, attrs):
        x = _converted(x, out_dtype)
        shift = _stable_shift(x, dims)
        total = np.sum(np.exp(x - shift), axis=dims, keepdims=True, dtype=x.dtype)
        out = np.log(total) + shift
        return out if keepdim else np.squeeze(out, axis=dims)


class AlongDim(Op):
    """Family base: a same-shape op along one dimension ``dim``, with an optional ``dtype``
    the input is converted to first."""

    family = "reduction"
    operands = (Operand("input"),)
    attributes = (Attr("dim", AttrKind.INT, doc="the dimension to work along"),
                  Attr("dtype", AttrKind.DTYPE, None, optional=True,
                       doc="convert the input to this first"))

    def result_dtype(self, t: TensorType, attrs: dict[str, Any]) -> dt.DType:
        return attrs["dtype"] or t.dtype

    def infer(self, types, attrs):
        (t,) = types
        normalize_dim(self.name, attrs["dim"], t.rank)
        return (t.with_dtype(self.result_dtype(t, attrs)),)

    def reference(self, arrays, attrs):
        (x,) = arrays
        out_dtype = self.result_dtype(type_of_array(x), attrs)
        x = _converted(x, out_dtype)
        if x.ndim == 0:  # a 0-d input works along its single implicit element
            out = self.compute(x.reshape(1), 0)
            return out.reshape(()).astype(out_dtype.np_dtype)
        axis = normalize_dim(self.name, attrs["dim"], x.ndim)
        return self.compute(x, axis).astype(out_dtype.np_dtype, copy=False)

    def compute(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError


class _Accumulation(AlongDim):
    """A running sum or product: bool and integer inputs accumulate in int64 (or ``dtype``)."""

    def result_dtype(self, t, attrs):
        return attrs["dtype"] or _int_to_int64(t)

    def infer(self, types, attrs):
        out = super().infer(types, attrs)
        if out[0].dtype.is_bool:
            raise self.error(DTypeError, "not implemented for result dtype bool")
        return out


@register
class Cumsum(_Accumulation):
    """Running sum along ``dim``; bool and integer inputs accumulate in int64."""

    name = "tp.cumsum"

    def vjp(self, ctx: RuleContext, grads):  # a sum from the end
        shape, _ = ctx.input_meta[0]
        if not shape:
            return (grads[0],)
        d = ctx.attrs["dim"] % len(shape)
        return (grads[0].flip(d).cumsum(d).flip(d),)

    def compute(self, x, axis):
        return np.cumsum(x, axis=axis, dtype=x.dtype)


@register
class Cumprod(_Accumulation):
    """Running product along ``dim``; bool and integer inputs multiply in int64."""

    name = "tp.cumprod"

    def vjp(self, ctx: RuleContext, grads):
        # before the first zero of a slice: the reversed running sum of g * out, divided by x;
        # at the first zero: the product before it times the reversed running sum of g times the
        # running product after it; after the first zero: 0 (each later output holds that zero)
        x, g, out = ctx.input(0), grads[0], ctx.output()
        shape = tuple(x.shape)
        if not shape:
            return (g,)
        d = ctx.attrs["dim"] % len(shape)
        if x.dtype is not out.dtype:  # dtype= converted the input first
            x = x.to(out.dtype)

        def rsum(v):
            return v.flip(d).cumsum(d).flip(d)

        zero = x == 0
        seen = zero.cumsum(d)  # zeros up to and including each position
        before = seen == 0
        first = zero & (seen == 1)
        after = (seen - _grad.mask(zero, seen)) >= 1
        safe = _grad.where(ctx, before, x, 1.0)
        part = _grad.where(ctx, before, rsum(g * out) / safe, 0.0)
        rest = _grad.where(ctx, after, x, 1.0).cumprod(d)
        at_zero = _grad.where(ctx, first, safe.cumprod(d) * rsum(g * rest), 0.0)
        return (part + at_zero,)

    def compute(self, x, axis):
        return np.cumprod(x, axis=axis, dtype=x.dtype)


@register
class Logcumsumexp(AlongDim):
    """``log(cumsum(exp(input)))`` along ``dim`` of a floating-point input, each step a stable
    ``logaddexp`` of the running value and the next element."""

    name = "tp.logcumsumexp"
    attributes = (Attr("dim", AttrKind.INT, doc="the dimension to work along"),)

    def vjp(self, ctx: RuleContext, grads):
        # sum over j >= i of g_j * exp(x_i - out_j), with the positive and negative parts of g
        # each summed in log space (a reversed logcumsumexp), so nothing overflows
        x, g = ctx.input(0), grads[0]
        shape = tuple(x.shape)
        if not shape:
            return (g,)
        d = ctx.attrs["dim"] % len(shape)
        out = ctx.output()
        import ml_dtypes  # (loaded only for this rule: eager import stays light)

        lowest = float(ml_dtypes.finfo(g.dtype.np_dtype).min)  # the dtype's, as PyTorch's rule
        log_abs = g.abs().log()

        def part(cond):
            logs = _grad.where(ctx, cond, log_abs, lowest) - out
            total = ctx.apply_op("tp.logcumsumexp", logs.flip(d), dim=d).flip(d)
            return (total + x).exp()

        return (part(g > 0) - part(g < 0),)

    def result_dtype(self, t, attrs):
        return t.dtype

    def infer(self, types, attrs):
        out = super().infer(types, attrs)
        if not out[0].dtype.is_floating_point:
            raise self.error(DTypeError, f"not implemented for dtype {out[0].dtype.name}")
        return out

    def compute(self, x, axis):
        with np.errstate(invalid="ignore"):
            return np.logaddexp.accumulate(x, axis=axis, dtype=x.dtype)


class SoftmaxLike(AlongDim):
    family = "normalization"

    def infer(self, types, attrs):
        out = super().infer(types, attrs)
        if not out[0].dtype.is_floating_point:
            raise self.error(DTypeError, f"not implemented for dtype {out[0].dtype.name}; "
                                         f"pass a floating-point dtype= or convert the input")
        return out


@register
class Softmax(SoftmaxLike):
    """``exp(x) / sum(exp(x))`` along ``dim``, computed with the maximum subtracted first."""

    name = "tp.softmax"

    def vjp(self, ctx: RuleContext, grads):
        y, g = ctx.output(), grads[0]
        d = ctx.attrs["dim"]
        return (y * (g - (g * y).sum(dim=d, keepdim=True)),)

    def compute(self, x, axis):
        e = np.exp(x - _stable_shift(x, axis))
        return e / np.sum(e, axis=axis, keepdims=True, dtype=x.dtype)


@register
class LogSoftmax(SoftmaxLike):
    """``x - logsumexp(x)`` along ``dim``, computed with the maximum subtracted first."""

    name = "tp.log_softmax"

    def vjp(self, ctx: RuleContext, grads):
        y, g = ctx.output(), grads[0]
        d = ctx.attrs["dim"]
        return (g - y.exp() * g.sum(dim=d, keepdim=True),)

    def compute(self, x, axis):
        shifted = x - _stable_shift(x, axis)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True, dtype=x.dtype))


@register
class LayerNorm(Op):
    """Normalize the trailing ``normalized_shape`` dims to zero mean and unit variance, then
    scale by ``weight`` and shift by ``bias`` when given."""

    name = "tp.layer_norm"
    family = "normalization"
    operands = (Operand("input"), Operand("weight", optional=True), Operand("bias", optional=True))
    attributes = (Attr("normalized_shape", AttrKind.INTS, doc="the trailing dims normalized over"),
                  Attr("eps", AttrKind.FLOAT, 1e-5, doc="added to the variance"))

    def vjp(self, ctx: RuleContext, grads):
        x, w = ctx.input(0), ctx.input(1)
        g = grads[0]
        k = len(ctx.attrs["normalized_shape"])
        dims = tuple(range(x.dim() - k, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        centered = x - mean
        rstd = ((centered * centered).mean(dim=dims, keepdim=True) + ctx.attrs["eps"]).rsqrt()
        xhat = centered * rstd
        gx = gw = gb = None
        if ctx.needs(0):
            gh = g * w if w is not None else g
            gx = rstd * (gh - gh.mean(dim=dims, keepdim=True) - xhat * (gh * xhat).mean(dim=dims, keepdim=True))
        if ctx.needs(1):
            gw = g * xhat  # summed over the leading dims by the engine
        if ctx.needs(2):
            gb = g
        return gx, gw, gb

    def infer(self, types, attrs):
        x, weight, bias = (list(types) + [None, None])[:3]
        shape = attrs["normalized_shape"]
        if not shape:
            raise self.error(OpAttributeError, "Expected normalized_shape to be at least "
                                              "1-dimensional, i.e., containing at least one "
                                              "element, but got normalized_shape = []")
        tail = x.shape[x.rank - len(shape):] if x.rank >= len(shape) else None
        if tail is None or not all(same_dim(a, b) for a, b in zip(tail, shape)):
            raise self.error(ShapeError, f"Given normalized_shape={list(shape)}, expected input "
                                         f"with shape [*, {', '.join(map(str, shape))}], but got "
                                         f"input of size{format_shape(x.shape)}")
        if not x.dtype.is_floating_point:
            raise self.error(DTypeError, f"not implemented for dtype {x.dtype.name}")
        for name, p in (("weight", weight), ("bias", bias)):
            if p is None:
                continue
            if len(p.shape) != len(shape) or not all(
                    same_dim(a, b) for a, b in zip(p.shape, shape)):
                raise self.error(ShapeError, f"Expected {name} to be of same shape as "
                                             f"normalized_shape, but got {name} of shape "
                                             f"{format_shape(p.shape)} and normalized_shape = "
                                             f"{list(shape)}")
            # parameters have the input's dtype, or the one it computes in (float32 ones
            # for half inputs)
            if p.dtype is not x.dtype and p.dtype is not x.dtype.computes_in:
                raise self.error(DTypeError, f"mixed dtypes: input is {x.dtype.name} but {name} "
                                             f"is {p.dtype.name}")
        return (x,)

    def reference(self, arrays, attrs):
        x, weight, bias = (list(arrays) + [None, None])[:3]
        out_dtype = type_of_array(x).dtype
        xc = upcast(x, out_dtype)
        axes = tuple(range(x.ndim - len(attrs["normalized_shape"]), x.ndim))
        n = xc.dtype.type(_count(x.shape, axes))
        mean = np.sum(xc, axis=axes, keepdims=True, dtype=xc.dtype) / n
        dev = xc - mean
        var = np.sum(dev * dev, axis=axes, keepdims=True, dtype=xc.dtype) / n
        out = dev / np.sqrt(var + xc.dtype.type(attrs["eps"]))
        if weight is not None:
            out = out * weight.astype(xc.dtype)
        if bias is not None:
            out = out + bias.astype(xc.dtype)
        return out.astype(out_dtype.np_dtype, copy=False)
