"""Shape ops: reshape, permute, broadcast, concatenate, slice, slice update and flip.

They move or copy elements without computing new values, so they accept every dtype and
keep it. A ``None`` dimension (a size known only at run time) flows through wherever the
result size does not depend on it; the reference checks such sizes on the real arrays.
Symbolic sizes (sympy expressions) flow through every rule, and size attributes
(``shape``, ``starts``, ``ends``) may hold them: the result sizes are expressions too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
from collections.abc import Sequence

import numpy as np

from .._lazy import lazy

from .. import symbolic as sym
from ..errors import DimError, DTypeError, ShapeError
from ..registry import Attr, AttrKind, Op, Operand, register
from ..shapes import format_shape, normalize_dim
from ..types import Dim, TensorType

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

sympy = lazy("sympy")

#: ``end`` of a slice that runs to the end of its dimension (the largest i64).
SLICE_END = 2**63 - 1


def static_numel(shape: Sequence[Dim]) -> Dim:
    """Number of elements, ``None`` when a dynamic dimension makes it unknown (a static zero
    dimension still makes it zero)."""
    if any(type(d) is int and d == 0 for d in shape):
        return 0
    if any(d is None for d in shape):
        return None
    return sym.as_size(math.prod(shape))


class ShapeOp(Op):
    """Family base: one input whose elements are rearranged; the dtype is kept."""

    family = "shape"
    operands = (Operand("input"),)


def resolve_reshape(op: Op, shape: tuple[Dim, ...], numel: Dim) -> tuple[Dim, ...]:
    """``shape`` with its ``-1`` entry resolved for ``numel`` elements (``None`` when the
    element count is known only at run time). With symbolic sizes the inferred entry is an
    expression; a division that is not exact becomes a guard that it is."""
    for i, d in enumerate(shape):
        if (type(d) is int and d < -1) or (sym.is_symbolic(d) and sym.lt(d, 0, "a reshape size")):
            raise op.error(ShapeError, f"invalid shape dimension {d} at index {i} of shape {list(shape)}")
    inferred = [i for i, d in enumerate(shape) if type(d) is int and d == -1]
    if len(inferred) > 1:
        raise op.error(ShapeError, "only one dimension can be inferred")
    if numel is None:
        return tuple(None if type(d) is int and d == -1 else d for d in shape)
    known = sym.as_size(math.prod(d for d in shape if not (type(d) is int and d == -1)))
    if not sym.is_symbolic(numel) and not sym.is_symbolic(known):
        if inferred:
            if known == 0:
                if numel == 0:
                    raise op.error(ShapeError, f"cannot reshape tensor of 0 elements into shape "
                                               f"{list(shape)} because the unspecified dimension size -1 "
                                               f"can be any value and is ambiguous")
            elif numel % known == 0:
                out = list(shape)
                out[inferred[0]] = numel // known
                return tuple(out)
        elif known == numel:
            return shape
        raise op.error(ShapeError, f"shape '{list(shape)}' is invalid for input of size {numel}")
    why = f"{op.name} to {format_shape(shape)}"
    if inferred:
        if sym.eq(known, 0, why):
            if sym.eq(numel, 0, why) is not False:
                raise op.error(ShapeError, f"cannot reshape tensor of 0 elements into shape "
                                           f"{format_shape(shape)} because the unspecified dimension size "
                                           f"-1 can be any value and is ambiguous")
        else:
            quotient = sympy.cancel(sympy.sympify(numel) / known)
            if sympy.fraction(quotient)[1] == 1:
                exact: Dim = sym.as_size(quotient)
            elif sym.decide(sympy.Eq(sympy.Mod(numel, known), 0), why) is not False:
                exact = sym.floordiv(numel, known)
            else:
                exact = None
            if exact is not None:
                out = list(shape)
                out[inferred[0]] = exact
                return tuple(out)
    elif sym.eq(known, numel, why) is not False:
        return shape
    raise op.error(ShapeError, f"shape '{format_shape(shape)}' is invalid for input of size "
                               f"{sym.size_text(numel)}")


@register
class Reshape(ShapeOp):
    """Same elements in row-major order under a new ``shape``; one entry may be -1 (inferred)."""

    name = "tp.reshape"
    attributes = (Attr("shape", AttrKind.INTS, doc="new sizes; one may be -1", symbolic=True),)

    def vjp(self, ctx: RuleContext, grads):
        return (grads[0].reshape(ctx.input_meta[0][0]),)

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

    def vjp(self, ctx: RuleContext, grads):
        dims = [d % len(ctx.attrs["dims"]) for d in ctx.attrs["dims"]]
        return (grads[0].permute([dims.index(i) for i in range(len(dims))]),)

    def infer(self, types, attrs):
        t = types[0]
        dims = check_permutation(self, attrs["dims"], t.rank)
        return (t.with_shape(tuple(t.shape[d] for d in dims)),)

    def reference(self, arrays, attrs):
        a = arrays[0]
        return np.transpose(a, check_permutation(self, attrs["dims"], a.ndim))


def resolve_broadcast(op: Op, in_shape: Sequence[Dim], target: Sequence[Dim]) -> tuple[Dim, ...]:
    """The result of expanding ``in_shape`` to ``target`` (PyTorch's ``expand`` rules:
    new dimensions lead, -1 keeps an existing size, only size-1 dimensions stretch)."""
    n, r = len(target), len(in_shape)
    if n < r:
        raise op.error(ShapeError, f"the number of sizes provided ({n}) must be greater or equal to the "
                                   f"number of dimensions in the tensor ({r})")
    lead = n - r
    why = f"{op.name} to {format_shape(target)}"
    out: list[Dim] = []
    for i, size in enumerate(target):
        symbolic = sym.is_symbolic(size)
        if i < lead:
            if not symbolic and size < 0:
                raise op.error(ShapeError, f"The expanded size of the tensor ({size}) isn't allowed in a "
                                           f"leading, non-existing dimension {i}")
            out.append(size)
            continue
        have = in_shape[i - lead]
        if not symbolic and size == -1:
            out.append(have)
            continue
        if symbolic or size >= 0:
            if have is None or (type(have) is int and have == 1):
                out.append(size)
                continue
            same = sym.eq(have, size, why)
            if same is None or same:
                out.append(size)
                continue
            if sym.eq(have, 1, why):
                out.append(size)
                continue
        raise op.error(ShapeError, f"The expanded size of the tensor ({sym.size_text(size)}) must match the "
                                   f"existing size ({sym.size_text(have)}) at non-singleton dimension "
                                   f"{i}.  Target sizes: {format_shape(target)}.  Tensor sizes: "
                                   f"{format_shape(in_shape)}")
    return tuple(out)


@register
class BroadcastTo(ShapeOp):
    """Repeat size-1 dimensions (and add leading ones) to reach ``shape``; -1 keeps a size."""

    name = "tp.broadcast_to"
    attributes = (Attr("shape", AttrKind.INTS, doc="target sizes; -1 keeps the input's size", symbolic=True),)

    def vjp(self, ctx: RuleContext, grads):  # the engine sums over the broadcast dims
        return (grads[0],)

    def infer(self, types, attrs):
        t = types[0]
        return (t.with_shape(resolve_broadcast(self, t.shape, attrs["shape"])),)

    def reference(self, arrays, attrs):
        a = arrays[0]
        # numpy's broadcast view (zero strides, read-only): the eager `expand` shares its
        # operand's memory, as in PyTorch, and a write into it raises PyTorch's error
        return np.broadcast_to(a, resolve_broadcast(self, a.shape, attrs["shape"]))


@register
class Concat(Op):
    """Join tensors of one dtype and rank along ``dim``; other sizes must agree."""

    name = "tp.concat"
    family = "shape"
    operands = (Operand("inputs", variadic=True),)
    attributes = (Attr("dim", AttrKind.INT, 0),)

    def vjp(self, ctx: RuleContext, grads):  # each input's slab of the gradient
        g = grads[0]
        d = ctx.attrs["dim"] % g.dim()
        out, at = [], 0
        for i, meta in enumerate(ctx.input_meta):
            n = meta[0][d]
            out.append(g.narrow(d, at, n) if ctx.needs(i) else None)
            at += n
        return tuple(out)

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
                elif b is not None and sym.eq(a, b, f"{self.name} along dim {dim}") is False:
                    raise self.error(ShapeError, f"Sizes of tensors must match except in dimension "
                                                 f"{dim}. Expected size {sym.size_text(a)} but got size "
                                                 f"{sym.size_text(b)} for tensor number {i} in the list.")
                elif type(b) is int:
                    shape[d] = b
        sizes = [t.shape[dim] for t in types]
        shape[dim] = None if any(s is None for s in sizes) else sym.as_size(sum(sizes))
        return (TensorType(tuple(shape), first.dtype),)

    def reference(self, arrays, attrs):
        return np.concatenate(arrays, axis=normalize_dim(self.name, attrs["dim"], arrays[0].ndim))


def clamp_bound(bound: Dim, size: Dim) -> Dim:
    """Python's slice rule for one bound (positive step): negative counts from the end, the
    result lies in ``[0, size]``."""
    if type(bound) is int:
        if bound >= 0:
            return size if bound >= SLICE_END else sym.size_min(bound, size)
        return sym.size_max(sym.as_size(size + bound), 0)
    negative = sym.lt(bound, 0, "a slice bound")
    if negative:
        return sym.size_max(sym.as_size(size + bound), 0)
    return sym.size_min(bound, size)


def slice_length(size: Dim, start: Dim, end: Dim, step: int) -> Dim:
    """``len(range(size)[start:end:step])`` for sizes that may be symbolic."""
    if size is None:
        return None
    if type(size) is int and type(start) is int and type(end) is int:
        return len(range(*slice(start, end, step).indices(size)))
    first, last = clamp_bound(start, size), clamp_bound(end, size)
    span = sym.size_max(sym.as_size(last - first), 0)
    n = sym.ceildiv(span, step)
    oracle = sym.current_oracle()
    return sym.as_size(oracle.simplify(n)) if oracle is not None else n


class Strided(ShapeOp):
    """Base of the ops that address a strided box: per-dimension ``starts``, ``ends`` and
    positive ``steps``, with Python's slice rules (negative bounds count from the end,
    bounds clamp to the size), so boxes over dynamic dimensions need no sizes. Starts and
    ends may be symbolic sizes."""

    attributes = (Attr("starts", AttrKind.INTS, doc="first index per dimension", symbolic=True),
                  Attr("ends", AttrKind.INTS, doc="end (exclusive) per dimension", symbolic=True),
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
            out.append(slice_length(size, start, end, step))
        return tuple(out)

    @staticmethod
    def slices(attrs) -> tuple[slice, ...]:
        return tuple(slice(b, e, s) for b, e, s in zip(attrs["starts"], attrs["ends"], attrs["steps"]))


@register
class Slice(Strided):
    """The strided box ``input[starts:ends:steps]`` (one start, end and step per dimension)."""

    name = "tp.slice"

    def vjp(self, ctx: RuleContext, grads):  # the gradient in the box, zero elsewhere
        shape, dtype = ctx.input_meta[0]
        zero = ctx.zeros(shape, grads[0].dtype, grads[0])
        box = {k: ctx.attrs[k] for k in ("starts", "ends", "steps")}
        return (ctx.apply_op("tp.slice_update", zero, grads[0], **box),)

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

    def vjp(self, ctx: RuleContext, grads):
        g = grads[0]
        box = {k: ctx.attrs[k] for k in ("starts", "ends", "steps")}
        ushape, _ = ctx.input_meta[1]
        gi = ctx.apply_op("tp.slice_update", g, ctx.zeros(ushape, g.dtype, g), **box) if ctx.needs(0) else None
        gu = ctx.apply_op("tp.slice", g, **box) if ctx.needs(1) else None
        return gi, gu

    def infer(self, types, attrs):
        t, u = types
        box = self.box(t.shape, attrs)
        if u.dtype is not t.dtype:
            raise self.error(DTypeError, f"update has dtype {u.dtype.name}, input {t.dtype.name}")
        if u.rank != len(box) or any(a is not None and b is not None
                                     and sym.eq(a, b, f"{self.name} box") is False
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

    def vjp(self, ctx: RuleContext, grads):
        return (grads[0].flip(ctx.attrs["dims"]),)

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
