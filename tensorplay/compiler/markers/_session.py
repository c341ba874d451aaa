"""How markers reach the active capture session (the Capture API of capture/) and the small
amount of state they keep across captures (the eager override flag, reset hooks)."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..._tensor import Tensor
from ..capture import current_capture, without_capture
from ... import _views

__all__ = ["current_capture", "eager_after_break", "forcing_eager", "compile_disabled", "describe", "defined_at",
           "is_capture_tensor", "at_capture_time", "on_reset", "run_reset_hooks"]

_local = threading.local()
_reset_hooks: list[Callable[[], None]] = []


@contextlib.contextmanager
def eager_after_break(cap: Any, reason: str) -> Iterator[None]:
    """End the current segment (a graph break for ``reason``) and run the block eagerly."""
    cap.graph_break(reason)
    with without_capture():
        yield


@contextlib.contextmanager
def at_capture_time() -> Iterator[None]:
    """Run the block eagerly in the middle of a capture, without ending the segment: no op is
    recorded and ``is_compiling()`` is False (its tensors must be concrete)."""
    with without_capture():
        yield


@contextlib.contextmanager
def forcing_eager() -> Iterator[None]:
    """Make compiled callables run their original Python eagerly within the block."""
    _local.eager_depth = getattr(_local, "eager_depth", 0) + 1
    try:
        yield
    finally:
        _local.eager_depth -= 1


def compile_disabled() -> bool:
    """True inside ``disable(fn)`` (recursive) and ``disable_capture()``: compiled callables
    called here run eagerly instead of capturing or running a compiled program."""
    return getattr(_local, "eager_depth", 0) > 0


def describe(fn: Any) -> str:
    """``module.qualname`` of a callable, for messages."""
    target = getattr(fn, "__func__", fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        name = type(fn).__qualname__ + " instance"
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else name


def defined_at(fn: Any) -> str:
    """``file:line`` where a Python callable is defined, or ``""`` for builtins."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        try:
            return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
        except (TypeError, OSError):
            return ""
    return f"{code.co_filename}:{code.co_firstlineno}"


def is_capture_tensor(value: Any) -> bool:
    return isinstance(value, Tensor) and not _views.has_memory(value)


def on_reset(hook: Callable[[], None]) -> Callable[[], None]:
    """Register ``hook`` to run when ``tensorplay.compiler.reset()`` clears compiler state."""
    _reset_hooks.append(hook)
    return hook


def run_reset_hooks() -> None:
    for hook in list(_reset_hooks):
        hook()
