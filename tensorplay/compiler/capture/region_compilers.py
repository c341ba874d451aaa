"""Nested compile regions that asked for a backend of their own, for their forward or backward."""

from __future__ import annotations

import weakref
from typing import Any

from ...dialects.tp.graph import Graph

#: callee graph -> backend that compiles that region on its own (NestedCompileRegionOptions)
_REGION_COMPILERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


#: callee graph -> backend that compiles that region's backward (bw_compiler, else fw_compiler)
_REGION_BACKWARD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def region_compiler(callee: Graph) -> Any:
    """The backend a nested compile region asked for, or None (compiled with its caller)."""
    return _REGION_COMPILERS.get(callee)


def region_backward_compiler(callee: Graph) -> Any:
    """The backend a nested compile region's backward compiles with, or None (its caller's)."""
    return _REGION_BACKWARD.get(callee)


def set_region_compiler(graph: Graph, compiler: Any) -> None:
    """Compile ``graph`` (a callee) with ``compiler`` on its own, as a region asked."""
    _REGION_COMPILERS[graph] = compiler
