"""What a compiled callable does when no cache entry serves a call: name the argument paths,
decide the dynamic dims, build the guards, run a capture session over the function, and
install the entry the capture yields (its compiled program, the state it updates in place,
its backward); past the recompile limit, run eagerly. Also the reruns of segmented entries
(functions with graph breaks) and the cache of their segment programs.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import time
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._grad_mode import is_grad_enabled
from .._tensor import Tensor
from ..runtime.storage import IN_PLACE_MIN_BYTES
from ..dialects.tp import symbolic as sym
from ..dialects.tp.errors import OpError
from ..dialects.tp.graph import Graph
from . import dynamic_policy, tracedir
from ._logging import get_logger
from .capture import pytree
from .capture.bindings import ArrayInput, AttachedInput
from .capture.graphs import interpret, structural_key
from .capture.guards import CallKey, ModuleGuard, free_objects, is_module, mask_key, module_guard, tensor_meta_guard
from .capture.programs import check_native, compile_graph
from .capture.reads import ReadGuard
from .capture.session import LAZY, Capture, CaptureConfig, TraceResult
from .capture.traced import function_info, record_capture, record_guards
from .dynamic_shapes import check_named_dims
from .entries import GRAPH, SEGMENTED, SEGMENTS_PER_RECOMPILE, Entry, miss_reason, passthrough
from .errors import GraphCaptureError
from .training import run_segment_training, wire_backward

if TYPE_CHECKING:
    from .api import CompiledFunction

__all__ = ["arg_paths", "capture", "function_tracer", "run_segmented", "run_segment"]

_log_guards = get_logger("guards")
_log_recompiles = get_logger("recompiles")


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


def arg_paths(cf: CompiledFunction, treedef: pytree.TreeDef) -> list[str]:
    """The path of each leaf of a call, named after the parameters (``x``, ``batch['ids']``)."""
    names = cf._signature
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


def capture(cf: CompiledFunction, args: tuple, kwargs: dict, leaves: list[Any], treedef: pytree.TreeDef,
            key: CallKey) -> Any:
    """A call no entry of ``cf`` serves: capture it into a new entry (run eagerly past the
    recompile limit) and return its result; the capture is traced when a trace is asked for."""
    group = cf._group
    paths = arg_paths(cf, treedef)
    if group.count:
        failed, cf._last_failure = getattr(cf, "_last_failure", None), None
        reason = miss_reason(group, cf._config, failed, key, paths)
    else:
        reason = "first call"
        cf._last_failure = None
    if group.count >= cf.recompile_limit:
        return _limit_reached(cf, args, kwargs, reason)
    spec = dynamic_policy.check_dynamic(cf.dynamic_shapes, cf._signature, leaves, paths)
    grown = (dynamic_policy.automatic_dynamic(cf.dynamic, group, cf._config, key, leaves, paths) if group.count
             else dynamic_policy.remembered_dynamic(cf.dynamic, group, cf._source_fn(), cf.name))
    decided = bool(grown) and group.count > 0  # a new automatic dynamic decision, kept once captured
    if group.count:
        _log_recompiles.info("recompiling %s (capture %d of at most %d): %s%s", cf.name,
                             group.count + 1, cf.recompile_limit, reason,
                             f"; automatic dynamic: {grown} now dynamic" if grown else "")
    dynamic_dims = dynamic_policy.dynamic_dims(cf.dynamic, group, leaves, paths, spec)
    modules, guards, keepalive = _guards(cf, leaves, paths)
    name = _entry_name(cf)
    tracer = function_tracer(cf)
    if tracer is None:
        result = _capture_as(cf, name, args, kwargs, leaves, key, paths, modules, guards, keepalive,
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
            result = _capture_as(cf, name, args, kwargs, leaves, key, paths, modules, guards, keepalive,
                                 dynamic_dims, spec)
        except BaseException as exc:
            tracedir.note(scope, error=f"{type(exc).__name__}: {exc}")
            tracedir.event(scope, "error", entry=name, error=f"{type(exc).__name__}: {str(exc)[:500]}")
            raise
    tracedir.note(scope, total_s=round(time.perf_counter() - start, 6))
    if decided:
        group.remember_dynamic(name)
    return result


def function_tracer(cf: CompiledFunction) -> Any:
    """The trace folder of this function's group under the folder a trace is asked for
    (``options['trace_dir']`` or ``TENSORPLAY_TRACE_DIR``), or None."""
    root = tracedir.requested(cf.options)
    if root is None:
        return None
    tracer = cf._group.traces.get(str(root))
    if tracer is None:
        info = function_info(cf._source_fn(), cf._backend.label if cf._backend else "disabled", cf.options,
                             mode=cf.mode, fullgraph=cf.fullgraph, dynamic=cf.dynamic,
                             recompile_limit=cf.recompile_limit)
        tracer = tracedir.function_trace(root, cf.name, info)
        cf._group.traces[str(root)] = tracer
    return tracer


def _capture_as(cf: CompiledFunction, name: str, args: tuple, kwargs: dict, leaves: list[Any], key: CallKey,
                paths: list[str], modules: list, guards: list, keepalive: list, dynamic_dims: dict,
                spec: dict) -> Any:
    group = cf._group
    scope = tracedir.current()
    config = CaptureConfig(name=name, fullgraph=cf.fullgraph, strict_native=cf.strict_native,
                           dynamic=cf.dynamic, run_graph=functools.partial(run_segment, cf), regions=group.regions,
                           dynamic_dims=dynamic_dims,
                           differentiate=cf._differentiator(leaves, name) if is_grad_enabled() else None,
                           run_training=functools.partial(run_segment_training, cf))
    session = Capture(config)
    start = time.perf_counter()
    try:
        trace = session.run_trace(cf._fn, args, kwargs, leaves, paths, modules)
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
        entry = Entry(SEGMENTED, key, cf._config, name, guards, keepalive)
        entry.paths = paths
        mask = tuple(sorted((i, d) for i, dims in dynamic_dims.items() for d in dims))
        masked = mask_key(key, mask) if mask else None
        if masked is not None:  # its segments keep these sizes symbolic: one entry for all sizes
            entry.key, entry.mask, entry.dynamic_dims = masked, mask, dynamic_dims
        if scope is not None:
            record_guards(scope, guards, session, None, leaves, paths, function_info(cf._source_fn(), "", {})["source"])
            entry.trace_scope = scope
            scope.function.watch(scope, entry)
        group.add(entry)
        return session.result
    result = _install(cf, trace, key, name, guards, keepalive, leaves, paths)
    if scope is not None:
        record_guards(scope, guards, session, trace, leaves, paths, function_info(cf._source_fn(), "", {})["source"])
    return result


def _install(cf: CompiledFunction, trace: TraceResult, key: CallKey, name: str, guards: list, keepalive: list,
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
    if cf.strict_native:
        check_native(graph)
    first = [b.first for b in trace.bindings]
    entry = Entry(GRAPH, key, cf._config, name, guards, keepalive)
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
        entry.runner = compile_graph(graph, first, cf._backend_for(first))
        if hasattr(entry.runner, "resident"):  # an IREE program: keep weights on its device
            entry.runner.resident = frozenset(i for i, b in enumerate(trace.bindings)
                                              if isinstance(b, AttachedInput))
            entry.runner.kept_results = frozenset(k for target, k in trace.writebacks
                                                  if isinstance(target, AttachedInput))
    elif graph.outputs:
        entry.runner = passthrough(graph)
    wire_backward(entry, trace, leaves, lambda: cf._backend_for(first))
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
    cf._group.add(entry)
    return result


def _guards(cf: CompiledFunction, leaves: list[Any], paths: list[str]) -> tuple[list, list, list]:
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

    if cf._module is not None:
        add_module("the compiled module", "", cf._module)
    target = cf._fn
    if inspect.ismethod(target) and is_module(target.__self__):
        add_module("self", "self.", target.__self__)
    for path, leaf in zip(paths, leaves):
        if is_module(leaf):
            add_module(path, f"{path}.", leaf)
        if not isinstance(leaf, Tensor) and not isinstance(leaf, (int, float, str, bool, type(None))):
            keepalive.append(leaf)
    for label, obj, getter in free_objects(cf._fn):
        guards.append((f"{label} still bound to the same object", lambda g=getter, o=obj: g() is o))
        if is_module(obj):
            add_module(label, f"{label}.", obj)
    return modules, guards, keepalive


def _limit_reached(cf: CompiledFunction, args: tuple, kwargs: dict, reason: str) -> Any:
    group = cf._group
    message = (f"{cf.name}: recompile_limit ({cf.recompile_limit}) reached; the last miss: "
               f"{reason}")
    if cf.fullgraph:
        raise GraphCaptureError(message + ". fullgraph/strict_native compiled callables do not "
                                "fall back to eager; raise recompile_limit or call "
                                "tensorplay.compiler.reset()")
    if not group.warned:
        group.warned = True
        warnings.warn(message + ". Calls that no cached graph covers now run eagerly; raise "
                      "recompile_limit or call tensorplay.compiler.reset()", UserWarning,
                      stacklevel=5)  # (the user's call: here, capture, CompiledFunction._capture, __call__)
    _log_recompiles.info("%s: running eagerly (%s)", cf.name, reason)
    tracer = function_tracer(cf)
    if tracer is not None and not group.traced_limit:
        group.traced_limit = True
        tracer.event("recompile_limit", reason=reason, limit=cf.recompile_limit)
    return cf._fn(*args, **kwargs)


def run_segmented(cf: CompiledFunction, args: tuple, kwargs: dict, leaves: list[Any], entry: Entry) -> Any:
    """Run a segmented entry: the Python again, lazily, its graph segments from the cache."""
    config = CaptureConfig(name=cf.name, fullgraph=False, strict_native=False, dynamic=cf.dynamic,
                           run_graph=functools.partial(run_segment, cf), regions=cf._group.regions,
                           run_training=functools.partial(run_segment_training, cf))
    dynamic = [(leaves[i], i, entry.paths[i], dims) for i, dims in entry.dynamic_dims.items()
               if isinstance(leaves[i], Tensor)]
    return Capture(config, mode=LAZY).run_lazy(cf._fn, args, kwargs, dynamic)


def run_segment(cf: CompiledFunction, graph: Graph, arrays: list[np.ndarray], segment: bool) -> list[np.ndarray]:
    """Run a graph segment, its program compiled once per structure (eagerly past the budget)."""
    group = cf._group
    skey = (structural_key(graph), cf._config)
    runner = group.segments.get(skey)
    if runner is None:
        limit = cf.recompile_limit * SEGMENTS_PER_RECOMPILE
        if len(group.segments) >= limit:
            if not group.segments_warned:
                group.segments_warned = True
                warnings.warn(f"{cf.name}: {limit} distinct graph segments compiled "
                              f"(recompile_limit x {SEGMENTS_PER_RECOMPILE}); new segments now run "
                              f"eagerly", UserWarning, stacklevel=2)
            return interpret(graph, arrays)
        graph.name = f"{cf.name}_segment{len(group.segments)}"
        runner = compile_graph(graph, arrays, cf._backend_for(arrays)) if graph.nodes else passthrough(graph)
        group.segments[skey] = runner
    return runner(*arrays)


def _entry_name(cf: CompiledFunction) -> str:
    """The name of the next capture's graph: the function's name, then ``name_1``, ... A
    first capture that starts from an earlier run's automatic dynamic decisions takes the
    name that run's dynamic capture had, so its program is the same artifact."""
    group = cf._group
    if group.count == 0 and group.remembered_name:
        return group.remembered_name
    taken = {e.name for e in group.order}
    n = group.count
    name = cf.name if n == 0 else f"{cf.name}_{n}"
    while name in taken:
        n += 1
        name = f"{cf.name}_{n}"
    return name
