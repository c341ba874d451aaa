"""Indexing functions: ``tensor[key]`` and its functional update, masks, gathers, triangles
and the coordinates of nonzero elements.

A key becomes at most four kinds of steps, each one tp op: a strided ``tp.slice`` for the
ints and slices, a ``tp.reshape`` that drops the int dimensions and adds the ``None`` ones,
one ``tp.index`` per 0-d index tensor whose value is not known yet (PyTorch applies those
like ints, before the other index tensors; eager ones are read as ints), and one
``tp.index`` for the advanced indices (integer tensors and lists, and boolean masks turned
into coordinates by ``tp.nonzero``). ``setitem`` writes a value back through the same steps in
reverse (``tp.index_put``, reshape, ``tp.slice_update``) and returns the whole new tensor,
which ``Tensor.__setitem__`` assigns in place.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp import registry
from ..dialects.tp import symbolic as sym
from ..dialects.tp.ops.shape import slice_length, clamp_bound
from ..dialects.tp.errors import DTypeError, ShapeError
from ..dialects.tp.ops.shape import SLICE_END
from ..dialects.tp.shapes import broadcast_shapes, format_shape, normalize_dim
from ._helpers import as_tensor_arg, is_scalar, scalar_tensor
from .elementwise import add, lt, where
from .shape import broadcast_tensors, expand_attr, flatten, has_shape, reshape_to, slice_dim
from .. import _views
from ._public import exported, public

# getitem and setitem serve Tensor.__getitem__ / __setitem__ and are not re-exported.


# --- the steps a key turns into ------------------------------------------------------------

def _result_shape(op: str, operands: Sequence[Tensor], **attrs: Any) -> tuple[Any, ...]:
    """The shape ``op`` would give, from inference alone (nothing runs or is recorded)."""
    o = registry.lookup(op)
    shape = o.verify([t._tensor_type() for t in operands], o.normalize_attrs(attrs))[0].shape
    return tuple(sym.as_user_size(d) if sym.is_symbolic(d) else d for d in shape)


class _SliceStep:
    def __init__(self, starts: list[int], ends: list[int], steps: list[int]):
        self.attrs = {"starts": tuple(starts), "ends": tuple(ends), "steps": tuple(steps)}

    def shape(self, x: Tensor) -> tuple[Any, ...]:
        return _result_shape("tp.slice", [x], **self.attrs)

    def get(self, x: Tensor) -> Tensor:
        return apply("tp.slice", x, **self.attrs)

    def put(self, base: Tensor, part: Tensor, accumulate: bool) -> Tensor:
        return apply("tp.slice_update", base, part, **self.attrs)


class _ReshapeStep:
    def __init__(self, shape: list[Any]):
        self.target = tuple(shape)

    def shape(self, x: Tensor) -> tuple[Any, ...]:
        return self.target

    def get(self, x: Tensor) -> Tensor:
        return reshape_to(x, self.target, "getitem")

    def put(self, base: Tensor, part: Tensor, accumulate: bool) -> Tensor:
        return reshape_to(part, tuple(base.shape), "setitem")


class _IndexStep:
    def __init__(self, indices: list[Tensor], dims: list[int]):
        self.indices, self.dims = indices, tuple(dims)

    def shape(self, x: Tensor) -> tuple[Any, ...]:
        return _result_shape("tp.index", [x, *self.indices], dims=self.dims)

    def get(self, x: Tensor) -> Tensor:
        return apply("tp.index", x, *self._on(x), dims=self.dims)

    def put(self, base: Tensor, part: Tensor, accumulate: bool) -> Tensor:
        return apply("tp.index_put", base, part, *self._on(base), dims=self.dims, accumulate=accumulate)

    def _on(self, x: Tensor) -> list[Tensor]:
        """The indices on ``x``'s device: as in PyTorch, host index tensors (and the ones made
        from ints and lists in the key) may index a device tensor."""
        if not _views.is_device(x):
            return self.indices
        return [i.to(x.device) for i in self.indices]


# --- parsing a key -------------------------------------------------------------------------

_BAD_INDEX_TENSOR = "tensors used as indices must be long, int, byte or bool tensors"


def _key_items(key: Any) -> tuple[Any, ...]:
    if isinstance(key, tuple):
        return key
    # a list holding slices, None, Ellipsis or sequences is a tuple (PyTorch's legacy rule)
    if isinstance(key, list) and any(k is None or k is Ellipsis or isinstance(
            k, (slice, list, tuple, Tensor, np.ndarray)) for k in key):
        return tuple(key)
    return (key,)


def _classify(item: Any) -> tuple[str, Any]:
    if item is Ellipsis:
        return "ellipsis", None
    if item is None:
        return "none", None
    if isinstance(item, (bool, np.bool_)):
        return "bool", bool(item)
    if isinstance(item, (int, np.integer)):
        return "int", int(item)
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, (list, np.ndarray)):
        array = np.asarray(item)
        if array.size == 0 and array.dtype.kind in "fO":
            array = array.astype(np.int64)
        if array.dtype.kind in "iu":
            array = array.astype(np.int64)
        elif array.dtype.kind != "b":
            raise IndexError(_BAD_INDEX_TENSOR)
        item = Tensor._wrap(array)
    if isinstance(item, Tensor):
        if item.dtype in (dt.bool_, dt.uint8):
            return "mask", item if item.dtype is dt.bool_ else apply("tp.cast", item, dtype=dt.bool_)
        if item.dtype in (dt.int32, dt.int64):
            if item.ndim == 0 and _views.has_memory(item):
                return "int", int(_views.array(item))  # PyTorch reads an eager 0-d index as an int
            return ("select" if item.ndim == 0 else "index"), item
        raise IndexError(_BAD_INDEX_TENSOR)
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                     f"are valid indices (got {type(item).__name__})")


def _mask_coordinates(mask: Tensor) -> list[Tensor]:
    """One 1-D index tensor per dimension of ``mask``: the coordinates of its true elements."""
    coords = apply("tp.nonzero", mask)
    k = mask.ndim
    if k == 1:
        return [reshape_to(coords, (None,), "nonzero")]
    return [reshape_to(slice_dim(coords, 1, j, j + 1), (None,), "nonzero") for j in range(k)]


def _slice_bounds(item: slice, size: Any) -> tuple[int, int, int, Any]:
    step = 1 if item.step is None else operator.index(item.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    if isinstance(size, sym.SymInt) or isinstance(item.start, sym.SymInt) or isinstance(item.stop, sym.SymInt):
        if size is None:
            size = SLICE_END  # unknown size: bounds are normalized at run time
        # symbolic sizes or bounds: normalized bounds as expressions (settled by the ranges)
        start = 0 if item.start is None else item.start
        stop = size if item.stop is None else item.stop
        first = clamp_bound(sym.as_size(start), sym.as_size(size))
        last = sym.size_max(clamp_bound(sym.as_size(stop), sym.as_size(size)), first)
        n = slice_length(sym.as_size(size), first, last, step)
        return (sym.as_user_size(first), sym.as_user_size(last), step, sym.as_user_size(n))
    if size is not None:
        start, stop, step = slice(item.start, item.stop, step).indices(size)
        stop = max(stop, start)
        return start, stop, step, len(range(start, stop, step))
    start = 0 if item.start is None else operator.index(item.start)
    stop = SLICE_END if item.stop is None else operator.index(item.stop)
    return start, stop, step, None


def _plan(x: Tensor, key: Any) -> list[Any]:
    """The steps that compute ``x[key]``."""
    items = [_classify(k) for k in _key_items(key)]
    rank, shape = x.ndim, tuple(x.shape)
    consumed = sum(1 if kind in ("int", "slice", "select", "index") else v.ndim if kind == "mask" else 0
                   for kind, v in items)
    if consumed > rank:
        if rank == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {rank}")
    starts, ends, steps = [0] * rank, [SLICE_END if s is None else s for s in shape], [1] * rank
    sliced = list(shape)
    view: list[Any] = []  # the shape after the slice and reshape steps
    selects: list[tuple[int, Tensor]] = []
    advanced: list[tuple[int, Tensor]] = []
    d = 0
    seen_ellipsis = False
    for kind, v in items:
        if kind == "ellipsis":
            if not seen_ellipsis:
                for _ in range(rank - consumed):
                    view.append(shape[d])
                    d += 1
            seen_ellipsis = True
        elif kind == "none":
            view.append(1)
        elif kind == "bool":
            advanced.append((len(view), Tensor._wrap(np.zeros(1 if v else 0, np.int64))))
            view.append(1)
        elif kind == "int":
            size = shape[d]
            if size is not None:
                if not -size <= v < size:
                    raise IndexError(f"index {v} is out of bounds for dimension {d} with size {size}")
                v = v + size if v < 0 else v
            starts[d], ends[d] = v, (v + 1 if v != -1 else SLICE_END)
            sliced[d] = 1
            d += 1
        elif kind == "slice":
            starts[d], ends[d], steps[d], sliced[d] = _slice_bounds(v, shape[d])
            view.append(sliced[d])
            d += 1
        elif kind in ("select", "index"):
            (selects if kind == "select" else advanced).append((len(view), v))
            view.append(shape[d])
            d += 1
        else:  # a boolean mask over the next v.ndim dimensions
            for j, (m, s) in enumerate(zip(v.shape, shape[d:d + v.ndim])):
                if m is not None and s is not None and m != s:
                    raise IndexError(f"The shape of the mask {format_shape(v.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor {format_shape(shape)} "
                                     f"at index {d + j}")
            if v.ndim == 0:
                advanced.append((len(view), _mask_coordinates(reshape_to(v, (1,), "getitem"))[0]))
                view.append(1)
            for j, coords in enumerate(_mask_coordinates(v) if v.ndim else ()):
                advanced.append((len(view), coords))
                view.append(shape[d + j])
            d += v.ndim
    view.extend(shape[d:])

    plan: list[Any] = []
    full = all(sym.known_eq(b, 0) and s == 1 and (sym.known_eq(e, SLICE_END) if n is None else sym.known_eq(e, n))
               for b, e, s, n in zip(starts, ends, steps, shape))
    if not full:
        plan.append(_SliceStep(starts, ends, steps))
    if view != sliced:
        plan.append(_ReshapeStep(view))
    for pos, index in sorted(selects, key=lambda p: -p[0]):
        plan.append(_IndexStep([index], [pos]))
        advanced = [(p - 1 if p > pos else p, t) for p, t in advanced]
    if advanced:
        plan.append(_IndexStep([t for _, t in advanced], [p for p, _ in advanced]))
    return plan


# --- getitem and setitem ---------------------------------------------------------------------

def getitem(tensor: Tensor, key: Any) -> Tensor:
    """``tensor[key]`` with PyTorch's rules: ints, slices (positive steps), None, Ellipsis,
    integer tensors and lists (broadcast together), and boolean masks."""
    x = as_tensor_arg(tensor, "getitem")
    for step in _plan(x, key):
        x = step.get(x)
    return x


def _value_tensor(x: Tensor, value: Any, op: str) -> Tensor:
    if isinstance(value, Tensor):
        v = value if value.dtype is x.dtype else apply("tp.cast", value, dtype=x.dtype)
    elif is_scalar(value):
        v = scalar_tensor(value, x.dtype, op)
    else:
        raise TypeError(f"can't assign a {type(value).__name__} to a {x.type()}")
    if _views.is_device(x) and not _views.is_device(v) and _views.has_memory(v):
        v = v.to(x.device)  # a host value written into a device tensor (copy_'s rule)
    return v


def _strip_leading_ones(v: Tensor, rank: int) -> tuple[Any, ...]:
    shape = tuple(v.shape)
    while len(shape) > rank and not sym.data_dependent(shape[0]) and shape[0] == 1:
        shape = shape[1:]
    return shape


def _fits(shape: Sequence[Any], target: Sequence[Any]) -> bool:
    return len(shape) <= len(target) and all(
        a is None or b is None or sym.known_eq(a, b) or (a == b if sym.data_dependent(a) else (a == 1 or a == b))
        for a, b in zip(reversed(shape), reversed(target)))


def _fit(v: Tensor, target: Sequence[Any], op: str, like: Callable[[], Tensor]) -> Tensor:
    """``v`` broadcast to ``target`` after dropping leading size-1 dimensions, as PyTorch
    does for assigned values. ``like()`` gives a tensor of the target shape, used when a
    size known only at run time must be broadcast to."""
    target = tuple(target)
    shape = _strip_leading_ones(v, len(target))
    if not _fits(shape, target):
        raise ShapeError(f"shape mismatch: value tensor of shape {format_shape(v.shape)} cannot be "
                         f"broadcast to indexing result of shape {format_shape(target)}")
    v = reshape_to(v, shape, op)
    if has_shape(v, target):
        return v
    lead = len(target) - len(shape)
    if any(t is None and (i < lead or shape[i - lead] is not None) for i, t in enumerate(target)):
        # the sizes are data, not attributes: broadcast elementwise against the target
        return apply("tp.where", Tensor._wrap(np.array(True)), v, like())
    return apply("tp.broadcast_to", v, shape=expand_attr(op, v, target))


def _mask_where(x: Tensor, key: Any, v: Tensor) -> Tensor | None:
    """``x[mask] = v`` as ``where(mask, v, x)`` when the value needs no element count: no
    data-dependent shape, so it also captures into a static graph."""
    items = _key_items(key)
    if len(items) != 1 or not isinstance(items[0], Tensor) or items[0].dtype is not dt.bool_:
        return None
    mask = items[0]
    k = mask.ndim
    if k == 0 or k > x.ndim or any(m is not None and s is not None and m != s
                                   for m, s in zip(mask.shape, x.shape)):
        return None
    rest = tuple(x.shape[k:])
    shape = _strip_leading_ones(v, len(rest))
    if not _fits(shape, rest):
        return None
    cond = reshape_to(mask, tuple(mask.shape) + (1,) * len(rest), "setitem")
    return apply("tp.where", cond, reshape_to(v, shape, "setitem"), x)


def _update(x: Tensor, plan: list[Any], value: Tensor, accumulate: bool, op: str) -> Tensor:
    """``x`` with ``value`` written (or added) where ``plan`` selects, as a new tensor."""
    v = value
    bases = [x]
    for step in plan[:-1]:
        bases.append(step.get(bases[-1]))
    if not plan:
        v = _fit(v, tuple(x.shape), op, lambda: x)
        if accumulate:
            return apply("tp.add", x, v)
        # a copy, so the tensor never shares the assigned value's storage
        return apply("tp.cast", v, dtype=x.dtype) if v is value else v
    last = plan[-1]
    v = _fit(v, last.shape(bases[-1]), op, lambda: last.get(bases[-1]))
    if accumulate and not isinstance(last, _IndexStep):
        v = apply("tp.add", last.get(bases[-1]), v)
        accumulate = False
    for step, base in zip(reversed(plan), reversed(bases)):
        v = step.put(base, v, accumulate)
        accumulate = False
    return v


def setitem(tensor: Tensor, key: Any, value: Any) -> Tensor:
    """The value of ``tensor`` after ``tensor[key] = value``, as a new tensor: the value is
    converted to the tensor's dtype and broadcast to the indexed shape."""
    x = as_tensor_arg(tensor, "setitem")
    v = _value_tensor(x, value, "setitem")
    fast = _mask_where(x, key, v)
    if fast is not None:
        return fast
    return _update(x, _plan(x, key), v, False, "setitem")


