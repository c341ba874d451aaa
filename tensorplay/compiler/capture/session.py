"""The capture session: the dispatch handler that records tp ops into graphs.

A :class:`Capture` runs in one of two modes:

* ``trace``: the first call of a compiled function for a guard key. Tensor arguments and
  the parameters and buffers of the modules involved are *borrowed*: their objects are
  turned into capture tensors for the duration (identity kept) and restored afterwards.
  A trace that finishes without a graph break yields one whole graph, run later without
  Python.
* ``lazy``: after a graph break, and on every call of a function known to break. Ops are
  recorded lazily; when Python needs a value the pending graph (a *segment*) is compiled,
  cached by its structural hash, and run, and every live capture tensor becomes concrete
  in place.
"""

from __future__ import annotations

import linecache
import logging
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from ... import _views
from ... import _dispatch
from ..._grad_mode import is_grad_enabled
from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph, Node, SourceLoc, Value, data_dependent_symbols
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType, type_of_array
from ...profiler._state import state as _prof_state
from .. import tracedir
from .._logging import get_logger
from ..errors import GraphCaptureError
from ..symbolic.guard import ShapeGuard
from ..symbolic.shape_env import ShapeEnv, data_dependent_message
from . import pytree
from .bindings import ArgInput, ArrayInput, AttachedInput, Binding, RandomInput, ReadInput
from .graphs import substitute_type, format_graph, order_inputs_by_use, prune_inputs, substitute_sizes
from .reads import ReadGuard, ReadRecorder, is_hidden_code

__all__ = ["Capture", "CaptureConfig", "BreakInfo", "SegmentInfo", "current_capture", "is_compiling",
           "is_exporting", "exporting", "suspended", "TRACE", "LAZY", "region_compiler", "region_backward_compiler",
           "set_region_compiler", "capture_once",
           "TraceResult"]

TRACE = "trace"
LAZY = "lazy"

_local = threading.local()
_log_breaks = get_logger("breaks")
_log_graphs = get_logger("graphs")


