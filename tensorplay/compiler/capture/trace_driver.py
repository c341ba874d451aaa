"""Driving a capture: installing it, running the function under it (a trace or lazy
segments), and turning a finished trace into its graph, bindings and write-backs."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ... import _views
from ... import _dispatch
from ..._tensor import Tensor
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph, Node, SourceLoc, Value
from .._logging import get_logger
from ..errors import GraphCaptureError
from ..symbolic.guard import ShapeGuard
from . import pytree
from .active import _stack
from .bindings import ArrayInput, AttachedInput, Binding, RandomInput
from .borrowing import _alive
from .graphs import format_graph, substitute_sizes
from .read_tracer import ReadRecorder
from .records import LAZY, TRACE, TraceResult, _Dead, _Ref
from .user_frames import _is_user_file

_log_breaks = get_logger("breaks")
_log_graphs = get_logger("graphs")


class TraceDriver:
    """The capture's part that runs the function and finishes the trace.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

    @contextmanager
    def active(self) -> Iterator[TraceDriver]:
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
