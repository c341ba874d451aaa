"""Shape functions: reshapes, transposes, broadcasting, joining, splitting and tiling.

Each maps PyTorch's signature onto a few general tp ops through
:func:`tensorplay._dispatch.apply`: squeeze, unsqueeze, flatten and view are ``tp.reshape``;
transpose, ``t`` and movedim are ``tp.permute``; split, chunk, narrow and unbind are
``tp.slice`` (plus a reshape); stack is reshape plus ``tp.concat``; repeat and tile are
``tp.broadcast_to`` between two reshapes; roll is two slices joined by ``tp.concat``, rot90 is
flip and transpose, diff is a difference of two slices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _views
from .._dispatch import apply, current_handler
from .._grad_mode import is_grad_enabled
from .._tensor import Size, Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp import symbolic as sym
from ..dialects.tp.errors import OpAttributeError, DimError, ShapeError
from ..dialects.tp.ops.shape import SLICE_END
from ..dialects.tp.shapes import broadcast_shapes as _broadcast_shapes
from ..dialects.tp.shapes import format_shape, normalize_dim, normalize_dims
from ._helpers import as_tensor_arg, int_tuple
from ._public import exported, public


# --- helpers shared with the indexing functions ---------------------------------------------

def sizes_arg(op: str, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """Sizes or dims given as ``f(x, 2, 3)``, ``f(x, (2, 3))`` or ``f(x, name=(2, 3))``."""
    if name in kwargs:
        if args:
            raise TypeError(f"{op}() got multiple values for argument '{name}'")
        args = (kwargs.pop(name),)
    if kwargs:
        raise TypeError(f"{op}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    return int_tuple(op, name, args)


def has_shape(x: Tensor, shape: Sequence[Any]) -> bool:
    """Whether ``x`` certainly has ``shape`` (no ``None`` in it): symbolic sizes compare
    without recording a guard, so a shortcut taken on this never constrains a capture."""
    current = tuple(x.shape)
    return len(current) == len(shape) and None not in shape and all(
        sym.known_eq(a, b) for a, b in zip(current, shape))


def reshape_to(x: Tensor, shape: Sequence[Any], op: str = "reshape") -> Tensor:
    """``x`` under ``shape``, which may hold one dynamic (``None``) size; no op when the
    shape is already ``shape``."""
    shape = tuple(shape)
    if has_shape(x, shape):
        return x
    if sum(d is None for d in shape) > 1:
        raise ShapeError(f"{op}: cannot reshape to {format_shape(shape)}: a reshape can infer only one "
                         f"size known only at run time")
    return apply("tp.reshape", x, shape=tuple(-1 if d is None else d for d in shape))


def slice_dim(x: Tensor, dim: int, start: int, end: int, step: int = 1) -> Tensor:
    """Elements ``start:end:step`` of ``x`` along ``dim`` (other dimensions whole)."""
    starts, ends, steps = [0] * x.ndim, [SLICE_END] * x.ndim, [1] * x.ndim
    starts[dim], ends[dim], steps[dim] = start, end, step
    return apply("tp.slice", x, starts=starts, ends=ends, steps=steps)


@public(method=True)
def select(x: Tensor, dim: int, index: int) -> Tensor:
    """``x`` at ``index`` along ``dim``, that dimension removed (a view; ``torch.select``)."""
    x = _tensor(x, "select")
    if x.ndim == 0:
        raise DimError("select() cannot be applied to a 0-dim tensor.")
    dim = normalize_dim("select", dim, x.ndim)
    size = x.shape[dim]
    index = int(index)
    if size is not None and type(size) is int:
        if not -size <= index < size:
            raise IndexError(f"select(): index {index} out of range for tensor of size {list(x.shape)} at "
                             f"dimension {dim}")
        index %= size
    return _select(x, dim, index)


def _select(x: Tensor, dim: int, index: int) -> Tensor:
    part = slice_dim(x, dim, index, index + 1 if index != -1 else SLICE_END)
    return reshape_to(part, tuple(x.shape[:dim]) + tuple(x.shape[dim + 1:]), "select")


def expand_attr(op: str, x: Tensor, shape: Sequence[Any]) -> tuple[int, ...]:
    """``shape`` as a ``tp.broadcast_to`` attribute: a dynamic size is -1 (kept from ``x``)."""
    lead = len(shape) - x.ndim
    out = []
    for i, d in enumerate(shape):
        if d is None:
            if i < lead or x.shape[i - lead] is not None:
                raise ShapeError(f"{op}: cannot broadcast {format_shape(x.shape)} to "
                                 f"{format_shape(shape)}: a new size is known only at run time")
            d = -1
        out.append(d)
    return tuple(out)


def _tensor(x: Any, op: str) -> Tensor:
    return as_tensor_arg(x, op)


def _tensor_list(op: str, tensors: Any) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return list(tensors)


def _common_dtype(tensors: Sequence[Tensor]) -> dt.DType:
    out = tensors[0].dtype
    for t in tensors[1:]:
        out = dt.promote_types(out, t.dtype)
    return out


def _cast(x: Tensor, dtype: dt.DType) -> Tensor:
    return x if x.dtype is dtype else apply("tp.cast", x, dtype=dtype)


def _dim_arg(dim: Any, axis: Any, default: int = 0) -> int:
    return axis if dim is None and axis is not None else (default if dim is None else dim)


# --- reshapes ----------------------------------------------------------------------------

@public(method=True, array_function={"reshape": lambda a, shape=None, newshape=None, **k: (
        (a, tuple(np.atleast_1d(shape if shape is not None else newshape).tolist())), {})})
def reshape(input: Any, *shape: Any, **kwargs: Any) -> Tensor:
    """``input``'s elements in row-major order under ``shape``; one size may be -1.

    >>> import tensorplay as tp
    >>> tp.arange(6).reshape(2, -1).shape
    tensorplay.Size([2, 3])
    """
    x = _tensor(input, "reshape")
    return apply("tp.reshape", x, shape=sizes_arg("reshape", "shape", shape, kwargs))


@public(top=False, method=True)
def view_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape_to(_tensor(input, "view_as"), tuple(other.shape), "view_as")


@public(top=False, method=True)
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape_to(_tensor(input, "reshape_as"), tuple(other.shape), "reshape_as")


@public(method=True, array_function={"expand_dims": lambda a, axis: ((a, axis), {})})
def unsqueeze(input: Any, dim: int) -> Tensor:
    """``input`` with a new size-1 dimension at ``dim``."""
    x = _tensor(input, "unsqueeze")
    d = normalize_dim("unsqueeze", dim, x.ndim + 1)
    shape = list(x.shape)
    shape.insert(d, 1)
    return apply("tp.reshape", x, shape=_reshape_attr("unsqueeze", shape))


def _reshape_attr(op: str, shape: Sequence[Any]) -> tuple[int, ...]:
    if sum(d is None for d in shape) > 1:
        raise ShapeError(f"{op}: cannot reshape to {format_shape(shape)}: a reshape can infer only one "
                         f"size known only at run time")
    return tuple(-1 if d is None else d for d in shape)


@public(method=True,
        array_function={"squeeze": lambda a, axis=None: ((a,) if axis is None else (a, axis), {})})
def squeeze(input: Any, dim: Any = None) -> Tensor:
    """``input`` without size-1 dimensions: all of them, or those among ``dim`` (an int or a
    tuple of ints); a named dimension of another size stays."""
    x = _tensor(input, "squeeze")
    if dim is None:
        dims = tuple(range(x.ndim))
    elif isinstance(dim, (tuple, list)):
        dims = normalize_dims("squeeze", int_tuple("squeeze", "dim", (dim,)), x.ndim)
    else:
        dims = normalize_dims("squeeze", (dim,), x.ndim)
    shape = [s for d, s in enumerate(x.shape) if not (d in dims and s == 1)]
    return apply("tp.reshape", x, shape=_reshape_attr("squeeze", shape))


@public(method=True)
def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``input`` with dimensions ``start_dim`` to ``end_dim`` merged into one."""
    x = _tensor(input, "flatten")
    if x.ndim == 0:
        return apply("tp.reshape", x, shape=(1,))
    s = normalize_dim("flatten", start_dim, x.ndim)
    e = normalize_dim("flatten", end_dim, x.ndim)
    if s > e:
        raise DimError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = list(x.shape)
    merged = shape[s:e + 1]
    size = 0 if 0 in merged else (None if None in merged else math.prod(merged))
    return apply("tp.reshape", x, shape=_reshape_attr("flatten", shape[:s] + [size] + shape[e + 1:]))


