"""Markers that decide where a graph ends: ``allow_in_graph`` (one unbroken piece),
``disallow_in_graph`` / ``disable`` / ``unused`` / ``disable_capture`` (run eagerly between
graphs)."""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from . import _session
from ._intercept import register_disallowed
from ._redirect import route, routed_marker
from ._session import current_capture, describe

__all__ = ["allow_in_graph", "disallow_in_graph", "disable", "disable_capture", "unused",
           "is_unused", "marker_of"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def marker_of(fn: Any) -> str | None:
    """The name of the marker that made wrapper ``fn`` (``"disable"``, ...), or that acts on
    calls of ``fn`` itself (``"allow_in_graph"`` on a marked function), else None."""
    return getattr(fn, "_tp_marker", None) or routed_marker(fn)


def _check_callable(marker: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"{marker}() expects a callable, got {type(fn).__qualname__}")


def allow_in_graph(fn: Any) -> Any:
    """Capture a callable as one graph operation without entering its body.

    Under capture the body of ``fn`` is traced into the current graph as one unbroken piece,
    and anything inside that would break the graph raises GraphCaptureError naming ``fn``;
    this holds for calls of ``fn`` itself and of the returned wrapper. Eager calls run ``fn``.
    A list or tuple of callables marks each one.
    """
    if isinstance(fn, (list, tuple)):
        return type(fn)(allow_in_graph(f) for f in fn)
    _check_callable("allow_in_graph", fn)
    name = f"allow_in_graph function {describe(fn)}"

    def atomic(call: Callable[..., Any]) -> Callable[..., Any]:
        return lambda cap, args, kwargs: cap.call_atomic(call, args, kwargs, name)

    route(fn, "allow_in_graph", atomic)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return fn(*args, **kwargs)
        return cap.call_atomic(fn, args, kwargs, name)

    wrapper._tp_marker = "allow_in_graph"
    return wrapper


def disallow_in_graph(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that a callable must not be absorbed into a captured graph.

    The tracer treats calls to ``fn`` as region boundaries: the surrounding pieces are
    captured as separate graphs and ``fn`` itself runs eagerly between them. Under eager
    execution the marker is inert metadata, so the callable is returned unchanged.
    """
    if isinstance(fn, (list, tuple)):
        for f in fn:
            disallow_in_graph(f)
        return fn
    _check_callable("disallow_in_graph", fn)
    register_disallowed(fn)
    return fn


def _disable_reason(fn: Any, reason: str | None) -> str:
    text = f"call to {describe(fn)}, marked with tensorplay.compiler.disable"
    return f"{text}: {reason}" if reason else text


def _compiled_original(obj: Any) -> Any:
    """The eager callable behind a compiled function, or None when ``obj`` is not one."""
    from ..api import CompiledFunction

    return obj.original if isinstance(obj, CompiledFunction) else None


def disable(fn: Callable[_P, _R] | None = None, recursive: bool = True, *,
            reason: str | None = None) -> Any:
    """Prevent capture from entering a callable.

    ``fn`` runs eagerly on every call, also when called from compiled code (a graph break whose
    report includes ``reason``). ``recursive=True``: compiled callables that ``fn`` calls run
    eagerly too; ``recursive=False``: they keep compiling. Applied to a compiled wrapper it
    returns the original callable, disabled; applied to a module it disables its ``forward``.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if not isinstance(recursive, bool):
        raise TypeError(f"disable(): recursive must be a bool, got {recursive!r}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"disable(): reason must be a string, got {type(reason).__qualname__}")
    original = _compiled_original(fn)
    if original is not None:
        return disable(original, recursive, reason=reason)
    from ...nn.modules.module import Module
    from ..api import CompiledModule

    if isinstance(fn, CompiledModule):  # the wrapper runs the original module eagerly
        object.__setattr__(fn, "forward", disable(fn._orig_mod.__call__, recursive, reason=reason))
        return fn
    if isinstance(fn, Module):
        object.__setattr__(fn, "forward", disable(fn.forward, recursive, reason=reason))
        return fn
    _check_callable("disable", fn)
    text = _disable_reason(fn, reason)

    def run(*args: Any, **kwargs: Any) -> Any:
        if recursive:
            with _session.forcing_eager():
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return run(*args, **kwargs)
        return cap.run_eagerly(run, args, kwargs, text)

    wrapper._tp_marker = "disable"
    wrapper._tp_disable_recursive = recursive
    wrapper._tp_disable_reason = reason
    return wrapper


@contextlib.contextmanager
def disable_capture() -> Iterator[None]:
    """Suspend the public capture state for a dynamic Python region.

    Inside the block ops run eagerly on concrete values, ``is_compiling()`` is False and
    compiled callables run their original Python; under capture entering the block is a graph
    break (GraphCaptureError under fullgraph).
    """
    cap = current_capture()
    with _session.forcing_eager():
        if cap is None:
            yield
            return
        with _session.eager_after_break(cap, "tensorplay.compiler.disable_capture() block"):
            yield


def unused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a callable as an eager-only helper.

    Eager calls run it; a call during capture (of ``fn`` itself or of the returned wrapper) is
    a graph break (GraphCaptureError under fullgraph) and it runs eagerly between graphs;
    export leaves unused methods out.
    """
    _check_callable("unused", fn)
    if getattr(fn, "_tp_export", False):
        raise TypeError(f"unused(): {describe(fn)} is marked with export; a method cannot be "
                        f"both an export entry point and unused")
    text = f"call to {describe(fn)}, marked with tensorplay.compiler.unused (eager-only)"

    def eager(call: Callable[..., Any]) -> Callable[..., Any]:
        return lambda cap, args, kwargs: cap.run_eagerly(call, args, kwargs, text)

    if route(fn, "unused", eager) is not None and isinstance(fn, types.FunctionType):
        fn._tp_unused = True  # as torch.jit.unused marks the function itself

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return fn(*args, **kwargs)
        return cap.run_eagerly(fn, args, kwargs, text)

    wrapper._tp_marker = "unused"
    wrapper._tp_unused = True
    return wrapper


def is_unused(fn: Any) -> bool:
    """Whether ``fn`` (or the function behind a bound method) is marked with ``unused``."""
    return bool(getattr(getattr(fn, "__func__", fn), "_tp_unused", False))
