"""The records a capture keeps and hands out: its configuration, breaks, segments, the result of
a finished trace, and what a capture tensor's ``_capture`` holds."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._capture_handler import CaptureHandler
from ..._tensor import Tensor
from ...dialects.tp.graph import Graph, SourceLoc, Value
from ..symbolic.guard import ShapeGuard
from ..symbolic.shape_env import ShapeEnv
from . import pytree
from .bindings import Binding

#: the modes of a capture: tracing a whole graph, or recording segments lazily after a break
TRACE = "trace"
LAZY = "lazy"


@dataclass
class BreakInfo:
    """One graph break: why, where (the user's line) and that line's text."""

    reason: str
    loc: SourceLoc | None
    source: str = ""

    def __str__(self) -> str:
        where = f"{self.loc}" if self.loc is not None else "<unknown location>"
        text = f"{where}: {self.reason}"
        return text + (f"\n    {self.source}" if self.source else "")


@dataclass
class SegmentInfo:
    """One graph a capture compiled and ran: the graph and how it was obtained."""

    graph: Graph
    key: str = ""
    compiled: bool = True  # False when served from the structural-hash cache


@dataclass
class CaptureConfig:
    """What a session needs from the compiled callable that owns it.

    ``run_graph(graph, arrays, segment)`` compiles (or finds) and runs a graph, returning
    one array per output; ``regions`` caches nested compile regions across calls.
    ``dynamic_dims`` names the argument dimensions captured with symbolic sizes: flattened
    argument index -> {dim: None or a dynamic_shapes name / ``Dim``}.
    """

    name: str = "main"
    fullgraph: bool = False
    strict_native: bool = False
    exporting: bool = False
    dynamic: bool | None = None
    run_graph: Callable[[Graph, list[np.ndarray], bool], list[np.ndarray]] | None = None
    regions: dict = field(default_factory=dict)
    dynamic_dims: dict[int, dict[int, Any]] | None = None
    #: ``differentiate(graph, bindings, shape_env)``: called on a finished whole graph (before
    #: its sizes are settled, so size decisions of its backward are guarded too); what it
    #: returns is the trace's ``training`` (compiled training: the graph and its backward)
    differentiate: Callable[[Graph, list[Binding], ShapeEnv], Any] | None = None
    #: ``run_training(graph, arrays, sources)`` runs a segment whose inputs (read from the
    #: tensors ``sources``, None for fixed values) need gradients; returns its results and
    #: ``grad_fn(tensor, output index)``, which gives a result its backward
    run_training: Callable[[Graph, list[np.ndarray], list[Any]], tuple[list[np.ndarray], Any]] | None = None


class _Ref:
    """What a capture tensor's ``_capture`` holds: its session, graph and current value."""

    __slots__ = ("session", "graph", "value", "device")

    def __init__(self, session: CaptureHandler, graph: Graph, value: Value, device: Any = None):
        self.session = session
        self.graph = graph
        self.value = value
        #: where a borrowed tensor's data lives (its ``device`` while the trace holds it)
        self.device = device


class _Borrow:
    """A caller-owned tensor turned into a capture tensor for the trace."""

    __slots__ = ("tensor", "data", "input", "binding")

    def __init__(self, tensor: Tensor, data: np.ndarray, input: Value, binding: Binding):
        self.tensor = tensor
        self.data = data
        self.input = input
        self.binding = binding


@dataclass
class TraceResult:
    """A trace that finished without a graph break: everything to build a cache entry."""

    graph: Graph
    bindings: list[Binding]
    out_tree: pytree.TreeDef
    #: ("new", output index) | ("object", binding) | ("const", value) | ("size", output index:
    #: a 0-d int64 output returned as a Python int, a size the data decides)
    out_spec: list[tuple]
    writebacks: list[tuple[Binding | weakref.ref, int]]  # (target, output index)
    guards: list[tuple[str, Callable[[], bool]]]
    shape_guard: ShapeGuard | None = None
    shape_env: ShapeEnv | None = None
    training: Any = None
    #: (tensor, output index or None): the .grad a backward() inside the trace left on each
    grad_writebacks: list[tuple[Any, int | None]] = field(default_factory=list)
    #: (function, args): Python the trace ran that later calls run after the program (a
    #: schedule's step(): see Capture.run_after_program)
    deferred: list[tuple[Callable[..., Any], tuple]] = field(default_factory=list)


class _Dead:
    """Marks capture tensors of a session that failed: using them says so."""

    def __init__(self, name: str):
        self.name = name
