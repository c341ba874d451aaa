"""The compiler's exception classes (named by the public API)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GraphCaptureError", "InvalidBackend"]


class GraphCaptureError(RuntimeError):
    """Raised when Python code cannot be represented by the current graph."""


class InvalidBackend(ValueError, RuntimeError):
    """A backend name that no registered, built-in or entry-point backend owns.

    Derives from ValueError and RuntimeError, so either handler catches it.
    """

    def __init__(self, name: str, suggestions: Sequence[str] | None = None):
        self.name = name
        self.suggestions = list(suggestions or [])
        message = f"unknown backend {name!r}"
        if self.suggestions:
            message += f"; did you mean {', '.join(repr(s) for s in self.suggestions)}?"
        message += " (tensorplay.compiler.list_backends() lists the registered ones)"
        super().__init__(message)
