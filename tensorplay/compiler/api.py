"""``compile`` and the objects it returns: compiled functions with their guarded caches,
the module wrapper, ``reset`` and the capture-state queries. ``explain`` is in
:mod:`.explanation`, the ``dynamic_shapes`` spec checks in :mod:`.dynamic_shapes`.

docs/compiler.md describes the behaviour in users' terms (capture and guards, graph breaks,
every keyword of ``compile``).
"""

from __future__ import annotations

import functools
import inspect
import keyword
import logging
import re
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import sympy

from .. import _views
from .._grad_mode import is_grad_enabled, no_grad
from .._tensor import Tensor
from ..autograd.engine import NoBackward
from ..runtime.program import BACKEND_OF_DRIVER
from ..runtime.storage import IN_PLACE_MIN_BYTES, DeviceArray, Donated, device_name, driver_of_arrays, sole_reference
from ..dialects.tp import symbolic as sym
from ..dialects.tp.graph import Graph, data_dependent_symbols
from ..nn.modules.module import Module
from ..profiler._state import state as _prof_state
from . import dynamic_decisions, tracedir
from ._logging import get_logger
from .autodiff import Differentiated, differentiate, live_values, replay_eagerly
from .capture import pytree
from .capture.bindings import ArgInput, ArrayInput, AttachedInput, Binding
from .capture.graphs import interpret, structural_key, substitute_sizes
from .capture.reads import ReadGuard
from .capture.guards import (CallKey, ModuleGuard, call_key, describe_change, free_objects, is_module, mask_key,
                             module_guard, size_changes, tensor_meta_guard)
from .capture.programs import Backend, check_native, compile_graph
from .capture.traced import function_info, record_capture, record_guards
from .capture.session import (
    LAZY,
    Capture,
    CaptureConfig,
    TraceResult,
    current_capture,
    exporting,
    is_compiling,
    is_exporting,
)
from ..dialects.tp.errors import OpError
from .dynamic_shapes import check_dynamic_shapes, check_named_dims, normalize_dynamic_shapes
from .errors import GraphCaptureError
from .symbolic.guard import ShapeGuard
from .symbolic.shape_env import ShapeEnv

__all__ = ["compile", "reset", "is_compiling", "is_exporting", "exporting", "CompiledFunction",
           "CompiledModule", "register_reset_hook", "DEFAULT_RECOMPILE_LIMIT"]

DEFAULT_RECOMPILE_LIMIT = 8
#: distinct segment graphs a compiled callable may compile, per unit of recompile_limit
SEGMENTS_PER_RECOMPILE = 8

_log_guards = get_logger("guards")
_log_perf = get_logger("perf")
_log_recompiles = get_logger("recompiles")

GRAPH = "graph"
SEGMENTED = "segmented"


# -- cache entries -----------------------------------------------------------------------------

_NO_BACKWARD = ("backward through the compiled graph {name!r} is not supported: {why}. Run that part eagerly "
                "for training (tp.compiler.disable), or call the compiled model under tp.no_grad() when no "
                "gradient is needed")


def _donations(graph: Graph, trace: Any) -> dict[int, int]:
    """The graph's outputs (-> inputs) a program may write into the buffers of the tensors they
    update: state the function reached and changed in place (parameters and optimizer state in
    a compiled step), of a fixed shape and over ``IN_PLACE_MIN_BYTES`` (a smaller buffer saves
    nothing worth a fence). Function arguments are never given up: the caller holds them; nor
    are inputs a scatter or slice update may write into (IREE 3.13 may do so in any argument's
    buffer, iree-org/iree#16168: they stay private copies)."""
    from .backends.iree import written_inputs

    position = {id(b): i for i, b in enumerate(trace.bindings)}
    written = written_inputs(graph)
    pairs: dict[int, int] = {}
    for target, k in trace.writebacks:
        i = position.get(id(target))
        if not isinstance(target, AttachedInput) or i is None or i in written:
            continue
        old, new = graph.inputs[i], graph.outputs[k]
        if new is old or new.type != old.type or any(sym.is_symbolic(d) for d in old.type.shape):
            continue
        if int(np.prod(old.type.shape, dtype=np.int64)) * old.type.dtype.itemsize > IN_PLACE_MIN_BYTES:
            pairs[k] = i
    return pairs


def _requires_grad(binding: Any, leaves: list[Any]) -> bool:
    if isinstance(binding, ArgInput):
        t = leaves[binding.index]
    else:
        t = getattr(binding, "tensor", None)
        if t is None and getattr(binding, "_weak", None) is not None:
            t = binding._weak()
    return bool(getattr(t, "requires_grad", False))


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
            self._grad_node = NoBackward(self.no_backward, _NO_BACKWARD.format(name=self.name,
                                                                               why=self.no_backward_why))
        t._grad_fn = self._grad_node


