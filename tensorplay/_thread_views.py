"""Per-thread views of tensors: how a capture borrows a tensor for its own thread only.

A capture running a function for the first time turns the tensors the function uses (its
tensor arguments, the parameters and buffers of its modules, a tensor it updates in place)
into capture tensors: no data, a graph value. Those objects are shared with every other
thread, which may run the same module eagerly at that moment and must see its data.

So a borrow does not change the tensor: it opens a *view* of it for the borrowing thread.
While the view is open, that thread reads and writes the tensor's ``_data``, ``_type`` and
``_capture`` in a table of its own; every other thread reads and writes the tensor itself.
The data descriptors that consult the table sit on ``Tensor`` only while some thread holds
a view (added when the first view opens, removed when the last one closes), so code that
runs while nothing is being captured reads plain instance attributes.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["open_view", "close_view", "has_view"]

FIELDS = ("_data", "_type", "_capture")

_lock = threading.Lock()
_open = 0  # views open in all threads together


class _Views(threading.local):
    #: id(tensor) -> (tensor, {field: value}) for this thread's open views
    table: dict[int, tuple[Any, dict[str, Any]]] | None = None


_views = _Views()


class _Field:
    """``Tensor.<field>`` while views are open: this thread's view of the tensor, if it has
    one, else the tensor's own attribute."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        table = _views.table
        if table:
            hit = table.get(id(obj))
            if hit is not None and hit[0] is obj:
                return hit[1][self.name]
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, obj: Any, value: Any) -> None:
        table = _views.table
        if table:
            hit = table.get(id(obj))
            if hit is not None and hit[0] is obj:
                hit[1][self.name] = value
                return
        obj.__dict__[self.name] = value

    def __delete__(self, obj: Any) -> None:
        raise AttributeError(f"cannot delete {self.name}")


def _tensor_class() -> type:
    from ._tensor import Tensor

    return Tensor


def open_view(tensor: Any, **fields: Any) -> None:
    """From now on this thread sees ``tensor`` with ``fields`` (``_data``, ``_type``,
    ``_capture``) until :func:`close_view`; other threads keep seeing the tensor as it is."""
    global _open
    table = _views.table
    if table is None:
        table = _views.table = {}
    if id(tensor) in table:
        raise RuntimeError("this thread already has a view of the tensor")
    with _lock:
        if _open == 0:
            klass = _tensor_class()
            for name in FIELDS:
                setattr(klass, name, _Field(name))
        _open += 1
    own = tensor.__dict__
    table[id(tensor)] = (tensor, {name: fields.get(name, own.get(name)) for name in FIELDS})


def close_view(tensor: Any) -> None:
    """End this thread's view of ``tensor``: it sees the tensor's own attributes again."""
    global _open
    table = _views.table
    hit = table.get(id(tensor)) if table else None
    if hit is None or hit[0] is not tensor:
        return
    del table[id(tensor)]
    with _lock:
        _open -= 1
        if _open == 0:
            klass = _tensor_class()
            for name in FIELDS:
                delattr(klass, name)


def has_view(tensor: Any) -> bool:
    """Whether this thread sees ``tensor`` through a view."""
    table = _views.table
    hit = table.get(id(tensor)) if table else None
    return hit is not None and hit[0] is tensor
