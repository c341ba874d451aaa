"""Shape rules shared by op families: broadcasting and dimension normalization.

Messages follow PyTorch's wording so users recognise them; each names the op.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .errors import DimError, ShapeError
from .types import Dim

__all__ = ["broadcast_shapes", "normalize_dim", "normalize_dims", "format_shape", "same_dim"]


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def same_dim(a: Dim, b: Dim) -> bool:
    if a is None or b is None:
        return True  # only known at run time; checked there
    return bool(a == b)


def broadcast_shapes(op: str, *shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """The broadcast of ``shapes`` (numpy/PyTorch rules), or a ShapeError naming the op."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        result: Dim = 1
        for k, s in enumerate(shapes):
            j = len(s) - rank + i
            if j < 0:
                continue
            d = s[j]
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(result, int) and result == 1:
                result = d
            elif d is None:
                continue
            elif result is None:
                result = d
            elif result != d:
                a_name, b_name = "a", "b"
                raise ShapeError(
                    f"{op}: The size of tensor {a_name} ({result}) must match the size of tensor "
                    f"{b_name} ({d}) at non-singleton dimension {i}; cannot broadcast shapes "
                    + " and ".join(format_shape(s) for s in shapes))
        out.append(result)
    return tuple(out)


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
