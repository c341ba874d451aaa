"""Turning a captured graph into something that runs: the backend's ``run`` callable, or a
chain of them when nested compile regions ask for their own backend.

A graph whose ``func.call`` nodes name a region compiled by another backend is cut at
those calls into pieces; each piece is compiled by the caller's backend, each region by
its own, and the pieces run one after another on arrays (no Python in between beyond
passing arrays along).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._tensor import Tensor
from ...profiler._state import state as _prof_state
from ...runtime.program import to_device
from ...runtime.storage import DeviceArray, driver_of_arrays
from ...dialects.tp.graph import Graph, Node, Value, copy_nodes
from .._logging import get_logger
from ..errors import GraphCaptureError
from .. import tracedir
from ..graphviz import graph_dot
from .graphs import type_key
from .region_compilers import region_compiler
from .traced import describe_graph

__all__ = ["ConfiguredBackend", "compile_graph", "check_native"]

_log_perf = get_logger("perf")

#: ``run(*arrays) -> list[np.ndarray]``
Runner = Callable[..., list]


class ConfiguredBackend:
    """A resolved backend with its merged options, called per the backend convention: each
    call compiles one graph into a runner (traced, timed and logged)."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any], label: str):
        self.fn = fn
        self.options = options
        self.label = label
        self.compiles = 0

    def __call__(self, graph: Graph, arrays: Sequence[np.ndarray]) -> Runner:
        examples = [Tensor._wrap(a) for a in arrays]
        scope = tracedir.current()
        if scope is not None:  # a traced compile: this graph's stages get a folder of their own
            scope = tracedir.graph_scope(scope, graph.name, backend=self.label, ops=len(graph.nodes),
                                         inputs=[type_key(v.type) for v in graph.inputs],
                                         outputs=[type_key(v.type) for v in graph.outputs])
            tracedir.write(scope, "01-tp-graph.txt", describe_graph(graph))
            tracedir.write(scope, "graph.dot", graph_dot([graph], title=f"@{graph.name} ({self.label})"))
        start = time.perf_counter()
        try:
            with tracedir.active(scope) if scope is not None else contextlib.nullcontext():
                if self.options:
                    run = self.fn(graph, examples, options=dict(self.options))
                else:
                    run = self.fn(graph, examples)
        except Exception as exc:
            exc.add_note(f"(while backend {self.label!r} compiled graph @{graph.name}, "
                         f"{len(graph.nodes)} ops; TENSORPLAY_LOGS=graphs shows the graph)")
            tracedir.note(scope, error=f"{type(exc).__name__}: {exc}")
            raise
        self.compiles += 1
        seconds = time.perf_counter() - start
        _log_perf.info("compiled @%s (%d ops) with %s in %.3f s", graph.name, len(graph.nodes),
                       self.label, seconds)
        if _prof_state.active:  # tensorplay.profiler records
            _prof_state.hooks.compiled_graph(graph.name, self.label, len(graph.nodes), start, seconds)
        if scope is not None:
            tracedir.note(scope, compile_s=round(seconds, 6))
            tracedir.event(scope, "compile", graph=graph.name, backend=self.label, seconds=round(seconds, 6),
                           ops=len(graph.nodes))
        if not callable(run):
            raise TypeError(f"backend {self.label!r} returned {type(run).__name__}, not a callable "
                            f"run(*arrays) -> list of arrays")
        # IREE's runners (a runtime Function, or a wrapper of one) take device arrays as they are
        return run if getattr(run, "takes_device_arrays", False) else _on_host(run)



def _on_host(run: Runner) -> Runner:
    """A backend's ``run`` that takes numpy arrays (the backend convention), called with device
    arrays too: those are copied to the host, and the results go back to their device."""

    def on_host(*arrays: Any) -> list:
        driver = driver_of_arrays(arrays)
        if driver is not None:
            arrays = tuple(a.to_host() if type(a) is DeviceArray else a for a in arrays)
        results = run(*arrays)
        if driver is None:
            return results
        return [r if type(r) is DeviceArray else to_device(np.asarray(r), driver) for r in results]

    on_host.__wrapped__ = run  # type: ignore[attr-defined]
    return on_host


