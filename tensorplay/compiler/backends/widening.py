"""Widening a graph's inputs and outputs for a target that cannot pass some dtypes across
its function boundary (IREE's Vulkan target: sub-32-bit tensors, see ``io_widening`` in
:mod:`.targets`). The widened graph takes and returns the wider dtypes and casts inside;
those are the dtypes the runtime keeps such tensors in on that device
(``runtime.storage.WIDE_STORAGE``), and host arrays are converted on upload and download
(exact for all values)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dialects.tp.graph import Graph

__all__ = ["Widened", "widen_io"]


@dataclass(frozen=True)
class Widened:
    """The graph a target compiles, and the host conversions of its inputs and outputs
    (empty when the graph needed none)."""

    graph: Graph
    input_casts: tuple[np.dtype | None, ...] = ()
    output_casts: tuple[np.dtype | None, ...] = ()


def widen_io(graph: Graph, widening: Mapping[str, str]) -> Widened:
    """``graph`` with every input and output whose dtype ``widening`` names taking or
    returning the wider dtype (dtype name -> dtype name), cast inside the graph."""
    from ...dialects.tp import dtypes as dt

    def wide(v: Any) -> Any:
        name = widening.get(v.type.dtype.name)
        return None if name is None else dt.as_dtype(name)

    if not any(wide(v) for v in (*graph.inputs, *graph.outputs)):
        return Widened(graph)
    w = Graph(graph.name)
    env: dict[int, Any] = {}
    input_casts = []
    for v in graph.inputs:
        to = wide(v)
        if to is None:
            env[id(v)] = w.add_input(v.type, v.name)
        else:
            env[id(v)] = w.add1("tp.cast", [w.add_input(v.type.with_dtype(to), v.name)], {"dtype": v.type.dtype})
        input_casts.append(None if to is None else to.np_dtype)
    for node in graph.nodes:
        inputs = [None if v is None else env[id(v)] for v in node.inputs]
        if getattr(node, "callee", None) is not None:
            results = w.add_call(node.callee, inputs, node.loc)
        else:
            results = w.add(node.op, inputs, node.attrs, node.loc)
        for old, new in zip(node.results, results):
            new.type = old.type
            env[id(old)] = new
    outputs, output_casts = [], []
    for v in graph.outputs:
        to = wide(v)
        outputs.append(env[id(v)] if to is None else w.add1("tp.cast", [env[id(v)]], {"dtype": to}))
        output_casts.append(None if to is None else v.type.dtype.np_dtype)
    w.set_outputs(outputs)
    w.donated = dict(graph.donated)
    return Widened(w, tuple(input_casts), tuple(output_casts))