@public
def index_put(input: Tensor, indices: Sequence[Tensor], values: Tensor, accumulate: bool = False) -> Tensor:
    """``input`` with ``values`` written at ``input[indices]`` (added with ``accumulate``,
    repeated indices then sum)."""
    x = as_tensor_arg(input, "index_put")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be a tuple of Tensors, not "
                        f"{type(indices).__name__}")
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"index_put(): expected Tensor as element {i} in argument 1, but got "
                            f"{type(t).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' must be a Tensor, not {type(values).__name__}")
    if values.dtype is not x.dtype:
        raise DTypeError(f"Index put requires the source and destination dtypes match, got "
                         f"{x.dtype.name} for the destination and {values.dtype.name} for the source.")
    return _update(x, _plan(x, tuple(indices)), values, bool(accumulate), "index_put")


# --- masks -----------------------------------------------------------------------------------

@public(method=True, inplace=True)
def masked_fill(input: Any, mask: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` where ``mask`` is true (the mask broadcasts); ``value`` is a
    number or a 0-d tensor, converted to ``input``'s dtype."""
    x = as_tensor_arg(input, "masked_fill")
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {got}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                             f"with {value.ndim} dimension(s).")
    elif not is_scalar(value):
        raise TypeError(f"masked_fill(): argument 'value' must be a number or a 0-d Tensor, not "
                        f"{type(value).__name__}")
    return apply("tp.where", mask, _value_tensor(x, value, "masked_fill"), x)


@public(method=True)
def masked_select(input: Any, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` is true, as a 1-D tensor (both broadcast)."""
    x = as_tensor_arg(input, "masked_select")
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise DTypeError("masked_select: expected BoolTensor for mask")
    xb, mb = broadcast_tensors(x, mask)
    return getitem(xb, mb)


@public(method=True)
def nonzero(input: Any, *, as_tuple: bool = False) -> Any:
    """Coordinates of the nonzero elements: an ``[n, ndim]`` int64 tensor, or with
    ``as_tuple`` one 1-D tensor per dimension."""
    x = as_tensor_arg(input, "nonzero")
    if not as_tuple:
        return apply("tp.nonzero", x)
    return tuple(_mask_coordinates(reshape_to(x, (1,), "nonzero") if x.ndim == 0 else x))


@public
def argwhere(input: Any) -> Tensor:
    return apply("tp.nonzero", as_tensor_arg(input, "argwhere"))


@public(method=True)
def unique(input: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Any:
    """The distinct elements of the flattened input in ascending order; with
    ``return_inverse`` also each element's index among them (the input's shape), with
    ``return_counts`` also how often each occurs. ``sorted=False`` gives the same sorted
    result (PyTorch leaves that order unspecified)."""
    x = as_tensor_arg(input, "unique")
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported: unique rows or slices need their own "
                                  "comparison; call unique on the flattened tensor (dim=None)")
    values, inverse, counts = apply("tp.unique", x)
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


# --- gathers and triangles -----------------------------------------------------------------

@public(method=True)
def gather(input: Any, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``input`` picked along ``dim`` at ``index`` (same rank; the result has its shape)."""
    return apply("tp.gather", as_tensor_arg(input, "gather"), index, dim=dim)