def differentiator(leaves: list[Any] | None, name: str, partitioner: str, *,
                   log: bool = True) -> Callable[..., Any]:
    """A capture's ``differentiate`` hook: the graph's backward for the inputs that require
    grad (``leaves``: the call's, to tell which bindings do; None: the hook is given the input
    positions), or the reason it cannot be built (logged with ``log``; backward raises it)."""

    def build(graph: Graph, bindings: Any, env: Any = None) -> Any:
        requires = bindings if leaves is None else [i for i, b in enumerate(bindings)
                                                    if _requires_grad(b, leaves)]
        if not requires:
            return None
        outputs = list(graph.outputs)
        try:
            return differentiate(graph, requires, name, shape_env=env, partitioner=partitioner)
        except Exception as exc:  # noqa: BLE001 - the forward still compiles; backward raises this
            graph.set_outputs(outputs)
            why = f"its backward could not be built ({type(exc).__name__}: {exc})"
            if log:
                _log_perf.warning("%s: %s", name, why)
            return why

    return build


def _attach_backward(training: Differentiated, runner: Any, backend: Any) -> None:
    """Let ``training`` compile its backward with ``backend`` (its stages written where the
    forward's are, when traced), and keep the values the forward ``runner`` saves for it on a
    GPU device (an IREE program's results)."""
    if hasattr(runner, "device_results"):
        runner.device_results = frozenset(range(training.n_outputs, len(training.forward.outputs)))
    scope = tracedir.current()
    training.compile = lambda g, arrays: tracedir.within(
        scope, compile_graph, g, arrays, backend) if g.nodes else _passthrough(g)


def _input_symbols(graph: Graph, arrays: Sequence[Any]) -> dict[Any, int]:
    """The size symbols that are input dimensions of ``graph``, with this call's values."""
    out: dict[Any, int] = {}
    for v, a in zip(graph.inputs, arrays):
        for d, size in enumerate(v.type.shape):
            if sym.is_symbolic(size) and size.is_Symbol and size not in out:
                out[size] = int(a.shape[d])
    return out


def _graph_grad_outputs(graph: Graph, requires: list[bool]) -> frozenset[int]:
    """The outputs of ``graph`` that depend, through differentiable ops, on an input whose
    flag in ``requires`` is set: those eager autograd would make require grad."""
    live = live_values(graph, [i for i, r in enumerate(requires) if r])
    return frozenset(k for k, v in enumerate(graph.outputs) if v in live)


def _name_symbolic_sizes(exc: BaseException, env: Any) -> None:
    """An op that fails while sizes are symbolic names them ``s0``, ``s1``: add a note
    saying which argument sizes those are and their values in the failing call."""
    infos = getattr(env, "infos", None) or {}
    text = str(exc)
    # a symbol stands alone or between dims ("3x2 and s0xs1"), never inside a word
    named = [info for s, info in infos.items()
             if re.search(rf"(?<![0-9A-Za-wyz_]){re.escape(str(s))}(?![0-9])", text)]
    if named:
        exc.add_note("(symbolic sizes in this message: " + "; ".join(
            f"{info.symbol} is {info.source}, " + (f"{info.hint} in this call" if info.hint is not None else
                                                   "a size the data decides, computed by the program")
            for info in named) + ")")


def _passthrough(graph: Graph) -> Callable[..., list]:
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


# -- compile -----------------------------------------------------------------------------------

def _default_name(fn: Any) -> str:
    target = getattr(fn, "__func__", fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or type(target).__name__
    name = name.rsplit("<locals>.", 1)[-1]
    name = re.sub(r"\W+", "_", name).strip("_") or "main"
    if name[0].isdigit():
        name = "_" + name
    return name


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"compile(name={name!r}): the name must be a Python identifier; it names "
                         f"the compiled module, its artifacts and its log lines")
    return name


def _backend_label(backend: Any) -> str:
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__name__", type(backend).__name__)


