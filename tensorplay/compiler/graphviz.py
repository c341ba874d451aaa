"""Pictures of captured graphs: Graphviz ``dot`` text, and SVG when the ``dot`` program is
installed (Debian's ``graphviz`` package; ``brew install graphviz``; conda's ``graphviz``).

Ops are boxes (op name, result type, the user's ``file:line``), graph inputs are ellipses
colored by what they are (argument, parameter, buffer, constant, value read per call,
random draw), calls of nested compile regions are double octagons with a dashed edge to the
called graph, drawn as a cluster, and graph breaks between the segments of a function are red
octagons with the reason and the line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from ..dialects.tp.graph import Graph
from .capture.graphs import type_key

__all__ = ["INPUT_KINDS", "dot_available", "graph_dot", "render_svg", "input_labels", "source_labels"]

#: input kind -> fill color
INPUT_KINDS = {
    "argument": "#cfe2ff",
    "parameter": "#ffe8a3",
    "buffer": "#f3d9b1",
    "constant": "#e2e3e5",
    "read": "#e0d4f7",
    "random": "#f8d7da",
    "input": "#d1e7dd",
}
_OP_FILL = "#ffffff"
_CALL_FILL = "#d1ecf1"
_BREAK_FILL = "#f5c2c7"


def _q(text: Any) -> str:
    """A dot string literal; newlines become dot's centered line breaks."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + s.replace("\n", "\\n") + '"'


def dot_available() -> bool:
    return shutil.which("dot") is not None


