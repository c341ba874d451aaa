"""Shape rules shared by op families: broadcasting and dimension normalization.

Messages follow PyTorch's wording so users recognise them; each names the op. Sizes may
be symbolic (sympy expressions, see :mod:`.symbolic`): questions about them (are these equal?
is this one 1?) go through :func:`.symbolic.decide`, which a running capture answers with a
guard.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import symbolic as sym
from .errors import DimError, ShapeError
from .types import Dim

__all__ = ["broadcast_shapes", "normalize_dim", "normalize_dims", "format_shape", "same_dim"]


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(sym.size_text(d) for d in shape) + "]"


def same_dim(a: Dim, b: Dim, why: str = "sizes must match") -> bool:
    """False only when ``a`` and ``b`` are known to differ: unknown sizes are checked at run
    time, symbolic ones are decided (and guarded) by the running capture."""
    return sym.same_size(a, b, why)


def broadcast_shapes(op: str, *shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """The broadcast of ``shapes`` (numpy/PyTorch rules), or a ShapeError naming the op.

    Symbolic sizes are first asked whether they are equal (then nothing broadcasts, whatever
    the value); only sizes that differ are asked whether they are 1."""
    rank = max((len(s) for s in shapes), default=0)
    why = f"broadcasting in {op}"
    out: list[Dim] = []
    for i in range(rank):
        result: Dim = 1
        for s in shapes:
            j = len(s) - rank + i
            if j < 0:
                continue
            d = s[j]
            if type(d) is int and d == 1:
                continue
            if type(result) is int and result == 1:
                result = d
            elif d is None:
                continue
            elif result is None:
                result = d
            elif type(result) is int and type(d) is int:
                if result != d:
                    _broadcast_error(op, shapes, i, result, d)
            else:
                same = sym.eq(result, d, why)
                if same is None:
                    continue  # unknown without a capture: checked at run time
                if same:
                    if type(d) is int:
                        result = d
                elif sym.eq(d, 1, why):
                    continue
                elif sym.eq(result, 1, why):
                    result = d
                else:
                    _broadcast_error(op, shapes, i, result, d)
        out.append(result)
    return tuple(out)


def _broadcast_error(op: str, shapes: Sequence[Sequence[Dim]], i: int, a: Dim, b: Dim) -> None:
    raise ShapeError(
        f"{op}: The size of tensor a ({sym.size_text(a)}) must match the size of tensor "
        f"b ({sym.size_text(b)}) at non-singleton dimension {i}; cannot broadcast shapes "
        + " and ".join(format_shape(s) for s in shapes))


def normalize_dim(op: str, dim: int, rank: int) -> int:
    """``dim`` in ``[0, rank)``; a 0-d tensor accepts dims -1 and 0, as in PyTorch."""
    r = max(rank, 1)
    if not -r <= dim < r:
        raise DimError(f"{op}: Dimension out of range (expected to be in range of "
                       f"[{-r}, {r - 1}], but got {dim})")
    return dim % r if rank > 0 else 0


def normalize_dims(op: str, dims: Iterable[int] | None, rank: int) -> tuple[int, ...]:
    """Sorted, de-duplicated dims; ``None`` (or empty) means every dimension."""
    if dims is None:
        return tuple(range(rank))
    out = [normalize_dim(op, d, rank) for d in dims]
    if len(set(out)) != len(out):
        raise DimError(f"{op}: dim {sorted(out)} appears multiple times in the list of dims")
    return tuple(sorted(out)) if rank > 0 else ()