class CompiledFunction:
    """A callable compiled by :func:`compile`: it captures on a cache miss, reuses guarded
    graphs on a hit, and runs functions with graph breaks in segments."""

    def __init__(self, fn: Callable[..., Any], *, fullgraph: bool = False, dynamic: bool | None = None,
                 backend: str | Callable[..., Any] | None = None, mode: str | None = None,
                 options: dict[str, Any] | None = None, name: str | None = None, disable: bool = False,
                 recompile_limit: int | None = None, isolate_recompiles: bool = False,
                 strict_native: bool = False, dynamic_shapes: Any = None,
                 _module: Module | None = None):
        if not callable(fn):
            raise TypeError(f"compile() expects a callable or a tensorplay.nn.Module, got "
                            f"{type(fn).__name__}")
        for label, value in (("fullgraph", fullgraph), ("disable", disable),
                             ("isolate_recompiles", isolate_recompiles), ("strict_native", strict_native)):
            if not isinstance(value, bool):
                raise TypeError(f"compile({label}=...) expects a bool, got {value!r}")
        if dynamic is not None and not isinstance(dynamic, bool):
            raise TypeError(f"compile(dynamic=...) expects True, False or None, got {dynamic!r}")
        if recompile_limit is not None and (isinstance(recompile_limit, bool)
                                            or not isinstance(recompile_limit, int) or recompile_limit < 1):
            raise ValueError(f"compile(recompile_limit={recompile_limit!r}): expected a positive int")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"compile(options=...) expects a dict, got {type(options).__name__}")
        self._fn = fn
        self._options = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                             name=name, disable=disable, recompile_limit=recompile_limit,
                             isolate_recompiles=isolate_recompiles, strict_native=strict_native,
                             dynamic_shapes=dynamic_shapes, _module=_module)
        self.__wrapped__ = fn
        functools.update_wrapper(self, getattr(fn, "__func__", fn) if _module is None else type(_module),
                                 assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=())
        self.fullgraph = fullgraph or strict_native
        self.dynamic = dynamic
        self.mode = mode
        self.disabled = disable
        self.recompile_limit = recompile_limit if recompile_limit is not None else DEFAULT_RECOMPILE_LIMIT
        self.isolate_recompiles = isolate_recompiles
        self.strict_native = strict_native
        if _module is None and inspect.ismethod(fn) and fn.__func__ is Module._call_impl:
            default = type(fn.__self__).__name__  # Module.compile(): named after the model
        else:
            default = _default_name(fn if _module is None else type(_module))
        self.name = _check_name(name) if name is not None else default
        self._module = _module
        owner = _module if _module is not None else (
            fn.__self__ if inspect.ismethod(fn) and fn.__func__ is Module._call_impl else None)
        # a module's calls are named after forward's parameters (guards, logs, dynamic_shapes)
        self._signature = _signature(owner.forward if owner is not None else fn)
        self.dynamic_shapes = normalize_dynamic_shapes(dynamic_shapes, dynamic, self._signature)
        from .backends import DEFAULT_BACKEND, get_default_backend, lookup_backend, resolve_options

        chosen = backend if backend is not None else get_default_backend()
        self.options = resolve_options(mode, options)
        self.backend = chosen
        if not disable:
            self._backend = Backend(lookup_backend(chosen), self.options, _backend_label(chosen))
            if strict_native:
                _check_native_backend(chosen)
        else:
            self._backend = None
        # no backend named and the default is the CPU's: tensors on a GPU device are compiled for
        # that device's backend (as torch.compile follows the tensors' device)
        self._follow_device = backend is None and chosen == DEFAULT_BACKEND
        self._device_backends: dict[str, Backend] = {}
        # (the dynamic policy too: a dynamic=True wrapper of a callable whose static wrapper ran
        # first gets the program for every size, not the static entry)
        self._config = (id(self._backend.fn) if self._backend else None,
                        tuple(sorted((k, repr(v)) for k, v in self.options.items())), strict_native,
                        self._follow_device, dynamic)
        if isolate_recompiles:
            self._group = CacheGroup(self.name)
        else:
            key = _group_key(fn)
            group = _shared_groups.get(key)
            if group is None:
                group = CacheGroup(self.name)
                _shared_groups[key] = group
            self._group = group
        self._group_anchor = fn  # keeps the group key's objects alive as long as the group

    # -- introspection ----------------------------------------------------------------------
    @property
    def original(self) -> Callable[..., Any]:
        """The callable that was compiled."""
        return self._fn

    @property
    def compile_count(self) -> int:
        """Programs this wrapper's backend compiled (whole graphs and segments)."""
        compiles = self._backend.compiles if self._backend is not None else 0
        return compiles + sum(b.compiles for b in self._device_backends.values())

    def _backend_for(self, arrays: Sequence[Any]) -> Backend:
        """The backend a graph reading ``arrays`` compiles with: the device backend of the GPU
        tensors among them when no backend was named, else the one chosen."""
        if not self._follow_device:
            return self._backend
        driver = driver_of_arrays(arrays)
        if driver is None:
            return self._backend
        backend = self._device_backends.get(driver)
        if backend is None:
            from .backends import lookup_backend

            name = BACKEND_OF_DRIVER[driver]
            backend = self._device_backends[driver] = Backend(lookup_backend(name), self.options, name)
            _log_perf.info("%s: tensors on %s, compiled with %s (no backend was named)", self.name,
                           device_name(driver), name)
        return backend

    def cache_info(self) -> dict[str, Any]:
        """Entries (graph and segmented), distinct segment programs and the budget."""
        g = self._group
        return {"entries": g.count, "graph_entries": sum(e.kind == GRAPH for e in g.order),
                "segmented_entries": sum(e.kind == SEGMENTED for e in g.order),
                "segment_programs": len(g.segments), "regions": len(g.regions),
                "recompile_limit": self.recompile_limit, "limit_reached": g.warned}

    @property
    def graphs(self) -> list[Graph]:
        """The whole graphs of this callable's entries, oldest first."""
        return [e.graph for e in self._group.order if e.graph is not None]

    def __repr__(self) -> str:
        state = "disabled" if self.disabled else f"backend={_backend_label(self.backend)!r}"
        return f"<CompiledFunction {self.name} ({state})>"

    def __reduce__(self) -> tuple:
        # Copies and pickles compile the same callable afresh (caches are not copied), so a
        # deep-copied module gets a compiled call of its own.
        return (_rebuild, (self._fn, self._options))

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self, instance)

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.disabled or current_capture() is not None or _compile_disabled():
            return self._fn(*args, **kwargs)
        since = _prof_state.active and time.perf_counter_ns()  # (the profiler's guard phase starts here)
        leaves, treedef = pytree.flatten_call(args, kwargs)
        key = call_key(treedef, leaves)
        with self._group.lock:
            entry = self._lookup(key, leaves)
            if entry is None and self._group.masks:
                for mask in self._group.masks:
                    masked = mask_key(key, mask)
                    if masked is not None:
                        entry = self._lookup(masked, leaves)
                        if entry is not None:
                            break
            if entry is not None:
                entry.hits += 1
                if _prof_state.active:  # tensorplay.profiler records the call and its phases
                    return _prof_state.hooks.compiled_call(self.name, entry.kind, since, self._run_entry, args,
                                                           kwargs, leaves, entry)
                return self._run_entry(args, kwargs, leaves, entry)
            if _prof_state.active:
                return _prof_state.hooks.span(f"tp.compile capture: {self.name}", "compile", self._capture, args,
                                              kwargs, leaves, treedef, key)
            return self._capture(args, kwargs, leaves, treedef, key)

    def _run_entry(self, args: tuple, kwargs: dict, leaves: list[Any], entry: Entry) -> Any:
        if entry.kind == GRAPH:
            return entry.run(leaves)
        if entry.trace_scope is not None:
            with tracedir.active(entry.trace_scope):
                return self._run_segmented(args, kwargs, leaves, entry)
        return self._run_segmented(args, kwargs, leaves, entry)

    def _lookup(self, key: CallKey, leaves: list[Any]) -> Entry | None:
        entries = self._group.entries.get(key)
        if not entries:
            return None
        for entry in reversed(entries):
            if entry.config != self._config or (self.fullgraph and entry.kind == SEGMENTED):
                continue
            if entry.shape_guard is not None and not entry.shape_guard(leaves):
                self._last_failure = (entry, leaves)
                if _log_guards.isEnabledFor(logging.INFO):
                    _log_guards.info("size guard failed for %s (entry @%s): %s", self.name, entry.name,
                                     entry.shape_guard.failure(leaves))
                continue
            failed = entry.failing_guard()
            if failed is None:
                return entry
            self._last_failure = failed
            _log_guards.info("guard failed for %s (entry @%s): %s", self.name, entry.name, failed)
        return None

    def _miss_reason(self, key: CallKey, paths: list[str]) -> str:
        failed = getattr(self, "_last_failure", None)
        self._last_failure = None
        if isinstance(failed, tuple):
            entry, leaves = failed
            return f"size guard failed: {entry.shape_guard.failure(leaves)}"
        if failed is not None:
            return f"guard failed: {failed}"
        same = [e for e in self._group.order if e.config == self._config]
        if not same:
            return "compile options differ from the cached entries"
        return describe_change(same[-1].exact_key, same[-1].paths, key, paths)

    def _paths(self, treedef: pytree.TreeDef) -> list[str]:
        names = self._signature
        out = []
        for p in pytree.leaf_paths(treedef):
            m = re.match(r"\[0\]\[(\d+)\](.*)", p)
            if m:
                i = int(m.group(1))
                head = names[i] if names is not None and i < len(names) else f"args[{i}]"
                out.append(head + m.group(2))
                continue
            m = re.match(r"\[1\]\['([^']*)'\](.*)", p)
            out.append(m.group(1) + m.group(2) if m else p)
        return out

    def _capture(self, args: tuple, kwargs: dict, leaves: list[Any], treedef: pytree.TreeDef,
                 key: CallKey) -> Any:
        group = self._group
        paths = self._paths(treedef)
        if group.count:
            reason = self._miss_reason(key, paths)
        else:
            reason = "first call"
            self._last_failure = None
        if group.count >= self.recompile_limit:
            return self._limit_reached(args, kwargs, reason)
        spec = self._check_dynamic(leaves, paths)
        grown = self._automatic_dynamic(key, leaves, paths) if group.count else self._remembered_dynamic()
        decided = bool(grown) and group.count > 0  # a new automatic dynamic decision, kept once captured
        if group.count:
            _log_recompiles.info("recompiling %s (capture %d of at most %d): %s%s", self.name,
                                 group.count + 1, self.recompile_limit, reason,
                                 f"; automatic dynamic: {grown} now dynamic" if grown else "")
        dynamic_dims = self._dynamic_dims(leaves, paths, spec)
        modules, guards, keepalive = self._guards(leaves, paths)
        name = self._entry_name()
        tracer = self._tracer()
        if tracer is None:
            result = self._capture_as(name, args, kwargs, leaves, key, paths, modules, guards, keepalive,
                                      dynamic_dims, spec)
            if decided:
                group.remember_dynamic(name)
            return result
        scope = tracer.entry(name, reason=reason, capture_number=group.count + 1, recompile=bool(group.count),
                             automatic_dynamic=grown or None, grad_mode=is_grad_enabled())
        tracedir.event(scope, "recompile" if group.count else "capture", entry=name, reason=reason)
        start = time.perf_counter()
        with tracedir.active(scope):
            try:
                result = self._capture_as(name, args, kwargs, leaves, key, paths, modules, guards, keepalive,
                                          dynamic_dims, spec)
            except BaseException as exc:
                tracedir.note(scope, error=f"{type(exc).__name__}: {exc}")
                tracedir.event(scope, "error", entry=name, error=f"{type(exc).__name__}: {str(exc)[:500]}")
                raise
        tracedir.note(scope, total_s=round(time.perf_counter() - start, 6))
        if decided:
            group.remember_dynamic(name)
        return result

    def _tracer(self) -> Any:
        """The trace folder of this function's group under the folder a trace is asked for
        (``options['trace_dir']`` or ``TENSORPLAY_TRACE_DIR``), or None."""
        root = tracedir.requested(self.options)
        if root is None:
            return None
        tracer = self._group.traces.get(str(root))
        if tracer is None:
            info = function_info(self._source_fn(), self._backend.label if self._backend else "disabled", self.options,
                                 mode=self.mode, fullgraph=self.fullgraph, dynamic=self.dynamic,
                                 recompile_limit=self.recompile_limit)
            tracer = tracedir.function_trace(root, self.name, info)
            self._group.traces[str(root)] = tracer
        return tracer

    def _source_fn(self) -> Any:
        """The function whose code the user wrote: a module's ``forward`` for a compiled module."""
        fn = self._fn
        owner = self._module if self._module is not None else (
            fn.__self__ if inspect.ismethod(fn) and fn.__func__ is Module._call_impl else None)
        return type(owner).forward if owner is not None else fn

    def _capture_as(self, name: str, args: tuple, kwargs: dict, leaves: list[Any], key: CallKey,
                    paths: list[str], modules: list, guards: list, keepalive: list, dynamic_dims: dict,
                    spec: dict) -> Any:
        group = self._group
        scope = tracedir.current()
        config = CaptureConfig(name=name, fullgraph=self.fullgraph, strict_native=self.strict_native,
                               dynamic=self.dynamic, run_graph=self._run_segment, regions=group.regions,
                               dynamic_dims=dynamic_dims,
                               differentiate=self._differentiator(leaves, name) if is_grad_enabled() else None,
                               run_training=self._run_segment_training)
        session = Capture(config)
        start = time.perf_counter()
        try:
            trace = session.run_trace(self._fn, args, kwargs, leaves, paths, modules)
        except OpError as exc:
            _name_symbolic_sizes(exc, session.shape_env)
            raise
        if scope is not None:
            record_capture(scope, session, trace, modules, time.perf_counter() - start, leaves, paths)
        if spec:
            check_named_dims(session.shape_env, spec)
        if trace is None:
            for _, check in guards:
                if isinstance(check, ModuleGuard):
                    check.refresh()
            entry = Entry(SEGMENTED, key, self._config, name, guards, keepalive)
            entry.paths = paths
            mask = tuple(sorted((i, d) for i, dims in dynamic_dims.items() for d in dims))
            masked = mask_key(key, mask) if mask else None
            if masked is not None:  # its segments keep these sizes symbolic: one entry for all sizes
                entry.key, entry.mask, entry.dynamic_dims = masked, mask, dynamic_dims
            if scope is not None:
                record_guards(scope, guards, session, None, leaves, paths, function_info(self._source_fn(), "", {})["source"])
                entry.trace_scope = scope
                scope.function.watch(scope, entry)
            group.add(entry)
            return session.result
        result = self._install(trace, key, name, guards, keepalive, leaves, paths)
        if scope is not None:
            record_guards(scope, guards, session, trace, leaves, paths, function_info(self._source_fn(), "", {})["source"])
        return result

    def _install(self, trace: TraceResult, key: CallKey, name: str, guards: list, keepalive: list,
                 leaves: list[Any], paths: list[str]) -> Any:
        graph = trace.graph
        graph.name = name
        exact_key = key
        mask: tuple[tuple[int, int], ...] = ()
        if trace.shape_guard is not None:
            mask = tuple(sorted((i, d) for i, d, _, _ in trace.shape_guard.dims))
            key = mask_key(key, mask)
        covered: set[int] = set()
        for _, check in guards:
            if isinstance(check, ModuleGuard):
                check.refresh()
                covered.update(id(t) for t, *_ in check.tensors)
        if self.strict_native:
            check_native(graph)
        first = [b.first for b in trace.bindings]
        entry = Entry(GRAPH, key, self._config, name, guards, keepalive)
        entry.paths = paths
        entry.exact_key, entry.mask, entry.shape_guard = exact_key, mask, trace.shape_guard
        for b in trace.bindings:
            if isinstance(b, AttachedInput) and id(b.tensor) not in covered:
                guards.append(tensor_meta_guard(b.tensor, b.what))
        guards.extend(trace.guards)
        if _log_guards.isEnabledFor(logging.INFO):
            for _, check in trace.guards:
                if isinstance(check, ReadGuard):
                    for text in check.descriptions():
                        _log_guards.info("%s: guard %s", name, text)
                    for text in check.notes:
                        _log_guards.info("%s: not guarded: %s", name, text)
        entry.bindings = trace.bindings
        entry.graph = graph
        entry.out_tree, entry.out_spec, entry.writebacks = trace.out_tree, trace.out_spec, trace.writebacks
        entry.grad_writebacks = [(weakref.ref(t), k) for t, k in trace.grad_writebacks]
        entry.deferred = trace.deferred
        scope = tracedir.current()
        start = time.perf_counter()
        if graph.nodes:
            graph.donated = _donations(graph, trace)
            entry.runner = compile_graph(graph, first, self._backend_for(first))
            if hasattr(entry.runner, "resident"):  # an IREE program: keep weights on its device
                entry.runner.resident = frozenset(i for i, b in enumerate(trace.bindings)
                                                  if isinstance(b, AttachedInput))
                entry.runner.kept_results = frozenset(k for target, k in trace.writebacks
                                                      if isinstance(target, AttachedInput))
        elif graph.outputs:
            entry.runner = _passthrough(graph)
        requires = [_requires_grad(b, leaves) for b in trace.bindings]
        if is_grad_enabled() and any(requires):  # (grad mode and requires_grad are in the guards)
            entry.no_backward = f"{name}Backward"
            training = trace.training
            if isinstance(training, Differentiated) and any(
                    _requires_grad(target, leaves) for target, _ in trace.writebacks
                    if not isinstance(target, weakref.ref)):
                training = "the function updates an input that requires grad in place"
            if isinstance(training, Differentiated):
                _attach_backward(training, entry.runner, self._backend_for(first))
                entry.training = training
                entry.grad_outputs = frozenset(training.grad_outputs)
            else:
                entry.no_backward_why = training or "its backward could not be built"
                entry.grad_outputs = _graph_grad_outputs(graph, requires)
        if entry.training is None and entry.runner is not None:
            # the inputs whose buffers the program updates in place (when the call gives them up)
            entry.donated = tuple(sorted(getattr(entry.runner, "donated", None) or ()))
        if scope is not None:
            tracedir.note(scope, compile_s=round(time.perf_counter() - start, 6))
            start = time.perf_counter()
        result = entry.run(leaves, first)
        if scope is not None:
            first_call = round(time.perf_counter() - start, 6)
            tracedir.note(scope, first_call_s=first_call)
            tracedir.event(scope, "first_call", entry=name, seconds=first_call)
            entry.trace_scope = scope
            scope.function.watch(scope, entry)
        for b in trace.bindings:
            if not isinstance(b, ArrayInput):
                b.first = None
        self._group.add(entry)
        return result

    def _differentiator(self, leaves: list[Any] | None, name: str, *, log: bool = True) -> Callable[..., Any]:
        return differentiator(leaves, name, self.options.get("partitioner", "min_cut"), log=log)

    def _guards(self, leaves: list[Any], paths: list[str]) -> tuple[list, list, list]:
        modules: list[tuple[str, Any]] = []
        guards: list[tuple[str, Callable[[], bool]]] = []
        keepalive: list[Any] = []
        seen: set[int] = set()

        def add_module(label: str, prefix: str, m: Any) -> None:
            if id(m) in seen:
                return
            seen.add(id(m))
            modules.append((prefix, m))
            guards.append(module_guard(m, label))

        if self._module is not None:
            add_module("the compiled module", "", self._module)
        target = self._fn
        if inspect.ismethod(target) and is_module(target.__self__):
            add_module("self", "self.", target.__self__)
        for path, leaf in zip(paths, leaves):
            if is_module(leaf):
                add_module(path, f"{path}.", leaf)
            if not isinstance(leaf, Tensor) and not isinstance(leaf, (int, float, str, bool, type(None))):
                keepalive.append(leaf)
        for label, obj, getter in free_objects(self._fn):
            guards.append((f"{label} still bound to the same object", lambda g=getter, o=obj: g() is o))
            if is_module(obj):
                add_module(label, f"{label}.", obj)
        return modules, guards, keepalive

    def _limit_reached(self, args: tuple, kwargs: dict, reason: str) -> Any:
        group = self._group
        message = (f"{self.name}: recompile_limit ({self.recompile_limit}) reached; the last miss: "
                   f"{reason}")
        if self.fullgraph:
            raise GraphCaptureError(message + ". fullgraph/strict_native compiled callables do not "
                                    "fall back to eager; raise recompile_limit or call "
                                    "tensorplay.compiler.reset()")
        if not group.warned:
            group.warned = True
            warnings.warn(message + ". Calls that no cached graph covers now run eagerly; raise "
                          "recompile_limit or call tensorplay.compiler.reset()", UserWarning, stacklevel=4)
        _log_recompiles.info("%s: running eagerly (%s)", self.name, reason)
        tracer = self._tracer()
        if tracer is not None and not group.traced_limit:
            group.traced_limit = True
            tracer.event("recompile_limit", reason=reason, limit=self.recompile_limit)
        return self._fn(*args, **kwargs)

    def _run_segmented(self, args: tuple, kwargs: dict, leaves: list[Any], entry: Entry) -> Any:
        config = CaptureConfig(name=self.name, fullgraph=False, strict_native=False, dynamic=self.dynamic,
                               run_graph=self._run_segment, regions=self._group.regions,
                               run_training=self._run_segment_training)
        dynamic = [(leaves[i], i, entry.paths[i], dims) for i, dims in entry.dynamic_dims.items()
                   if isinstance(leaves[i], Tensor)]
        return Capture(config, mode=LAZY).run_lazy(self._fn, args, kwargs, dynamic)

    def _run_segment(self, graph: Graph, arrays: list[np.ndarray], segment: bool) -> list[np.ndarray]:
        group = self._group
        skey = (structural_key(graph), self._config)
        runner = group.segments.get(skey)
        if runner is None:
            limit = self.recompile_limit * SEGMENTS_PER_RECOMPILE
            if len(group.segments) >= limit:
                if not group.segments_warned:
                    group.segments_warned = True
                    warnings.warn(f"{self.name}: {limit} distinct graph segments compiled "
                                  f"(recompile_limit x {SEGMENTS_PER_RECOMPILE}); new segments now run "
                                  f"eagerly", UserWarning, stacklevel=2)
                return interpret(graph, arrays)
            graph.name = f"{self.name}_segment{len(group.segments)}"
            runner = compile_graph(graph, arrays, self._backend_for(arrays)) if graph.nodes else _passthrough(graph)
            group.segments[skey] = runner
        return runner(*arrays)

    def _run_segment_training(self, graph: Graph, arrays: list[Any], sources: list[Any]) -> tuple[list, Any]:
        """Run a segment whose inputs need gradients: its forward (cached with its backward
        by structure and by which inputs require grad), and the grad_fn for its results."""
        group = self._group
        requires = tuple(i for i, t in enumerate(sources)
                         if t is not None and t._requires_grad and t.dtype.is_floating_point)
        skey = (structural_key(graph), self._config, "training", requires)
        hit = group.segments.get(skey)
        if hit is None:
            limit = self.recompile_limit * SEGMENTS_PER_RECOMPILE
            if len(group.segments) >= limit:  # eager from here on, as _run_segment (which warns)
                outs = replay_eagerly(graph, [t if t is not None else Tensor._wrap(a)
                                              for t, a in zip(sources, arrays)])

                def follow(t: Tensor, k: int) -> None:
                    if outs[k]._grad_fn is not None:
                        t._requires_grad, t._grad_fn, t._output_nr = True, outs[k]._grad_fn, outs[k]._output_nr

                return [_views.held(o) for o in outs], follow
            name = graph.name = f"{self.name}_segment{len(group.segments)}"
            symbols = data_dependent_symbols(graph)
            sizes = _input_symbols(graph, arrays)  # symbolic sizes the segment reads from its inputs
            training = None
            if sizes:  # a backward for every size, if building it asks nothing about them
                env = ShapeEnv.of_unbacked(name, symbols | set(sizes))
                training = self._differentiator(None, name, log=False)(graph, requires, env)
                if not isinstance(training, Differentiated):  # it did: this call's sizes
                    _log_perf.info("%s: backward built for this call's sizes (%s)", name, training)
                    substitute_sizes(graph, lambda e: sym.as_size(e.xreplace(sizes))
                                     if isinstance(e, sympy.Basic) else e)
                    skey = (structural_key(graph), self._config, "training", requires)
                    hit = group.segments.get(skey)
                    training = None
            if hit is None and training is None:
                env = ShapeEnv.of_unbacked(name, symbols) if symbols else None
                training = self._differentiator(None, name)(graph, requires, env)
        if hit is None:
            backend = self._backend_for(arrays)
            runner = compile_graph(graph, arrays, backend)
            if isinstance(training, Differentiated):
                _attach_backward(training, runner, backend)
                hit = (runner, training, frozenset(training.grad_outputs), None)
            else:
                why = _NO_BACKWARD.format(name=name, why=training)
                hit = (runner, None, _graph_grad_outputs(graph, [i in requires for i in range(len(sources))]), why)
            group.segments[skey] = hit
        runner, training, grad_outputs, why = hit
        outs = runner(*arrays)
        if training is not None:
            node = training.node(sources, arrays, outs)
            order = training.grad_outputs
            outs = outs[:training.n_outputs]
        else:
            node, order = NoBackward(f"{graph.name}Backward", why), None

        def grad_fn(t: Tensor, k: int) -> None:
            if k not in grad_outputs:
                return
            if t._requires_grad and t._grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            t._requires_grad = True
            t._grad_fn = node
            t._output_nr = order.index(k) if order is not None else 0

        return outs, grad_fn

    def _check_dynamic(self, leaves: list[Any], paths: list[str]) -> dict:
        if self.dynamic_shapes is None:
            return {}
        return check_dynamic_shapes(self.dynamic_shapes, self._signature, leaves, paths)

    def _automatic_dynamic(self, key: CallKey, leaves: list[Any], paths: list[str]) -> str:
        """dynamic=None: when this call misses only because tensor sizes differ from an
        entry's capture, every dim of each argument whose size changed becomes dynamic (a
        sequence length that changes makes the batch dynamic too; dims the program ties to a
        weight are specialized again by the capture's guards); returns the newly dynamic dims
        in words ("" if none)."""
        if self.dynamic is not None or not self._group.order:
            return ""
        for entry in reversed(self._group.order):
            if entry.config != self._config:
                continue
            changed = size_changes(entry.exact_key, key)
            if changed:
                grown = sorted({(i, k) for i, _ in changed for k in range(leaves[i].ndim)})
                new = self._group.grow_dynamic([(paths[i], d) for i, d in grown])
                return ", ".join(f"{path} dim {d}" for path, d in new)
        return ""

    def _entry_name(self) -> str:
        """The name of the next capture's graph: the function's name, then ``name_1``, ... A
        first capture that starts from an earlier run's automatic dynamic decisions takes the
        name that run's dynamic capture had, so its program is the same artifact."""
        group = self._group
        if group.count == 0 and group.remembered_name:
            return group.remembered_name
        taken = {e.name for e in group.order}
        n = group.count
        name = self.name if n == 0 else f"{self.name}_{n}"
        while name in taken:
            n += 1
            name = f"{self.name}_{n}"
        return name

    def _remembered_dynamic(self) -> str:
        """dynamic=None, first capture: the dims an earlier process's automatic dynamic made
        dynamic for this callable (kept in the artifact cache), in words ("" if none)."""
        group = self._group
        if self.dynamic is not None or group.decisions_loaded:
            return ""
        group.decisions_loaded = True
        group.decision_id = dynamic_decisions.function_id(self._source_fn())
        if group.decision_id is None:
            return ""
        remembered, group.remembered_name = dynamic_decisions.load(group.decision_id)
        group.grow_dynamic([(path, d) for path, dims in remembered.items() for d in dims])
        text = ", ".join(f"{path} dim {d}" for path, dims in sorted(remembered.items()) for d in sorted(dims))
        if text:
            _log_recompiles.info("%s: automatic dynamic from an earlier run: %s dynamic from the first capture",
                                 self.name, text)
        return text

    def _dynamic_dims(self, leaves: list[Any], paths: list[str], spec: dict) -> dict[int, dict[int, Any]]:
        """Which argument dims this capture makes symbolic: every dim (dynamic=True), the
        dims automatic dynamic has seen change (dynamic=None), never (dynamic=False); plus
        the named dims of dynamic_shapes. Dims marked with mark_static stay static."""
        if self.dynamic is False:
            return {}
        out: dict[int, dict[int, Any]] = {}
        auto = self._group.auto_dynamic
        for i, (path, leaf) in enumerate(zip(paths, leaves)):
            if not isinstance(leaf, Tensor) or not _views.has_memory(leaf):
                continue
            static = leaf._static_dims or frozenset()
            if self.dynamic:
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


