"""Recording: the dispatch handler's hot path, turning each op on capture tensors into a graph
node, and what tensor code asks of a capture (a value, an in-place rebinding, printing)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _views
from ..._grad_mode import is_grad_enabled
from ..._tensor import Tensor
from ...dialects.tp.graph import Graph, Node, Value
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType
from ..errors import GraphCaptureError
from .bindings import ArrayInput, AttachedInput, Binding
from .borrowing import _describe
from .records import TRACE, _Ref
from .user_frames import user_loc


class OpRecorder:
    """The capture's dispatch handler: records ops into the current graph.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

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

    def in_region(self) -> bool:
        """Whether a nested compile region is being traced (its inputs have static sizes)."""
        return bool(self._regions)
