"""Symbolic sizes for compile and export: the shape environment of a capture, the size
guards of a compiled graph, and ``Dim`` for ``dynamic_shapes`` specs.

The expressions themselves (sympy), the :class:`SymInt` user code sees and the questions
shape inference asks live in :mod:`tensorplay.dialects.tp.symbolic`; docs/dynamic.md
describes the policies (``dynamic=None/True/False``, ``dynamic_shapes``, automatic dynamic).
"""

from __future__ import annotations

from ...dialects.tp.symbolic import SymInt
from .dims import Dim
from .guard import ShapeGuard
from .shape_env import ClosedShapeEnvError, ShapeEnv

__all__ = ["Dim", "ShapeEnv", "ShapeGuard", "SymInt", "ClosedShapeEnvError"]
