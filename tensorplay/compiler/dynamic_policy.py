"""The dynamic-dims policy of a compiled callable: which argument dims its next capture makes
symbolic. ``dynamic=True``: every dim; ``dynamic=False``: none; ``dynamic=None`` (automatic
dynamic): the dims of the arguments whose sizes changed between captures, and from the first
capture those an earlier process decided (kept on disk by :mod:`.dynamic_decisions`); plus
the named dims of ``dynamic_shapes`` (checked by :mod:`.dynamic_shapes`). Dims marked with
``mark_static`` stay static.
"""

from __future__ import annotations

from typing import Any

from .. import _views
from .._tensor import Tensor
from . import dynamic_decisions
from ._logging import get_logger
from .capture.guards import CallKey, size_changes
from .dynamic_shapes import check_dynamic_shapes
from .entries import CacheGroup

__all__ = ["check_dynamic", "automatic_dynamic", "remembered_dynamic", "dynamic_dims"]

_log_recompiles = get_logger("recompiles")


def check_dynamic(dynamic_shapes: Any, signature: list[str] | None, leaves: list[Any], paths: list[str]) -> dict:
    """The call checked against the ``dynamic_shapes`` spec: argument path -> {dim: name or size}."""
    if dynamic_shapes is None:
        return {}
    return check_dynamic_shapes(dynamic_shapes, signature, leaves, paths)


def automatic_dynamic(dynamic: bool | None, group: CacheGroup, config: tuple, key: CallKey, leaves: list[Any],
                      paths: list[str]) -> str:
    """dynamic=None: when this call misses only because tensor sizes differ from an
    entry's capture, every dim of each argument whose size changed becomes dynamic (a
    sequence length that changes makes the batch dynamic too; dims the program ties to a
    weight are specialized again by the capture's guards); returns the newly dynamic dims
    in words ("" if none)."""
    if dynamic is not None or not group.order:
        return ""
    for entry in reversed(group.order):
        if entry.config != config:
            continue
        changed = size_changes(entry.exact_key, key)
        if changed:
            grown = sorted({(i, k) for i, _ in changed for k in range(leaves[i].ndim)})
            new = group.grow_dynamic([(paths[i], d) for i, d in grown])
            return ", ".join(f"{path} dim {d}" for path, d in new)
    return ""


def remembered_dynamic(dynamic: bool | None, group: CacheGroup, source_fn: Any, name: str) -> str:
    """dynamic=None, first capture: the dims an earlier process's automatic dynamic made
    dynamic for this callable (kept in the artifact cache), in words ("" if none)."""
    if dynamic is not None or group.decisions_loaded:
        return ""
    group.decisions_loaded = True
    group.decision_id = dynamic_decisions.function_id(source_fn)
    if group.decision_id is None:
        return ""
    remembered, group.remembered_name = dynamic_decisions.load(group.decision_id)
    group.grow_dynamic([(path, d) for path, dims in remembered.items() for d in dims])
    text = ", ".join(f"{path} dim {d}" for path, dims in sorted(remembered.items()) for d in sorted(dims))
    if text:
        _log_recompiles.info("%s: automatic dynamic from an earlier run: %s dynamic from the first capture",
                             name, text)
    return text


def dynamic_dims(dynamic: bool | None, group: CacheGroup, leaves: list[Any], paths: list[str],
                 spec: dict) -> dict[int, dict[int, Any]]:
    """Which argument dims this capture makes symbolic: every dim (dynamic=True), the
    dims automatic dynamic has seen change (dynamic=None), never (dynamic=False); plus
    the named dims of dynamic_shapes. Dims marked with mark_static stay static."""
    if dynamic is False:
        return {}
    out: dict[int, dict[int, Any]] = {}
    auto = group.auto_dynamic
    for i, (path, leaf) in enumerate(zip(paths, leaves)):
        if not isinstance(leaf, Tensor) or not _views.has_memory(leaf):
            continue
        static = leaf._static_dims or frozenset()
        if dynamic:
            dims: dict[int, Any] = {d: None for d in range(leaf.ndim)}
        else:
            dims = {d: None for d in auto.get(path, ()) if d < leaf.ndim}
        for d, label in spec.get(path, {}).items():
            if not isinstance(label, int):
                dims[d] = label
        dims = {d: v for d, v in dims.items() if d not in static}
        if dims:
            out[i] = dims
    return out
