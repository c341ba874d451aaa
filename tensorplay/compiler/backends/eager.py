"""The ``eager`` debug backend: runs a captured graph through each op's numpy reference
implementation, node by node, with no compiler involved. What it returns is what
``tensorplay`` eager mode computes, so a mismatch with an IREE backend points at the
capture or the lowering."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...dialects.tp.graph import Graph, interpret
from .base import ALL_DTYPE_NAMES, BackendCapabilities

__all__ = ["interpret", "eager_backend", "CAPABILITIES"]

CAPABILITIES = BackendCapabilities(
    name="eager", target=None, runtime_driver=None, device_kind="cpu", dtypes=ALL_DTYPE_NAMES,
    dynamic_shapes=True, training=True, export_formats=(),
    description="runs the captured graph through the tp ops' numpy reference implementations")


def eager_backend(graph: Graph, example_inputs: Sequence[Any] = (), options: Mapping[str, Any] | None = None,
                  ) -> Callable[..., list[np.ndarray]]:
    """``run(*arrays)`` interpreting ``graph``; compile options have nothing to change here
    and are ignored."""
    def run(*arrays: Any) -> list[np.ndarray]:
        return interpret(graph, arrays)

    run.__name__ = f"eager_{graph.name}"
    return run


eager_backend.capabilities = CAPABILITIES  # type: ignore[attr-defined]
