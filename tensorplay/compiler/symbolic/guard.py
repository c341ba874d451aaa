"""``ShapeGuard``: the size guards of one captured graph, compiled to one Python function.

A call reuses a graph with symbolic sizes when its tensor arguments' sizes satisfy what
the capture recorded: sizes that share a symbol are equal, specialized sizes have their
value, every symbol is in its range, and the remaining relations hold. The check is plain
Python integer arithmetic over ``array.shape`` entries: no sympy on the call path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re

import sympy

from ... import _views
from ...dialects.tp import symbolic as sym
from .shape_env import ShapeEnv

__all__ = ["ShapeGuard"]


class ShapeGuard:
    """Checks of the sizes of a call's tensor arguments, built from a capture's ShapeEnv.

    ``dims`` lists the symbolic argument dimensions as ``(leaf index, dim, label, size)``
    where ``size`` is what the capture ended up knowing about that dimension (a symbol, an
    int when specialized)."""

    def __init__(self, env: ShapeEnv, dims: Sequence[tuple[int, int, str, Any]]):
        self.dims = list(dims)
        names: dict[sympy.Symbol, str] = {}
        bound_at: dict[sympy.Symbol, tuple[int, int]] = {}
        lines: list[str] = []
        leaves = sorted({i for i, _, _, _ in self.dims})
        for i in leaves:
            lines.append(f"a{i} = held(leaves[{i}]).shape")
        # (python text, description) of each condition, cheapest first
        conditions: list[tuple[str, str]] = []
        for i, d, label, size in self.dims:
            size = env.simplify(size)
            if isinstance(size, sympy.Symbol) and size not in names:
                names[size] = f"v{len(names)}"
                bound_at[size] = (i, d)
                lines.append(f"{names[size]} = a{i}[{d}]")
        self.bindings = [(names[s], i, d) for s, (i, d) in bound_at.items()]
        for i, d, label, size in self.dims:
            size = env.simplify(size)
            if isinstance(size, sympy.Symbol) and bound_at[size] == (i, d):
                continue
            conditions.append((f"a{i}[{d}] == {sym.size_to_python(size, names)}",
                               f"{label} == {env.describe(size)}"))
        for s, var in names.items():
            info = env.infos.get(s)
            if info is None:
                continue
            if info.lo > 0:
                conditions.append((f"{var} >= {info.lo}", f"{info.source} >= {info.lo}"))
            if info.hi is not None:
                conditions.append((f"{var} <= {info.hi}", f"{info.source} <= {info.hi}"))
        for r in env.relations:
            expr = env.simplify(r.expr)
            conditions.append((sym.size_to_python(expr, names), f"{env.describe(expr)} ({r.why})"))
        self.conditions = conditions
        body = "\n    ".join(lines) or "pass"
        test = " and ".join(f"({c})" for c, _ in conditions) or "True"
        source = f"def check(leaves):\n    {body}\n    return {test}\n"
        scope: dict[str, Any] = {"held": _views.held}
        exec(compile(source, f"<size guards of {env.owner}>", "exec"), scope)  # noqa: S102
        self.check = scope["check"]
        self._prefix = lines
        self.source = source
        self.symbols = names

    def __call__(self, leaves: Sequence[Any]) -> bool:
        try:
            return bool(self.check(leaves))
        except (AttributeError, IndexError, TypeError):
            return False

    def failure(self, leaves: Sequence[Any]) -> str | None:
        """The first size guard ``leaves`` break, in the user's words (None when all hold)."""
        scope: dict[str, Any] = {"leaves": leaves, "held": _views.held}
        try:
            exec("\n".join(self._prefix), scope)  # noqa: S102
        except (AttributeError, IndexError, TypeError):
            return "the tensor arguments changed rank"
        for text, description in self.conditions:
            try:
                ok = eval(text, scope)  # noqa: S307
            except Exception:  # noqa: BLE001
                ok = False
            if not ok:
                return description
        return None

    def describe(self) -> list[str]:
        """Every size guard, in the user's words."""
        return [d for _, d in self.conditions]

    def portable(self, arg_of_leaf: dict[int, int] | None = None) -> dict[str, Any]:
        """The checks as plain data for a runtime without sympy (JSON-able): ``bind`` lists
        ``[name, argument, dim]`` (``vK = shape of argument at dim``), ``checks`` lists
        ``[expression, description]`` where the expression reads ``aN[d]`` (argument N's
        shape) and the bound names with Python integer arithmetic (``//``, ``%``, ``min``,
        ``max``). ``arg_of_leaf`` renumbers flattened argument leaves (identity by default)."""
        remap = arg_of_leaf or {}

        def arg(i: int) -> int:
            return remap.get(i, i)

        checks = [[re.sub(r"\ba(\d+)\[", lambda m: f"a{arg(int(m.group(1)))}[", text), description]
                  for text, description in self.conditions]
        return {"bind": [[name, arg(i), d] for name, i, d in self.bindings], "checks": checks}