def render_svg(dot: str, timeout: float = 120.0) -> str:
    """The SVG Graphviz lays ``dot`` out as; RuntimeError (with the reason and what to install)
    when the ``dot`` program is missing or fails."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz's 'dot' program is not installed, so graphs cannot be drawn; install it "
                           "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz; conda: "
                           "conda install graphviz) or read the dot text instead")
    proc = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed ({proc.returncode}): {proc.stderr.decode(errors='replace').strip()[:500]}")
    return proc.stdout.decode("utf-8", errors="replace")


def input_labels(bindings: Sequence[Any], names: dict[int, tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """(kind, text) for each graph input from a capture's bindings; ``names`` maps a tensor's
    id to (``parameter``/``buffer``, its qualified name) for the modules the call reached."""
    from .capture.bindings import ArgInput, ArrayInput, AttachedInput, RandomInput, ReadInput

    names = names or {}
    out = []
    for b in bindings:
        if isinstance(b, ArgInput):
            out.append(("argument", f"argument {b.path or b.index}"))
        elif isinstance(b, AttachedInput):
            t = b.target()
            kind, name = names.get(id(t), (None, None)) if t is not None else (None, None)
            if kind is not None:
                out.append((kind, f"{kind} {name}"))
            else:
                out.append(("parameter" if b.what == "parameter" else "constant" if b.what == "tensor"
                            else "buffer", b.what if b.what != "tensor" else "tensor (global or closure)"))
        elif isinstance(b, ReadInput):
            out.append(("read", f"read per call: {b.what}"))
        elif isinstance(b, ArrayInput):
            out.append(("constant", "constant (captured array)"))
        elif isinstance(b, RandomInput):
            out.append(("random", "random draw"))
        else:
            out.append(("input", b.describe()))
    return out


def source_labels(tensors: Sequence[Any], names: dict[int, tuple[str, str]],
                  arguments: dict[int, str]) -> list[tuple[str, str]]:
    """(kind, text) for the inputs of a graph segment from the tensors they read: a parameter
    or buffer by name, an argument by path, else a value computed before the segment."""
    out = []
    for t in tensors:
        if t is not None and id(t) in names:
            kind, name = names[id(t)]
            out.append((kind, f"{kind} {name}"))
        elif t is not None and id(t) in arguments:
            out.append(("argument", f"argument {arguments[id(t)]}"))
        else:
            out.append(("input", "computed before this segment"))
    return out


def graph_dot(parts: Sequence[Any], title: str = "") -> str:
    """Dot text for ``parts`` drawn top to bottom: each a :class:`Graph` (inputs labeled
    ``input``), a ``(graph, labels)`` pair with one ``(kind, text)`` per input (see
    :func:`input_labels`), or a graph break (any object with ``reason``, ``loc`` and
    ``source``). Graphs are clusters; the graphs they call are clusters of their own."""
    out = ["digraph tensorplay {", "  compound=true; rankdir=TB; newrank=true;",
           '  graph [fontname="Helvetica" fontsize=11 labeljust=l];',
           '  node [fontname="Helvetica" fontsize=9 style=filled];',
           '  edge [color="#555555" arrowsize=0.6];']
    if title:
        out.append(f"  label={_q(title)}; labelloc=t;")
    drawn: dict[int, str] = {}  # id(graph) -> cluster anchor node
    counter = [0]
    previous: str | None = None

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def draw(graph: Graph, labels: Sequence[tuple[str, str]] | None, indent: str) -> tuple[str, str]:
        """Draw ``graph`` as a cluster; returns its first node and its return node."""
        cid = fresh("cluster_")
        lines = [f"{indent}subgraph {cid} {{",
                 f'{indent}  label={_q("@" + graph.name)}; style="rounded"; color="#888888";']
        ids: dict[int, str] = {}
        anchor = None
        later: list[str] = []
        for i, v in enumerate(graph.inputs):
            kind, text = labels[i] if labels is not None and i < len(labels) else (
                "input", v.name or f"input {i}")
            nid = fresh("i")
            ids[id(v)] = nid
            anchor = anchor or nid
            lines.append(f'{indent}  {nid} [shape=ellipse fillcolor="{INPUT_KINDS.get(kind, "#ffffff")}" '
                         f'label={_q(text + chr(10) + type_key(v.type))}];')
        for node in graph.nodes:
            nid = fresh("n")
            anchor = anchor or nid
            types = ", ".join(type_key(r.type) for r in node.results)
            where = f"\n{_short_loc(node.loc)}" if node.loc is not None else ""
            if node.callee is not None:
                lines.append(f'{indent}  {nid} [shape=doubleoctagon fillcolor="{_CALL_FILL}" '
                             f'label={_q(f"call @{node.callee.name}{chr(10)}{types}{where}")}];')
                if id(node.callee) not in drawn:
                    drawn[id(node.callee)] = draw(node.callee, None, "  ")[0]
                later.append(f'  {nid} -> {drawn[id(node.callee)]} [style=dashed color="#1b6ec2" '
                             f'lhead="{_cluster_of[drawn[id(node.callee)]]}" label="calls"];')
            else:
                shape = "note" if node.op == "tp.constant" else "box"
                fill = INPUT_KINDS["constant"] if node.op == "tp.constant" else _OP_FILL
                lines.append(f'{indent}  {nid} [shape={shape} fillcolor="{fill}" '
                             f'label={_q(f"{node.op}{chr(10)}{types}{where}")}];')
            for v in node.inputs:
                if v is not None and id(v) in ids:
                    lines.append(f"{indent}  {ids[id(v)]} -> {nid};")
            for r in node.results:
                ids[id(r)] = nid
        oid = fresh("o")
        anchor = anchor or oid
        lines.append(f'{indent}  {oid} [shape=house fillcolor="#d1e7dd" '
                     f'label={_q(f"return ({len(graph.outputs)})")}];')
        for k, v in enumerate(graph.outputs):
            src = ids.get(id(v))
            if src is not None:
                lines.append(f'{indent}  {src} -> {oid} [label="{k}" fontsize=8];')
        lines.append(f"{indent}}}")
        out.extend(lines)
        out.extend(later)
        _cluster_of[anchor] = cid
        return anchor, oid

    _cluster_of: dict[str, str] = {}
    for part in parts:
        if isinstance(part, Graph) or (isinstance(part, tuple) and isinstance(part[0], Graph)):
            graph, labels = (part, None) if isinstance(part, Graph) else part
            anchor, last = draw(graph, labels, "  ")
            if previous is not None:
                out.append(f'  {previous} -> {anchor} [style=dotted lhead="{_cluster_of[anchor]}"];')
            previous = last
        else:
            bid = fresh("b")
            where = f"\n{_short_loc(part.loc)}" if getattr(part, "loc", None) is not None else ""
            source = f"\n{part.source.strip()}" if getattr(part, "source", "") else ""
            out.append(f'  {bid} [shape=octagon fillcolor="{_BREAK_FILL}" color="#b02a37" '
                       f'label={_q(f"graph break: {_wrap(part.reason)}{where}{source}")}];')
            if previous is not None:
                out.append(f"  {previous} -> {bid} [style=dotted];")
            previous = bid
    out.append("}")
    return "\n".join(out) + "\n"


def _short_loc(loc: Any) -> str:
    """``file.py:line`` (the full path is in the text stages; pictures stay narrow)."""
    return f"{os.path.basename(loc.file)}:{loc.line}"


def _wrap(text: str, width: int = 60) -> str:
    words, lines, line = str(text).split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return "\n".join(lines[:6]) + ("\n..." if len(lines) > 6 else "")
