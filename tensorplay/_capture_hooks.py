"""What eager code asks of an active capture: a concrete value, or a rebinding.

A tensor with no data stands for a value inside a graph being captured. When Python
needs its data (``bool(t)``, ``t.item()``, ``t.numpy()``) or updates it in place, the
installed capture handler decides: graph break, error, or a new graph value. Library code
(autograd, optimizers, gradient clipping) asks :func:`active_handler` for the handler's
other hooks (:class:`~tensorplay._capture_handler.CaptureHandler`). The compiler learns
which library types to guard by identity from :func:`guard_by_identity`, which those types'
modules call, so it imports none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._capture_handler import NO_CAPTURE, CaptureHandler
from ._dispatch import current_handler

__all__ = ["CaptureHandler", "active_handler", "needs_concrete_value", "rebind", "random_source", "display_value",
           "symbolic_sizes", "concrete_symbolic_type", "guard_by_identity", "identity_guarded_types"]


def active_handler() -> CaptureHandler:
    """The installed dispatch handler as a :class:`CaptureHandler`: the handler itself where it
    declares the interface, else :data:`NO_CAPTURE` (nothing installed, or a bare callable that
    only records ops), whose hooks take the eager path."""
    handler = current_handler()
    if handler is None or CaptureHandler not in type(handler).__mro__:
        return NO_CAPTURE
    return handler


def needs_concrete_value(tensor: Any, why: str) -> Any:
    return active_handler().concrete_value(tensor, why)


def display_value(tensor: Any, why: str) -> None:
    """Printing a captured tensor: the active capture may make it concrete first (a graph
    break); otherwise it prints as a placeholder."""
    active_handler().display_value(tensor, why)


def symbolic_sizes(tensor: Any, shape: tuple) -> tuple:
    """The shape of a captured tensor with symbolic sizes as user code sees it (ints and
    SymInts from the active capture); outside a capture, the raw entries."""
    return active_handler().symbolic_sizes(tensor, shape)


def concrete_symbolic_type(tensor: Any) -> Any:
    """The symbolic type the capture that ran ``tensor``'s segment keeps for it (a TensorType
    with size symbols), while that capture is the active one and traces at its top level;
    else None (the tensor's concrete type applies)."""
    owner, ttype = tensor._sym
    if current_handler() is not owner or owner.in_region():
        return None
    return ttype


def rebind(tensor: Any, value: Any) -> None:
    active_handler().rebind(tensor, value)


def random_source(fn: Callable[..., Any] | None = None, *,
                  size: Callable[[tuple, dict], Any] | None = None) -> Any:
    """Mark a function that draws from a host random generator: the active capture's
    ``random_call`` hook decides how the draw enters the graph (eager calls are unchanged).
    ``size(args, kwargs)`` returns the result's shape as given in the call (entries may be
    symbolic sizes), which lets a capture keep a draw's size symbolic."""
    if fn is None:
        return lambda f: random_source(f, size=size)
    fn.random_size = size  # type: ignore[attr-defined]

    @functools.wraps(fn)
    def draw(*args: Any, **kwargs: Any) -> Any:
        return active_handler().random_call(fn, args, kwargs)

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
