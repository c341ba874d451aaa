"""``explain``: capture one call and report its graphs, graph breaks, ops and guards.

docs/compiler.md (Diagnostics) describes the report.
"""

from __future__ import annotations

import inspect
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..dialects.tp.graph import Graph
from .graphviz import graph_dot, input_labels, render_svg
from ..nn.modules.module import Module
from .._grad_mode import is_grad_enabled
from .api import GRAPH, CompiledFunction, CompiledModule, Entry, _default_name, _passthrough, differentiator
from .autodiff import Differentiated
from .capture import pytree
from .capture.graphs import format_graph, interpret, op_counts
from .capture.guards import free_objects, is_module
from .capture.traced import module_names, timeline_parts
from .capture.session import BreakInfo, Capture, CaptureConfig, current_capture

__all__ = ["explain", "ExplainReport"]


@dataclass
class ExplainReport:
    """What capturing one call produced: graphs, graph breaks (with source lines) and ops."""

    graphs: list[Graph] = field(default_factory=list)
    breaks: list[BreakInfo] = field(default_factory=list)
    #: size guards of a capture with symbolic sizes (a compiled callable's dynamic policy)
    size_guards: list[str] = field(default_factory=list)
    #: the Python values the graph relies on, each guarded (global, closure, attribute, item)
    value_guards: list[str] = field(default_factory=list)
    #: what the capture read but could not guard, and why
    unguarded: list[str] = field(default_factory=list)
    #: for a whole graph captured under grad mode with inputs that require grad: its backward
    #: (op count, recomputed ops, the bytes saved for it under the min-cut partitioner and
    #: when saving everything), or why it cannot be built
    backward: list[str] = field(default_factory=list)
    #: the graphs and the breaks between them, in the order the call ran them
    timeline: list[Any] = field(default_factory=list)
    #: per graph (by id): (kind, label) of each input, where the capture knows them
    input_labels: dict[int, list[tuple[str, str]]] = field(default_factory=dict, repr=False)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.breaks)

    @property
    def break_reasons(self) -> list[BreakInfo]:
        return list(self.breaks)

    @property
    def ops_per_graph(self) -> list[int]:
        return [len(g.nodes) for g in self.graphs]

    @property
    def op_counts(self) -> list[Counter]:
        return [op_counts(g) for g in self.graphs]

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(self.ops_per_graph)}"]
        if self.breaks:
            lines.append("Break reasons:")
            for i, b in enumerate(self.breaks, 1):
                lines.append(f"  {i}. {b.reason}")
                lines.append(f"     at {b.loc if b.loc is not None else '<unknown location>'}")
                if b.source:
                    lines.append(f"       {b.source}")
        if self.size_guards:
            lines.append("Size guards:")
            lines += [f"  {g}" for g in self.size_guards]
        if self.value_guards:
            lines.append("Value guards (Python state the graph relies on):")
            lines += [f"  {g}" for g in self.value_guards]
        if self.unguarded:
            lines.append("Not guarded:")
            lines += [f"  {g}" for g in self.unguarded]
        lines.append("Ops per graph:")
        for i, (g, counts) in enumerate(zip(self.graphs, self.op_counts), 1):
            detail = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
            lines.append(f"  graph {i} (@{g.name}): {len(g.nodes)} ops" + (f": {detail}" if detail else ""))
        return "\n".join(lines)

    def format_graphs(self) -> str:
        return "\n\n".join(format_graph(g) for g in self.graphs)

    def _part(self, g: Graph) -> Any:
        labels = self.input_labels.get(id(g))
        return (g, labels) if labels is not None else g

    def to_dot(self, index: int | None = None) -> str:
        """Graphviz dot text of graph ``index``, or (None) of the whole call: every graph
        with the graph breaks between them, nested-region calls and labeled inputs."""
        if index is not None:
            g = self.graphs[index]
            return graph_dot([self._part(g)], title=f"@{g.name}")
        parts = self.timeline or self.graphs
        return graph_dot([self._part(p) if isinstance(p, Graph) else p for p in parts])

    def save_graphs(self, folder: str | os.PathLike, format: str = "svg") -> list[Path]:  # noqa: A002
        """Write a picture of each graph (``<graph name>.svg``) and of the whole call
        (``call.svg``, breaks included) into ``folder``; ``format="dot"`` writes the dot text
        instead (no Graphviz needed). Returns the files written. SVG needs Graphviz's ``dot``
        program: without it a RuntimeError says how to install it."""
        if format not in ("svg", "dot"):
            raise ValueError(f"save_graphs(format={format!r}): expected 'svg' or 'dot'")
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        texts = [(f"{g.name}", self.to_dot(i)) for i, g in enumerate(self.graphs)] + [("call", self.to_dot())]
        written = []
        for name, dot in texts:
            path = out / f"{name}.{format}"
            path.write_text(render_svg(dot) if format == "svg" else dot, encoding="utf-8")
            written.append(path)
        return written


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ExplainReport:
    """Capture one call of ``fn`` and report its graphs, graph breaks and ops.

    The call really runs (Python side effects included), with graphs interpreted by the
    reference implementations instead of compiled, so nothing is cached. For a compiled
    callable the capture follows its dynamic policy (``dynamic=True``, ``dynamic_shapes``,
    the dims automatic dynamic has marked): graphs show symbolic sizes and the report lists
    the size guards."""
    module = None
    compiled: CompiledFunction | None = None
    if isinstance(fn, CompiledModule):
        compiled = fn.__dict__["_compiled"]
        module, fn = fn._orig_mod, fn._orig_mod._call_impl
    elif isinstance(fn, CompiledFunction):
        compiled = fn
        module, fn = fn._module, fn._fn
    elif isinstance(fn, Module):
        module, fn = fn, fn._call_impl
    name = _default_name(fn if module is None else type(module))
    leaves, treedef = pytree.flatten((args, kwargs))
    modules = [("", module)] if module is not None else []
    if inspect.ismethod(fn) and is_module(fn.__self__) and fn.__self__ is not module:
        modules.append(("self.", fn.__self__))
    modules += [(f"{p}.", leaf) for p, leaf in zip(pytree.leaf_paths(treedef), leaves) if is_module(leaf)]
    modules += [(f"{label}.", obj) for label, obj, _ in free_objects(fn) if is_module(obj)]

    def run(graph: Graph, arrays: list[np.ndarray], segment: bool) -> list[np.ndarray]:
        return interpret(graph, arrays)

    paths = pytree.leaf_paths(treedef)
    dynamic_dims = None
    if compiled is not None:
        paths = compiled._paths(treedef)
        spec = compiled._check_dynamic(leaves, paths)
        dynamic_dims = compiled._dynamic_dims(leaves, paths, spec) or None
    partitioner = compiled.options.get("partitioner", "min_cut") if compiled is not None else "min_cut"

    build = differentiator(leaves, name, partitioner, log=False)

    def differentiate(graph: Graph, bindings: list, env: Any) -> Any:
        outputs = list(graph.outputs)
        result = build(graph, bindings, env)
        graph.set_outputs(outputs)  # (the report shows the forward as captured)
        return result.describe() if isinstance(result, Differentiated) else result

    session = Capture(CaptureConfig(name=name, run_graph=run, dynamic_dims=dynamic_dims,
                                    differentiate=differentiate if is_grad_enabled() else None))
    if current_capture() is not None:
        raise RuntimeError("explain() cannot run inside a capture")
    session.segment_sources = {}  # (to label each segment's inputs in pictures)
    trace = session.run_trace(fn, args, kwargs, leaves, paths, modules)
    report = ExplainReport([s.graph for s in session.segments], list(session.breaks))
    names = module_names(modules)
    for part in timeline_parts(session, names, leaves, paths):
        report.timeline.append(part[0] if isinstance(part, tuple) else part)
        if isinstance(part, tuple):
            report.input_labels[id(part[0])] = part[1]
    if trace is not None and trace.shape_guard is not None:
        report.size_guards = trace.shape_guard.describe()
    if session.read_guard is not None:
        report.value_guards = session.read_guard.descriptions()
        report.unguarded = list(session.read_guard.notes)
    if trace is not None and isinstance(trace.training, str):
        report.backward.append(trace.training)
    if trace is not None:
        entry = Entry(GRAPH, None, (), name, [], [])
        entry.bindings, entry.graph = trace.bindings, trace.graph
        entry.out_tree, entry.out_spec, entry.writebacks = trace.out_tree, trace.out_spec, trace.writebacks
        graph = trace.graph
        entry.runner = (lambda *a: interpret(graph, a)) if graph.nodes else (
            _passthrough(graph) if graph.outputs else None)
        entry.run(leaves, [b.first for b in trace.bindings])
        report.graphs.append(graph)
        report.timeline.append(graph)
        report.input_labels[id(graph)] = input_labels(trace.bindings, names)
    return report
