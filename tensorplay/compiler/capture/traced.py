"""What a capture writes into its trace folder (:mod:`..tracedir`): the captured graph(s)
with source lines, graph breaks, guards with the line behind each one, and the entry's picture.
Called only when a trace folder is active."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ...dialects.tp.graph import Graph
from .. import tracedir
from ..graphviz import graph_dot, input_labels, source_labels
from .graphs import format_graph
from .guards import ModuleGuard, is_module
from .read_guards import ReadGuard

__all__ = ["function_info", "module_names", "record_capture", "record_guards", "describe_graph", "timeline_parts"]


def function_info(fn: Any, backend: str, options: dict[str, Any], **more: Any) -> dict[str, Any]:
    """What ``function.json`` says about a compiled callable."""
    target = getattr(fn, "__func__", fn)
    where = None
    try:
        code = target.__code__
        where = f"{code.co_filename}:{code.co_firstlineno}"
    except AttributeError:
        try:
            where = f"{inspect.getsourcefile(type(getattr(fn, '__self__', fn)))}"
        except TypeError:
            pass
    return {"qualname": getattr(target, "__qualname__", repr(target)), "source": where, "backend": backend,
            "options": {k: v if isinstance(v, (bool, int, float, str, type(None))) else str(v)
                        for k, v in options.items()}, **more}


def module_names(modules: Sequence[tuple[str, Any]]) -> dict[int, tuple[str, str]]:
    """id(tensor) -> (``parameter``/``buffer``, qualified name) over the modules a call reached."""
    names: dict[int, tuple[str, str]] = {}
    for prefix, m in modules:
        if not is_module(m):
            continue
        for n, p in m.named_parameters():
            names.setdefault(id(p), ("parameter", prefix + n))
        for n, b in m.named_buffers():
            names.setdefault(id(b), ("buffer", prefix + n))
    return names


def describe_graph(graph: Graph) -> str:
    """A graph and the graphs it calls, one op per line with the user's file:line."""
    parts = [format_graph(g) for g in [*graph.callees(), graph]]
    return "\n\n".join(parts) + "\n"


def _leaf(leaf: Any) -> str:
    from ..._tensor import Tensor

    if isinstance(leaf, Tensor):
        t = leaf._tensor_type()
        return (f"Tensor {t.dtype.name}{list(leaf.shape)} on {leaf.device}"
                + (", requires_grad" if leaf.requires_grad else ""))
    if is_module(leaf):
        return f"module {type(leaf).__name__}"
    text = repr(leaf)
    return f"{type(leaf).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def timeline_parts(session: Any, names: dict[int, tuple[str, str]], leaves: Sequence[Any],
                   paths: Sequence[str]) -> list[Any]:
    """The segments a session ran, each with its input labels, and the breaks between them."""
    arguments = {id(leaf): path for leaf, path in zip(leaves, paths)}
    sources = session.segment_sources or {}
    return [(p, source_labels(sources[id(p)], names, arguments)) if isinstance(p, Graph) and id(p) in sources
            else p for p in session.timeline]


def record_capture(scope: tracedir.Scope, session: Any, trace: Any, modules: Sequence[tuple[str, Any]],
                   capture_s: float, leaves: Sequence[Any], paths: Sequence[str]) -> None:
    """The captured graph(s), the breaks and the picture of one entry."""
    breaks = list(session.breaks)
    if trace is not None:
        labels = input_labels(trace.bindings, module_names(modules))
        parts: list[Any] = [(trace.graph, labels)]
        text = describe_graph(trace.graph)
        tracedir.note(scope, kind="graph", graphs=[trace.graph.name], ops=len(trace.graph.nodes),
                      inputs=[{"kind": k, "label": t} for k, t in labels])
    else:
        parts = timeline_parts(session, module_names(modules), leaves, paths)
        chunks = []
        for part in session.timeline:
            if isinstance(part, Graph):
                chunks.append(describe_graph(part))
            else:
                chunks.append(f"# graph break at {part.loc or '<unknown>'}: {part.reason}\n"
                              + (f"#     {part.source.strip()}\n" if part.source else ""))
        text = "\n".join(chunks)
        tracedir.note(scope, kind="segmented", graphs=[p.name for p in session.timeline if isinstance(p, Graph)],
                      ops=sum(len(p.nodes) for p in session.timeline if isinstance(p, Graph)))
    tracedir.note(scope, capture_s=round(capture_s, 6),
                  breaks=[{"reason": b.reason, "loc": str(b.loc) if b.loc else None, "source": b.source.strip()}
                          for b in breaks])
    tracedir.write(scope, "capture.txt", text)
    tracedir.write(scope, "breaks.txt", "".join(
        f"{b.loc or '<unknown location>'}: {b.reason}\n" + (f"    {b.source.strip()}\n" if b.source else "")
        for b in breaks) or "no graph breaks\n")
    tracedir.write(scope, "graph.dot", graph_dot(parts, title=f"{scope.function.name}: entry {scope.record.get('name')}"))
    for b in breaks:
        tracedir.event(scope, "break", entry=scope.record.get("name"), reason=b.reason,
                       loc=str(b.loc) if b.loc else None)


def record_guards(scope: tracedir.Scope, guards: Sequence[tuple[str, Any]], session: Any, trace: Any,
                  leaves: Sequence[Any], paths: Sequence[str], fn_source: str | None) -> None:
    """``guards.txt``: what a later call must match to reuse the entry, each with the line
    (or the part of the call) behind it."""
    lines = ["# A later call reuses this entry only when all of this still holds.", "",
             "## the call's arguments (their kinds, dtypes, shapes and plain values are the cache key)"]
    lines += [f"- {path}: {_leaf(leaf)}" for path, leaf in zip(paths, leaves)] or ["- (no arguments)"]
    shape_guard = getattr(trace, "shape_guard", None)
    if shape_guard is not None:
        lines += ["", "## symbolic sizes (one compiled graph serves every size that passes these)"]
        lines += [f"- {text}" for text in shape_guard.describe()]
    sites = {id(check): loc for (_, check), loc in zip(session.guards, session.guard_sites)}
    lines += ["", "## state the graph relies on"]
    notes: list[str] = []
    for description, check in guards:
        if isinstance(check, ReadGuard):
            lines += [f"- {text}" for text in check.descriptions()]
            notes += check.notes
            continue
        if id(check) in sites:
            where = f"added at {sites[id(check)]}" if sites[id(check)] else "added by library code"
        elif isinstance(check, ModuleGuard):
            where = "the modules the call reached"
        else:
            where = f"the function's globals and closure ({fn_source})" if "still bound" in description else \
                "a tensor the graph reads"
        lines.append(f"- {description}  [{where}]")
    if notes:
        lines += ["", "## not guarded (documented limits)"] + [f"- {n}" for n in notes]
    tracedir.write(scope, "guards.txt", "\n".join(lines) + "\n")
    tracedir.note(scope, guards=len(guards))
