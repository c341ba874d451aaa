"""Errors raised when a tp op is given operands or attributes it cannot accept.

Each class derives from the builtin that PyTorch raises for the same mistake, and from
:class:`OpError`, so ``except RuntimeError`` (PyTorch habits), ``except ValueError`` /
``IndexError`` / ``TypeError`` (Python habits) and ``except OpError`` all work.
Messages start with the op name.
"""

from __future__ import annotations

__all__ = ["OpError", "ShapeError", "DimError", "DTypeError", "OpAttributeError", "UnknownOpError"]


class OpError(RuntimeError):
    """An op was applied to operands or attributes it does not accept."""


class ShapeError(OpError, ValueError):
    """Operand shapes do not fit the op (broadcasting, matmul sizes, reshape element counts)."""


class DimError(OpError, IndexError):
    """A dimension index is out of range for the operand's rank."""


class DTypeError(OpError, TypeError):
    """An operand dtype the op does not support."""


class OpAttributeError(OpError, ValueError):
    """An attribute is missing, unknown, of the wrong type or out of range."""


class UnknownOpError(OpError, KeyError):
    """A name that no registered tp op owns."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
