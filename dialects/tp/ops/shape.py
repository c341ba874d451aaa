"""Shape ops: reshape, permute, broadcast, concatenate, slice, slice update and flip.

They move or copy elements without computing new values, so they accept every dtype and
keep it. A ``None`` dimension (a size known only at run time) flows through wherever the
result size does not depend on it; the reference checks such sizes on the real arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import DimError, DTypeError, ShapeError
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import format_shape, normalize_dim
from ..types import Dim, TensorType

#: ``end`` of a slice that runs to the end of its dimension (the largest i64).
SLICE_END = 2**63 - 1


def static_numel(shape: Sequence[Dim]) -> Dim:
    """Number of elements, ``None`` when a dynamic dimension makes it unknown (a static zero
    dimension still makes it zero)."""
    if any(d == 0 for d in shape if d is not None):
        return 0
    if any(d is None for d in shape):
        return None
    return math.prod(shape)


class ShapeOp(Op):
    """Family base: one input whose elements are rearranged; the dtype is kept."""

    family = "shape"
    operands = (Operand("input"),)


def resolve_reshape(op: Op, shape: tuple[int, ...], numel: Dim) -> tuple[Dim, ...]:
    """``shape`` with its ``-1`` entry resolved for ``numel`` elements (``None`` when the
    element count is known only at run time)."""
    for i, d in enumerate(shape):
        if d < -1:
            raise op.error(ShapeError, f"invalid shape dimension {d} at index {i} of shape {list(shape)}")
    inferred = [i for i, d in enumerate(shape) if d == -1]
    if len(inferred) > 1:
        raise op.error(ShapeError, "only one dimension can be inferred")
    if numel is None:
        return tuple(None if d == -1 else d for d in shape)
    known = math.prod(d for d in shape if d != -1)
    if inferred:
        if known == 0:
            if numel == 0:
                raise op.error(ShapeError, f"cannot reshape tensor of 0 elements into shape {list(shape)} "
                                           f"because the unspecified dimension size -1 can be any value "
                                           f"and is ambiguous")
        elif numel % known == 0:
            out = list(shape)
            out[inferred[0]] = numel // known
            return tuple(out)
    elif known == numel:
        return shape
    raise op.error(ShapeError, f"shape '{list(shape)}' is invalid for input of size {numel}")


@register
class Reshape(ShapeOp):
    """Same elements in row-major order under a new ``shape``; one entry may be -1 (inferred)."""

    name = "tp.reshape"
    attributes = (Attr("shape", AttrKind.INTS, doc="new sizes; one may be -1"),)

    def infer(self, types, attrs):
        t = types[0]
        return (t.with_shape(resolve_reshape(self, attrs["shape"], static_numel(t.shape))),)

    def reference(self, arrays, attrs):
        a = arrays[0]
        return a.reshape(resolve_reshape(self, attrs["shape"], a.size))


def check_permutation(op: Op, dims: Sequence[int], rank: int) -> tuple[int, ...]:
    if len(dims) != rank:
        raise op.error(ShapeError, f"number of dimensions in the tensor input does not match the length "
                                   f"of the desired ordering of dimensions i.e. input.dim() = {rank} "
                                   f"is not equal to len(dims) = {len(dims)}")
    out = tuple(normalize_dim(op.name, d, rank) for d in dims)
    if len(set(out)) != len(out):
        raise op.error(DimError, f"duplicate dims are not allowed (dims {list(dims)})")
    return out


@register
class Permute(ShapeOp):
    """Reorder the dimensions: result dimension ``i`` is input dimension ``dims[i]``."""

    name = "tp.permute"
    attributes = (Attr("dims", AttrKind.INTS, doc="a permutation of the input dimensions"),)

    def infer(self, types, attrs):
        t = types[0]
        dims = check_permutation(self, attrs["dims"], t.rank)
        return (t.with_shape(tuple(t.shape[d] for d in dims)),)

    def reference(self, arrays, attrs):
        a = arrays[0]
        return np.transpose(a, check_permutation(self, attrs["dims"], a.ndim))


def resolve_broadcast(op: Op, in_shape: Sequence[Dim], target: Sequence[int]) -> tuple[Dim, ...]:
    """The result of expanding ``in_shape`` to ``target`` (PyTorch's ``expand`` rules:
    new dimensions lead, -1 keeps an existing size, only size-1 dimensions stretch)."""
    n, r = len(target), len(in_shape)
    if n < r:
        raise op.error(ShapeError, f"the number of sizes provided ({n}) must be greater or equal to the "
                                   f"number of dimensions in the tensor ({r})")
    lead = n - r
    out: list[Dim] = []
    for i, size in enumerate(target):
        if i < lead:
            if size < 0:
                raise op.error(ShapeError, f"The expanded size of the tensor ({size}) isn't allowed in a "
                                           f"leading, non-existing dimension {i}")
            out.append(size)
            continue
        have = in_shape[i - lead]
        if size == -1:
            out.append(have)
        elif size >= 0 and (have is None or have == size or have == 1):
            out.append(size)
        else:
            raise op.error(ShapeError, f"The expanded size of the tensor ({size}) must match the existing "
                                       f"size ({'?' if have is None else have}) at non-singleton dimension "
                                       f"{i}.  Target sizes: {list(target)}.  Tensor sizes: "
                                       f"{format_shape(in_shape)}")
    return tuple(out)


@register
class BroadcastTo(ShapeOp):
    """Repeat size-1 dimensions (and add leading ones) to reach ``shape``; -1 keeps a size."""

    name = "tp.broadcast_to"
    attributes = (Attr("shape", AttrKind.INTS, doc="target sizes; -1 keeps the input's size"),)

    def infer(self, types, attrs):
        t = types[0]
        return (t.with_shape(resolve_broadcast(self, t.shape, attrs["shape"])),)

    def reference(self, arrays, attrs):
        a = arrays[0]
        # a fresh array: numpy's broadcast view is read-only with zero strides
        return np.broadcast_to(a, resolve_broadcast(self, a.shape, attrs["shape"])).copy()


@register
class Concat(Op):
    """Join tensors of one dtype and rank along ``dim``; other sizes must agree."""

    name = "tp.concat"
    family = "shape"
    operands = (Operand("inputs", variadic=True),)
    attributes = (Attr("dim", AttrKind.INT, 0),)

    def infer(self, types, attrs):
        if not types:
            raise self.error(ShapeError, "expected a non-empty list of tensors")
        first = types[0]
        for i, t in enumerate(types):
            if t.rank == 0:
                raise self.error(ShapeError, f"zero-dimensional tensor (at position {i}) cannot be "
                                             f"concatenated")
            if t.dtype is not first.dtype:
                raise self.error(DTypeError, f"all inputs must have one dtype; got {first.dtype.name} "
                                             f"and {t.dtype.name} (tensor number {i})")
            if t.rank != first.rank:
                raise self.error(ShapeError, f"Tensors must have same number of dimensions: got "
                                             f"{first.rank} and {t.rank}")
        dim = normalize_dim(self.name, attrs["dim"], first.rank)
        shape = list(first.shape)
        for i, t in enumerate(types[1:], start=1):
            for d in range(first.rank):
                if d == dim:
                    continue
                a, b = shape[d], t.shape[d]
                if a is None:
                    shape[d] = b
                elif b is not None and a != b:
                    raise self.error(ShapeError, f"Sizes of tensors must match except in dimension "
                                                 f"{dim}. Expected size {a} but got size {b} for tensor "
                                                 f"number {i} in the list.")
        sizes = [t.shape[dim] for t in types]
        shape[dim] = None if any(s is None for s in sizes) else sum(sizes)
        return (TensorType(tuple(shape), first.dtype),)

    def reference(self, arrays, attrs):
        return np.concatenate(arrays, axis=normalize_dim(self.name, attrs["dim"], arrays[0].ndim))


class Strided(ShapeOp):
    """Base of the ops that address a strided box: per-dimension ``starts``, ``ends`` and
    positive ``steps``, with Python's slice rules (negative bounds count from the end,
    bounds clamp to the size), so boxes over dynamic dimensions need no sizes."""

    attributes = (Attr("starts", AttrKind.INTS, doc="first index per dimension"),
                  Attr("ends", AttrKind.INTS, doc="end (exclusive) per dimension"),
                  Attr("steps", AttrKind.INTS, doc="positive stride per dimension"))

    def box(self, shape: Sequence[Dim], attrs) -> tuple[Dim, ...]:
        starts, ends, steps = attrs["starts"], attrs["ends"], attrs["steps"]
        rank = len(shape)
        for what, v in (("starts", starts), ("ends", ends), ("steps", steps)):
            if len(v) != rank:
                raise self.error(ShapeError, f"'{what}' has {len(v)} entries for a tensor of rank {rank}")
        out: list[Dim] = []
        for size, start, end, step in zip(shape, starts, ends, steps):
            if step <= 0:
                raise self.error(ShapeError, f"step must be greater than zero, got {step}")
            out.append(None if size is None else len(range(*slice(start, end, step).indices(size))))
        return tuple(out)

    @staticmethod
    def slices(attrs) -> tuple[slice, ...]:
        return tuple(slice(b, e, s) for b, e, s in zip(attrs["starts"], attrs["ends"], attrs["steps"]))


@register
class Slice(Strided):
    """The strided box ``input[starts:ends:steps]`` (one start, end and step per dimension)."""

    name = "tp.slice"

    def infer(self, types, attrs):
        t = types[0]
        return (t.with_shape(self.box(t.shape, attrs)),)

    def reference(self, arrays, attrs):
        return arrays[0][self.slices(attrs)]


@register
class SliceUpdate(Strided):
    """A copy of ``input`` whose strided box ``[starts:ends:steps]`` holds ``update``."""

    name = "tp.slice_update"
    operands = (Operand("input"), Operand("update", doc="the box's new value, of the box's shape"))

    def infer(self, types, attrs):
        t, u = types
        box = self.box(t.shape, attrs)
        if u.dtype is not t.dtype:
            raise self.error(DTypeError, f"update has dtype {u.dtype.name}, input {t.dtype.name}")
        if u.rank != len(box) or any(a is not None and b is not None and a != b
                                     for a, b in zip(box, u.shape)):
            raise self.error(ShapeError, f"update of shape {format_shape(u.shape)} does not fit the "
                                         f"box of shape {format_shape(box)}")
        return (t,)

    def reference(self, arrays, attrs):
        a, u = arrays
        box = self.box(a.shape, attrs)
        if tuple(u.shape) != box:
            raise self.error(ShapeError, f"update of shape {list(u.shape)} does not fit the box of shape "
                                         f"{list(box)}")
        out = a.copy()
        out[self.slices(attrs)] = u
        return out


@register
class Flip(ShapeOp):
    """Reverse the order of elements along each of ``dims``."""

    name = "tp.flip"
    attributes = (Attr("dims", AttrKind.INTS),)

    def flip_dims(self, attrs, rank: int) -> tuple[int, ...]:
        dims = tuple(normalize_dim(self.name, d, rank) for d in attrs["dims"])
        for i, d in enumerate(dims):
            if d in dims[:i]:
                raise self.error(DimError, f"dim {d} appears multiple times in the list of dims")
        return dims if rank > 0 else ()

    def infer(self, types, attrs):
        self.flip_dims(attrs, types[0].rank)
        return (types[0],)

    def reference(self, arrays, attrs):
        a = arrays[0]
        return np.flip(a, self.flip_dims(attrs, a.ndim)).copy()