@public
def ravel(input: Any) -> Tensor:
    """``input`` as a 1-D tensor."""
    return apply("tp.reshape", _tensor(input, "ravel"), shape=(-1,))


@public(method=True)
def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Tensor:
    """``input`` with dimension ``dim`` split into ``sizes`` (one may be -1)."""
    x = _tensor(input, "unflatten")
    d = normalize_dim("unflatten", dim, x.ndim)
    sizes = int_tuple("unflatten", "sizes", (sizes,))
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    if sum(s == -1 for s in sizes) > 1:
        raise ShapeError("unflatten: only one dimension can be inferred")
    have = x.shape[d]
    known = math.prod(s for s in sizes if s != -1)
    if have is not None:
        if -1 in sizes and known != 0 and have % known == 0:
            sizes = tuple(have // known if s == -1 else s for s in sizes)
        if -1 in sizes or math.prod(sizes) != have:
            raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of "
                             f"dim {dim} ({have}) in the input tensor")
    shape = list(x.shape[:d]) + list(sizes) + list(x.shape[d + 1:])
    if -1 in sizes:
        shape = [-1 if s is None else s for s in shape]
        if shape.count(-1) > 1:
            raise ShapeError(f"unflatten: cannot infer a size of {format_shape(x.shape)} split by "
                             f"{list(sizes)}: a reshape can infer only one size")
        return apply("tp.reshape", x, shape=tuple(shape))
    return apply("tp.reshape", x, shape=_reshape_attr("unflatten", shape))


