"""Helpers over captured graphs: structural hashing, a readable listing and input pruning
(the reference interpreter is dialects/tp/graph.py's ``interpret``).

The structural key covers ops, attributes, types and wiring (and callees), never value
names or source locations, so the same computation captured at two places shares one
compiled program.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import numpy as np

from ...dialects.tp import symbolic as sym
from ...dialects.tp.dtypes import DType
from ...dialects.tp.graph import CALL, Graph, Value, interpret
from ...dialects.tp.types import TensorType

__all__ = ["structural_key", "format_graph", "interpret", "prune_inputs", "order_inputs_by_use", "op_counts",
           "used_values", "substitute_sizes", "type_key"]


def structural_key(graph: Graph) -> str:
    """A hex digest identifying ``graph`` up to names and locations."""
    h = hashlib.sha256()
    _hash_graph(graph, h, {})
    return h.hexdigest()


def type_key(t: TensorType) -> str:
    """A type's text with its symbolic sizes spelled out (``tensor<s0x4xf32>``)."""
    if t.has_static_shape:
        return str(t)
    return "tensor<" + "x".join(sym.size_text(d) for d in t.shape) + f"x{t.dtype.mlir}>"


def _hash_graph(graph: Graph, h: Any, callees: dict[int, str]) -> None:
    ref: dict[Value, str] = {}
    for i, v in enumerate(graph.inputs):
        ref[v] = f"i{i}"
        h.update(f"in {type_key(v.type)};".encode())
    for n, node in enumerate(graph.nodes):
        h.update(f"op {node.op}(".encode())
        h.update(",".join("_" if v is None else ref[v] for v in node.inputs).encode())
        h.update(b")")
        if node.callee is not None:
            h.update(f"callee {_graph_key(node.callee, callees)}".encode())
        else:
            for name in sorted(node.attrs):
                h.update(f"{name}=".encode())
                value = node.attrs[name]
                if isinstance(value, Graph):  # a loop body: its structure
                    h.update(f"body {_graph_key(value, callees)};".encode())
                else:
                    _hash_attr(value, h)
        if node.stop_gradient:
            h.update(b" no-grad")
        for j, r in enumerate(node.results):
            ref[r] = f"n{n}.{j}"
            h.update(f"-> {type_key(r.type)};".encode())
    h.update(("out " + ",".join(ref[v] for v in graph.outputs)).encode())


def _graph_key(graph: Graph, keys: dict[int, str]) -> str:
    """The structural digest of a called graph or loop body, computed once per graph."""
    key = keys.get(id(graph))
    if key is None:
        sub = hashlib.sha256()
        _hash_graph(graph, sub, keys)
        key = keys[id(graph)] = sub.hexdigest()
    return key


def _hash_attr(value: Any, h: Any) -> None:
    if isinstance(value, np.ndarray):
        h.update(f"array {value.dtype} {value.shape} ".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, DType):
        h.update(f"dtype {value.name};".encode())
    elif isinstance(value, tuple):
        h.update(b"(")
        for v in value:
            _hash_attr(v, h)
        h.update(b")")
    else:
        h.update(f"{type(value).__name__} {value!r};".encode())


def substitute_type(t: TensorType, simplify: Any) -> TensorType:
    if t.has_static_shape:
        return t
    return TensorType(tuple(sym.as_size(simplify(d)) if sym.is_symbolic(d) else d for d in t.shape), t.dtype)


def _substitute_attr(value: Any, simplify: Any) -> Any:
    if sym.is_symbolic(value):
        return sym.as_size(simplify(value))
    if isinstance(value, tuple) and any(sym.is_symbolic(v) for v in value):
        return tuple(sym.as_size(simplify(v)) if sym.is_symbolic(v) else v for v in value)
    return value


def substitute_sizes(graph: Graph, simplify: Any) -> None:
    """Rewrite every symbolic size of ``graph`` and its callees (value types and size
    attributes) with ``simplify`` (a shape environment's: replacements, settled Min/Max)."""
    for g in [graph, *graph.callees()]:
        for v in g.inputs:
            v.type = substitute_type(v.type, simplify)
        for node in g.nodes:
            for r in node.results:
                r.type = substitute_type(r.type, simplify)
            if node.callee is None and any(sym.is_symbolic(v) or isinstance(v, tuple) for v in node.attrs.values()):
                changed = {k: _substitute_attr(v, simplify) for k, v in node.attrs.items()}
                node.attrs = node.opdef.normalize_attrs(changed)


def used_values(graph: Graph) -> set[Value]:
    """Values read by a node or an output."""
    used = {v for node in graph.nodes for v in node.inputs if v is not None}
    used.update(graph.outputs)
    return used


def prune_inputs(graph: Graph) -> list[int]:
    """Drop inputs nothing reads; returns the indices (into the old list) that remain."""
    used = used_values(graph)
    keep = [i for i, v in enumerate(graph.inputs) if v in used]
    graph.inputs = [graph.inputs[i] for i in keep]
    for i, v in enumerate(graph.inputs):
        v.index = i
    return keep


def order_inputs_by_use(graph: Graph) -> None:
    """Renumber inputs in order of first use, so equal computations reached along different
    paths (traced or lazy) get equal structural keys."""
    order: dict[Value, None] = {}
    inputs = set(graph.inputs)
    for node in graph.nodes:
        for v in node.inputs:
            if v in inputs:
                order.setdefault(v)
    for v in graph.outputs:
        if v in inputs:
            order.setdefault(v)
    for v in graph.inputs:
        order.setdefault(v)
    graph.inputs = list(order)
    for i, v in enumerate(graph.inputs):
        v.index = i


def op_counts(graph: Graph) -> Counter:
    """How many times each op occurs (calls count as ``func.call @callee``)."""
    return Counter(f"{CALL} @{n.callee.name}" if n.callee is not None else n.op for n in graph.nodes)


def format_graph(graph: Graph) -> str:
    """A readable listing: one line per node, with its source location."""
    names: dict[Value, str] = {}
    for i, v in enumerate(graph.inputs):
        names[v] = f"%arg{i}"
    lines = [f"graph @{graph.name}(" + ", ".join(f"{names[v]}: {type_key(v.type)}" for v in graph.inputs) + ")"]
    k = 0
    for node in graph.nodes:
        outs = []
        for r in node.results:
            names[r] = f"%{k}"
            k += 1
            outs.append(names[r])
        args = ", ".join("none" if v is None else names.get(v, "%?") for v in node.inputs)
        if node.callee is not None:
            text = f"{CALL} @{node.callee.name}({args})"
        else:
            attrs = ", ".join(f"{a}={_short(v)}" for a, v in node.attrs.items())
            text = f"{node.op}({args})" + (f" {{{attrs}}}" if attrs else "")
        types = ", ".join(type_key(r.type) for r in node.results)
        where = f"  # {node.loc}" if node.loc is not None else ""
        lines.append(f"  {', '.join(outs)} = {text} : {types}{where}")
    lines.append("  return " + ", ".join(names.get(v, "%?") for v in graph.outputs))
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return f"dense<{value.tolist()}>"
        return f"dense<{value.dtype}{list(value.shape)}>"
    if isinstance(value, DType):
        return value.name
    return repr(value)


