"""Matrix products and ``einsum``.

Every product is ``tp.matmul`` (PyTorch's ``matmul`` rules, batch dims broadcast) after the
checks PyTorch makes for the narrower functions (``mm`` takes matrices, ``bmm`` equal
batches, ``dot`` vectors). ``einsum`` is a composition: diagonals by reshape and strided
slice, operands aligned by permute and reshape, private dims summed, then a left-to-right
chain of pairwise contractions, each a batched ``tp.matmul`` (or a product when nothing is
summed), the order PyTorch uses, so results and dtypes agree with it. ``cdist`` takes
PyTorch's two routes: for p=2 with more than 25 rows (or when asked) a matrix product of
operands padded with their squared norms, else the norms of all pairwise differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..amp import autocast_mode as _amp
from .._dispatch import apply
from .._tensor import Tensor
from ..dialects.tp.errors import DTypeError, ShapeError
from ..dialects.tp.shapes import format_shape
from . import elementwise
from . import reduction
from .shape import reshape_to, slice_dim
from ._public import exported, public


def _tensor(op: str, value: Any, name: str, position: int) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor._wrap(value)
    raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not "
                    f"{type(value).__name__}")


@public(method=True, ufunc="matmul",
        array_function={"matmul": None, "dot": lambda a, b, out=None: ((a, b), {})})
@_amp.policy("lower")
def matmul(input: Any, other: Any) -> Tensor:
    """Matrix product with broadcasting batch dims; 1-D operands are vectors (``@``).

    >>> import tensorplay as tp
    >>> (tp.ones(2, 3) @ tp.ones(3)).tolist()
    [3.0, 3.0]
    """
    return apply("tp.matmul", _tensor("matmul", input, "input", 1), _tensor("matmul", other, "other", 2))


@public(method=True)
@_amp.policy("lower")
def mm(input: Any, mat2: Any) -> Tensor:
    """Product of two matrices (2-D only)."""
    a, b = _tensor("mm", input, "input", 1), _tensor("mm", mat2, "mat2", 2)
    if a.ndim != 2:
        raise ShapeError(f"mm: self must be a matrix, got a tensor of size {format_shape(a.shape)}")
    if b.ndim != 2:
        raise ShapeError(f"mm: mat2 must be a matrix, got a tensor of size {format_shape(b.shape)}")
    return apply("tp.matmul", a, b)


@public(method=True)
@_amp.policy("lower")
def bmm(input: Any, mat2: Any) -> Tensor:
    """Batched matrix product of two 3-D tensors with equal batch sizes (no broadcasting)."""
    a, b = _tensor("bmm", input, "input", 1), _tensor("bmm", mat2, "mat2", 2)
    if a.ndim != 3:
        raise ShapeError(f"bmm: batch1 must be a 3D tensor, got size {format_shape(a.shape)}")
    if b.ndim != 3:
        raise ShapeError(f"bmm: batch2 must be a 3D tensor, got size {format_shape(b.shape)}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ShapeError(f"bmm: Expected size for first two dimensions of batch2 tensor to be: "
                         f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return apply("tp.matmul", a, b)


@public
@_amp.policy("lower", cpu=False)
def mv(input: Any, vec: Any) -> Tensor:
    """Product of a matrix and a vector."""
    a, v = _tensor("mv", input, "input", 1), _tensor("mv", vec, "vec", 2)
    if a.ndim != 2 or v.ndim != 1:
        raise ShapeError(f"mv: vector + matrix @ vector expected, got {a.ndim}, {v.ndim}")
    if a.shape[1] != v.shape[0]:
        raise ShapeError(f"mv: size mismatch, got input ({a.shape[0]}), mat "
                         f"({a.shape[0]}x{a.shape[1]}), vec ({v.shape[0]})")
    return apply("tp.matmul", a, v)


@public(method=True)
def dot(input: Any, tensor: Any) -> Tensor:
    """Inner product of two vectors of the same size and dtype (a 0-d tensor)."""
    a, b = _tensor("dot", input, "input", 1), _tensor("dot", tensor, "tensor", 2)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise DTypeError(f"dot: expected both vectors to have same dtype, but found "
                         f"{a.dtype.name} and {b.dtype.name}")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"dot: inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                         f"[{b.shape[0]}] to have the same number of elements, but got "
                         f"{a.shape[0]} and {b.shape[0]} elements respectively")
    return apply("tp.matmul", a, b)


@public
def inner(input: Any, other: Any) -> Tensor:
    """Sum of products over the last dims; a 0-d operand scales the other."""
    a, b = _tensor("inner", input, "input", 1), _tensor("inner", other, "other", 2)
    if a.ndim == 0 or b.ndim == 0:
        return elementwise.mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"inner: inner() the last dimension must match on both input tensors "
                         f"but got shapes {format_shape(a.shape)} and {format_shape(b.shape)}")
    left = _LETTERS[:a.ndim - 1]
    right = _LETTERS[a.ndim - 1:a.ndim + b.ndim - 2]
    return einsum(f"{left}z,{right}z->{left}{right}", a, b)


@public(method=True, aliases=("ger",))
def outer(input: Any, vec2: Any) -> Tensor:
    """Outer product of two vectors, ``input[i] * vec2[j]`` (dtypes promote as for ``*``)."""
    a, b = _tensor("outer", input, "input", 1), _tensor("outer", vec2, "vec2", 2)
    for name, v in (("self", a), ("vec2", b)):
        if v.ndim != 1:
            raise ShapeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return elementwise.mul(reshape_to(a, (a.shape[0], 1), "outer"), reshape_to(b, (1, b.shape[0]), "outer"))


# --- einsum ------------------------------------------------------------------------------

# Label order of implicit outputs: uppercase before lowercase, as in PyTorch.
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ELLIPSIS = -1  # marker in a parsed subscript list


class _EinsumError(ShapeError):
    """A malformed equation or operands that do not fit it."""


def _err(message: str) -> _EinsumError:
    return _EinsumError(f"einsum(): {message}")


def _parse_term(term: str, offset: int, what: str) -> list[int]:
    """Label indices (0..51) of one subscript term, with ``_ELLIPSIS`` for ``...``."""
    out: list[int] = []
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == ".":
            if term[i:i + 3] != "...":
                raise _err(f"found '.' for {what} that is not part of any ellipsis")
            if _ELLIPSIS in out:
                raise _err(f"found more than one ellipsis ('...') for {what}")
            out.append(_ELLIPSIS)
            i += 3
            continue
        if ch not in _LETTERS:
            raise _err(f"invalid subscript given at index {offset + i} in the equation string, "
                       f"subscripts must be in [a-zA-Z]")
        out.append(_LETTERS.index(ch))
        i += 1
    return out


def _parse(equation: str, n_operands: int) -> tuple[list[list[int]], list[int] | None]:
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms, offset = [], 0
    for k, term in enumerate(lhs.split(",")):
        terms.append(_parse_term(term, offset, f"operand {k}"))
        offset += len(term) + 1
    if len(terms) > n_operands:
        raise _err("fewer operands were provided than specified in the equation")
    if len(terms) < n_operands:
        raise _err("more operands were provided than specified in the equation")
    if not arrow:
        return terms, None
    output = _parse_term(rhs, len(lhs) + 2, "the output")
    seen = set()
    for label in output:
        if label in seen and label != _ELLIPSIS:
            raise _err(f"output subscript {_LETTERS[label]} appears more than once in the output")
        seen.add(label)
        if label != _ELLIPSIS and not any(label in t for t in terms):
            raise _err(f"output subscript {_LETTERS[label]} does not appear in the equation for "
                       f"any input operand")
    return terms, output


def _from_sublists(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as an equation string and its operands."""
    def term(sub: Any) -> str:
        text = ""
        for s in sub:
            if s is Ellipsis:
                text += "..."
            elif isinstance(s, (int, np.integer)) and 0 <= s < len(_LETTERS):
                text += _LETTERS[s]
            else:
                raise _err(f"subscript in subscript list is not within the valid range "
                           f"[0, {len(_LETTERS)}), got {s!r}")
        return text

    operands = list(args[0::2][: len(args) // 2])
    terms = [term(s) for s in args[1::2][: len(args) // 2]]
    equation = ",".join(terms)
    if len(args) % 2:
        equation += "->" + term(args[-1])
    return equation, operands


def _diagonals(x: Tensor, labels: list[Any], index: int) -> tuple[Tensor, list[Any]]:
    """``x`` with each repeated label reduced to its diagonal (one dim per label)."""
    while True:
        repeated = next((lab for lab in labels if labels.count(lab) > 1), None)
        if repeated is None:
            return x, labels
        p = labels.index(repeated)
        q = labels.index(repeated, p + 1)
        n, m = x.shape[p], x.shape[q]
        if n != m:
            raise _err(f"subscript {_LETTERS[repeated]} is repeated for operand {index} but the "
                       f"sizes don't match, {n} != {m}")
        rest = [d for d in range(x.ndim) if d not in (p, q)]
        x = apply("tp.permute", x, dims=rest + [p, q])
        # the diagonal of an n x n block is every (n+1)-th element of its flattening
        x = reshape_to(x, tuple(x.shape[:-2]) + (n * n,), "einsum")
        x = slice_dim(x, x.ndim - 1, 0, n * n, n + 1)
        labels = [labels[d] for d in rest] + [repeated]


def _contract_pair(a: Tensor, b: Tensor, sum_dims: list[int]) -> Tensor:
    """Product of two aligned operands summed over ``sum_dims``, as one batched matmul."""
    if not sum_dims:
        return elementwise.mul(a, b)
    rank = a.ndim
    batch, left, right, ones = [], [], [], []
    for d in range(rank):
        if d in sum_dims:
            continue
        a1, b1 = a.shape[d] == 1, b.shape[d] == 1
        if not a1 and not b1:
            batch.append(d)
        elif not a1:
            left.append(d)
        elif not b1:
            right.append(d)
        else:
            ones.append(d)

    def prod(x: Tensor, dims: list[int]) -> Any:
        n = 1
        for d in dims:
            if x.shape[d] is None:
                return None  # known at run time; reshape infers it
            n *= x.shape[d]
        return n

    a_rest = [d for d in range(rank) if d not in batch + left + sum_dims]
    b_rest = [d for d in range(rank) if d not in batch + sum_dims + right]
    at = apply("tp.permute", a, dims=batch + left + sum_dims + a_rest)
    bt = apply("tp.permute", b, dims=batch + sum_dims + right + b_rest)
    at = reshape_to(at, (prod(a, batch), prod(a, left), prod(a, sum_dims)), "einsum")
    bt = reshape_to(bt, (prod(b, batch), prod(b, sum_dims), prod(b, right)), "einsum")
    out = apply("tp.matmul", at, bt)
    order = batch + left + right + sum_dims + ones
    sizes = ([a.shape[d] for d in batch] + [a.shape[d] for d in left] + [b.shape[d] for d in right]
             + [1] * (len(sum_dims) + len(ones)))
    out = reshape_to(out, tuple(sizes), "einsum")
    inverse = [order.index(d) for d in range(rank)]
    return apply("tp.permute", out, dims=inverse)


@public(array_function={"einsum": lambda eq, *ops, **k: ((eq, *ops), {})})
@_amp.policy("lower", cpu=False)
def einsum(*args: Any) -> Tensor:
    """Sum of products over the labelled dims of the operands, as in ``numpy.einsum``.

    Accepts ``einsum("ij,jk->ik", a, b)``, ``einsum("ij,jk", [a, b])`` (implicit output:
    labels seen once, sorted, after any ellipsis dims) and the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. Repeated labels in one operand take its diagonal.

    >>> import tensorplay as tp
    >>> tp.einsum("ij,jk->ik", tp.ones(2, 3), tp.ones(3, 4)).shape
    tensorplay.Size([2, 4])
    """
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand")
    if isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    else:
        equation, operands = _from_sublists(args)
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    operands = [_tensor("einsum", op, "operands", i + 1) for i, op in enumerate(operands)]
    terms, output = _parse(equation, len(operands))

    # Expand each ellipsis into labels 52, 53, ... shared (right-aligned) by all operands.
    n_ellipsis = 0
    for k, (term, x) in enumerate(zip(terms, operands)):
        named = len(term) - (_ELLIPSIS in term)
        if _ELLIPSIS in term:
            if named > x.ndim:
                raise _err(f"the number of subscripts in the equation ({named}) is more than the "
                           f"number of dimensions ({x.ndim}) for operand {k}")
            n_ellipsis = max(n_ellipsis, x.ndim - named)
        elif named != x.ndim:
            raise _err(f"the number of subscripts in the equation ({named}) does not match the "
                       f"number of dimensions ({x.ndim}) for operand {k} and no ellipsis was given")
    ell = [len(_LETTERS) + j for j in range(n_ellipsis)]
    labels_per_op: list[list[int]] = []
    for term, x in zip(terms, operands):
        if _ELLIPSIS in term:
            p = term.index(_ELLIPSIS)
            count = x.ndim - (len(term) - 1)
            term = term[:p] + ell[n_ellipsis - count:] + term[p + 1:]
        labels_per_op.append(term)
    if output is None:
        counts: dict[int, int] = {}
        for term in labels_per_op:
            for lab in term:
                counts[lab] = counts.get(lab, 0) + 1
        output = ell + sorted(lab for lab, c in counts.items() if c == 1 and lab < len(_LETTERS))
    elif _ELLIPSIS in output:
        p = output.index(_ELLIPSIS)
        output = output[:p] + ell + output[p + 1:]

    # Take diagonals, then align every operand to one label order (output labels first).
    prepared = [_diagonals(x, list(term), k) for k, (x, term) in enumerate(zip(operands, labels_per_op))]
    order = list(output)
    for _, term in prepared:
        order += [lab for lab in term if lab not in order]
    n_out, rank = len(output), len(order)
    sizes: dict[int, tuple[int, Any]] = {}
    aligned: list[Tensor] = []
    for k, (x, term) in enumerate(prepared):
        for dim, lab in enumerate(term):
            size = x.shape[dim]
            if size == 1:
                continue
            if lab in sizes and sizes[lab][1] != size:
                name = _LETTERS[lab] if lab < len(_LETTERS) else "..."
                raise _err(f"subscript {name} has size {size} for operand {k} which does not "
                           f"broadcast with previously seen size {sizes[lab][1]}")
            sizes.setdefault(lab, (k, size))
        present = [lab for lab in order if lab in term]
        x = apply("tp.permute", x, dims=[term.index(lab) for lab in present]) if present != term else x
        full = tuple(x.shape[present.index(lab)] if lab in present else 1 for lab in order)
        aligned.append(reshape_to(x, full, "einsum"))

    contracted = list(range(n_out, rank))
    out_shape = tuple(sizes[lab][1] if lab in sizes else 1 for lab in output)
    if len(aligned) == 1:
        result = aligned[0]
        if contracted:
            result = reduction.sum(result, contracted)
        return reshape_to(result, out_shape, "einsum")

    # How many operands still hold each contracted dim with a size other than 1.
    holders = {d: sum(1 for x in aligned if x.shape[d] != 1) for d in contracted}
    for k, x in enumerate(aligned):
        private = [d for d in contracted if x.shape[d] != 1 and holders[d] == 1]
        if private:
            aligned[k] = reduction.sum(x, private, keepdim=True)
            for d in private:
                holders[d] = 0
    result = aligned[0]
    for b in aligned[1:]:
        sum_dims = []
        for d in contracted:
            in_a, in_b = result.shape[d] != 1, b.shape[d] != 1
            if in_a and in_b:
                holders[d] -= 1
                if holders[d] == 1:
                    sum_dims.append(d)
                    holders[d] = 0
            elif holders[d] == 1 and (in_a or in_b):
                if in_a:
                    result = reduction.sum(result, [d], keepdim=True)
                else:
                    b = reduction.sum(b, [d], keepdim=True)
                holders[d] = 0
        result = _contract_pair(result, b, sum_dims)
    return reshape_to(result, out_shape, "einsum")


_CDIST_MODES = {
    "use_mm_for_euclid_dist_if_necessary": None,
    "use_mm_for_euclid_dist": True,
    "donot_use_mm_for_euclid_dist": False,
}


def _guarded_pow(v: Tensor, exponent: float) -> Tensor:
    """``v ** exponent`` for ``v >= 0`` whose gradient is 0 (not NaN) where ``v`` is 0, as
    PyTorch's cdist backward; the plain power when nothing is recorded."""
    from . import creation
    from ._helpers import tracking

    if not tracking(v):
        return elementwise.pow(v, exponent)
    zero = elementwise.eq(v, 0)
    return elementwise.where(zero, elementwise.mul(v, 0), elementwise.pow(elementwise.where(zero, creation.ones((), dtype=v.dtype), v), exponent))


def _euclidean_by_matmul(a: Tensor, b: Tensor) -> Tensor:
    """Distances from ``|a|^2 - 2 a.b + |b|^2``, one batched product of padded operands."""
    from . import creation
    from ._helpers import sqrt_zero_grad
    from .shape import cat, transpose

    a_norm = reduction.sum(elementwise.mul(a, a), -1, True)
    b_norm = reduction.sum(elementwise.mul(b, b), -1, True)
    left = cat([elementwise.mul(a, -2), a_norm, creation.ones_like(a_norm)], -1)
    right = cat([b, creation.ones_like(b_norm), b_norm], -1)
    return sqrt_zero_grad(elementwise.clamp(matmul(left, transpose(right, -1, -2)), min=0))


def _pairwise(a: Tensor, b: Tensor, p: float) -> Tensor:
    """p-norms of every difference of a row of ``a`` and a row of ``b``."""
    import math

    from . import creation
    from ._helpers import sqrt_zero_grad
    from .shape import unsqueeze

    diff = elementwise.sub(unsqueeze(a, -2), unsqueeze(b, -3))
    if p == 0:  # the nonzero count (NaN counts), through sign so the gradient is 0, as PyTorch's
        nonzero = elementwise.abs(elementwise.sign(diff))
        return reduction.sum(elementwise.where(elementwise.isnan(nonzero), creation.ones((), dtype=diff.dtype), nonzero), -1)
    if p == math.inf:
        if diff.shape[-1] == 0:  # no columns: every distance is 0 (a sum over nothing)
            return reduction.sum(elementwise.abs(diff), -1)
        return reduction.amax(elementwise.abs(diff), -1)
    if p == 1:
        return reduction.sum(elementwise.abs(diff), -1)
    if p == 2:
        return sqrt_zero_grad(reduction.sum(elementwise.mul(diff, diff), -1))
    return _guarded_pow(reduction.sum(_guarded_pow(elementwise.abs(diff), p), -1), 1.0 / p)


@public
@_amp.policy("fp32")
def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance of every row of ``x1`` (``[*, P, M]``) to every row of ``x2``
    (``[*, R, M]``): a ``[*, P, R]`` tensor, batch dims broadcast. For p=2 the distances come
    from a matrix product when either operand has more than 25 rows (``compute_mode``:
    ``"use_mm_for_euclid_dist"`` always, ``"donot_use_mm_for_euclid_dist"`` never), as in
    PyTorch; other p take the differences themselves."""
    import math

    from ._helpers import is_scalar

    a, b = _tensor("cdist", x1, "x1", 1), _tensor("cdist", x2, "x2", 2)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    if not is_scalar(p) or isinstance(p, (bool, np.bool_)):
        raise TypeError(f"cdist(): argument 'p' must be a number, not {type(p).__name__}")
    p = float(p)
    for name, t in (("X1", a), ("X2", b)):
        if t.ndim < 2:
            raise ShapeError(f"cdist: cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"cdist: X1 and X2 must have the same number of columns. X1: {a.shape[-1]} "
                         f"X2: {b.shape[-1]}")
    for name, t in (("X1", a), ("X2", b)):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"cdist: cdist only supports floating-point dtypes, {name} got: {t.dtype.name}")
        if t.dtype.computes_in is not t.dtype:
            raise DTypeError(f"cdist: not implemented for dtype {t.dtype.name} (use float32 or float64)")
    if a.dtype is not b.dtype:
        raise DTypeError(f"cdist: X1 and X2 must have the same dtype, got {a.dtype.name} and {b.dtype.name}")
    if math.isnan(p) or p < 0:
        raise ValueError("cdist: cdist only supports non-negative p values")
    use_mm = _CDIST_MODES[compute_mode]
    if p == 2 and a.numel() != 0 and b.numel() != 0 and (
            use_mm or (use_mm is None and (a.shape[-2] > 25 or b.shape[-2] > 25))):
        return _euclidean_by_matmul(a, b)
    return _pairwise(a, b, p)


__all__ = exported(__name__)  # the names declared @public above