# --- permutations ------------------------------------------------------------------------

@public(method=True, array_function={"transpose": lambda a, axes=None: (
        (a, tuple(axes) if axes is not None else tuple(reversed(range(a.ndim)))), {})})
def permute(input: Any, *dims: Any, **kwargs: Any) -> Tensor:
    """``input`` with its dimensions reordered: result dimension ``i`` is ``dims[i]``."""
    x = _tensor(input, "permute")
    return apply("tp.permute", x, dims=sizes_arg("permute", "dims", dims, kwargs))


@public(method=True, array_function={"swapaxes": lambda a, axis1, axis2: ((a, axis1, axis2), {})})
def transpose(input: Any, dim0: int, dim1: int) -> Tensor:
    """``input`` with dimensions ``dim0`` and ``dim1`` swapped."""
    x = _tensor(input, "transpose")
    a = normalize_dim("transpose", dim0, x.ndim)
    b = normalize_dim("transpose", dim1, x.ndim)
    perm = list(range(x.ndim))
    if x.ndim:
        perm[a], perm[b] = perm[b], perm[a]
    return apply("tp.permute", x, dims=tuple(perm))


@public(method=True)
def swapaxes(input: Any, axis0: int, axis1: int) -> Tensor:
    return transpose(input, axis0, axis1)


@public
def swapdims(input: Any, dim0: int, dim1: int) -> Tensor:
    return transpose(input, dim0, dim1)


@public(method=True)
def t(input: Any) -> Tensor:
    """The transpose of a matrix; 0-d and 1-d tensors come back unchanged."""
    x = _tensor(input, "t")
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return apply("tp.permute", x, dims=tuple(reversed(range(x.ndim))))


@public(method=True, aliases=("moveaxis",))
def movedim(input: Any, source: Any, destination: Any) -> Tensor:
    """``input`` with dimensions ``source`` moved to positions ``destination``; the others
    keep their order."""
    x = _tensor(input, "movedim")
    src = int_tuple("movedim", "source", (source,) if not isinstance(source, (tuple, list)) else source)
    dst = int_tuple("movedim", "destination",
                    (destination,) if not isinstance(destination, (tuple, list)) else destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                         f"contain the same number of dims as destination ({list(dst)} dims)")
    given = {"source": src, "destination": dst}
    src = tuple(normalize_dim("movedim", d, x.ndim) for d in src)
    dst = tuple(normalize_dim("movedim", d, x.ndim) for d in dst)
    for what, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise DimError(f"movedim: repeated dim in `{what}` ({list(given[what])})")
    perm: list[int | None] = [None] * x.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    return apply("tp.permute", x, dims=tuple(next(rest) if p is None else p for p in perm))


# --- broadcasting ------------------------------------------------------------------------

@public(top=False)
def expand(input: Any, *sizes: Any, **kwargs: Any) -> Tensor:
    """``input`` repeated along size-1 dimensions (and new leading ones) to ``sizes``;
    -1 keeps a size."""
    x = _tensor(input, "expand")
    return apply("tp.broadcast_to", x, shape=sizes_arg("expand", "size", sizes, kwargs))


@public(top=False, method=True)
def expand_as(input: Any, other: Tensor) -> Tensor:
    x = _tensor(input, "expand_as")
    return apply("tp.broadcast_to", x, shape=expand_attr("expand_as", x, tuple(other.shape)))


@public(method=True, array_function={
    "broadcast_to": lambda a, shape, **k: ((a, tuple(np.atleast_1d(shape).tolist())), {})})
def broadcast_to(input: Any, size: Sequence[int]) -> Tensor:
    """``input`` broadcast to ``size`` (PyTorch's expand rules)."""
    x = _tensor(input, "broadcast_to")
    return apply("tp.broadcast_to", x, shape=int_tuple("broadcast_to", "size", (size,)))


