"""What eager tensor code asks of an active capture: a concrete value, or a rebinding.

A tensor with no data stands for a value inside a graph being captured. When Python
needs its data (``bool(t)``, ``t.item()``, ``t.numpy()``) or updates it in place, the
installed capture handler decides: graph break, error, or a new graph value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._dispatch import current_handler

__all__ = ["needs_concrete_value", "rebind", "random_source", "display_value", "symbolic_sizes",
           "concrete_symbolic_type"]


def needs_concrete_value(tensor: Any, why: str) -> Any:
    handler = current_handler()
    concrete = getattr(handler, "concrete_value", None)
    if concrete is None:
        raise RuntimeError(f"{why}: this tensor stands for a value of a captured graph and has no "
                           f"data outside the capture that made it")
    return concrete(tensor, why)


def display_value(tensor: Any, why: str) -> None:
    """Printing a captured tensor: the active capture may make it concrete first (a graph
    break); otherwise it prints as a placeholder."""
    hook = getattr(current_handler(), "display_value", None)
    if hook is not None:
        hook(tensor, why)


def symbolic_sizes(tensor: Any, shape: tuple) -> tuple:
    """The shape of a captured tensor with symbolic sizes as user code sees it (ints and
    SymInts from the active capture); outside a capture, the raw entries."""
    hook = getattr(current_handler(), "symbolic_sizes", None)
    return shape if hook is None else hook(tensor, shape)


def concrete_symbolic_type(tensor: Any) -> Any:
    """The symbolic type the capture that ran ``tensor``'s segment keeps for it (a TensorType
    with size symbols), while that capture is the active one and traces at its top level;
    else None (the tensor's concrete type applies)."""
    owner, ttype = tensor._sym
    if current_handler() is not owner or owner.in_region():
        return None
    return ttype


def rebind(tensor: Any, value: Any) -> None:
    handler = current_handler()
    hook = getattr(handler, "rebind", None)
    if hook is None:
        raise RuntimeError("in-place update of a captured tensor outside its capture")
    hook(tensor, value)


def random_source(fn: Callable[..., Any] | None = None, *,
                  size: Callable[[tuple, dict], Any] | None = None) -> Any:
    """Mark a function that draws from a host random generator: an active capture with a
    ``random_call`` hook decides how the draw enters the graph (eager calls are unchanged).
    ``size(args, kwargs)`` returns the result's shape as given in the call (entries may be
    symbolic sizes), which lets a capture keep a draw's size symbolic."""
    if fn is None:
        return lambda f: random_source(f, size=size)
    fn.random_size = size  # type: ignore[attr-defined]

    @functools.wraps(fn)
    def draw(*args: Any, **kwargs: Any) -> Any:
        hook = getattr(current_handler(), "random_call", None)
        if hook is None:
            return fn(*args, **kwargs)
        return hook(fn, args, kwargs)

    return draw


#: types whose values a traced function reads are guarded by identity, not by content (their
#: state changes every step; what a compiled step reads of it is a graph input or guarded by
#: the object itself): optimizers and schedules register themselves
identity_guarded_types: tuple[type, ...] = ()


def guard_by_identity(cls: type) -> type:
    """Register ``cls`` with :data:`identity_guarded_types` (usable as a class decorator)."""
    global identity_guarded_types
    if cls not in identity_guarded_types:
        identity_guarded_types = (*identity_guarded_types, cls)
    return cls
