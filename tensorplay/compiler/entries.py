"""The cache of a compiled callable: its entries (one specialization each: the guards a call
must pass and how to run it), the group that holds a callable's entries, segment programs
and recompile budget, the lookup of a call's entry, and ``reset``.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _views
from .._grad_mode import no_grad
from .._tensor import Tensor
from ..autograd.engine import NoBackward
from ..runtime.storage import DeviceArray, Donated, sole_reference
from ..dialects.tp.graph import Graph
from . import dynamic_decisions, tracedir
from ._logging import get_logger
from .autodiff import Differentiated
from .capture import pytree
from .capture.bindings import ArgInput, AttachedInput, Binding
from .capture.guards import CallKey, describe_change
from .symbolic.guard import ShapeGuard

__all__ = ["GRAPH", "SEGMENTED", "NO_BACKWARD", "SEGMENTS_PER_RECOMPILE", "Entry", "CacheGroup", "group_for",
           "lookup", "miss_reason", "passthrough", "register_reset_hook", "reset"]

_log_guards = get_logger("guards")

#: distinct segment graphs a compiled callable may compile, per unit of recompile_limit
SEGMENTS_PER_RECOMPILE = 8

GRAPH = "graph"
SEGMENTED = "segmented"

#: why backward through a compiled graph raises (the graph has no backward)
NO_BACKWARD = ("backward through the compiled graph {name!r} is not supported: {why}. Run that part eagerly "
               "for training (tp.compiler.disable), or call the compiled model under tp.no_grad() when no "
               "gradient is needed")


class Entry:
    """One specialization: the guards it needs and how to run it.

    A ``graph`` entry runs its compiled program without Python; a ``segmented`` entry
    (the function broke) reruns the Python lazily, segments coming from the structural cache.
    """

    def __init__(self, kind: str, key: CallKey | None, config: tuple, name: str,
                 guards: list[tuple[str, Callable[[], bool]]], keepalive: list[Any]):
        self.kind = kind
        self.key = key
        self.config = config
        self.name = name
        self.guards = guards
        self.keepalive = keepalive
        self.paths: list[str] = []
        self.bindings: list[Binding] = []
        self.runner: Callable[..., list] | None = None
        self.graph: Graph | None = None
        self.out_tree: pytree.TreeDef = pytree.LEAF
        self.out_spec: list[tuple] = []
        self.writebacks: list[tuple[Any, int]] = []
        self.hits = 0
        self.trace_scope: Any = None  # tracedir.Scope of this entry's folder, when traced
        #: segmented entries: argument leaf index -> dims its segments keep symbolic
        self.dynamic_dims: dict[int, dict[int, Any]] = {}
        self.exact_key = key  # the call key of the capture (key is masked when dynamic)
        self.mask: tuple[tuple[int, int], ...] = ()  # (leaf index, dim) captured symbolic
        self.shape_guard: ShapeGuard | None = None
        #: set when the capture had inputs requiring grad under grad mode: the results that
        #: depend on them (``grad_outputs``, graph output indexes) then require grad as eager's
        #: do; ``training`` runs their compiled backward, else backward raises ``no_backward_why``
        self.no_backward: str | None = None
        self.no_backward_why = ""
        self.grad_outputs: frozenset[int] = frozenset()
        self.training: Differentiated | None = None
        self._grad_node: Any = None
        self.grad_writebacks: list[tuple[weakref.ref, int | None]] = []
        #: Python run after the program on every call but the first (its trace ran it)
        self.deferred: list[tuple[Callable[..., Any], tuple]] = []
        #: input positions whose buffers the program writes its new values into (the state a
        #: compiled step updates in place: see passes/donation.py)
        self.donated: tuple[int, ...] = ()

    def failing_guard(self) -> str | None:
        for description, check in self.guards:
            try:
                ok = check()
            except Exception:  # noqa: BLE001 - a guard that cannot be evaluated does not hold
                ok = False
            if not ok:
                return getattr(check, "failed", None) or description
        return None

    def run(self, leaves: list[Any], arrays: list[np.ndarray] | None = None) -> Any:
        first_call = arrays is not None
        if arrays is None:
            arrays = [b.fetch(leaves) for b in self.bindings]
            for i in self.donated:  # state the program updates in place: give up its buffer
                # if only the tensor and this list hold it (nothing else could see it change)
                if sole_reference(arrays[i], 2):
                    arrays[i] = Donated(arrays[i])
        outs = self.runner(*arrays) if self.runner is not None else []
        node = None
        if self.training is not None:
            node = self.training.node([b.source(leaves) for b in self.bindings], arrays, outs)
        for target, k in self.writebacks:
            if isinstance(target, ArgInput):
                obj = leaves[target.index]
            elif isinstance(target, AttachedInput):
                obj = target.tensor
            else:
                obj = target()
            if obj is not None:
                _views.settle(obj, outs[k])
        for target, k in self.grad_writebacks:  # the .grad a backward() inside the function set
            obj = target()
            if obj is not None:
                obj.grad = None if k is None else Tensor._wrap(outs[k] if type(outs[k]) is DeviceArray
                                                                else np.asarray(outs[k]))
        if not first_call:
            for fn, args in self.deferred:  # (a schedule's step after the optimizer's)
                fn(*args)
        if self.out_tree is pytree.LEAF and len(self.out_spec) == 1 and self.out_spec[0][0] == "new":
            out = outs[self.out_spec[0][1]]  # (one new tensor: the usual result)
            t = Tensor._wrap(out if type(out) is DeviceArray else np.asarray(out))
            if self.grad_outputs:
                self._grad_fn(t, self.out_spec[0][1], node)
            return t
        made: dict[int, Tensor] = {}
        result: list[Any] = []
        for item in self.out_spec:
            kind = item[0]
            if kind == "new":
                t = made.get(item[1])
                if t is None:
                    out = outs[item[1]]
                    t = made[item[1]] = Tensor._wrap(out if type(out) is DeviceArray else np.asarray(out))
                    if self.grad_outputs:
                        self._grad_fn(t, item[1], node)
                result.append(t)
            elif kind == "object":
                b = item[1]
                result.append(leaves[b.index] if isinstance(b, ArgInput) else b.tensor)
            elif kind == "view":  # a view of an input, as eagerly: made from it after the writes
                b = item[1]
                with no_grad():
                    result.append(_views.replay(leaves[b.index] if isinstance(b, ArgInput) else b.tensor, item[2]))
            elif kind == "size":  # a size the data decided, computed by the program
                out = outs[item[1]]
                result.append(int(out.to_host() if type(out) is DeviceArray else np.asarray(out)))
            else:
                result.append(item[1])
        return pytree.unflatten(self.out_tree, result)

    def _grad_fn(self, t: Tensor, k: int, node: Any) -> None:
        if k not in self.grad_outputs:
            return
        t._requires_grad = True
        if node is not None:
            t._grad_fn = node
            t._output_nr = self.training.grad_outputs.index(k)
            return
        if self._grad_node is None:
            self._grad_node = NoBackward(self.no_backward, NO_BACKWARD.format(name=self.name,
                                                                              why=self.no_backward_why))
        t._grad_fn = self._grad_node


def passthrough(graph: Graph) -> Callable[..., list]:
    """The runner of a graph without nodes: its outputs are some of its inputs."""
    positions = [graph.inputs.index(v) for v in graph.outputs]

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        # a new array as eager gives; device storage is immutable, so it is shared
        return [arrays[i] if type(arrays[i]) is DeviceArray else np.array(arrays[i]) for i in positions]

    return run


class CacheGroup:
    """The entries, segment programs, regions and recompile budget of one callable; shared
    by every wrapper of that callable unless ``isolate_recompiles``."""

    def __init__(self, label: str):
        self.label = label
        self.entries: dict[CallKey, list[Entry]] = {}
        self.order: list[Entry] = []
        self.segments: dict[tuple, Callable[..., list]] = {}
        self.regions: dict = {}
        self.masks: dict[tuple, None] = {}  # masks of the entries with symbolic sizes
        self.auto_dynamic: dict[str, set[int]] = {}  # automatic dynamic: dims seen to change
        self.decision_id: str | None = None  # names the callable across processes (dynamic_decisions)
        self.remembered_name: str | None = None  # the graph name an earlier run gave its dynamic capture
        self.decisions_loaded = False
        self.warned = False
        self.segments_warned = False
        self.lock = threading.RLock()
        self.traces: dict[str, Any] = {}  # trace folder -> tracedir.FunctionTrace
        self.traced_limit = False
        _all_groups.add(self)

    @property
    def count(self) -> int:
        return len(self.order)

    def add(self, entry: Entry) -> None:
        self.entries.setdefault(entry.key, []).append(entry)
        self.order.append(entry)
        if entry.mask:
            self.masks[entry.mask] = None

    def grow_dynamic(self, dims: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Make (argument path, dim) pairs dynamic for later captures; returns the new ones."""
        new = [(path, d) for path, d in dims if d not in self.auto_dynamic.get(path, ())]
        for path, d in new:
            self.auto_dynamic.setdefault(path, set()).add(d)
        return new

    def remember_dynamic(self, name: str) -> None:
        """Keep this group's automatic dynamic dims on disk with ``name``, the graph captured
        with them (when the group has a decision id: dynamic=None, a Python callable)."""
        if self.decision_id is not None and self.auto_dynamic:
            dynamic_decisions.store(self.decision_id, self.auto_dynamic, name)

    def clear(self) -> None:
        self.entries.clear()
        self.order.clear()
        self.segments.clear()
        self.regions.clear()
        self.masks.clear()
        self.auto_dynamic.clear()
        self.decisions_loaded = False
        self.remembered_name = None
        self.warned = False
        self.segments_warned = False


