"""Sorting ops: a sort along one dimension with the original positions, the ``k`` largest
or smallest elements, and the ``k``-th smallest.

Every op orders with NaN as the largest value (as PyTorch's sorts do) and is stable: equal
elements (``-0.0`` and ``0.0`` are equal, and so are two NaNs) keep their input order, the
element at the smaller index first, in both directions. Indices are int64. A 0-d input is a
one-element sequence. Half types compare in float32, which orders them exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from .. import symbolic as sym
from ..errors import OpAttributeError, DimError, DTypeError
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import normalize_dim
from ..types import TensorType, is_static, type_of_array
from . import _grad
from ._common import upcast

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

__all__ = ["stable_order"]


def stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The int64 permutation that sorts ``x`` along ``axis``: NaN largest, ties in index
    order in both directions."""
    x = upcast(x, type_of_array(x).dtype)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64)
    # a stable ascending sort of the reversed sequence, reversed: the largest (NaN) first and
    # equal elements still in index order
    n = x.shape[axis]
    rev = np.flip(x, axis=axis)
    order = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis=axis)
    return (n - 1 - order).astype(np.int64)


def _sorted(x: np.ndarray, axis: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    order = stable_order(x, axis, descending)
    return np.take_along_axis(x, order, axis=axis), order


def _scatter_back(ctx: RuleContext, g: Any, index: Any, shape: tuple, dim: int) -> Any:
    """The gradient of values picked from an input of ``shape`` at ``index`` along ``dim``
    (distinct positions): ``g`` written at those positions of zeros."""
    rank = len(shape)
    if rank == 0:
        return g.reshape(())
    coords = []
    for k in range(rank):
        if k == dim:
            coords.append(index)
        else:
            pos = _grad.arange(ctx, index.shape[k], index.dtype, g)
            coords.append(pos.reshape([-1 if j == k else 1 for j in range(rank)]).expand(tuple(index.shape)))
    zero = ctx.zeros(shape, g.dtype, g)
    return ctx.apply_op("tp.index_put", zero, g, *coords, dims=tuple(range(rank)), accumulate=True)


class Sorting(Op):
    """Family base: one tensor operand, worked on along ``dim``."""

    family = "sorting"
    operands = (Operand("input"),)

    def along(self, t: TensorType, attrs: dict[str, Any]) -> int:
        return normalize_dim(self.name, attrs["dim"], t.rank)

    def size_along(self, t: TensorType, dim: int) -> Any:
        return t.shape[dim] if t.rank else 1

    def check_k(self, t: TensorType, dim: int, k: int, what: str) -> None:
        n = self.size_along(t, dim)
        if k < 0 or (is_static(n) and k > n) or (not is_static(n) and sym.gt(k, n, f"{self.name} k")):
            raise self.error(DimError, f"{what} (k = {k}, size {n} along dim {dim})")

    def no_bool(self, t: TensorType) -> None:
        if t.dtype.is_bool:
            raise self.error(DTypeError, "not implemented for dtype bool")


@register
class Sort(Sorting):
    """The elements sorted along ``dim`` and the int64 index each came from.

    Ascending unless ``descending``; NaN sorts as the largest value. Always stable (equal
    elements keep their order, in both directions), so ``stable=False`` gives the same
    result."""

    name = "tp.sort"
    results = ("values", "indices")
    attributes = (Attr("dim", AttrKind.INT, -1, doc="the dimension to sort along"),
                  Attr("descending", AttrKind.BOOL, False, doc="largest first"),
                  Attr("stable", AttrKind.BOOL, False, doc="keep equal elements in order (always done)"))

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        dim = ctx.attrs["dim"] % max(len(shape), 1)
        return (_scatter_back(ctx, grads[0], ctx.output(1), tuple(shape), dim),)

    def infer(self, types, attrs):
        (t,) = types
        self.along(t, attrs)
        return (t, t.with_dtype(dt.int64))

    def reference(self, arrays, attrs):
        (x,) = arrays
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        return _sorted(x, normalize_dim(self.name, attrs["dim"], x.ndim), attrs["descending"])


@register
class Topk(Sorting):
    """The ``k`` largest (or, unless ``largest``, smallest) elements along ``dim`` and their int64 indices.

    Always returned in order (largest first, or smallest first) whatever ``sorted`` says;
    NaN counts as the largest value, and of equal elements the one at the smaller index comes
    first."""

    name = "tp.topk"
    results = ("values", "indices")
    attributes = (Attr("k", AttrKind.INT, doc="how many elements to select"),
                  Attr("dim", AttrKind.INT, -1, doc="the dimension to select along"),
                  Attr("largest", AttrKind.BOOL, True, doc="the largest elements; else the smallest"),
                  Attr("sorted", AttrKind.BOOL, True, doc="return them in order (always done)"))

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        dim = ctx.attrs["dim"] % max(len(shape), 1)
        return (_scatter_back(ctx, grads[0], ctx.output(1), tuple(shape), dim),)

    def infer(self, types, attrs):
        (t,) = types
        self.no_bool(t)
        dim = self.along(t, attrs)
        k = attrs["k"]
        self.check_k(t, dim, k, "selected index k out of range")
        shape = tuple(k if i == dim else n for i, n in enumerate(t.shape))
        return (TensorType(shape, t.dtype), TensorType(shape, dt.int64))

    def reference(self, arrays, attrs):
        (x,) = arrays
        k = attrs["k"]
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        dim = normalize_dim(self.name, attrs["dim"], x.ndim)
        values, order = _sorted(x, dim, attrs["largest"])
        first = tuple(slice(0, k) if i == dim else slice(None) for i in range(x.ndim))
        return values[first], order[first]


@register
class Kthvalue(Sorting):
    """The ``k``-th smallest element along ``dim`` (``k`` from 1) and its int64 index.

    NaN counts as the largest value; equal elements count in index order, so where the
    ``k``-th smallest is one of several equal elements, its index follows that order."""

    name = "tp.kthvalue"
    results = ("values", "indices")
    attributes = (Attr("k", AttrKind.INT, doc="which smallest element, counting from 1"),
                  Attr("dim", AttrKind.INT, -1, doc="the dimension to search"),
                  Attr("keepdim", AttrKind.BOOL, False, doc="keep the searched dim with size 1"))

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        rank = len(shape)
        dim = ctx.attrs["dim"] % max(rank, 1)
        g, index = grads[0], ctx.output(1)
        if rank and not ctx.attrs["keepdim"]:
            g, index = g.unsqueeze(dim), index.unsqueeze(dim)
        return (_scatter_back(ctx, g, index, tuple(shape), dim),)

    def infer(self, types, attrs):
        (t,) = types
        self.no_bool(t)
        dim = self.along(t, attrs)
        k = attrs["k"]
        if k < 1:
            raise self.error(OpAttributeError, f"k must be at least 1, got {k}")
        self.check_k(t, dim, k, f"selected number k out of range for dimension {dim}")
        if not t.rank:
            return (t, TensorType((), dt.int64))
        if attrs["keepdim"]:
            shape = tuple(1 if i == dim else n for i, n in enumerate(t.shape))
        else:
            shape = tuple(n for i, n in enumerate(t.shape) if i != dim)
        return (TensorType(shape, t.dtype), TensorType(shape, dt.int64))

    def reference(self, arrays, attrs):
        (x,) = arrays
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        dim = normalize_dim(self.name, attrs["dim"], x.ndim)
        values, order = _sorted(x, dim, False)
        k = attrs["k"]
        pick = tuple(slice(k - 1, k) if i == dim else slice(None) for i in range(x.ndim))
        values, order = values[pick], order[pick]
        if not attrs["keepdim"]:
            values, order = np.squeeze(values, dim), np.squeeze(order, dim)
        return values, order
