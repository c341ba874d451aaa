"""A captured program as plain data: values, nodes (tp op name, inputs, attributes,
result values, source location) and graphs with inputs and outputs.

Nodes are verified through the op registry as they are added, so a Graph always holds
well-typed tp ops; emission to MLIR and parsing back live in :mod:`.mlir`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .registry import Op, lookup
from .types import TensorType

__all__ = ["SourceLoc", "Value", "Node", "Graph"]


@dataclass(frozen=True)
class SourceLoc:
    """Where in the user's code a node came from."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(eq=False)
class Value:
    """An SSA value: a graph input (``node is None``) or result ``index`` of ``node``."""

    type: TensorType
    node: Node | None = None
    index: int = 0
    name: str | None = None

    def __repr__(self) -> str:
        where = f"input {self.index}" if self.node is None else f"{self.node.op}#{self.index}"
        return f"<Value {where}: {self.type}>"


@dataclass(eq=False)
class Node:
    op: str
    inputs: tuple[Value | None, ...]
    attrs: dict[str, Any]
    results: tuple[Value, ...] = ()
    loc: SourceLoc | None = None

    @property
    def opdef(self) -> Op:
        return lookup(self.op)


@dataclass(eq=False)
class Graph:
    """One function: typed inputs, a topologically ordered list of nodes, outputs."""

    name: str = "main"
    inputs: list[Value] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)

    def add_input(self, ttype: TensorType, name: str | None = None) -> Value:
        v = Value(ttype, None, len(self.inputs), name)
        self.inputs.append(v)
        return v

    def add(self, op_name: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None,
            loc: SourceLoc | None = None) -> tuple[Value, ...]:
        """Append a verified node; returns its result values."""
        op = lookup(op_name)
        norm = op.normalize_attrs(dict(attrs or {}))
        types = op.verify([None if v is None else v.type for v in inputs], norm)
        node = Node(op.name, tuple(inputs), norm, (), loc)
        node.results = tuple(Value(t, node, i) for i, t in enumerate(types))
        self.nodes.append(node)
        return node.results

    def add1(self, op_name: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None,
             loc: SourceLoc | None = None) -> Value:
        """:meth:`add` for single-result ops."""
        (result,) = self.add(op_name, inputs, attrs, loc)
        return result

    def set_outputs(self, values: Sequence[Value]) -> None:
        self.outputs = list(values)