_all_groups: weakref.WeakSet[CacheGroup] = weakref.WeakSet()
_shared_groups: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_reset_hooks: list[Callable[[], None]] = []


def _group_key(fn: Any) -> tuple:
    if inspect.ismethod(fn):
        return ("method", id(fn.__func__), id(fn.__self__))
    return ("callable", id(fn))


def group_for(fn: Any, label: str, isolate: bool) -> CacheGroup:
    """The cache group of a wrapper of ``fn``: the one every wrapper of ``fn`` shares, or a
    group of its own (``isolate``: compile(isolate_recompiles=True))."""
    if isolate:
        return CacheGroup(label)
    key = _group_key(fn)
    group = _shared_groups.get(key)
    if group is None:
        group = CacheGroup(label)
        _shared_groups[key] = group
    return group


def lookup(group: CacheGroup, key: CallKey, leaves: list[Any], config: tuple, fullgraph: bool,
           name: str) -> tuple[Entry | None, Any]:
    """The newest entry of ``group`` for ``key``, made with ``config``, whose guards hold for
    this call (``fullgraph``: whole-graph entries only); and the last guard that failed on the
    way (``(entry, leaves)`` for a size guard, the guard's words otherwise; None if none did)."""
    failed = None
    entries = group.entries.get(key)
    if not entries:
        return None, failed
    for entry in reversed(entries):
        if entry.config != config or (fullgraph and entry.kind == SEGMENTED):
            continue
        if entry.shape_guard is not None and not entry.shape_guard(leaves):
            failed = (entry, leaves)
            if _log_guards.isEnabledFor(logging.INFO):
                _log_guards.info("size guard failed for %s (entry @%s): %s", name, entry.name,
                                 entry.shape_guard.failure(leaves))
            continue
        failing = entry.failing_guard()
        if failing is None:
            return entry, failed
        failed = failing
        _log_guards.info("guard failed for %s (entry @%s): %s", name, entry.name, failing)
    return None, failed


