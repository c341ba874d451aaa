"""Symbolic sizes in a capture: sizes the data decides, the shapes tensor code sees, and the
sizes each segment is compiled for."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import sympy

from ... import _views
from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph, Node, Value, data_dependent_symbols
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType, type_of_array
from ..symbolic.shape_env import data_dependent_message
from . import pytree
from .graphs import substitute_sizes
from .records import _Ref
from .user_frames import user_loc


class SizeSettling:
    """The capture's part that keeps sizes symbolic and settles them at each segment.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

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
        env = owner.shape_env if isinstance(owner, SizeSettling) else self.shape_env
        return tuple(env.wrap(d) for d in shape)

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

    def _plain_sizes(self, result: Any) -> Any:
        """A segmented call's result with sizes returned as Python values made ints (a SymInt
        is only valid inside its capture)."""
        leaves, tree = pytree.flatten(result)
        if not any(isinstance(leaf, sym.SymInt) for leaf in leaves):
            return result
        return pytree.unflatten(tree, [int(leaf) if isinstance(leaf, sym.SymInt) else leaf for leaf in leaves])