def _scatter(op: str, input: Any, dim: int, index: Tensor, src: Any, accumulate: bool) -> Tensor:
    """``input`` with ``src`` written (or added) along ``dim`` at ``index``: element ``pos`` of
    ``src`` (within ``index``'s shape) goes to ``pos`` with its ``dim`` coordinate replaced by
    ``index[pos]``, as a ``tp.index_put`` over all dims."""
    from . import creation
    from . import shape as shape_ops

    x = as_tensor_arg(input, op)
    if not isinstance(index, Tensor) or index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    if index.ndim != x.ndim and not (x.ndim == 0 and index.ndim <= 1):
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor")
    if x.ndim == 0:
        x1 = shape_ops.reshape(x, (1,))
        return shape_ops.reshape(_scatter(op, x1, 0, shape_ops.reshape(index, (-1,)), src if not isinstance(src, Tensor)
                                  else shape_ops.reshape(src, (-1,)), accumulate), ())
    d = normalize_dim(op, dim, x.ndim)
    shape = tuple(index.shape)
    if isinstance(src, Tensor):
        if src.ndim != x.ndim:
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as src tensor")
        if any(i > n for i, n in zip(shape, src.shape)):
            raise RuntimeError(f"{op}(): Expected index {list(shape)} to be smaller than src {list(src.shape)} "
                               f"apart from dimension {d}")
        values = src
        if tuple(src.shape) != shape:
            values = apply("tp.slice", src, starts=(0,) * src.ndim, ends=shape, steps=(1,) * src.ndim)
        if values.dtype is not x.dtype:
            from . import elementwise

            values = elementwise.cast(values, x.dtype)
    else:
        values = creation.full(shape, src, dtype=x.dtype, device=x.device)
    coords = []
    for k in range(x.ndim):
        if k == d:
            coords.append(index)
            continue
        pos = creation.arange(shape[k], dtype=index.dtype, device=x.device)
        coords.append(shape_ops.expand(shape_ops.reshape(pos, tuple(-1 if j == k else 1 for j in range(x.ndim))), shape))
    return apply("tp.index_put", x, values, *coords, dims=tuple(range(x.ndim)), accumulate=accumulate)


