"""A captured program as plain data: values, nodes (tp op name, inputs, attributes,
result values, source location) and graphs with inputs and outputs.

Nodes are verified through the op registry as they are added, so a Graph always holds
well-typed tp ops; emission to MLIR and parsing back live in :mod:`.mlir`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import symbolic as sym
from .registry import Op, lookup
from .types import TensorType

__all__ = ["CALL", "SourceLoc", "Value", "Node", "Graph", "interpret", "data_dependent_symbols", "bodies_of", "copy_nodes"]


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


#: the op name of a node that calls another graph (emitted as MLIR's ``func.call``)
CALL = "func.call"


@dataclass(eq=False)
class Node:
    """One tp op application, or a call of another graph (``op == CALL``, ``callee`` set)."""

    op: str
    inputs: tuple[Value | None, ...]
    attrs: dict[str, Any]
    results: tuple[Value, ...] = ()
    loc: SourceLoc | None = None
    callee: Graph | None = None
    #: applied while grad mode was off (or by ``detach``): no gradient flows through it
    stop_gradient: bool = False

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
    #: output position -> input position: the output is the new value of a tensor the input
    #: holds (a parameter or an optimizer's state that a compiled step updates). The IREE
    #: backends write such an output into the input's buffer when a call gives that buffer up
    #: (``runtime.storage.Donated``); other backends ignore it. Emitted as the function's
    #: ``tp.donated`` attribute.
    donated: dict[int, int] = field(default_factory=dict)

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

    def add_call(self, callee: Graph, inputs: Sequence[Value], loc: SourceLoc | None = None) -> tuple[Value, ...]:
        """Append a call of ``callee`` (a function of the same module) on ``inputs``; returns
        its result values. Types must equal the callee's input types."""
        if len(inputs) != len(callee.inputs):
            raise ValueError(f"call of @{callee.name}: expected {len(callee.inputs)} operands, got {len(inputs)}")
        for i, (v, p) in enumerate(zip(inputs, callee.inputs)):
            if v.type != p.type:
                raise TypeError(f"call of @{callee.name}: operand {i} has type {v.type}, "
                                f"the callee takes {p.type}")
        node = Node(CALL, tuple(inputs), {"callee": callee.name}, (), loc, callee)
        node.results = tuple(Value(o.type, node, i) for i, o in enumerate(callee.outputs))
        self.nodes.append(node)
        return node.results

    def callees(self) -> list[Graph]:
        """Every graph this one calls or runs as a loop body, directly or not, each once,
        callees before callers."""
        order: list[Graph] = []
        seen: set[int] = set()

        def visit(g: Graph) -> None:
            for node in g.nodes:
                for sub in ([node.callee] if node.callee is not None else bodies_of(node)):
                    if id(sub) not in seen:
                        seen.add(id(sub))
                        visit(sub)
                        order.append(sub)

        visit(self)
        return order

    def set_outputs(self, values: Sequence[Value]) -> None:
        self.outputs = list(values)

    def size_symbols_used(self, *, outputs: bool = True) -> set:
        """The size symbols its nodes' result types and size attributes (and, with ``outputs``,
        its output types) compute with."""
        used: set = set()
        for node in self.nodes:
            for r in node.results:
                used |= sym.free_symbols(r.type.shape)
            for a in node.attrs.values():
                if sym.is_symbolic(a):
                    used |= a.free_symbols
                elif isinstance(a, tuple):
                    used |= sym.free_symbols([x for x in a if sym.is_symbolic(x)])
        if outputs:
            for v in self.outputs:
                used |= sym.free_symbols(v.type.shape)
        return used


def copy_nodes(graph: Graph, nodes: Sequence[Node], mapping: dict[Value, Value]) -> None:
    """Append copies of ``nodes`` to ``graph``, their inputs looked up in ``mapping`` (which
    gains each copied result)."""
    for node in nodes:
        new = Node(node.op, tuple(None if v is None else mapping[v] for v in node.inputs), dict(node.attrs),
                   (), node.loc, node.callee, node.stop_gradient)
        new.results = tuple(Value(r.type, new, r.index) for r in node.results)
        mapping.update(zip(node.results, new.results))
        graph.nodes.append(new)


def bodies_of(node: Node) -> list[Graph]:
    """The graphs a node's function attributes hold (the body of a ``tp.scan``)."""
    if node.callee is not None:
        return []
    return [a for a in node.attrs.values() if isinstance(a, Graph)]


def data_dependent_symbols(graph: Graph) -> set:
    """The size symbols that results of data-dependent ops (``tp.nonzero``) define."""
    out: set = set()
    for node in graph.nodes:
        if node.callee is None and node.opdef.data_dependent:
            for r in node.results:
                out |= {d for d in r.type.shape if sym.is_symbolic(d) and d.is_Symbol}
    return out


def interpret(graph: Graph, arrays: Sequence[Any]) -> list[Any]:
    """Evaluate ``graph`` on numpy ``arrays`` (one per input) with each op's reference
    implementation, as eager mode would; call nodes evaluate their callee."""
    import numpy as np

    if len(arrays) != len(graph.inputs):
        raise TypeError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(arrays)}")
    env: dict[int, Any] = {id(v): np.asarray(a) for v, a in zip(graph.inputs, arrays)}
    sizes = _bind_sizes(graph, [env[id(v)] for v in graph.inputs])
    for node in graph.nodes:
        operands = [None if v is None else env[id(v)] for v in node.inputs]
        if node.callee is not None:
            results = interpret(node.callee, operands)
        else:
            attrs = node.attrs
            if sizes and any(sym.is_symbolic(a) or isinstance(a, tuple) for a in attrs.values()):
                attrs = node.opdef.normalize_attrs({k: _concrete(a, sizes) for k, a in attrs.items()})
            results = node.opdef.evaluate(operands, attrs, [r.type for r in node.results])
        for value, array in zip(node.results, results):
            env[id(value)] = array
            if node.callee is None and node.opdef.data_dependent:  # sizes the data decided
                for d, size in enumerate(value.type.shape):
                    if sym.is_symbolic(size) and size.is_Symbol:
                        sizes.setdefault(size, int(np.shape(array)[d]))
    return [env[id(v)] for v in graph.outputs]


def _bind_sizes(graph: Graph, arrays: Sequence[Any]) -> dict:
    """Values of the size symbols of ``graph``'s input types, read from the arrays' shapes."""
    sizes: dict = {}
    for v, a in zip(graph.inputs, arrays):
        for d, size in enumerate(v.type.shape):
            if sym.is_symbolic(size) and size.is_Symbol and size not in sizes and d < a.ndim:
                sizes[size] = int(a.shape[d])
    return sizes


def _concrete(value: Any, sizes: dict) -> Any:
    """An attribute value with its symbolic sizes evaluated."""
    import sympy

    values = {k: sympy.Integer(v) for k, v in sizes.items()}
    if sym.is_symbolic(value):
        return sym.hint_of(value, values)
    if isinstance(value, tuple) and any(sym.is_symbolic(v) for v in value):
        return tuple(sym.hint_of(v, values) if sym.is_symbolic(v) else v for v in value)
    return value