@public
def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of ``shapes`` broadcast to (an int stands for a 1-D shape)."""
    norm = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(_broadcast_shapes("broadcast_shapes", *norm))


@public
def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    xs = _tensor_list("broadcast_tensors", list(tensors))
    shape = _broadcast_shapes("broadcast_tensors", *[tuple(x.shape) for x in xs])
    return tuple(x if has_shape(x, shape) else
                 apply("tp.broadcast_to", x, shape=expand_attr("broadcast_tensors", x, shape))
                 for x in xs)


@public(method=True)
def repeat(input: Any, *repeats: Any, **kwargs: Any) -> Tensor:
    """``input`` tiled ``repeats[i]`` times along dimension ``i`` (extra repeats add leading
    dimensions)."""
    x = _tensor(input, "repeat")
    reps = sizes_arg("repeat", "repeats", repeats, kwargs)
    if len(reps) < x.ndim:
        raise ShapeError("Number of dimensions of repeat dims can not be smaller than number of "
                         "dimensions of tensor")
    shape = [1] * (len(reps) - x.ndim) + list(x.shape)
    result = [None if s is None else r * s for r, s in zip(reps, shape)]
    if any(r < 0 for r in reps):
        raise ShapeError(f"Trying to create tensor with negative dimension "
                         f"{min(d for d in result if d is not None)}: {format_shape(result)}")
    if all(r == 1 for r in reps):
        return apply("tp.reshape", x, shape=_reshape_attr("repeat", shape))
    # (s0, s1) -> (1, s0, 1, s1) -> (r0, s0, r1, s1) -> (r0*s0, r1*s1)
    interleaved = [v for s in shape for v in (1, s)]
    wide = apply("tp.broadcast_to", reshape_to(x, interleaved, "repeat"),
                 shape=tuple(v for r, s in zip(reps, shape) for v in (r, -1 if s is None else s)))
    return reshape_to(wide, result, "repeat")


@public(method=True)
def tile(input: Any, *dims: Any, **kwargs: Any) -> Tensor:
    """``input`` repeated ``dims[i]`` times along each dimension; missing leading entries
    of ``dims`` count as 1."""
    x = _tensor(input, "tile")
    reps = sizes_arg("tile", "dims", dims, kwargs)
    reps = (1,) * (x.ndim - len(reps)) + reps
    return repeat(x, reps)


# --- joining -----------------------------------------------------------------------------

@public(array_function={"concatenate": lambda arrays, axis=0: ((list(arrays),), {"dim": axis})})
def cat(tensors: Sequence[Tensor], dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """The tensors joined along ``dim`` in a promoted dtype. As in PyTorch, 1-D empty
    tensors are skipped when other tensors are joined."""
    xs = _tensor_list("cat", tensors)
    if not xs:
        raise ShapeError("cat(): expected a non-empty list of Tensors")
    dtype = _common_dtype(xs)
    every_1d = all(x.ndim == 1 for x in xs)

    def skipped(x: Tensor) -> bool:
        if x.ndim != 1:
            return False
        if every_1d:  # joining 1-D tensors, an empty one adds nothing whether skipped or not:
            return sym.known_eq(x.shape[0], 0)  # no question about a symbolic size
        return x.shape[0] == 0

    kept = [x for x in xs if not skipped(x)] or xs[:1]
    return apply("tp.concat", *[_cast(x, dtype) for x in kept], dim=_dim_arg(dim, axis))


@public
def concat(tensors: Sequence[Tensor], dim: int | None = None, *, axis: int | None = None) -> Tensor:
    return cat(tensors, dim, axis=axis)


@public
def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    return cat(tensors, axis)


@public(array_function={"stack": lambda arrays, axis=0: ((list(arrays),), {"dim": axis})})
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors, all of one shape, joined along a new dimension ``dim``."""
    xs = _tensor_list("stack", tensors)
    if not xs:
        raise ShapeError("stack expects a non-empty TensorList")
    first = tuple(xs[0].shape)
    for i, x in enumerate(xs[1:], start=1):
        if tuple(x.shape) != first:
            raise ShapeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                             f"and {list(x.shape)} at entry {i}")
    d = normalize_dim("stack", dim, len(first) + 1)
    dtype = _common_dtype(xs)
    shape = list(first)
    shape.insert(d, 1)
    return apply("tp.concat", *[reshape_to(_cast(x, dtype), shape, "stack") for x in xs], dim=d)


# --- splitting ---------------------------------------------------------------------------

def _static_size(op: str, x: Tensor, dim: int) -> int:
    size = x.shape[dim]
    if size is None:
        raise ShapeError(f"{op}: dimension {dim} of {format_shape(x.shape)} is known only at run time; "
                         f"the number of pieces must be static")
    return size


