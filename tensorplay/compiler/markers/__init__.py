"""Markers: decorators and context managers that tell capture how to treat a callable
(inline it unbroken, run it eagerly between graphs, substitute it, reuse it as a nested
region) and facts recorded for export and shape policies. See docs/markers.md."""

from __future__ import annotations

from . import _intercept, _redirect
from ._intercept import is_disallowed_in_graph
from ._session import compile_disabled
from ._session import run_reset_hooks as _on_reset
from .boundaries import (allow_in_graph, disable, disable_capture, disallow_in_graph, is_unused,
                         marker_of, unused)
from .metadata import exported_methods, export, mark_static, overload_method, overloads_of, static_dims
from .regions import NestedCompileRegionOptions, nested_compile_region, region_of
from .substitution import assume_constant_result, nonstrict_trace, substitute_for, substitute_in_graph

__all__ = [
    "allow_in_graph", "assume_constant_result", "disable", "disable_capture",
    "disallow_in_graph", "export", "mark_static", "nested_compile_region", "nonstrict_trace",
    "overload_method", "substitute_in_graph", "unused", "NestedCompileRegionOptions",
    # helpers for capture, export and shape policies
    "compile_disabled", "exported_methods", "is_disallowed_in_graph", "is_unused", "marker_of",
    "overloads_of", "region_of", "static_dims", "substitute_for",
]


def _capture_entered(cap: object) -> None:
    """Called by a capture session as it becomes active on this thread."""
    _redirect.capture_entered(cap)
    try:
        _intercept.capture_entered(cap)
    except BaseException:
        _redirect.capture_exited(cap)
        raise


def _capture_exited(cap: object) -> None:
    """Called by a capture session as it stops being active (also after an exception)."""
    try:
        _intercept.capture_exited(cap)
    finally:
        _redirect.capture_exited(cap)


def _register_reset_hook() -> None:
    from ..api import register_reset_hook

    register_reset_hook(_on_reset)


_register_reset_hook()
