"""What every backend shares: the capabilities record, the backend errors, and helpers
that read a captured graph (dtypes used, a readable place for error messages)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from ...dialects.tp.graph import Graph, Node

__all__ = ["BackendCapabilities", "BackendUnavailable", "BackendCompileError", "ALL_DTYPE_NAMES",
           "graph_functions", "iter_nodes", "dtypes_used", "first_use_of"]

#: every dtype tensorplay has, by name
ALL_DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64",
                   "float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend compiles for and what it supports; ``None`` means "not declared".

    ``available`` is False when a dependency or device is missing; ``reason`` says which
    and ``install_hint`` what to do about it.
    """

    name: str = ""
    target: str | None = None            # IREE compile target ("llvm-cpu", "vulkan-spirv", ...)
    runtime_driver: str | None = None    # IREE runtime driver ("local-sync", "vulkan", ...)
    device_kind: str | None = None       # "cpu" or "gpu"
    dtypes: tuple[str, ...] | None = None
    dynamic_shapes: bool | None = None
    training: bool = False               # True: compiles the backward graphs of training captures
    export_formats: tuple[str, ...] = ()
    available: bool = True
    reason: str | None = None
    install_hint: str | None = None
    description: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    def supports_dtype(self, dtype_name: str) -> bool:
        return self.dtypes is None or dtype_name in self.dtypes

    def with_name(self, name: str) -> BackendCapabilities:
        return replace(self, name=name)


class BackendUnavailable(RuntimeError):
    """A registered backend that cannot run here (a missing package or device)."""

    def __init__(self, name: str, reason: str | None, install_hint: str | None = None):
        self.name = name
        self.reason = reason
        self.install_hint = install_hint
        message = f"backend {name!r} is not available: {reason or 'its probe failed'}"
        if install_hint:
            message += f"; {install_hint}"
        message += " (tensorplay.compiler.list_backends() lists the backends usable here)"
        super().__init__(message)


class BackendCompileError(RuntimeError):
    """A backend could not compile a graph; the message says which backend, which graph,
    what failed and how to reproduce or avoid it."""

    def __init__(self, message: str, *, backend: str, graph: str, reproducer: str | None = None):
        self.backend = backend
        self.graph = graph
        self.reproducer = reproducer
        super().__init__(message)


def graph_functions(graph: Graph) -> list[Graph]:
    """The graph and every graph it calls, callees first (the functions of one module)."""
    callees = graph.callees() if hasattr(graph, "callees") else []
    return [*callees, graph]


def iter_nodes(graph: Graph) -> Iterator[Node]:
    for g in graph_functions(graph):
        yield from g.nodes


def dtypes_used(graph: Graph) -> set[str]:
    """Names of every dtype a graph (or a graph it calls) reads or produces."""
    names = {v.type.dtype.name for g in graph_functions(graph) for v in (*g.inputs, *g.outputs)}
    for node in iter_nodes(graph):
        names.update(r.type.dtype.name for r in node.results)
    return names


def first_use_of(graph: Graph, dtype_name: str) -> str:
    """Where ``dtype_name`` first appears in ``graph``: an input, or an op with its source line."""
    for g in graph_functions(graph):
        for i, v in enumerate(g.inputs):
            if v.type.dtype.name == dtype_name:
                return f"input {i} of @{g.name} ({v.type})"
        for node in g.nodes:
            for r in node.results:
                if r.type.dtype.name == dtype_name:
                    where = f" at {node.loc}" if node.loc is not None else ""
                    return f"{node.op} in @{g.name}{where} ({r.type})"
    return f"@{graph.name}"