def _stack() -> list[Capture | None]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current_capture() -> Capture | None:
    """The innermost active capture session; None when running eagerly."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def is_compiling() -> bool:
    """Whether Python is running under a capture (tracing, or between graph segments)."""
    return current_capture() is not None


def is_exporting() -> bool:
    """Whether an export session is active on this thread."""
    return bool(getattr(_local, "exporting", 0))


@contextmanager
def exporting() -> Iterator[None]:
    """Mark the block as an export session: captures started inside export (fullgraph)."""
    _local.exporting = getattr(_local, "exporting", 0) + 1
    try:
        yield
    finally:
        _local.exporting -= 1


@contextmanager
def suspended() -> Iterator[None]:
    """Run the block eagerly: no capture session and no dispatch handler."""
    _stack().append(None)
    try:
        with _dispatch.capture_handler(None):
            yield
    finally:
        _stack().pop()


# -- where the user's code is -----------------------------------------------------------------

def _dirs(*paths: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.join(q, "") for p in paths if p for q in (p, os.path.realpath(p))))


def _package_roots() -> list[tuple[tuple[str, ...], bool]]:
    """Folders and whether frames there are the user's, most specific first: tensorplay's
    examples are; tensorplay, installed packages (numpy calling back into tensorplay) and
    the standard library are not."""
    import importlib.util

    import tensorplay

    package = os.path.dirname(tensorplay.__file__)
    ours = [package]
    for sub in ("tensorplay.dialects", "tensorplay.passes", "tensorplay.tools"):
        spec = importlib.util.find_spec(sub)
        if spec is not None and spec.origin:
            ours.append(os.path.dirname(spec.origin))
    paths = sysconfig.get_paths()
    installed = [p for p in paths.values() if "-packages" in p]
    return [(_dirs(os.path.join(package, "examples")), True), (_dirs(*ours), False),
            (_dirs(*installed), False), (_dirs(paths.get("stdlib", "")), False)]


_ROOTS: list[tuple[tuple[str, ...], bool]] | None = None
_user_file_cache: dict[str, bool] = {}


def _is_user_file(filename: str) -> bool:
    hit = _user_file_cache.get(filename)
    if hit is None:
        global _ROOTS
        if _ROOTS is None:
            _ROOTS = _package_roots()
        hit = not filename.startswith("<frozen")
        if hit:
            for prefixes, is_user in _ROOTS:
                if filename.startswith(prefixes):
                    hit = is_user
                    break
        _user_file_cache[filename] = hit
    return hit


def user_loc(depth: int = 1) -> SourceLoc | None:
    """The first frame outside tensorplay, the standard library and installed packages (or,
    when the whole stack is there, the first frame outside tensorplay); markers' trampolines
    (see ``reads.hide_code``) are skipped."""
    frame = sys._getframe(depth)
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if _is_user_file(filename) and not is_hidden_code(frame.f_code):
            return SourceLoc(filename, frame.f_lineno)
        if fallback is None and not _is_ours(filename):
            fallback = SourceLoc(filename, frame.f_lineno)
        frame = frame.f_back
    return fallback


def _is_ours(filename: str) -> bool:
    if _ROOTS is None:
        _is_user_file(filename)
    examples, ours = _ROOTS[0][0], _ROOTS[1][0]
    return filename.startswith(ours) and not filename.startswith(examples)


def source_line(loc: SourceLoc | None) -> str:
    if loc is None:
        return ""
    return linecache.getline(loc.file, loc.line).strip()


# -- records ---------------------------------------------------------------------------------

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

    def __init__(self, session: Capture, graph: Graph, value: Value, device: Any = None):
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


class Capture:
    """A capture session; see :mod:`tensorplay.compiler.capture` for the public contract."""

    def __init__(self, config: CaptureConfig, mode: str = TRACE):
        self.config = config
        self.mode = mode
        self.exporting = config.exporting or is_exporting()
        self.dynamic = config.dynamic
        self.breaks: list[BreakInfo] = []
        self.segments: list[SegmentInfo] = []
        #: the segments run and the breaks between them, in order (graphs and BreakInfo)
        self.timeline: list[Any] = []
        #: where each guard of ``guards`` was added (only while a trace folder is written)
        self.guard_sites: list[SourceLoc | None] = []
        #: id(segment graph) -> the tensor each of its inputs read; kept only while a trace
        #: folder is written or explain() asks (set to a dict to record)
        self.segment_sources: dict[int, list[Any]] | None = {} if tracedir.current() is not None else None
        self.guards: list[tuple[str, Callable[[], bool]]] = []
        self.read_guard: ReadGuard | None = None
        #: calls that later calls of the traced graph make after running it (run_after_program)
        self.deferred: list[tuple[Callable[..., Any], tuple]] = []
        self._active_recorder: ReadRecorder | None = None
        self._atomic: list[str] = []
        self._regions: list[Any] = []  # regions._RegionFrame, innermost last
        self._segment_index = 0
        self.shape_env = ShapeEnv(config.name)
        self.shape_env.on_data_dependent = self._on_data_dependent
        self._arg_dims: list[tuple[int, int, str, Any]] = []  # symbolic argument dims
        #: concrete tensors this capture gave symbolic sizes (Tensor._sym), cleared when it ends
        self._sym_tensors: list[weakref.ref] = []
        #: symbol of an argument dimension -> the argument (a segment that needs the size reads it)
        self._size_sources: dict[Any, weakref.ref] = {}
        #: tensors whose .grad a backward() inside the trace set (replayed on every call)
        self._grad_targets: dict[int, Tensor] = {}
        #: first touches of a .grad whose guard depends on what comes next (see zero_grad)
        self._grad_pending: dict[int, tuple] = {}
        #: tensors whose .grad library code read before the trace set it (guarded as found)
        self._grad_read: set[int] = set()
        self._new_graph()

    # -- public contract ------------------------------------------------------------------
    @property
    def fullgraph(self) -> bool:
        """True when a graph break must raise instead of splitting the graph."""
        return bool(self.config.fullgraph or self.config.strict_native or self.exporting
                    or self._atomic or self._regions)

    def loc(self) -> SourceLoc | None:
        """The user's frame: the first one outside tensorplay."""
        return user_loc(2)

    def graph_break(self, reason: str, loc: SourceLoc | None = None) -> None:
        """Split here (compile and run what is captured so far) or raise under fullgraph."""
        loc = loc or user_loc(2)
        info = BreakInfo(reason, loc, source_line(loc))
        self.breaks.append(info)
        _log_breaks.info("graph break in %s at %s: %s%s", self.config.name, loc or "<unknown>",
                         reason, f"\n    {info.source}" if info.source else "")
        if _prof_state.active:  # tensorplay.profiler records
            _prof_state.hooks.graph_break(self.config.name, reason, loc)
        if self.fullgraph:
            raise self._break_error(info)
        self._flush()
        self.timeline.append(info)
        # from here the function's Python runs on every call (segments): what was deferred
        # ran in this call already, and runs in Python on the later ones
        self.deferred.clear()

    def run_eagerly(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                    reason: str) -> Any:
        """Break the graph, run ``fn`` eagerly on concrete tensors and return its results."""
        self.graph_break(reason)
        with suspended():
            return fn(*args, **(kwargs or {}))

    def run_after_program(self, fn: Callable[..., Any], args: Sequence[Any], reason: str) -> Any:
        """Python that changes only Python state which the graph reads afresh on every call
        through :meth:`input_from` with ``scheduled=True`` (a schedule's ``step()`` setting each
        group's ``lr``). In a trace it runs now, and each later call of the graph runs it after
        the program, as eagerly it runs after the ops before it; a scheduled read later in the
        same trace breaks the graph (the program would read the value from before the call).
        Elsewhere (segments, nested regions, export) it runs eagerly at a graph break."""
        if self.mode != TRACE or self._regions or self._atomic or self.exporting:
            return self.run_eagerly(fn, args, {}, reason)
        with suspended():
            result = fn(*args)
        self.deferred.append((fn, tuple(args)))
        return result

    def call_atomic(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                    name: str) -> Any:
        """Trace ``fn`` into the current graph; a break inside raises GraphCaptureError."""
        self._atomic.append(name)
        try:
            return fn(*args, **(kwargs or {}))
        finally:
            self._atomic.pop()

    def call_region(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], *,
                    key: Any, compiler: Any = None, bw_compiler: Any = None) -> Any:
        """Call ``fn`` as a nested compile region: traced once per key into a callee graph,
        then a call of that callee at every site (``compiler``/``bw_compiler``: the backends
        of its forward and of its backward, None: its caller's)."""
        from .regions import call_region

        return call_region(self, fn, tuple(args), dict(kwargs or {}), key, compiler, bw_compiler)

    def add_guard(self, description: str, check: Callable[[], bool]) -> None:
        """A condition the cached graph relies on; a call where it is false recompiles.

        Only traced (whole-graph) entries keep guards: segmented functions run their
        Python on every call, so nothing captured there is reused without it."""
        if self.mode == TRACE:
            self.guards.append((description, check))
            if tracedir.current() is not None:
                self.guard_sites.append(user_loc(2))

    def input_from(self, getter: Callable[[], Any], what: str, dtype: Any = None, scheduled: bool = False) -> Any:
        """A graph input that later calls read through ``getter`` (a tensor, or a Python
        number as a 0-d tensor of ``dtype``): what library code reads from its own state
        afresh each call, so no value of this call is baked in (an optimizer's learning
        rate and the gradients its parameters hold). The caller guards what the getter
        relies on (``add_guard``). Outside a trace (lazy segments run Python every call) it
        is the value itself. ``scheduled``: state that a deferred call changes (see
        :meth:`run_after_program`)."""
        from ... import ops

        if scheduled and self.deferred and self.mode == TRACE:
            self.graph_break(f"{what} is read after a call that changes it ran in this call "
                             f"(a schedule's step() before the optimizer's)")
        value = getter()
        if not isinstance(value, Tensor):
            value = ops.creation.tensor(value, dtype=dtype)
        if self.mode != TRACE or self._regions or not _views.has_memory(value):
            return value
        binding = ReadInput(getter, _views.held(value), what)
        return self._wrap_results([self._add_input(value._tensor_type(), binding)], self.graph)

    def backward_in_graph(self, outputs: Sequence[Tensor], grads: Sequence[Any], inputs: Sequence[Any] | None,
                          create_graph: bool) -> bool:
        """``backward()`` of tensors of this trace: the gradients of the leaves that require
        grad are built into the same graph from the ops' gradient rules and set as their
        ``.grad`` (a whole training step compiles to one program); every call sets them
        again. Returns False after a graph break (the caller then runs eager autograd)."""
        from ..autodiff.joint import NotDifferentiable, build_joint

        why = None
        if self.mode != TRACE or self._regions:
            why = "backward() inside a segmented function or a nested region"
        elif create_graph:
            why = "backward(create_graph=True) inside a compiled function"
        if why is not None:
            self.graph_break(why)
            return False
        graph = self.graph
        sources = self._input_tensors()
        wanted = None if inputs is None else {id(t) for t in inputs}
        requires = []
        made = []  # inputs an eager autograd graph made: fine while no gradient reaches them
        for i, v in enumerate(graph.inputs):
            t = sources.get(v)
            if t is None or not t._requires_grad or not t.dtype.is_floating_point:
                continue
            if wanted is not None and id(t) not in wanted:
                continue
            if t._grad_fn is not None:
                made.append(i)
            requires.append(i)
        hooked = [sources[graph.inputs[i]] for i in requires if _has_grad_hooks(sources[graph.inputs[i]])]
        if hooked:
            # (DistributedDataParallel's all-reduce of gradient buckets is such a hook)
            self.graph_break(f"backward() reaches {len(hooked)} tensor(s) with gradient hooks (register_hook, "
                             f"register_post_accumulate_grad_hook, DistributedDataParallel): the hooks run eagerly "
                             f"during the backward of the compiled forward")
            return False
        roots = [self.value_of(t) for t in outputs]
        kept = list(graph.outputs)
        graph.set_outputs(roots)
        try:
            joint = build_joint(graph, requires, shape_env=self.shape_env)
        except NotDifferentiable as exc:
            self.graph_break(f"backward(): {exc}")
            return False
        finally:
            graph.set_outputs(kept)
        if any(g is not None for i, g in zip(requires, joint.gradients) if i in made):
            # (a hidden state carried over from the previous step and detached inside is not)
            self.graph_break("backward() into a tensor that an eager autograd graph made")
            return False
        if not joint.grad_outputs:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        seeds: dict[Value, Value] = {}
        for tangent, k in zip(joint.tangents, joint.grad_outputs):
            g = grads[k] if k < len(grads) else None
            if g is None:
                root = outputs[k]
                if root.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                node = Node("tp.constant", (), {"value": np.ones(tuple(root.shape), root.dtype.np_dtype)}, (),
                            user_loc(3))
                node.results = (Value(tangent.type, node, 0),)
                graph.nodes.append(node)
                seeds[tangent] = node.results[0]
            else:
                seeds[tangent] = self.value_of(g)
        for node in joint.backward:
            node.inputs = tuple(seeds.get(v, v) if v is not None else None for v in node.inputs)
        graph.nodes.extend(joint.backward)
        for i, gv in zip(requires, joint.gradients):
            if gv is None:
                continue
            t = sources[graph.inputs[i]]
            self._accumulate_grad(t, self._wrap_results([seeds.get(gv, gv)], graph))
        return True

    # .grad of the tensors library code of the trace sets (a backward, zero_grad). The .grad left
    # at the end is set again on every call, and guards keep what the program relies on of the
    # .grad a call finds. None and a tensor of the parameter's own shape, dtype and device differ
    # only where something reads the difference: a backward gives the same values either way
    # (None: its gradient; a tensor G: G + its gradient, read as an input, zeros while None), and
    # zero_grad(set_to_none=False) leaves None or zeros. So a parameter whose .grad the trace's
    # first touch is a backward, or a zero_grad(set_to_none=False) that a backward follows before
    # library code looks at it (an optimizer step, clip_grad_norm_: ``note_grad_read``), is guarded
    # by "None or such a tensor": the step compiles once whether a call finds the gradients of the
    # previous step or None (the first call, or after zero_grad()). Anything else keeps the exact
    # state the trace found (None, or a tensor of that shape, dtype and device).

    def zero_grad(self, t: Tensor, set_to_none: bool) -> bool:
        """``zero_grad()`` of ``t`` inside a trace (False elsewhere: the caller clears it
        eagerly). ``set_to_none`` as the first touch needs no guard: nothing read the old
        ``.grad``."""
        if self.mode != TRACE:
            return False
        first = id(t) not in self._grad_targets
        self._grad_targets[id(t)] = t
        g = t.grad
        if set_to_none:
            t.grad = None
            if self._grad_pending.get(id(t), ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=True)  # None either way now
            return True
        if first:
            self._grad_pending[id(t)] = ("zeroed", _meta(g))
        if g is not None:
            from ..._grad_mode import no_grad
            from ...ops import creation

            with no_grad():  # zeros made in the graph: the old values are not read
                t.grad = creation.zeros(*g.shape, dtype=g.dtype, device=g.device)
        return True

    def note_grad_read(self, t: Tensor, guarded: bool = False) -> None:
        """Library code of the trace reads ``t.grad`` (whether it is None, its values): a
        guard keeps what it found at the call's start (``guarded``: the caller's own guard
        does), unless a backward or zero_grad of the trace set it before (then that one's
        guard covers it)."""
        if self.mode != TRACE:
            return
        if id(t) in self._grad_targets:
            if self._grad_pending.get(id(t), ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=False)
            return
        if not guarded and id(t) not in self._grad_read:
            self._grad_read.add(id(t))
            self._guard_grad(t, _meta(t.grad))

    def _accumulate_grad(self, t: Tensor, new: Tensor) -> None:
        """A backward of the trace adds ``new`` to ``t.grad``."""
        key = id(t)
        first = key not in self._grad_targets
        self._grad_targets[key] = t
        g = t.grad
        if not first:
            if self._grad_pending.get(key, ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=True)
            t.grad = new if g is None else g + new
            return
        if g is not None and (not _views.has_memory(g) or _meta(g) != _meta(t)):
            self._guard_grad(t, _meta(g))  # (a .grad the function set itself, or of another shape)
            if _views.has_memory(g):
                g = self.input_from(lambda t=t: t.grad, "a parameter's .grad")
            t.grad = g + new
            return
        if g is None and (new.dtype != t.dtype or tuple(new.shape) != tuple(t.shape)):
            self._guard_grad(t, None)
            t.grad = new
            return
        held = self.input_from(lambda t=t: _grad_or_zeros(t), "a parameter's .grad")
        total = held + new
        t.grad = total
        if g is not None:
            self._guard_grad(t, _meta(t), relaxed=True)
        else:  # settled at the end: if the call leaves None there, nothing is read
            self._grad_pending[key] = ("added", self.value_of(total).node)

    def _settle_grad(self, t: Tensor, relaxed: bool) -> None:
        """The guard of a pending first touch of ``t.grad`` (see above)."""
        pending = self._grad_pending.pop(id(t), None)
        if pending is None:
            return
        meta = pending[1] if pending[0] == "zeroed" else None
        if relaxed and meta in (None, _meta(t)):
            self._guard_grad(t, _meta(t), relaxed=True)
        else:
            self._guard_grad(t, meta)

    def _settle_grads(self) -> None:
        """At the end of a trace: a backward's sum with the .grad found is kept where the call
        leaves a tensor in .grad (the next call finds one to add to), and is the backward's
        gradient alone where it leaves None (then the .grad found must be None)."""
        for key, pending in list(self._grad_pending.items()):
            t = self._grad_targets[key]
            if pending[0] == "added" and t.grad is None:
                del self._grad_pending[key]
                node = pending[1]
                node.op, node.inputs, node.attrs = "tp.cast", (node.inputs[1],), {"dtype": node.results[0].type.dtype}
                self._guard_grad(t, None)
            else:
                self._settle_grad(t, relaxed=pending[0] == "added")

    def _guard_grad(self, t: Tensor, meta: tuple | None, relaxed: bool = False) -> None:
        if relaxed:
            self.add_guard("the .grad of each tensor a compiled backward() adds to (or zero_grad() zeroes "
                           "before a backward()) is None or of the tensor's shape, dtype and device",
                           lambda t=t, meta=meta: t.grad is None or _meta(t.grad) == meta)
        else:
            self.add_guard("the .grad of each tensor a compiled backward() or zero_grad() sets is as it was "
                           "(None, or a tensor of the same shape)",
                           lambda t=t, meta=meta: _meta(t.grad) == meta)

    # -- dispatch handler protocol -----------------------------------------------------------
    def __call__(self, op: Op, operands: tuple[Any, ...], attrs: dict[str, Any],
                 result_types: tuple[TensorType, ...]) -> Any:
        captured = False
        for o in operands:
            if o is not None and not _views.has_memory(o):
                captured = True
                break
        if any(d is None for t in result_types for d in t.shape):
            if not captured:
                return NotImplemented
            if not op.data_dependent or self._regions:
                where = " inside a nested compile region" if self._regions else ""
                self.graph_break(f"{op.name} has a data-dependent output shape{where}")
                return NotImplemented
            inputs = tuple(None if o is None else self.value_of(o) for o in operands)
            result_types = self._data_dependent_types(op, inputs, attrs, result_types)
            return self._emit(op.name, inputs, attrs, result_types)
        inputs = tuple(None if o is None else self.value_of(o) for o in operands)
        return self._emit(op.name, inputs, attrs, result_types)

    def _data_dependent_types(self, op: Op, inputs: tuple[Value | None, ...], attrs: dict[str, Any],
                              result_types: tuple[TensorType, ...]) -> tuple[TensorType, ...]:
        """The result types of a data-dependent op with its data-decided size (every None
        dim of one application) as a new unbacked symbol. The same op on the same values
        gets the same symbol, so ``x[m]`` and ``y[m]`` have one length."""
        key = (op.name, inputs, tuple(sorted((k, repr(v)) for k, v in attrs.items())))
        hit = self._data_sizes.get(key)
        if hit is not None:
            return hit
        env = self.shape_env
        bound = sym.as_size(env.simplify(op.size_bound([None if v is None else v.type for v in inputs], attrs)))
        loc = user_loc(3)
        u = env.create_unbacked(f"{op.data_size} ({op.name})", loc=loc,
                                hi=bound if isinstance(bound, int) else None)
        types = tuple(TensorType(tuple(u if d is None else d for d in t.shape), t.dtype) for t in result_types)
        self._data_sizes[key] = types
        return types

    def _on_data_dependent(self, expr: Any, why: str, symbols: list) -> None:
        """A question about sizes the data decides (``if y.shape[0] > 3`` after ``y = x[m]``):
        no guard can answer it, so the graph breaks here (the segment computes those sizes,
        and Python goes on with them); under fullgraph, GraphCaptureError."""
        if self.shape_env.closed:
            return
        self.graph_break(data_dependent_message(self.shape_env, expr, why, symbols))

    def symbolic_sizes(self, tensor: Tensor, shape: tuple) -> tuple:
        """``x.shape`` of a tensor with symbolic sizes: ints and SymInts of its capture."""
        owner = getattr(tensor._capture, "session", None)
        env = owner.shape_env if isinstance(owner, Capture) else self.shape_env
        return tuple(env.wrap(d) for d in shape)

    def in_region(self) -> bool:
        """Whether a nested compile region is being traced (its inputs have static sizes)."""
        return bool(self._regions)

    def _mark_symbolic(self, t: Tensor, ttype: TensorType) -> None:
        """Keep ``ttype`` (symbolic sizes) as the type of the concrete tensor ``t`` until the
        capture ends (a static type clears the mark)."""
        if ttype.has_static_shape:
            if t._sym is not None:
                t._sym = None
            return
        t._sym = (self, ttype)
        self._sym_tensors.append(weakref.ref(t))

    def _clear_symbolic(self) -> None:
        for wr in self._sym_tensors:
            t = wr()
            if t is not None and t._sym is not None and t._sym[0] is self:
                t._sym = None
        self._sym_tensors.clear()

    def concrete_value(self, tensor: Tensor, why: str) -> np.ndarray:
        """Python asked for a captured tensor's data: graph break, then its value."""
        ref = tensor._capture
        if not isinstance(ref, _Ref) or ref.session is not self:
            raise RuntimeError(f"{why}: this tensor stands for a value of another capture")
        self.graph_break(f"{why} needs the value of a captured tensor")
        if not _views.has_memory(tensor):
            raise GraphCaptureError(f"{why}: the captured tensor could not be made concrete")
        return _views.held(tensor)

    def display_value(self, tensor: Tensor, why: str) -> None:
        """print/repr of one of this session's tensors: a graph break that makes it concrete."""
        ref = tensor._capture
        if isinstance(ref, _Ref) and ref.session is self and not self._regions:
            self.concrete_value(tensor, why)
        elif isinstance(ref, _Ref) and ref.session is self:
            self.graph_break(f"{why} needs the value of a captured tensor")

    def rebind(self, tensor: Tensor, value: Tensor) -> None:
        """An in-place update: ``tensor`` now stands for ``value``'s graph value."""
        new = self.value_of(value)
        if self._regions:
            self._regions[-1].rebind(tensor, new)
            return
        ref = tensor._capture
        if isinstance(ref, _Ref) and ref.session is self:
            ref.value = new
            return
        if not _views.has_memory(tensor):
            raise RuntimeError("in-place update of a tensor captured by another session")
        # A concrete tensor updated in place: it stands for a graph value from now on.
        if self.mode == TRACE:
            self._borrow(tensor, AttachedInput(tensor, _views.held(tensor), _describe(tensor)))
            tensor._capture.value = new
        else:
            self._convert(tensor, new)

    def _view_of_input(self, t: Tensor) -> tuple | None:
        """``("view", binding, steps)`` for a result that is a view, made here, of a tensor the
        function was given or reads (an argument, a parameter): eagerly it shares that
        tensor's memory, so each call makes it again from that tensor after the write-backs.
        None for other results (and for views that require grad, or reshape to or slice at
        sizes known only at run time: those come back as new tensors)."""
        steps_made = _views.view_steps(t)
        if not _views.is_alias(t) or not _views.made_in(t, self) or t._requires_grad or not steps_made:
            return None
        root = _views.root(t)
        from ...dialects.tp import registry
        from ...dialects.tp.ops.shape import SLICE_END

        steps = []
        ttype = root._tensor_type()
        for name, attrs in steps_made:
            op = registry.lookup(name)
            after = op.verify([ttype], op.normalize_attrs(attrs))[0]
            if name == "tp.slice":  # a slice to the end of a dim of run-time size
                ends = tuple(SLICE_END if type(e) is not int and sym.known_eq(e, ttype.shape[d]) else e
                             for d, e in enumerate(attrs["ends"]))
                attrs = dict(attrs, ends=ends)
            ttype = after
            if not all(type(d) is int for v in attrs.values() if isinstance(v, tuple) for d in v):
                return None
            steps.append((name, attrs))
        binding = self._binding_of(root)
        if not _alive(binding):
            return None
        return ("view", binding, tuple(steps))

    def _binding_of(self, t: Tensor) -> Binding | None:
        """How the program reads ``t``, a tensor from outside the capture (None: it does not)."""
        borrow = self._borrowed.get(id(t))
        lifted = self._lifted.get(id(t))
        return borrow.binding if borrow is not None else (
            self._bindings[lifted[1].index] if lifted is not None else None)

    def random_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A random op: drawn by the eager generator; under trace, a graph input redrawn on
        every call in the same order."""
        leaves, tree = pytree.flatten((args, kwargs))
        if any(isinstance(a, Tensor) and not _views.has_memory(a) for a in leaves):
            return self.run_eagerly(fn, args, kwargs, f"{_fn_name(fn)}() with a captured tensor argument")
        symbolic = self._symbolic_draw(fn, args, kwargs, leaves)
        given = (args, kwargs)
        if symbolic is None and any(isinstance(a, sym.SymInt) for a in leaves):
            # a draw whose shape is not a plain size argument, or one in a segment: its sizes
            # become constants
            args, kwargs = pytree.unflatten(tree, [int(a) if isinstance(a, sym.SymInt) else a for a in leaves])
        elif symbolic is not None:
            args, kwargs = pytree.unflatten(tree, [self.shape_env.hint(a.node) if isinstance(a, sym.SymInt)
                                                   else a for a in leaves])
        with suspended():
            out = fn(*args, **kwargs)
        if self.mode != TRACE or self._regions:
            if self._regions:
                ttype = type_of_array(_views.held(out))
                if symbolic is not None and len(symbolic) == len(ttype.shape):
                    # every call site draws with the sizes as symbols (the region's input is symbolic)
                    return self._regions[-1].random_input(fn, *given, out, TensorType(symbolic, ttype.dtype))
                return self._regions[-1].random_input(fn, args, kwargs, out)
            return out
        ttype = type_of_array(_views.held(out))
        sizes = None
        if symbolic is not None and len(symbolic) == len(ttype.shape):
            ttype = TensorType(symbolic, ttype.dtype)
            sizes = (tree, [(i, a.node) for i, a in enumerate(leaves) if isinstance(a, sym.SymInt)])
        binding = RandomInput(fn, args, kwargs, _views.held(out), sizes)
        value = self._add_input(ttype, binding)
        result = Tensor._from_type(value.type, _Ref(self, self.graph, value))
        result.requires_grad = out.requires_grad
        self._live.append(weakref.ref(result))
        return result

    def _symbolic_draw(self, fn: Callable[..., Any], args: tuple, kwargs: dict, leaves: list) -> tuple | None:
        """The shape of a traced draw whose size arguments hold symbolic sizes (entries are
        ints and sympy expressions), or None when the draw is static or cannot stay symbolic."""
        if self.mode != TRACE or not any(isinstance(a, sym.SymInt) for a in leaves):
            return None
        size_of = getattr(fn, "random_size", None)
        try:
            size = size_of(args, kwargs) if size_of is not None else None
        except (IndexError, KeyError, TypeError):
            size = None
        if size is None or not any(isinstance(d, sym.SymInt) for d in size):
            return None
        if any(sym.data_dependent(d) for d in size):  # (no example value to draw with)
            return None
        if not all(isinstance(d, (int, sym.SymInt)) and not isinstance(d, bool) for d in size):
            return None
        return tuple(d.node if isinstance(d, sym.SymInt) else int(d) for d in size)

    # -- values ------------------------------------------------------------------------------
    def value_of(self, t: Tensor) -> Value:
        """The graph value ``t`` stands for in the graph being built (lifting if needed)."""
        if self._regions:
            return self._regions[-1].value_of(t)
        ref = t._capture
        if isinstance(ref, _Ref):
            if ref.session is self and ref.graph is self.graph:
                return ref.value
            if ref.session is not self:
                raise GraphCaptureError("a captured tensor of another compiled function was used "
                                        "here; tensors made inside a capture cannot leave it")
        if not _views.has_memory(t):
            raise GraphCaptureError("a captured tensor from a finished capture was used")
        return self._lift(t)

    def _lift(self, t: Tensor) -> Value:
        hit = self._lifted.get(id(t))
        if hit is not None:
            return hit[1]
        if self.mode == TRACE:
            binding: Binding = AttachedInput(t, _views.held(t), _describe(t))
        else:
            binding = ArrayInput(_views.held(t))
        value = self._add_input(t._tensor_type(), binding)
        self._lifted[id(t)] = (t, value)
        return value

    def _add_input(self, ttype: TensorType, binding: Binding) -> Value:
        value = self.graph.add_input(ttype)
        self._bindings.append(binding)
        return value

    def current_graph(self) -> Graph:
        """The graph new nodes go to: the innermost region being traced, else the segment."""
        return self._regions[-1].graph if self._regions else self.graph

    def _emit(self, op_name: str, inputs: tuple[Value | None, ...], attrs: dict[str, Any],
              result_types: Sequence[TensorType]) -> Any:
        graph = self.current_graph()
        node = Node(op_name, inputs, attrs, (), user_loc(3))
        if not is_grad_enabled():
            node.stop_gradient = True
        node.results = tuple(Value(t, node, i) for i, t in enumerate(result_types))
        graph.nodes.append(node)
        return self._wrap_results(node.results, graph)

    def _wrap_results(self, values: Sequence[Value], graph: Graph) -> Any:
        outs = []
        for v in values:
            t = Tensor._from_type(v.type, _Ref(self, graph, v))
            if not self._regions:
                self._live.append(weakref.ref(t))
            outs.append(t)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def wrap_values(self, values: Sequence[Value], graph: Graph) -> tuple[Tensor, ...]:
        """Capture tensors for ``values`` of ``graph`` (always a tuple)."""
        out = self._wrap_results(values, graph) if values else ()
        return out if isinstance(out, tuple) else (out,)

    # -- borrowing (trace mode) --------------------------------------------------------------
    def borrow_argument(self, tensor: Tensor, index: int, path: str) -> None:
        dims = (self.config.dynamic_dims or {}).get(index)
        ttype = self._symbolic_type(tensor, index, path, dims) if dims and _views.has_memory(tensor) else None
        self._borrow(tensor, ArgInput(index, _views.held(tensor), path), ttype)

    def _symbolic_type(self, tensor: Tensor, index: int, path: str, dims: dict[int, Any]) -> TensorType | None:
        """The argument's type with a size symbol for each dim in ``dims`` (a dim of size 0
        stays static unless it is named in dynamic_shapes)."""
        if id(tensor) in self._borrowed:
            return None
        base = type_of_array(_views.held(tensor))
        shape = list(base.shape)
        for d, spec in sorted(dims.items()):
            size = shape[d]
            if spec is None and size == 0:
                continue
            name = getattr(spec, "__name__", spec) if spec is not None else None
            label = f"{path}.size({d})"
            s = self.shape_env.create_symbol(size, label, name=name, lo=getattr(spec, "min", None),
                                             hi=getattr(spec, "max", None))
            shape[d] = s
            self._arg_dims.append((index, d, label, s))
            self._size_sources.setdefault(s, weakref.ref(tensor))
        return TensorType(tuple(shape), base.dtype)

    def borrow_attached(self, tensor: Tensor, what: str) -> None:
        self._borrow(tensor, AttachedInput(tensor, _views.held(tensor), what))

    def _borrow(self, tensor: Tensor, binding: Binding, ttype: TensorType | None = None) -> _Borrow | None:
        if id(tensor) in self._borrowed or not _views.has_memory(tensor):
            return None
        ttype = ttype or tensor._tensor_type()
        lifted = self._lifted.pop(id(tensor), None)
        value = lifted[1] if lifted is not None else self._add_input(ttype, binding)
        if lifted is not None:
            binding = self._bindings[value.index]
        borrow = _Borrow(tensor, _views.held(tensor), value, binding)
        self._borrowed[id(tensor)] = borrow
        # this thread only: another one running the same module eagerly still sees the data
        _views.take_over(tensor, ttype, _Ref(self, self.graph, value, tensor.device))
        return borrow

    def _restore_borrowed(self) -> None:
        for b in self._borrowed.values():
            _views.hand_back(b.tensor)
        self._borrowed.clear()

    def _convert(self, tensor: Tensor, value: Value) -> None:
        """Lazy mode: a concrete tensor updated in place becomes a capture tensor until the
        next flush makes it concrete again (with the new value)."""
        self._converted.append((tensor, _views.held(tensor)))
        ttype = tensor._tensor_type()
        if tensor._sym is not None:
            tensor._sym = None
        _views.take_over(tensor, ttype, _Ref(self, self.graph, value))
        self._live.append(weakref.ref(tensor))

    # -- segments ----------------------------------------------------------------------------
    def _new_graph(self) -> None:
        self.graph = Graph(name=self._graph_name())
        self._bindings: list[Binding] = []
        self._lifted: dict[int, tuple[Tensor, Value]] = {}
        self._borrowed: dict[int, _Borrow] = {}
        self._converted: list[tuple[Tensor, np.ndarray]] = []
        self._live: list[weakref.ref] = []
        #: data-dependent op applications of this graph -> their result types (see
        #: _data_dependent_types)
        self._data_sizes: dict[tuple, tuple[TensorType, ...]] = {}

    def _graph_name(self) -> str:
        if self.mode == TRACE and not self.segments:
            return self.config.name
        return f"{self.config.name}_segment{self._segment_index}"

    def _flush(self) -> None:
        """Compile and run the pending graph; every live capture tensor becomes concrete.
        Sizes stay symbolic across the break where the segment can read them from its inputs
        (:meth:`_settle_sizes`); the results keep their symbolic types for the next segment."""
        graph = self.graph
        env = self.shape_env
        # Sizes the data decides stay symbolic in the segment; it also returns each one, so
        # Python (a SymInt it holds) can go on with their values
        used = graph.size_symbols_used()
        computed = [(s, self._size_value(s)) for s in env.unresolved() if s in used]
        first = dict(zip(graph.inputs, (b.first for b in self._bindings)))
        pending: list[tuple[Tensor, Value]] = []
        for b in self._borrowed.values():
            ref = b.tensor._capture
            if ref.value is not b.input:
                pending.append((b.tensor, ref.value))
        for wr in self._live:
            t = wr()
            if t is not None and isinstance(t._capture, _Ref) and t._capture.session is self \
                    and t._capture.graph is graph:
                pending.append((t, t._capture.value))
        outputs: list[Value] = []
        index: dict[Value, int] = {}
        for v in [v for _, v in pending] + [v for _, v in computed]:
            if v.node is not None and v not in index:
                index[v] = len(outputs)
                outputs.append(v)
        results: list[np.ndarray] = []
        grad_fn: Any = None
        settle: Callable[[Any], Any] = self.shape_env.simplify
        if outputs:
            graph.set_outputs(outputs)
            prune_inputs(graph)
            order_inputs_by_use(graph)
            sources = self._segment_sources(graph, pending)
            # (nested regions are built for static sizes)
            settle = self._settle_sizes(graph, first, keep=not graph.callees())
            if _log_graphs.isEnabledFor(logging.INFO):
                _log_graphs.info("segment of %s:\n%s", self.config.name, format_graph(graph))
            arrays = [first[v] for v in graph.inputs]
            if self.segment_sources is not None:
                by_value = self._input_tensors()
                self.segment_sources[id(graph)] = [by_value.get(v) for v in graph.inputs]
            if sources is not None:
                results, grad_fn = self._run_graph(graph, arrays, segment=True, sources=sources)
            else:
                results = self._run_graph(graph, arrays, segment=True)
        for s_, v in computed:
            out = results[index[v]]
            env.resolve(s_, int(out.to_host() if hasattr(out, "to_host") else np.asarray(out)))
        # Borrowed tensors get their (possibly updated) values back; the session goes lazy.
        kept = [(b.tensor, b.input.type) for b in self._borrowed.values() if not b.input.type.has_static_shape]
        self._restore_borrowed()
        for t, _ in self._converted:  # their new values (below) are for every thread to see
            _views.hand_back(t)
        for t, ttype in kept:
            self._mark_symbolic(t, substitute_type(ttype, settle))
        for t, v in pending:
            _views.settle(t, first[v] if v.node is None else results[index[v]])
            self._mark_symbolic(t, substitute_type(v.type, settle))
            if grad_fn is not None and v.node is not None:
                grad_fn(t, index[v])
        for t, _ in pending:  # aliases of concrete tensors view their memory again
            _views.rematerialize(t)
        self._converted.clear()
        self._segment_index += 1
        self.mode = LAZY
        self._new_graph()

    def _settle_sizes(self, graph: Graph, first: dict[Value, Any], keep: bool) -> Callable[[Any], Any]:
        """Fix the sizes of a segment about to run. A symbol stays symbolic (``keep``) when an
        input dimension is exactly that symbol, so the compiled segment reads it at run time
        and serves every size; a symbol of an argument dimension the segment does not read
        otherwise brings that argument in as an input (only its size is read); an input
        dimension that is an expression of other symbols (``s0*s1``) becomes a symbol of its
        own; every other symbol takes this call's value in this segment only (``keep=False``:
        all of them). ``first`` gets the arrays of added inputs. Returns the substitution,
        for the types of tensors that leave the segment."""
        env = self.shape_env
        found: set = set()

        def collect(e: Any) -> Any:
            e = env.simplify(e)
            if sym.is_symbolic(e):
                found.update(e.free_symbols)
            return e

        substitute_sizes(graph, collect)
        if not found:
            return env.simplify
        # a size the data decides is defined inside the segment (computed when it runs)
        readable: set = data_dependent_symbols(graph)
        fresh: dict[Any, Any] = {}
        if keep:
            readable |= {d for v in graph.inputs for d in v.type.shape if sym.is_symbolic(d) and d.is_Symbol}
            for s in sorted(found - readable, key=str):
                source = self._size_sources.get(s)
                t = source() if source is not None else None
                if t is None or (not _views.has_memory(t) and not isinstance(t._capture, _Ref)):
                    continue
                value = self.value_of(t)  # a new input, or one the segment had and pruned
                if value not in graph.inputs:
                    value.index = len(graph.inputs)
                    graph.inputs.append(value)
                if value not in first:  # just lifted: its binding is the last one
                    first[value] = self._bindings[-1].first
                shape = [collect(d) for d in value.type.shape]
                readable |= {d for d in shape if sym.is_symbolic(d) and d.is_Symbol}
            for v in graph.inputs:
                for d in v.type.shape:
                    if sym.is_symbolic(d) and not d.is_Symbol and not d.free_symbols <= readable and d not in fresh:
                        fresh[d] = env.create_symbol(env.hint(d), f"a size of {graph.name}'s inputs ({d})")
            readable |= set(fresh.values())
        fixed = {s: sympy.Integer(env.hint(s)) for s in found if s not in readable}

        def settle(e: Any) -> Any:
            e = env.simplify(e)
            if not sym.is_symbolic(e):
                return e
            if fresh:
                e = fresh[e] if e in fresh else e.subs(fresh)
            if fixed:
                e = e.xreplace(fixed)
            return sym.as_size(e)

        substitute_sizes(graph, settle)
        return settle

    def _size_value(self, expr: Any) -> Value:
        """A 0-d int64 value of the current graph holding the size ``expr`` at run time."""
        node = Node("tp.full", (), {"shape": (), "value": expr, "dtype": dt.int64}, (), None)
        node.stop_gradient = True
        node.results = (Value(TensorType((), dt.int64), node, 0),)
        self.graph.nodes.append(node)
        return node.results[0]

    def _segment_sources(self, graph: Graph, pending: list[tuple[Tensor, Value]]) -> list[Any] | None:
        """The tensors a segment's inputs read, when the segment needs a backward (grad mode
        is on and one of them requires grad); None otherwise."""
        if self.config.run_training is None or not is_grad_enabled() or not graph.nodes:
            return None
        by_value = self._input_tensors()
        sources = [by_value.get(v) for v in graph.inputs]
        if not any(t is not None and t._requires_grad for t in sources):
            return None
        return sources

    def _input_tensors(self) -> dict[Value, Tensor]:
        """The tensor each input of the current graph reads (borrowed or lifted)."""
        out: dict[Value, Tensor] = {b.input: b.tensor for b in self._borrowed.values()}
        out.update((v, t) for t, v in self._lifted.values())
        return out

    def _run_graph(self, graph: Graph, arrays: list[np.ndarray], segment: bool,
                   sources: list[Any] | None = None) -> Any:
        # The backend's code is not the traced program: no read recording, no capture (markers'
        # call interception sees no capture and leaves it alone, so a disallowed function that
        # the backend or the cache happens to call cannot re-enter this session's flush).
        recorder = self._active_recorder
        if recorder is not None:
            recorder.paused += 1
        try:
            with suspended():
                if sources is not None:
                    self.segments.append(SegmentInfo(graph))
                    self.timeline.append(graph)
                    return self.config.run_training(graph, arrays, sources)
                return self._run_graph_now(graph, arrays, segment)
        finally:
            if recorder is not None:
                recorder.paused -= 1

    def _run_graph_now(self, graph: Graph, arrays: list[np.ndarray], segment: bool) -> list[np.ndarray]:
        self.segments.append(SegmentInfo(graph))
        self.timeline.append(graph)
        run = self.config.run_graph
        if run is None:
            from .graphs import interpret

            return interpret(graph, arrays)
        return run(graph, arrays, segment)

    # -- running a function -----------------------------------------------------------------
    @contextmanager
    def active(self) -> Iterator[Capture]:
        """Install this session as the dispatch handler and the current capture (and let
        markers redirect calls of marked callables and watch for disallowed ones)."""
        from ..markers import _capture_entered, _capture_exited

        _stack().append(self)
        try:
            with _dispatch.capture_handler(self), sym.deciding(self.shape_env):
                _capture_entered(self)
                try:
                    yield self
                finally:
                    _capture_exited(self)
        finally:
            _stack().pop()

    def abandon(self) -> None:
        """Undo borrowing and conversions after an exception."""
        self._clear_symbolic()
        self._restore_borrowed()
        for t, _ in self._converted:
            _views.hand_back(t)
        self._converted.clear()
        for wr in self._live:
            t = wr()
            if t is not None and isinstance(t._capture, _Ref) and t._capture.session is self:
                t._capture = _Dead(self.config.name)

    def run_trace(self, fn: Callable[..., Any], args: tuple, kwargs: dict, leaves: Sequence[Any],
                  paths: Sequence[str], modules: Sequence[tuple[str, Any]]) -> TraceResult | None:
        """Trace one call. Returns the whole graph, or None when the function broke (then
        ``self.result`` holds its eager-equal result, computed in segments)."""
        try:
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, Tensor):
                    self.borrow_argument(leaf, i, paths[i])
            for prefix, module in modules:
                for name, p in module.named_parameters():
                    self.borrow_attached(p, f"parameter {prefix}{name}")
                for name, b in module.named_buffers():
                    self.borrow_attached(b, f"buffer {prefix}{name}")
            with self.active():
                recorder = self._active_recorder = self._recorder(fn, leaves, modules)
                try:
                    with recorder:
                        box = [fn(*args, **kwargs)]
                finally:
                    self._active_recorder = None
                if self.mode == TRACE:
                    self.read_guard = recorder.guard()
                if self.mode == LAZY:
                    self._flush()
                    self.result = self._plain_sizes(box.pop())
                    return None
                return self._finish_trace(box)
        except BaseException:
            self.abandon()
            raise
        finally:
            self._clear_symbolic()
            self.shape_env.close()

    def _recorder(self, fn: Callable[..., Any], leaves: Sequence[Any], modules: Sequence[tuple[str, Any]]
                  ) -> ReadRecorder:
        """Watches the Python state the trace reads (see :mod:`.reads`); a store into state
        that outlives the call breaks the graph there."""
        roots: list[Any] = [leaf for leaf in leaves if not isinstance(leaf, Tensor)]
        roots += [m for _, m in modules]
        target = getattr(fn, "__self__", None)
        if target is not None:
            roots.append(target)

        def side_effect(what: str, loc: SourceLoc) -> None:
            if self.mode != TRACE:
                return
            if self.exporting:  # an exported program runs without Python: the effect happened once, here
                _log_breaks.info("%s: %s set at %s while exporting; the exported program does not repeat "
                                 "Python side effects", self.config.name, what, loc)
                return
            self.graph_break(f"Python state that outlives the call changed ({what} set); compiled code "
                             f"cannot replay that, so the function runs its Python on every call", loc=loc)

        recorder = ReadRecorder(_is_user_file, roots, side_effect, funcs=[fn, getattr(fn, "forward", None)],
                                still_needed=lambda: self.mode == TRACE, guarded_modules=[m for _, m in modules])
        # what the call reads from the function objects themselves: code, defaults, the
        # arguments of a partial (a function passed as an argument is guarded by identity)
        recorder.function_state(fn, "the compiled function")
        for leaf in roots:
            recorder.function_state(leaf, "a function passed as an argument")
        return recorder

    def run_lazy(self, fn: Callable[..., Any], args: tuple, kwargs: dict,
                 dynamic: Sequence[tuple[Tensor, int, str, dict[int, Any]]] = ()) -> Any:
        """Run the function's Python with ops recorded lazily and run in segments. ``dynamic``
        names argument tensors (with their leaf index and path) and the dims of each that
        are symbolic, as in the capture that made the entry: the segments are compiled for
        those sizes as symbols, so other sizes reuse them."""
        try:
            for tensor, index, path, dims in dynamic:
                if _views.has_memory(tensor):
                    ttype = self._symbolic_type(tensor, index, path, dims)
                    if ttype is not None:
                        self._mark_symbolic(tensor, ttype)
            with self.active():
                result = fn(*args, **kwargs)
                self._flush()
                result = self._plain_sizes(result)
            return result
        except BaseException:
            self.abandon()
            raise
        finally:
            self._clear_symbolic()
            self.shape_env.close()

    def _plain_sizes(self, result: Any) -> Any:
        """A segmented call's result with sizes returned as Python values made ints (a SymInt
        is only valid inside its capture)."""
        leaves, tree = pytree.flatten(result)
        if not any(isinstance(leaf, sym.SymInt) for leaf in leaves):
            return result
        return pytree.unflatten(tree, [int(leaf) if isinstance(leaf, sym.SymInt) else leaf for leaf in leaves])

    def _finish_trace(self, box: list[Any]) -> TraceResult:
        # The result is handed over in a list so that, once flattened, no frame keeps it:
        # capture tensors still alive afterwards were stored somewhere by the function.
        graph = self.graph
        out_leaves, out_tree = pytree.flatten(box.pop())
        items: list[tuple] = []
        leaf = None
        for leaf in out_leaves:
            if isinstance(leaf, sym.SymInt) and self.shape_env.unresolved(self.shape_env.simplify(leaf.node)):
                # a size the data decides: the program computes it, each call returns its int
                items.append(("size", self._size_value(self.shape_env.simplify(leaf.node))))
                continue
            if isinstance(leaf, sym.SymInt):
                leaf = int(leaf)  # a size returned as a Python value is fixed in the entry
            if isinstance(leaf, Tensor):
                view = self._view_of_input(leaf)
                if view is not None:  # a view of an input: made again from it after each call
                    items.append(view)
                    continue
                items.append(("tensor", self.value_of(leaf), self._binding_of(leaf)))
            else:
                items.append(("const", leaf))
        del out_leaves, leaf
        mutated = [(b.binding, b.tensor._capture.value) for b in self._borrowed.values()
                   if b.tensor._capture.value is not b.input]
        self._settle_grads()
        grad_finals: list[tuple[Tensor, Value | None]] = []
        for t in self._grad_targets.values():
            g = t.grad
            ref = getattr(g, "_capture", None)
            if g is None or (isinstance(ref, _Ref) and ref.session is self):
                grad_finals.append((t, None if g is None else ref.value))
            else:  # a tensor the function set itself after backward: compiled graphs cannot replay that
                raise GraphCaptureError(f"{self.config.name}: .grad of a parameter was set to a tensor made outside "
                                        f"the compiled function after backward(); set it to None or leave it")
        self._restore_borrowed()
        self._lifted.clear()
        leaked: list[tuple[weakref.ref, Value]] = []
        for wr in self._live:
            t = wr()
            if t is not None and isinstance(t._capture, _Ref) and t._capture.session is self:
                leaked.append((wr, t._capture.value))
                t._capture = _Dead(self.config.name)
            del t
        self._live = []
        # Tensors made during the capture and not kept are fixed arrays from now on.
        for i, b in enumerate(self._bindings):
            if isinstance(b, AttachedInput) and b.resolve() is None:
                self._bindings[i] = ArrayInput(b.first)

        outputs: list[Value] = []
        index: dict[Value, int] = {}

        def output(v: Value) -> int:
            if v not in index:
                index[v] = len(outputs)
                outputs.append(v)
            return index[v]

        spec: list[tuple] = []
        for item in items:
            if item[0] == "const":
                spec.append(("const", item[1]))
            elif item[0] == "view":
                spec.append(item)
            elif item[0] == "size":
                spec.append(("size", output(item[1])))
            elif _alive(item[2]):
                spec.append(("object", item[2]))
            else:
                spec.append(("new", output(item[1])))
        writebacks: list[tuple[Any, int]] = []
        for binding, v in mutated:
            if _alive(binding):
                writebacks.append((binding, output(v)))
        for wr, v in leaked:
            writebacks.append((wr, output(v)))
        grad_writebacks = [(t, None if v is None else output(v)) for t, v in grad_finals]
        graph.set_outputs(outputs)
        bindings = _fold_constants(graph, self._bindings)
        training = None
        if self.config.differentiate is not None and not self._grad_targets:
            training = self.config.differentiate(graph, bindings, self.shape_env)
        shape_guard = None
        if self._arg_dims:
            substitute_sizes(graph, self.shape_env.simplify)
            backward = getattr(training, "backward_graph", None)
            if backward is not None:
                substitute_sizes(backward, self.shape_env.simplify)
            shape_guard = ShapeGuard(self.shape_env, self._arg_dims)
            for b in bindings:
                if isinstance(b, RandomInput) and b.sizes is not None:
                    b.bind_sizes(self.shape_env.simplify, shape_guard.bindings, shape_guard.symbols)
        if _log_graphs.isEnabledFor(logging.INFO):
            _log_graphs.info("captured graph of %s:\n%s", self.config.name, format_graph(graph))
        guards = list(self.guards)
        if self.read_guard is not None and len(self.read_guard):
            guards.append(("Python values the trace read", self.read_guard))
        return TraceResult(graph, bindings, out_tree, spec, writebacks, guards, shape_guard,
                           self.shape_env, training, grad_writebacks, list(self.deferred))

    def _break_error(self, info: BreakInfo) -> GraphCaptureError:
        where = f" at {info.loc}" if info.loc is not None else ""
        if self._regions:
            scope = f" inside {self._regions[-1].name}"
            hint = "a nested compile region must capture as one graph"
        elif self._atomic:
            scope = f" inside {self._atomic[-1]}"
            hint = f"{self._atomic[-1]} must capture as one graph"
        elif self.exporting:
            scope, hint = "", "export captures the whole program as one graph"
        elif self.config.strict_native:
            scope, hint = "", "strict_native=True runs nothing outside the compiled graph"
        else:
            scope, hint = "", "fullgraph=True forbids graph breaks; compile with fullgraph=False to run in segments"
        text = f"graph break{scope} in {self.config.name}{where}: {info.reason}"
        if info.source:
            text += f"\n    {info.source}"
        err = GraphCaptureError(f"{text}\n({hint})")
        err.reason = info.reason
        err.loc = info.loc
        err.source = info.source
        return err


def capture_once(fn: Callable[..., Any], args: tuple, kwargs: dict, *, name: str,
                 modules: Sequence[tuple[str, Any]] = (), regions: dict | None = None, exporting: bool = True,
                 paths: Sequence[str] | None = None,
                 dynamic_dims: dict[int, dict[int, Any]] | None = None) -> TraceResult:
    """Trace one call of ``fn`` as a whole graph (fullgraph; an export session when
    ``exporting``), borrowing the parameters and buffers of ``modules`` (``(prefix, module)``
    pairs) like a compiled function does. ``paths`` names the flattened arguments in messages;
    ``dynamic_dims`` makes argument dims symbolic (see :class:`CaptureConfig`)."""
    leaves, treedef = pytree.flatten((args, kwargs or {}))
    paths = list(paths) if paths is not None else pytree.leaf_paths(treedef)
    config = CaptureConfig(name=name, fullgraph=True, exporting=exporting,
                           regions=regions if regions is not None else {}, dynamic_dims=dynamic_dims)
    with (_exporting_block() if exporting else _no_block()):
        trace = Capture(config).run_trace(fn, args, kwargs or {}, leaves, paths, list(modules))
    if trace is None:  # fullgraph breaks raise; kept as a clear failure
        raise GraphCaptureError(f"{name}: the capture did not produce one graph")
    return trace


_exporting_block = exporting


@contextmanager
def _no_block() -> Iterator[None]:
    yield


#: fixed arrays up to this many elements become tp.constant nodes (foldable, no input)
CONSTANT_LIMIT = 64


def _fold_constants(graph: Graph, bindings: list[Binding]) -> list[Binding]:
    """Small fixed arrays become constants; inputs nothing reads are dropped (random draws
    stay, so the generator advances as in eager mode). Returns the remaining bindings."""
    replace: dict[Value, Value] = {}
    constants: list[Node] = []
    for v, b in zip(graph.inputs, bindings):
        if isinstance(b, ArrayInput) and b.first.size <= CONSTANT_LIMIT:
            node = Node("tp.constant", (), {"value": np.array(b.first)}, (), None)
            node.results = (Value(v.type, node, 0),)
            constants.append(node)
            replace[v] = node.results[0]
    if replace:
        for node in graph.nodes:
            if any(x in replace for x in node.inputs if x is not None):
                node.inputs = tuple(replace.get(x, x) if x is not None else None for x in node.inputs)
        graph.outputs = [replace.get(v, v) for v in graph.outputs]
        graph.nodes[:0] = constants
    old = list(graph.inputs)
    used = {x for node in graph.nodes for x in node.inputs if x is not None} | set(graph.outputs)
    keep = [i for i, v in enumerate(old) if v in used or isinstance(bindings[i], RandomInput)]
    needed = graph.size_symbols_used() - {d for i in keep for d in old[i].type.shape if sym.is_symbolic(d)}
    if needed:  # an unread argument still gives the sizes the graph computes with
        for i, v in enumerate(old):
            if i not in keep and needed & {d for d in v.type.shape if sym.is_symbolic(d)}:
                keep.append(i)
                needed -= set(v.type.shape)
        keep.sort()
    graph.inputs = [old[i] for i in keep]
    for i, v in enumerate(graph.inputs):
        v.index = i
    return [bindings[i] for i in keep]


class _Dead:
    """Marks capture tensors of a session that failed: using them says so."""

    def __init__(self, name: str):
        self.name = name


def _meta(t: Any) -> tuple | None:
    return None if t is None else (tuple(t.shape), t.dtype, str(t.device))


def _grad_or_zeros(t: Tensor) -> Tensor:
    """``t.grad``, or zeros of ``t``'s type while it is None (what a backward adds to)."""
    if t.grad is not None:
        return t.grad
    from ...ops import creation

    with suspended():
        return creation.zeros(*t.shape, dtype=t.dtype, device=t.device)


def _describe(t: Tensor) -> str:
    from ...nn.parameter import Parameter

    return "parameter" if isinstance(t, Parameter) else "tensor"


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _alive(binding: Binding | None) -> bool:
    """Whether a binding still reaches a tensor after the call: an argument, or an attached
    tensor alive."""
    return isinstance(binding, ArgInput) or (isinstance(binding, AttachedInput) and binding.tensor is not None)


def _has_grad_hooks(t: Tensor) -> bool:
    """Whether leaf ``t`` has hooks on its gradient (``register_hook``,
    ``register_post_accumulate_grad_hook``), which an in-graph backward could not run."""
    acc = t.__dict__.get("_keep_acc")
    return acc is not None and (bool(acc._hooks) or any(acc._pre_hooks.values()))
