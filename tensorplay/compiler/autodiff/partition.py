"""Splitting a joint graph into the forward and backward programs.

The backward reads forward values; each one is either *saved* (the forward returns it and
the backward node keeps it until backward runs) or *recomputed* in the backward from other
values. ``min_cut`` decides with a minimum cut over the forward's data flow, as
rematerializing partitioners do: cutting a value costs its bytes, values the backward reads
sit at the sink, the forward's inputs (alive anyway: arguments and parameters) cost nothing,
and only cheap ops that IREE fuses into their consumers may be recomputed (elementwise ops,
casts, views and reshapes, constants); matmuls, convolutions, reductions, normalizations,
indexing and region calls are always saved when read. ``save_all`` saves every forward value
the backward reads, for comparison.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph, Node, Value
from ...dialects.tp.ops.creation import Creation
from ...dialects.tp.ops.elementwise import Cast, Elementwise
from ...dialects.tp.ops.shape import ShapeOp
from ..capture.programs import _subgraph
from .joint import Joint

__all__ = ["Partition", "PARTITIONERS", "partition", "recomputable", "value_bytes"]

PARTITIONERS = ("min_cut", "save_all")


@dataclass
class Partition:
    """Where each forward value the backward reads comes from.

    The forward graph returns its own outputs followed by ``saved`` (forward results);
    the backward graph takes the forward inputs at ``saved_inputs``, then the saved values,
    then the tangents, and returns one gradient per non-None entry of ``gradient_slots``."""

    forward: Graph
    n_outputs: int
    saved_inputs: list[int]
    saved: list[Value]
    backward: Graph
    gradient_slots: list[int | None]
    recomputed: int
    saved_bytes: int
    saved_all_bytes: int
    partitioner: str


def recomputable(node: Node) -> bool:
    """Whether the min-cut partitioner may recompute ``node`` in the backward."""
    if node.callee is not None or len(node.results) != 1:
        return False
    op = node.opdef
    return isinstance(op, (Elementwise, Cast, ShapeOp, Creation))


def value_bytes(v: Value, hint: Callable[[Any], int] | None = None) -> int:
    """The size of ``v`` in bytes (symbolic sizes at their example values)."""
    n = 1
    for d in v.type.shape:
        n *= int(d) if not sym.is_symbolic(d) else (hint(d) if hint is not None else 64)
    return n * v.type.dtype.itemsize


def partition(joint: Joint, name: str, *, partitioner: str = "min_cut",
              hint: Callable[[Any], int] | None = None) -> Partition:
    """Split ``joint`` (its forward graph gains the saved outputs in place)."""
    if partitioner not in PARTITIONERS:
        raise ValueError(f"partitioner {partitioner!r}: expected one of {', '.join(PARTITIONERS)}")
    graph = joint.forward
    producer: dict[Value, Node] = {r: n for n in graph.nodes for r in n.results}
    forward_values = set(graph.inputs) | set(producer)
    needed: list[Value] = []
    seen: set[Value] = set()
    for n in joint.backward:
        for v in n.inputs:
            if v is not None and v in forward_values and v not in seen:
                seen.add(v)
                needed.append(v)
    for v in joint.gradients:
        if v is not None and v in forward_values and v not in seen:
            seen.add(v)
            needed.append(v)
    size = {v: value_bytes(v, hint) for v in forward_values}
    saved_all = sum(size[v] for v in needed if v in producer)
    if partitioner == "save_all":
        keep, recompute = set(needed), set()
    else:
        keep, recompute = _min_cut(graph, producer, needed, size)
    _bind_sizes(graph, producer, joint, keep, recompute)
    inputs = {v: i for i, v in enumerate(graph.inputs)}
    saved_inputs = [inputs[v] for v in graph.inputs if v in keep]
    saved = [v for n in graph.nodes for v in n.results if v in keep]
    n_outputs = len(graph.outputs)
    graph.set_outputs(list(graph.outputs) + saved)
    redo = [n for n in graph.nodes if any(r in recompute for r in n.results)]
    bw_inputs = [graph.inputs[i] for i in saved_inputs] + saved + list(joint.tangents)
    grads = [v for v in joint.gradients if v is not None]
    slots: list[int | None] = []
    k = 0
    for v in joint.gradients:
        slots.append(None if v is None else k)
        k += v is not None
    backward = _subgraph(f"{name}_backward", redo + list(joint.backward), bw_inputs, grads)
    return Partition(graph, n_outputs, saved_inputs, saved, backward, slots, len(redo),
                     sum(size[v] for v in saved), saved_all, partitioner)


def _bind_sizes(graph: Graph, producer: dict[Value, Node], joint: Joint, keep: set[Value],
                recompute: set[Value]) -> None:
    """Every size symbol the backward computes with must be a dim of one of its inputs:
    where only an attribute uses one (an ``expand`` to ``(u0,)``), a forward value with that
    dim is saved too (the smallest; an input when one has it)."""
    redo = [n for n in graph.nodes if any(r in recompute for r in n.results)]
    used = _Nodes(redo + list(joint.backward)).size_symbols_used(outputs=False)
    bound = set()
    for v in list(keep) + list(joint.tangents):
        bound |= {d for d in v.type.shape if sym.is_symbolic(d) and d.is_Symbol}
    for s in used - bound:
        holders = [v for v in list(graph.inputs) + list(producer) if s in v.type.shape]
        if holders:
            best = min(holders, key=lambda v: (v in producer, value_bytes(v)))
            keep.add(best)
            recompute.discard(best)


class _Nodes(Graph):
    def __init__(self, nodes: list[Node]):
        super().__init__("backward", [], nodes, [])


_INF = math.inf


def _min_cut(graph: Graph, producer: dict[Value, Node], needed: Sequence[Value],
             size: dict[Value, int]) -> tuple[set[Value], set[Value]]:
    """(values to save, values to recompute) from a minimum cut of the forward's flow."""
    # node ids: value v -> (2k, 2k+1) for its in and out halves; source and sink at the end
    ids = {v: k for k, v in enumerate(size)}
    source, sink = 2 * len(ids), 2 * len(ids) + 1
    cap: dict[int, dict[int, float]] = {}

    def edge(a: int, b: int, c: float) -> None:
        cap.setdefault(a, {})
        cap[a][b] = cap[a].get(b, 0) + c
        cap.setdefault(b, {}).setdefault(a, 0)

    # only the part of the forward the needed values depend on matters
    relevant: set[Value] = set()
    stack = list(needed)
    while stack:
        v = stack.pop()
        if v in relevant:
            continue
        relevant.add(v)
        n = producer.get(v)
        if n is not None and recomputable(n):
            stack.extend(x for x in n.inputs if x is not None)
    for v in relevant:
        k = ids[v]
        n = producer.get(v)
        edge(2 * k, 2 * k + 1, 0 if n is None else size[v] + 1)
        if n is None or not recomputable(n):
            edge(source, 2 * k, _INF)  # computed in the forward: saved where read
        else:
            for x in n.inputs:
                if x is not None:
                    edge(2 * ids[x] + 1, 2 * k, _INF)
    for v in needed:
        edge(2 * ids[v] + 1, sink, _INF)
    flow: dict[int, dict[int, float]] = {a: {b: 0.0 for b in bs} for a, bs in cap.items()}
    while True:  # Edmonds-Karp
        parent = {source: source}
        queue = deque([source])
        while queue and sink not in parent:
            a = queue.popleft()
            for b, c in cap.get(a, {}).items():
                if b not in parent and c - flow[a][b] > 0:
                    parent[b] = a
                    queue.append(b)
        if sink not in parent:
            break
        push = _INF
        b = sink
        while b != source:
            a = parent[b]
            push = min(push, cap[a][b] - flow[a][b])
            b = a
        if push == _INF:  # cannot happen: every source-sink path crosses a finite value edge
            raise AssertionError("min-cut partition: an uncuttable path")
        b = sink
        while b != source:
            a = parent[b]
            flow[a][b] += push
            flow[b][a] -= push
            b = a
    reached = set(parent)
    keep = {v for v in relevant if 2 * ids[v] in reached and 2 * ids[v] + 1 not in reached}
    recompute = {v for v in relevant if 2 * ids[v] not in reached and v in producer}
    return keep, recompute
