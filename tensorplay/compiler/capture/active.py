"""Which capture is active on this thread, and blocks that run with none."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ... import _dispatch

if TYPE_CHECKING:
    from .session import Capture

_local = threading.local()


def _stack() -> list[Capture | None]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current_capture() -> Capture | None:
    """The innermost active capture session; None when running eagerly."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def is_compiling() -> bool:
    """Whether Python is running under a capture (tracing, or between graph segments)."""
    return current_capture() is not None


def is_exporting() -> bool:
    """Whether an export session is active on this thread."""
    return bool(getattr(_local, "exporting", 0))


@contextmanager
def exporting() -> Iterator[None]:
    """Mark the block as an export session: captures started inside export (fullgraph)."""
    _local.exporting = getattr(_local, "exporting", 0) + 1
    try:
        yield
    finally:
        _local.exporting -= 1


@contextmanager
def without_capture() -> Iterator[None]:
    """Run the block eagerly: no capture is current and no dispatch handler is installed (ops run
    eagerly, ``current_capture()`` is None inside)."""
    _stack().append(None)
    try:
        with _dispatch.capture_handler(None):
            yield
    finally:
        _stack().pop()
