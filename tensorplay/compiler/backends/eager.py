"""The ``eager`` debug backend: runs a captured graph through each op's numpy reference
implementation, node by node, with no compiler involved. What it returns is what
``tensorplay`` eager mode computes, so a mismatch with an IREE backend points at the
capture or the lowering."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...dialects.tp.graph import Graph
from .base import ALL_DTYPE_NAMES, BackendCapabilities

__all__ = ["interpret", "eager_backend", "CAPABILITIES"]

CAPABILITIES = BackendCapabilities(
    name="eager", target=None, runtime_driver=None, device_kind="cpu", dtypes=ALL_DTYPE_NAMES,
    dynamic_shapes=True, training=False, export_formats=(),
    description="runs the captured graph through the tp ops' numpy reference implementations")


def interpret(graph: Graph, arrays: Sequence[Any]) -> list[np.ndarray]:
    """Evaluate ``graph`` on ``arrays`` (one per input); call nodes evaluate their callee."""
    if len(arrays) != len(graph.inputs):
        raise TypeError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(arrays)}")
    env: dict[int, np.ndarray] = {}
    for value, array in zip(graph.inputs, arrays):
        env[id(value)] = np.asarray(array)
    for node in graph.nodes:
        operands = [None if v is None else env[id(v)] for v in node.inputs]
        if node.callee is not None:
            results = interpret(node.callee, operands)
        else:
            results = node.opdef.evaluate(operands, node.attrs, [r.type for r in node.results])
        for value, array in zip(node.results, results):
            env[id(value)] = array
    return [env[id(v)] for v in graph.outputs]


def eager_backend(graph: Graph, example_inputs: Sequence[Any] = (), options: Mapping[str, Any] | None = None,
                  ) -> Callable[..., list[np.ndarray]]:
    """``run(*arrays)`` interpreting ``graph``; compile options have nothing to change here
    and are ignored."""
    def run(*arrays: Any) -> list[np.ndarray]:
        return interpret(graph, arrays)

    run.__name__ = f"eager_{graph.name}"
    return run


eager_backend.capabilities = CAPABILITIES  # type: ignore[attr-defined]