def _rebuild(fn: Callable[..., Any], options: dict[str, Any]) -> CompiledFunction:
    return CompiledFunction(fn, **options)


def _compile_disabled() -> bool:
    """Inside ``disable(fn)`` and ``disable_capture()`` compiled callables run eagerly."""
    global _compile_disabled
    from .markers._session import compile_disabled

    _compile_disabled = compile_disabled
    return compile_disabled()


def _check_native_backend(backend: Any) -> None:
    from .backends import get_backend_capabilities

    caps = get_backend_capabilities(backend)
    if caps.target is None:
        raise ValueError(f"compile(strict_native=True): backend {_backend_label(backend)!r} declares no "
                         f"native compile target (it runs graphs through the reference implementations); "
                         f"choose a native backend such as 'iree-cpu'")


def _signature(fn: Any) -> list[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return names


# -- the module wrapper ------------------------------------------------------------------------

class CompiledModule(Module):
    """What ``compile(module)`` returns: a Module whose calls run compiled.

    The original is ``_orig_mod`` (a child module, so ``train()``, ``to()`` and
    ``parameters()`` reach it); attributes not found on the wrapper are the original's,
    attribute assignment goes to the original, and ``state_dict()`` /
    ``load_state_dict()`` use the original's keys, so checkpoints move between the two.
    """

    def __init__(self, module: Module, **options: Any):
        Module.__init__(self)
        self._modules["_orig_mod"] = module
        object.__setattr__(self, "_compiled", CompiledFunction(module._call_impl, _module=module, **options))

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        modules = self.__dict__.get("_modules")
        if modules is not None and "_orig_mod" in modules:
            modules["_orig_mod"].training = mode

    @property
    def compiled_function(self) -> CompiledFunction:
        """The compiled call (its cache, counters and graphs)."""
        return self.__dict__["_compiled"]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        if modules is None or "_orig_mod" not in modules:
            raise AttributeError(name)
        return getattr(modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("training", "_compiled") or name in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator:
        return self._orig_mod.named_parameters(*args, **kwargs)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Iterator:
        return self._orig_mod.named_buffers(*args, **kwargs)

    def get_submodule(self, target: str) -> Module:
        return self._orig_mod.get_submodule(target)

    def get_parameter(self, target: str) -> Any:
        return self._orig_mod.get_parameter(target)

    def get_buffer(self, target: str) -> Any:
        return self._orig_mod.get_buffer(target)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))


def compile(model: Callable[..., Any] | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable[..., Any] | None = None, mode: str | None = None,
            options: dict[str, Any] | None = None, name: str | None = None, disable: bool = False,
            recompile_limit: int | None = None, isolate_recompiles: bool = False, strict_native: bool = False,
            dynamic_shapes: Any = None) -> Callable[..., Any]:
    """Compile a callable through the TensorPlay capture and lowering pipeline."""
    opts = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, name=name,
                disable=disable, recompile_limit=recompile_limit, isolate_recompiles=isolate_recompiles,
                strict_native=strict_native, dynamic_shapes=dynamic_shapes)
    if model is None:
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            return compile(fn, **opts)

        return decorate
    if isinstance(model, CompiledModule):
        model = model._orig_mod
    elif isinstance(model, CompiledFunction) and model._module is None:
        model = model._fn
    if isinstance(model, Module):
        return CompiledModule(model, **opts)
    return CompiledFunction(model, **opts)
