"""Indexing ops: gathers by index tensors, advanced indexing and its functional update,
triangular masks and the coordinates of nonzero elements.

Index operands are int32 or int64 tensors. The references check every index against the
size it addresses and raise an IndexError naming the value, the dimension and the size, as
PyTorch does; inference cannot, since index values are data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Sequence

import numpy as np

from .. import dtypes as dt
from .. import symbolic as sym
from ..errors import DimError, DTypeError, OpError, ShapeError
from . import _grad
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import broadcast_shapes, format_shape, normalize_dim
from ..types import Dim, TensorType

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

INDEX_DTYPES = (dt.int32, dt.int64)


class IndexShapeError(ShapeError, IndexError):
    """Index tensors whose shapes cannot be broadcast together."""


class Indexing(Op):
    family = "indexing"


def check_index_dtype(op: Op, t: TensorType, what: str) -> None:
    if t.dtype not in INDEX_DTYPES:
        raise op.error(DTypeError, f"{what} must be an int32 or int64 tensor, got {t.dtype.name}")


def checked_indices(op: Op, index: np.ndarray, size: int, dim: int, *, wrap: bool) -> np.ndarray:
    """``index`` as int64 in ``[0, size)``: negative entries count from the end when ``wrap``,
    anything else out of range raises DimError (an IndexError) as PyTorch does."""
    index = index.astype(np.int64, copy=False)
    low = -size if wrap else 0
    bad = (index < low) | (index >= size)
    if bad.any():
        value = int(index[bad].flat[0])
        raise op.error(DimError, f"index {value} is out of bounds for dimension {dim} with size {size}")
    return np.where(index < 0, index + size, index) if wrap else index


@register
class Gather(Indexing):
    """Pick elements of ``input`` along ``dim`` at ``index`` (same rank); the result has its shape.

    For ``dim = 0``: ``result[i][j] = input[index[i][j]][j]``; indices must be in range."""

    name = "tp.gather"
    operands = (Operand("input"), Operand("index"))
    attributes = (Attr("dim", AttrKind.INT),)

    def vjp(self, ctx: RuleContext, grads):  # scatter-add: every other dim indexed by its position
        shape, _ = ctx.input_meta[0]
        g, index = grads[0], ctx.input(1)
        rank = len(shape)
        if rank == 0:
            return (g, None)
        d = ctx.attrs["dim"] % rank
        coords = []
        for k in range(rank):
            if k == d:
                coords.append(index)
            else:
                pos = _grad.arange(ctx, index.shape[k], index.dtype, g)
                coords.append(pos.reshape([-1 if j == k else 1 for j in range(rank)]).expand(tuple(index.shape)))
        zero = ctx.zeros(shape, g.dtype, g)
        return (ctx.apply_op("tp.index_put", zero, g, *coords, dims=tuple(range(rank)), accumulate=True), None)

    def infer(self, types, attrs):
        t, index = types
        check_index_dtype(self, index, "index")
        if index.rank != t.rank:
            raise self.error(ShapeError, f"Index tensor must have the same number of dimensions as input "
                                         f"tensor (index {format_shape(index.shape)}, input "
                                         f"{format_shape(t.shape)})")
        dim = normalize_dim(self.name, attrs["dim"], t.rank)
        for d, (i, s) in enumerate(zip(index.shape, t.shape)):
            if d != dim and i is not None and s is not None and sym.gt(i, s, f"{self.name} index size"):
                raise self.error(ShapeError, f"Size does not match at dimension {d} expected index "
                                             f"{format_shape(index.shape)} to be no larger than self "
                                             f"{format_shape(t.shape)} apart from dimension {dim}")
        return (TensorType(index.shape, t.dtype),)

    def reference(self, arrays, attrs):
        a, index = arrays
        if a.ndim == 0:
            checked_indices(self, index, 1, 0, wrap=False)
            return a.copy()
        dim = normalize_dim(self.name, attrs["dim"], a.ndim)
        index = checked_indices(self, index, a.shape[dim], dim, wrap=False)
        crop = tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))
        return np.take_along_axis(a[crop], index, axis=dim)


@register
class IndexSelect(Indexing):
    """The slices of ``input`` along ``dim`` at the positions of a 1-D ``index``."""

    name = "tp.index_select"
    operands = (Operand("input"), Operand("index"))
    attributes = (Attr("dim", AttrKind.INT),)

    def vjp(self, ctx: RuleContext, grads):
        shape, _ = ctx.input_meta[0]
        g = grads[0]
        d = ctx.attrs["dim"] % max(len(shape), 1)
        zero = ctx.zeros(shape, g.dtype, g)
        index = ctx.input(1).reshape(-1) if len(ctx.input_meta[1][0]) == 0 else ctx.input(1)
        if len(shape) == 0:
            return (g, None)
        return (ctx.apply_op("tp.index_put", zero, g, index, dims=(d,), accumulate=True), None)

    def infer(self, types, attrs):
        t, index = types
        check_index_dtype(self, index, "index")
        if index.rank > 1:
            raise self.error(DimError, f"Index is supposed to be a vector, got shape "
                                       f"{format_shape(index.shape)}")
        dim = normalize_dim(self.name, attrs["dim"], t.rank)
        if t.rank == 0:
            return (t,)
        shape = list(t.shape)
        shape[dim] = index.shape[0] if index.rank == 1 else 1
        return (t.with_shape(tuple(shape)),)

    def reference(self, arrays, attrs):
        a, index = arrays
        if a.ndim == 0:
            checked_indices(self, index, 1, 0, wrap=False)
            return a.copy()
        dim = normalize_dim(self.name, attrs["dim"], a.ndim)
        index = checked_indices(self, index.reshape(-1), a.shape[dim], dim, wrap=False)
        return np.take(a, index, axis=dim)


def _index_dims(op: Op, dims: Sequence[int], count: int, rank: int) -> tuple[int, ...]:
    if count == 0:
        raise op.error(OpError, "expected at least one index tensor")
    if len(dims) != count:
        raise op.error(ShapeError, f"'dims' names {len(dims)} dimension(s) for {count} index tensor(s)")
    if any(d < 0 or d >= rank for d in dims) or list(dims) != sorted(set(dims)):
        raise op.error(DimError, f"'dims' must be increasing dimensions of a rank-{rank} input, "
                                 f"got {list(dims)}")
    return tuple(dims)


def advanced_index_shape(op: Op, shape: Sequence[Dim], index_shapes: Sequence[Sequence[Dim]],
                         dims: Sequence[int]) -> tuple[Dim, ...]:
    """Result shape of indexing ``dims`` of ``shape`` with broadcast index tensors: the
    broadcast index shape replaces adjacent indexed dims in place, and leads when they are
    separated (numpy's placement rule)."""
    dims = _index_dims(op, dims, len(index_shapes), len(shape))
    try:
        idx = broadcast_shapes(op.name, *index_shapes)
    except ShapeError:
        raise op.error(IndexShapeError, "shape mismatch: indexing tensors could not be broadcast "
                                        "together with shapes "
                                        + ", ".join(format_shape(s) for s in index_shapes)) from None
    rest = [s for d, s in enumerate(shape) if d not in dims]
    if list(dims) == list(range(dims[0], dims[0] + len(dims))):
        return tuple(shape[:dims[0]]) + idx + tuple(shape[dims[-1] + 1:])
    return idx + tuple(rest)


def numpy_key(op: Op, shape: Sequence[int], indices: Sequence[np.ndarray],
              dims: Sequence[int]) -> tuple | None:
    """The numpy key selecting what ``tp.index`` selects, with indices bounds-checked; None
    when nothing is selected: the indices broadcast to no element (none is checked, as in
    PyTorch) or a dimension that is not indexed is empty (only indices into empty
    dimensions are checked)."""
    if 0 in np.broadcast_shapes(*[i.shape for i in indices]):
        return None
    empty = any(s == 0 for d, s in enumerate(shape) if d not in dims)
    key: list = [slice(None)] * len(shape)
    for index, d in zip(indices, dims):
        if not empty or shape[d] == 0:
            key[d] = checked_indices(op, index, shape[d], d, wrap=True)
    return None if empty else tuple(key)


@register
class Index(Indexing):
    """Advanced indexing: index tensors, broadcast together, pick elements along ``dims``.

    Negative indices count from the end. Adjacent ``dims`` are replaced in place by the
    broadcast index shape; separated ones put it first (numpy's rule)."""

    name = "tp.index"
    operands = (Operand("input"), Operand("indices", variadic=True))
    attributes = (Attr("dims", AttrKind.INTS, doc="increasing dimensions, one per index tensor"),)

    def vjp(self, ctx: RuleContext, grads):  # added back where the elements were read (repeats add up)
        shape, _ = ctx.input_meta[0]
        g = grads[0]
        indices = [ctx.input(i) for i in range(1, len(ctx.input_meta))]
        zero = ctx.zeros(shape, g.dtype, g)
        return (ctx.apply_op("tp.index_put", zero, g, *indices, dims=ctx.attrs["dims"], accumulate=True),
                *[None] * len(indices))

    def infer(self, types, attrs):
        t, *indices = types
        for i in indices:
            check_index_dtype(self, i, "tensors used as indices")
        shape = advanced_index_shape(self, t.shape, [i.shape for i in indices], attrs["dims"])
        return (t.with_shape(shape),)

    def reference(self, arrays, attrs):
        a, *indices = arrays
        key = numpy_key(self, a.shape, indices, attrs["dims"])
        if key is None:
            return np.zeros(advanced_index_shape(self, a.shape, [i.shape for i in indices], attrs["dims"]),
                            a.dtype)
        return a[key]


@register
class IndexPut(Indexing):
    """A copy of ``input`` with ``values`` written (or added) where ``tp.index`` would read.

    ``values`` has the shape ``tp.index`` gives; with repeated indices the last write wins,
    or, with ``accumulate``, all of them add up."""

    name = "tp.index_put"
    operands = (Operand("input"), Operand("values"), Operand("indices", variadic=True))
    attributes = (Attr("dims", AttrKind.INTS, doc="increasing dimensions, one per index tensor"),
                  Attr("accumulate", AttrKind.BOOL, False, doc="add instead of overwrite"))

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        indices = [ctx.input(i) for i in range(2, len(ctx.input_meta))]
        dims = ctx.attrs["dims"]
        gi = gv = None
        if ctx.needs(0):
            if ctx.attrs["accumulate"]:
                gi = g
            else:  # the written elements came from values
                vshape, _ = ctx.input_meta[1]
                gi = ctx.apply_op("tp.index_put", g, ctx.zeros(vshape, g.dtype, g), *indices, dims=dims)
        if ctx.needs(1):  # summed to the values' shape by the engine where they broadcast
            gv = ctx.apply_op("tp.index", g, *indices, dims=dims)
        return (gi, gv, *[None] * len(indices))

    def infer(self, types, attrs):
        t, values, *indices = types
        for i in indices:
            check_index_dtype(self, i, "tensors used as indices")
        shape = advanced_index_shape(self, t.shape, [i.shape for i in indices], attrs["dims"])
        if values.dtype is not t.dtype:
            raise self.error(DTypeError, f"values have dtype {values.dtype.name}, input "
                                         f"{t.dtype.name}")
        if values.rank != len(shape) or any(a is not None and b is not None
                                            and sym.eq(a, b, f"{self.name} values") is False
                                            for a, b in zip(values.shape, shape)):
            raise self.error(ShapeError, f"values of shape {format_shape(values.shape)} do not match "
                                         f"the indexing result of shape {format_shape(shape)}")
        return (t,)

    def reference(self, arrays, attrs):
        a, values, *indices = arrays
        out = a.copy()
        key = numpy_key(self, a.shape, indices, attrs["dims"])
        if key is None:
            return out
        if attrs["accumulate"]:
            np.add.at(out, key, values)
        else:
            out[key] = values
        return out


class Triangle(Indexing):
    operands = (Operand("input"),)
    attributes = (Attr("diagonal", AttrKind.INT, 0, doc="0: main diagonal; >0 above; <0 below"),)

    def infer(self, types, attrs):
        t = types[0]
        if t.rank < 2:
            raise self.error(ShapeError, f"input tensor must have at least 2 dimensions, got shape "
                                         f"{format_shape(t.shape)}")
        return (t,)


@register
class Tril(Triangle):
    """Keep the elements on and below the ``diagonal`` of the last two dimensions; zero the rest."""

    name = "tp.tril"

    def vjp(self, ctx: RuleContext, grads):
        return (ctx.apply_op("tp.tril", grads[0], diagonal=ctx.attrs["diagonal"]),)

    def reference(self, arrays, attrs):
        return np.tril(arrays[0], attrs["diagonal"])


@register
class Triu(Triangle):
    """Keep the elements on and above the ``diagonal`` of the last two dimensions; zero the rest."""

    name = "tp.triu"

    def vjp(self, ctx: RuleContext, grads):
        return (ctx.apply_op("tp.triu", grads[0], diagonal=ctx.attrs["diagonal"]),)

    def reference(self, arrays, attrs):
        return np.triu(arrays[0], attrs["diagonal"])


@register
class Nonzero(Indexing):
    """Coordinates of the nonzero elements: an int64 ``[n, rank]`` tensor, ``n`` dynamic.

    Rows come in row-major order; ``n`` is known only at run time (under capture, a size
    symbol the program computes). Integer coordinates: no gradient."""

    name = "tp.nonzero"
    differentiable = False
    data_dependent = True
    data_size = "the number of nonzero elements"
    operands = (Operand("input"),)

    def infer(self, types, attrs):
        return (TensorType((None, types[0].rank), dt.int64),)

    def reference(self, arrays, attrs):
        return np.argwhere(arrays[0]).astype(np.int64)


@register
class Unique(Indexing):
    """The distinct elements in ascending order, each element's index among them, and their counts.

    Results: ``values`` (1-D: the distinct elements of the flattened input, ascending, NaNs
    last and each one distinct, as PyTorch's), ``inverse`` (int64, the input's shape: where
    each element is in ``values``) and ``counts`` (int64, like ``values``: how often each
    occurs). Their length is known only at run time (under capture, a size symbol the program
    computes). Not differentiable: PyTorch defines no gradient for it either."""

    name = "tp.unique"
    differentiable = False
    data_dependent = True
    data_size = "the number of distinct elements"
    operands = (Operand("input"),)
    results = ("values", "inverse", "counts")

    def infer(self, types, attrs):
        t = types[0]
        return (TensorType((None,), t.dtype), TensorType(t.shape, dt.int64), TensorType((None,), dt.int64))

    def reference(self, arrays, attrs):
        x = np.asarray(arrays[0])
        dtype = dt.from_numpy_dtype(x.dtype)
        flat = x.reshape(-1).astype(dtype.computes_in.np_dtype, copy=False)
        values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
        return (values.astype(x.dtype), inverse.reshape(x.shape).astype(np.int64), counts.astype(np.int64))