@public(method=True, inplace=True)
def scatter(input: Any, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with ``src`` (a tensor, or the number ``value``) written along
    ``dim`` at ``index``; ``reduce="add"`` adds instead. Which write wins where ``index``
    repeats is unspecified, as in PyTorch."""
    if reduce not in (None, "add"):
        raise ValueError(f"scatter(): reduce={reduce!r} is not supported (use scatter_add, or reduce='add')")
    if src is None:
        if value is None:
            raise TypeError("scatter() needs src (a tensor) or value (a number)")
        src = value
    return _scatter("scatter", input, dim, index, src, reduce == "add")


@public(method=True, inplace=True)
def scatter_add(input: Any, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index`` (repeats add up)."""
    return _scatter("scatter_add", input, dim, index, src, True)


@public(method=True)
def index_select(input: Any, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` along ``dim`` at the positions in the 1-D ``index``."""
    return apply("tp.index_select", as_tensor_arg(input, "index_select"), index, dim=dim)


@public
def take_along_dim(input: Any, indices: Tensor, dim: int | None = None) -> Tensor:
    """``input`` picked at ``indices`` along ``dim``, the other dimensions broadcast and
    negative indices counting from the end; with no ``dim``, the flattened input at the
    flattened indices (which must then be in range, as in PyTorch)."""
    x = as_tensor_arg(input, "take_along_dim")
    if dim is None:
        return apply("tp.gather", flatten(x), flatten(indices), dim=0)
    if x.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim(): input and indices should have the same number of "
                         f"dimensions, but got {x.ndim} dimensions for input, and {indices.ndim} "
                         f"dimensions for indices")
    d = normalize_dim("take_along_dim", dim, x.ndim)
    wanted = list(indices.shape)
    wanted[d] = x.shape[d]
    shape = broadcast_shapes("take_along_dim", wanted, tuple(x.shape))
    if tuple(x.shape) != shape:
        x = apply("tp.broadcast_to", x, shape=expand_attr("take_along_dim", x, shape))
    index_shape = list(shape)
    index_shape[d] = indices.shape[d]
    if tuple(indices.shape) != tuple(index_shape):
        indices = apply("tp.broadcast_to", indices, shape=expand_attr("take_along_dim", indices, index_shape))
    size = x.shape[d]
    if size is None:
        raise ShapeError(f"take_along_dim: dimension {d} of {format_shape(x.shape)} is known only at "
                         f"run time")
    indices = where(lt(indices, 0), add(indices, size), indices)
    return apply("tp.gather", x, indices, dim=d)


@public(method=True, inplace=True, array_function={"tril": lambda m, k=0: ((m, k), {})})
def tril(input: Any, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dimensions (on and below ``diagonal``); zeros above."""
    return apply("tp.tril", as_tensor_arg(input, "tril"), diagonal=diagonal)


@public(method=True, inplace=True, array_function={"triu": lambda m, k=0: ((m, k), {})})
def triu(input: Any, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dimensions (on and above ``diagonal``); zeros below."""
    return apply("tp.triu", as_tensor_arg(input, "triu"), diagonal=diagonal)


__all__ = exported(__name__)  # the names declared @public above