@public(method=True)
def split(tensor: Any, split_size_or_sections: Any = None, dim: int = 0, **kwargs: Any) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or pieces of the
    listed sizes."""
    if split_size_or_sections is None:
        split_size_or_sections = kwargs.pop("split_size", None)
    if kwargs:
        raise TypeError(f"split() got an unexpected keyword argument '{next(iter(kwargs))}'")
    x = _tensor(tensor, "split")
    d = normalize_dim("split", dim, x.ndim)
    size = _static_size("split", x, d)
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = list(int_tuple("split", "split_size_or_sections", split_size_or_sections))
        if any(s < 0 for s in sizes):
            raise ShapeError(f"split_with_sizes expects split_sizes have only non-negative entries, but "
                             f"got split_sizes={sizes}")
        if sum(sizes) != size:
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input "
                             f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    else:
        step = split_size_or_sections
        if isinstance(size, sym.SymInt) or isinstance(step, sym.SymInt):
            symbolic = _symbolic_pieces(size, step)
            if symbolic is not None:
                return _pieces(x, d, symbolic)
        step = int(step)
        if step < 0:
            raise ShapeError(f"split expects split_size be non-negative, but got split_size={step}")
        if step == 0 and size != 0:
            raise ShapeError(f"split_size can only be 0 if dimension size is 0, but got dimension size "
                             f"of {size}")
        size = int(size)
        sizes = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    return _pieces(x, d, sizes)


def _symbolic_pieces(size: Any, step: Any, chunks: int | None = None) -> list[Any] | None:
    """Piece sizes of a split of a symbolic ``size`` into pieces of ``step`` (either may be
    symbolic): the number of pieces is what the example sizes give, kept by guards
    (``(n - 1) * step < size <= n * step``); the last piece's size stays symbolic. For
    ``chunk(chunks)`` (``step = ceil(size / chunks)``) ``n == chunks`` needs no upper guard."""
    env = next(v.env for v in (size, step) if isinstance(v, sym.SymInt))
    hint = getattr(env, "hint", None)
    if hint is None:
        return None
    h_size, h_step = (hint(v.node) if isinstance(v, sym.SymInt) else int(v) for v in (size, step))
    if h_size <= 0 or h_step <= 0:
        return None  # empty or invalid splits take the static path (and its errors)
    n = -(-h_size // h_step)
    if not size > (n - 1) * step:  # records the guard; true for the example
        return None
    if n != chunks and not size <= n * step:
        return None
    return [step] * (n - 1) + [size - (n - 1) * step]


def _pieces(x: Tensor, dim: int, sizes: Sequence[int]) -> tuple[Tensor, ...]:
    out, start = [], 0
    for s in sizes:
        out.append(slice_dim(x, dim, start, start + s))
        start += s
    return _multi_views(out, "SplitBackward0")


def _multi_views(views: Sequence[Tensor], node: str) -> tuple[Tensor, ...]:
    """The views of one function returning several (split, chunk, unbind): PyTorch forbids
    modifying them in place when they require grad."""
    for i, v in enumerate(views):
        if v._requires_grad and _views.base(v) is not None:
            _views.mark_multi_view(v, i, node)
    return tuple(views)


@public(method=True)
def chunk(input: Any, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most ``chunks`` pieces of equal size (the last may be smaller) along ``dim``."""
    x = _tensor(input, "chunk")
    if chunks <= 0:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = normalize_dim("chunk", dim, x.ndim)
    size = _static_size("chunk", x, d)
    if isinstance(size, sym.SymInt):
        pieces = _symbolic_pieces(size, -((-size) // chunks), chunks)
        if pieces is not None:
            return _pieces(x, d, pieces)
    if size == 0:
        return _pieces(x, d, [0] * chunks)
    return split(x, -(-size // chunks), d)


@public(method=True)
def unbind(input: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices of ``input`` along ``dim``, that dimension removed."""
    x = _tensor(input, "unbind")
    if x.ndim == 0:
        raise DimError("Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim("unbind", dim, x.ndim)
    return _multi_views([_select(x, d, i) for i in range(_static_size("unbind", x, d))], "UnbindBackward0")


@public(method=True)
def narrow(input: Any, dim: int, start: Any, length: int) -> Tensor:
    """Elements ``start`` to ``start + length`` of ``input`` along ``dim``."""
    x = _tensor(input, "narrow")
    if x.ndim == 0:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim("narrow", dim, x.ndim)
    start = int(start)
    length = int(length)
    size = x.shape[d]
    if length < 0:
        raise ShapeError("narrow(): length must be non-negative.")
    if size is None:
        end = start + length if start + length < 0 or start >= 0 else SLICE_END
        return slice_dim(x, d, start, end)
    if not -size <= start <= size:
        raise DimError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise ShapeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return slice_dim(x, d, start, start + length)


@public(method=True, array_function={
    "flip": lambda m, axis=None: ((m, tuple(range(m.ndim)) if axis is None else axis), {})})
def flip(input: Any, *dims: Any, **kwargs: Any) -> Tensor:
    """``input`` with the order of elements reversed along ``dims``."""
    x = _tensor(input, "flip")
    return apply("tp.flip", x, dims=sizes_arg("flip", "dims", dims, kwargs))


# --- views with any strides --------------------------------------------------------------------

@public(method=True)
def as_strided(input: Any, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Tensor:
    """A view of ``input``'s storage with the given sizes, strides and offset (in elements,
    from the start of the storage). Writing into one whose elements overlap raises."""

    x = _tensor(input, "as_strided")
    size = tuple(int(d) for d in size)
    stride = tuple(int(d) for d in stride)
    if len(size) != len(stride):
        raise ShapeError(f"mismatch in length of strides and shape: {len(stride)} strides for {len(size)} sizes")
    if any(d < 0 for d in size) or any(st < 0 for st in stride):
        raise ShapeError(f"as_strided: negative size or stride in size {list(size)}, stride {list(stride)}")
    offset = x.storage_offset() if storage_offset is None else int(storage_offset)
    root = _views.root(x)
    numel = root.numel()
    need = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    if need > numel or offset < 0:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {x.element_size()} requiring a storage size of {need * x.element_size()} are "
                           f"out of bounds for storage of size {numel * x.element_size()}")
    attrs = {"size": size, "stride": stride, "offset": offset}
    data = _views.held(root)
    if type(data) is np.ndarray and root._capture is None and x._capture is None and current_handler() is None:
        if not data.flags.c_contiguous:
            raise RuntimeError("as_strided of a tensor whose storage is not in row-major order (a numpy array "
                               "given to from_numpy with other strides): clone() it first")
        out = Tensor._wrap(_views.host_strided(data, attrs))
        if root._requires_grad and is_grad_enabled():  # the view's history: gathered from the root
            made = _views.replay(root, (("as_strided", attrs),))
            out._grad_fn, out._output_nr, out._requires_grad = made._grad_fn, made._output_nr, True
    else:
        out = _views.replay(root, (("as_strided", attrs),))
    _views.made(x, out, "as_strided", attrs)
    return out


@public(method=True)
def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of ``input`` in the plane of ``dim1`` and ``dim2`` (``offset`` above it
    when positive, below when negative) as the last dim: a view."""
    x = _tensor(input, "diagonal")
    d1 = normalize_dim("diagonal", dim1, x.ndim)
    d2 = normalize_dim("diagonal", dim2, x.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape = [int(d) for d in x.shape]
    strides = list(x.stride())
    start = x.storage_offset()
    if offset >= 0:
        n = max(0, min(shape[d1], shape[d2] - offset))
        start += offset * strides[d2] if n else 0
    else:
        n = max(0, min(shape[d1] + offset, shape[d2]))
        start += -offset * strides[d1] if n else 0
    keep = [d for d in range(x.ndim) if d not in (d1, d2)]
    return as_strided(x, [shape[d] for d in keep] + [n], [strides[d] for d in keep] + [strides[d1] + strides[d2]],
                      start)


@public(top=False, method=True)
def unfold(input: Any, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` along ``dimension``,
    as a new last dim: a view (windows that overlap share elements)."""
    x = _tensor(input, "unfold")
    d = normalize_dim("unfold", dimension, max(x.ndim, 1))
    shape = [int(n) for n in x.shape] or [1]
    strides = list(x.stride()) or [1]
    if size > shape[d]:
        raise ShapeError(f"maximum size for tensor at dimension {d} is {shape[d]} but size is {size}")
    if step <= 0:
        raise ShapeError(f"step is {step} but must be > 0")
    count = (shape[d] - size) // step + 1
    new_shape = shape[:d] + [count] + shape[d + 1:] + [size]
    new_strides = strides[:d] + [strides[d] * step] + strides[d + 1:] + [strides[d]]
    if x.ndim == 0:
        new_shape, new_strides = [size], [1]
    return as_strided(x, new_shape, new_strides, x.storage_offset())


# --- rolling, rotating, differences ----------------------------------------------------------

def _ints_arg(op: str, name: str, value: Any) -> tuple[Any, ...]:
    """An int or a sequence of ints (symbolic sizes kept) as a tuple."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not bool")
    if isinstance(value, (int, np.integer, sym.SymInt)):
        return (value if isinstance(value, sym.SymInt) else int(value),)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not {type(value).__name__}")
    return int_tuple(op, name, (value,))


def _roll_dim(x: Tensor, dim: int, shift: Any) -> Tensor:
    size = x.shape[dim]
    if size == 0:
        return x
    s = shift % size
    if s == 0:
        return x
    cut = size - s
    return cat([slice_dim(x, dim, cut, SLICE_END), slice_dim(x, dim, 0, cut)], dim)


@public(method=True)
def roll(input: Any, shifts: Any, dims: Any = None) -> Tensor:
    """``input`` with its elements shifted by ``shifts`` along ``dims``, those leaving at one
    end coming back at the other; with no ``dims``, shifted in the flattened tensor and given
    the original shape back."""
    x = _tensor(input, "roll")
    shift = _ints_arg("roll", "shifts", shifts)
    dim = () if dims is None else _ints_arg("roll", "dims", dims)
    if not shift:
        raise ShapeError("roll: `shifts` required")
    if not dim:
        if len(shift) != 1:
            raise ShapeError(f"roll: shifts and dimensions must align. shifts: {len(shift)}, dims:0")
        flat = reshape_to(x, (x.numel(),), "roll")
        return reshape_to(_copy_if_same(_roll_dim(flat, 0, shift[0]), flat), tuple(x.shape), "roll")
    if len(shift) != len(dim):
        raise ShapeError(f"roll: shifts and dimensions must align. shifts: {len(shift)}, dims:{len(dim)}")
    if x.ndim == 0:
        raise DimError(f"roll: Dimension specified as {dim[0]} but tensor has no dimensions")
    out = x
    for s, d in zip(shift, dim):
        out = _roll_dim(out, normalize_dim("roll", d, x.ndim), s)
    return _copy_if_same(out, x)


def _copy_if_same(out: Tensor, x: Tensor) -> Tensor:
    """A new tensor, never ``x`` itself (nothing moved: a copy, as PyTorch returns)."""
    if out is x:
        from .elementwise import clone

        return clone(x)
    return out


@public(method=True)
def rot90(input: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    dim towards the second (a negative ``k`` turns the other way)."""
    x = _tensor(input, "rot90")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"rot90(): argument 'k' must be int, not {type(k).__name__}")
    plane = _ints_arg("rot90", "dims", dims)
    if len(plane) != 2:
        raise ShapeError(f"rot90: expected total rotation dims == 2, but got dims = {len(plane)}")
    if x.ndim < 2:
        raise ShapeError(f"rot90: expected total dims >= 2, but got total dims = {x.ndim}")
    given = plane
    d0, d1 = normalize_dim("rot90", plane[0], x.ndim), normalize_dim("rot90", plane[1], x.ndim)
    if d0 == d1:
        raise ShapeError(f"rot90: expected rotation dims to be different, but got dim0 = {given[0]} and "
                         f"dim1 = {given[1]}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(x, (d1,)), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return transpose(flip(x, (d0,)), d0, d1)
    from .elementwise import clone

    return clone(x)


@public(method=True)
def diff(input: Any, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``out[i] = x[i + 1] - x[i]``, applied
    ``n`` times; bool tensors give ``x[i + 1] != x[i]``), after joining ``prepend`` and
    ``append`` to ``input`` along ``dim``."""
    from . import elementwise

    x = _tensor(input, "diff")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"diff(): argument 'n' must be int, not {type(n).__name__}")
    if x.ndim == 0:
        raise ShapeError("diff: diff expects input to be at least one-dimensional")
    if n < 0:
        raise OpAttributeError(f"diff: order must be non-negative but got {n}")
    d = normalize_dim("diff", dim, x.ndim)
    parts = [x]
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            continue
        if not isinstance(extra, Tensor):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(extra).__name__}")
        if extra.ndim != x.ndim:
            raise ShapeError("diff: diff expects prepend or append to be the same dimension as input")
        parts.insert(0 if name == "prepend" else len(parts), extra)
    out = cat(parts, d) if len(parts) > 1 else x
    for _ in range(int(n)):
        size = out.shape[d]
        length = size - 1 if size > 0 else 0
        later, earlier = slice_dim(out, d, 1, SLICE_END), slice_dim(out, d, 0, length)
        out = elementwise.logical_xor(later, earlier) if out.dtype.is_bool else elementwise.sub(later, earlier)
    return _copy_if_same(out, x)


@public(method=True)
def diag_embed(input: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices with the last dim of ``input`` on their diagonal (``offset`` above it when
    positive, below when negative) and zeros elsewhere, in the plane of the result's dims
    ``dim1`` (rows) and ``dim2`` (columns)."""
    from . import elementwise
    from .creation import arange, zeros

    x = _tensor(input, "diag_embed")
    if x.ndim == 0:
        raise ShapeError("diag_embed(): expected a tensor of at least 1 dimension, got a 0-d tensor")
    offset = int_tuple("diag_embed", "offset", (offset,))[0]
    d1 = normalize_dim("diag_embed", dim1, x.ndim + 1)
    d2 = normalize_dim("diag_embed", dim2, x.ndim + 1)
    if d1 == d2:
        raise ShapeError(f"diag_embed(): diagonal dimensions cannot be identical {dim1}, {dim2}")
    k = abs(offset)
    n = x.shape[-1] + k
    if k:
        x = cat([x, zeros(*x.shape[:-1], k, dtype=x.dtype, device=x.device)], -1)
    steps = arange(n, device=x.device)
    on_diagonal = elementwise.eq(elementwise.sub(unsqueeze(steps, 0), unsqueeze(steps, 1)), offset)  # [row, col]: col - row
    values = unsqueeze(x, -1) if offset >= 0 else unsqueeze(x, -2)  # row i (col i) holds element i
    out = elementwise.where(on_diagonal, values, False if x.dtype.is_bool else 0)
    return movedim(out, (x.ndim - 1, x.ndim), (d1, d2))


@public(method=True)
def diag(input: Any, diagonal: int = 0) -> Tensor:
    """A 1-D ``input`` as the ``diagonal``-th diagonal of a square matrix, or a copy of the
    ``diagonal``-th diagonal of a 2-D ``input``."""
    from .elementwise import clone

    x = _tensor(input, "diag")
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        return clone(globals()["diagonal"](x, diagonal))
    raise ShapeError(f"diag(): supports 1-D or 2-D tensors, got a {x.ndim}-D tensor")


@public
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D (or 0-d) tensors: result ``i`` repeats ``tensors[i]`` along
    every other dim. ``indexing='ij'`` gives shape ``(len(t0), len(t1), ...)``; ``'xy'``
    swaps the first two dims. Without ``indexing`` it is ``'ij'``, with a UserWarning."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    xs = _tensor_list("meshgrid", list(tensors))
    if not xs:
        raise ShapeError("meshgrid(): expected a non-empty list of tensors")
    if indexing is None:
        import warnings

        warnings.warn("tp.meshgrid: pass indexing='ij' or indexing='xy'; without it the grids use 'ij' "
                      "indexing", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid(): indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in xs:
        if t.ndim > 1:
            raise ShapeError(f"meshgrid(): expected 0-d or 1-D tensors, got one of shape {list(t.shape)}")
        if t.dtype is not xs[0].dtype or t.device != xs[0].device:
            raise TypeError("meshgrid(): expected all tensors to have the same dtype and device, got "
                            f"{xs[0].dtype.name} on {xs[0].device} and {t.dtype.name} on {t.device}")
    position = list(range(len(xs)))
    if indexing == "xy" and len(xs) > 1:
        position[0], position[1] = 1, 0
    sizes = [0] * len(xs)
    for i, t in enumerate(xs):
        sizes[position[i]] = t.numel()
    grids = []
    for i, t in enumerate(xs):
        view = [1] * len(xs)
        view[position[i]] = -1
        grids.append(expand(reshape(t, tuple(view)), tuple(sizes)))
    return tuple(grids)


@public(method=True)
def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element of ``input`` repeated ``repeats`` times along ``dim`` (the flattened
    input when ``dim`` is None). ``repeats`` is an int or a tensor of one count per element
    (or one count for all); ``output_size``, the result's length along ``dim``, saves
    reading the counts' sum. ``repeat_interleave(repeats)`` repeats the indices
    ``0..len(repeats)-1``."""
    from . import elementwise
    from .creation import arange
    from .reduction import cumsum
    from .sorting import searchsorted

    if repeats is None:  # repeat_interleave(repeats)
        counts = _tensor(input, "repeat_interleave")
        if counts.ndim > 1:
            raise ShapeError(f"repeat_interleave(): repeats must be 0-d or 1-D, got shape {list(counts.shape)}")
        counts = reshape(counts, (-1,))
        return repeat_interleave(arange(counts.shape[0], device=counts.device), counts, 0,
                                 output_size=output_size)
    x = _tensor(input, "repeat_interleave")
    if dim is None:
        x, d = reshape(x, (-1,)), 0
    else:
        d = normalize_dim("repeat_interleave", dim, max(x.ndim, 1))
        if x.ndim == 0:
            x = reshape(x, (1,))
    if not isinstance(repeats, Tensor):
        if isinstance(repeats, (bool, np.bool_)) or not isinstance(repeats, (int, np.integer)):
            raise TypeError(f"repeat_interleave(): repeats must be an int or a Tensor, not "
                            f"{type(repeats).__name__}")
        if repeats < 0:
            raise ValueError(f"repeat_interleave(): repeats can not be negative, got {repeats}")
        sizes = list(x.shape)
        out = expand(unsqueeze(x, d + 1), tuple(sizes[:d + 1] + [int(repeats)] + sizes[d + 1:]))
        out = flatten(out, d, d + 1)
        if output_size is not None and output_size != out.shape[d]:
            raise ValueError(f"repeat_interleave(): output_size {output_size} does not match the "
                             f"{out.shape[d]} elements the repeats give")
        return out
    if repeats.dtype not in (dt.int64, dt.int32):
        raise TypeError(f"repeat_interleave(): repeats must be an int64 or int32 tensor, got {repeats.dtype.name}")
    if repeats.ndim > 1:
        raise ShapeError(f"repeat_interleave(): repeats must be 0-d or 1-D, got shape {list(repeats.shape)}")
    n = x.shape[d]
    if repeats.numel() == 1:
        repeats = expand(reshape(repeats, (1,)), (n,))
    elif repeats.shape[0] != n:
        raise ShapeError(f"repeat_interleave(): repeats must have the same size as input along dim, but got "
                         f"repeats.size(0) = {repeats.shape[0]} and input.size({d}) = {n}")
    if output_size is None:
        if bool(elementwise.lt(repeats, 0).any()):
            raise ValueError("repeat_interleave(): repeats can not be negative")
        output_size = int(repeats.sum())
    ends = cumsum(repeats.to(dt.int64), 0)
    index = searchsorted(ends, arange(output_size, device=ends.device), right=True)
    return apply("tp.index_select", x, index, dim=d)


__all__ = exported(__name__)  # the names declared @public above
