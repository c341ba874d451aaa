"""Graph-break segments: the pending graph compiled and run at a break, every live capture
tensor made concrete in place, and the capture going on lazily."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _views
from ..._grad_mode import is_grad_enabled
from ..._tensor import Tensor
from ...dialects.tp.graph import Graph, Value
from ...dialects.tp.types import TensorType
from .._logging import get_logger
from .active import without_capture
from .bindings import Binding
from .graphs import substitute_type, format_graph, order_inputs_by_use, prune_inputs
from .records import LAZY, TRACE, SegmentInfo, _Borrow, _Ref

_log_graphs = get_logger("graphs")


class Segments:
    """The capture's part that runs the pending graph as a segment.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

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
            with without_capture():
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
