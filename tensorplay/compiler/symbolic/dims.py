"""``Dim``: a named dynamic dimension for ``dynamic_shapes`` specs (compile and export)."""

from __future__ import annotations

from typing import Any

__all__ = ["Dim"]


class Dim:
    """A named dimension whose size may change between calls, with optional bounds.

    >>> batch = Dim("batch", min=1, max=64)
    >>> batch
    Dim('batch', min=1, max=64)

    Dims with the same name are one size: every argument dimension given that name must have
    the same size in a call. A call (or an export example) outside ``[min, max]`` is a
    ``ValueError`` naming the argument and dimension.
    """

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):  # noqa: A002
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim(name={name!r}): the name must be a Python identifier")
        for label, v in (("min", min), ("max", max)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"Dim({name!r}, {label}={v!r}): expected a non-negative int or None")
        if min is not None and max is not None and max < min:
            raise ValueError(f"Dim({name!r}, min={min}, max={max}): max is below min")
        self.__name__ = name
        self.min = min
        self.max = max

    @property
    def name(self) -> str:
        return self.__name__

    def contains(self, size: int) -> bool:
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)

    def describe_range(self) -> str:
        lo = self.min if self.min is not None else 0
        return f"[{lo}, {self.max if self.max is not None else 'inf'}]"

    def __repr__(self) -> str:
        parts = [repr(self.__name__)]
        if self.min is not None:
            parts.append(f"min={self.min}")
        if self.max is not None:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Dim) and (self.__name__, self.min, self.max) == (other.__name__, other.min, other.max)

    def __hash__(self) -> int:
        return hash((Dim, self.__name__, self.min, self.max))