def check_native(graph: Graph) -> None:
    """strict_native: every op of ``graph`` (and its callees) must have a native lowering."""
    from ...passes.lowering import LOWERINGS, _load

    _load()
    for g in [graph, *graph.callees()]:
        for node in g.nodes:
            if node.callee is None and node.op not in LOWERINGS:
                where = f" at {node.loc}" if node.loc is not None else ""
                raise GraphCaptureError(f"strict_native: {node.op}{where} has no native lowering "
                                        f"(convert-tp-to-linalg); it could only run eagerly")


_region_programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_graph(graph: Graph, arrays: Sequence[np.ndarray], backend: ConfiguredBackend) -> Runner:
    """A runner for ``graph``: the backend's own, or a chain around separately compiled regions."""
    if not any(n.callee is not None and region_compiler(n.callee) is not None for n in graph.nodes):
        return backend(graph, arrays)
    return _Chain(graph, arrays, backend)


def _region_backend(compiler: Any) -> ConfiguredBackend:
    from ..backends import lookup_backend

    label = compiler if isinstance(compiler, str) else getattr(compiler, "__name__", repr(compiler))
    return ConfiguredBackend(lookup_backend(compiler), {}, str(label))


class _Chain:
    """Pieces of one graph run in order; regions with their own backend in between."""

    def __init__(self, graph: Graph, arrays: Sequence[np.ndarray], backend: ConfiguredBackend):
        self.graph = graph
        pieces: list[list[Node]] = []
        current: list[Node] = []
        for node in graph.nodes:
            if node.callee is not None and region_compiler(node.callee) is not None:
                if current:
                    pieces.append(current)
                    current = []
                pieces.append([node])
            else:
                current.append(node)
        if current:
            pieces.append(current)
        later: list[set[Value]] = []
        needed = set(graph.outputs)
        for piece in reversed(pieces):
            later.append(set(needed))
            for node in piece:
                needed.update(v for v in node.inputs if v is not None)
        later.reverse()
        env: dict[Value, np.ndarray] = dict(zip(graph.inputs, arrays))
        self.steps: list[tuple[list[Value], Runner, list[Value]]] = []
        for k, (piece, after) in enumerate(zip(pieces, later)):
            defined = {r for node in piece for r in node.results}
            ins: list[Value] = []
            for node in piece:
                for v in node.inputs:
                    if v is not None and v not in defined and v not in ins:
                        ins.append(v)
            outs = [r for node in piece for r in node.results if r in after]
            region = piece[0].callee if len(piece) == 1 and piece[0].callee is not None and \
                region_compiler(piece[0].callee) is not None else None
            example = [env[v] for v in ins]
            if region is not None:
                run = _region_programs.get(region)
                if run is None:
                    run = _region_backend(region_compiler(region))(region, example)
                    _region_programs[region] = run
                outs = list(piece[0].results)
            else:
                sub = _subgraph(f"{graph.name}_part{k}", piece, ins, outs)
                run = compile_graph(sub, example, backend)
            results = run(*example)
            env.update(zip(outs, results))
            self.steps.append((ins, run, outs))

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        env: dict[Value, np.ndarray] = dict(zip(self.graph.inputs, arrays))
        for ins, run, outs in self.steps:
            env.update(zip(outs, run(*[env[v] for v in ins])))
        return [env[v] for v in self.graph.outputs]


def _subgraph(name: str, nodes: list[Node], ins: list[Value], outs: list[Value]) -> Graph:
    sub = Graph(name=name)
    mapping: dict[Value, Value] = {v: sub.add_input(v.type) for v in ins}
    copy_nodes(sub, nodes, mapping)
    sub.set_outputs([mapping[v] for v in outs])
    return sub