def miss_reason(group: CacheGroup, config: tuple, failed: Any, key: CallKey, paths: list[str]) -> str:
    """Why no entry served a call: the guard that failed last (as :func:`lookup` gives it),
    else what differs from the newest entry made with ``config``."""
    if isinstance(failed, tuple):
        entry, leaves = failed
        return f"size guard failed: {entry.shape_guard.failure(leaves)}"
    if failed is not None:
        return f"guard failed: {failed}"
    same = [e for e in group.order if e.config == config]
    if not same:
        return "compile options differ from the cached entries"
    return describe_change(same[-1].exact_key, same[-1].paths, key, paths)


def register_reset_hook(hook: Callable[[], None]) -> Callable[[], None]:
    """Have :func:`reset` call ``hook()`` (e.g. to forget values assumed constant)."""
    if hook not in _reset_hooks:
        _reset_hooks.append(hook)
    return hook


def reset() -> None:
    """Forget every compiled specialization (entries, segment programs, nested regions and
    their recompile budgets) and every value assumed constant during capture."""
    tracedir.write_hits()  # traced entries: how many calls each served, before they go
    for group in list(_all_groups):
        with group.lock:
            group.clear()
    from .capture.programs import _region_programs

    _region_programs.clear()
    for hook in list(_reset_hooks):
        hook()
