"""The joint forward+backward graph of a captured graph, built from the ops' gradient rules.

The forward graph's nodes stay as they are; the backward is traced: each forward node whose
results need a gradient gets its op's ``Op.vjp`` applied (in reverse order) to tensors that
stand for the forward's values and for the incoming gradients (the *tangents*). The rules are
compositions of tp ops, so tracing them records backward nodes the same way eager autograd
runs them; the engine's per-operand reduction over broadcast dims and cast (``fit_gradient``)
is applied to each result, as in eager mode. Nested compile regions are differentiated by
inlining their callee into the backward (its forward is recomputed there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _dispatch
from ..._capture_handler import CaptureHandler
from ..._grad_mode import no_grad
from ...amp.autocast_mode import suspended as autocast_suspended
from ..._tensor import Tensor
from ...autograd.engine import add_gradients, fit_gradient
from ...autograd.rule_context import RuleContext
from ...dialects.tp.graph import CALL, Graph, Node, Value
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType
from ... import _views

__all__ = ["Joint", "NotDifferentiable", "build_joint", "live_values"]


class NotDifferentiable(Exception):
    """The graph's backward cannot be built (the message says why)."""


@dataclass
class Joint:
    """A forward graph and the backward traced from it.

    ``backward`` nodes read forward values (graph inputs and forward results) and the
    ``tangents`` (one per entry of ``grad_outputs``, the forward outputs that get a gradient);
    ``gradients[i]`` is the value holding the gradient of forward input ``requires[i]`` (None
    where no gradient reaches it)."""

    forward: Graph
    requires: list[int]  # forward input positions that get gradients
    grad_outputs: list[int]  # forward output positions that receive gradients
    tangents: list[Value]
    backward: list[Node] = field(default_factory=list)
    gradients: list[Value | None] = field(default_factory=list)


class _Ref:
    __slots__ = ("tape", "value")

    def __init__(self, tape: _Tape, value: Value):
        self.tape = tape
        self.value = value


class _Tape(CaptureHandler):
    """The dispatch handler that records what the gradient rules apply (a
    :class:`CaptureHandler` that only records: no graph breaks, guards or graph inputs)."""

    def __init__(self, shape_env: Any, loc: Any):
        self.nodes: list[Node] = []
        self.shape_env = shape_env
        self.loc = loc

    def tensor(self, v: Value) -> Tensor:
        return Tensor._from_type(v.type, _Ref(self, v))

    def value_of(self, t: Tensor) -> Value:
        ref = t._capture
        if isinstance(ref, _Ref) and ref.tape is self:
            return ref.value
        if not _views.has_memory(t):
            raise NotDifferentiable("a gradient rule used a tensor of another capture")
        data = _views.held(t)
        if not isinstance(data, np.ndarray):  # a device array made by a rule: its values
            data = data.to_host()
        node = Node("tp.constant", (), {"value": np.array(data)}, (), self.loc)
        node.results = (Value(t._tensor_type(), node, 0),)
        self.nodes.append(node)
        return node.results[0]

    def __call__(self, op: Op, operands: tuple[Any, ...], attrs: dict[str, Any],
                 result_types: tuple[TensorType, ...]) -> Any:
        if any(d is None for t in result_types for d in t.shape):
            raise NotDifferentiable(f"the gradient rule applies {op.name} with a data-dependent shape")
        inputs = tuple(None if o is None else self.value_of(o) for o in operands)
        node = Node(op.name, inputs, attrs, (), self.loc)
        node.results = tuple(Value(t, node, i) for i, t in enumerate(result_types))
        self.nodes.append(node)
        outs = tuple(self.tensor(r) for r in node.results)
        return outs[0] if len(outs) == 1 else outs

    # what tensor code asks of a capture
    def symbolic_sizes(self, tensor: Tensor, shape: tuple) -> tuple:
        if self.shape_env is None:
            raise NotDifferentiable("symbolic sizes without the capture's shape environment")
        return tuple(self.shape_env.wrap(d) for d in shape)

    def concrete_value(self, tensor: Tensor, why: str) -> Any:
        raise NotDifferentiable(f"a gradient rule needs the value of a traced tensor ({why})")

    def rebind(self, tensor: Tensor, value: Tensor) -> None:
        ref = tensor._capture
        if not (isinstance(ref, _Ref) and ref.tape is self):
            raise NotDifferentiable("a gradient rule updated a tensor in place")
        ref.value = self.value_of(value)

    def random_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        raise NotDifferentiable(f"a gradient rule draws random numbers ({getattr(fn, '__name__', fn)})")


class _RuleContext(RuleContext):
    """What a gradient rule sees of one forward node, traced (eagerly, the engine's ``Node``)."""

    def __init__(self, node: Node, tensor: Callable[[Value], Tensor], needs: Sequence[bool]):
        self.op = node.opdef
        self.attrs = node.attrs
        self._node = node
        self._tensor = tensor
        self.needs_input_grad = tuple(needs)
        self.input_meta = tuple(None if v is None else (tuple(tensor(v).shape), v.type.dtype)
                                for v in node.inputs)
        self.output_meta = tuple((tuple(tensor(r).shape), r.type.dtype) for r in node.results)
        self.output_devices = ()
        self.metadata: dict = {}

    @property
    def inputs(self) -> tuple:
        return tuple(None if v is None else self._tensor(v) for v in self._node.inputs)

    @property
    def outputs(self) -> tuple:
        return tuple(self._tensor(r) for r in self._node.results)

    def needs(self, i: int) -> bool:
        return self.needs_input_grad[i]

    def input(self, i: int) -> Any:
        v = self._node.inputs[i]
        return None if v is None else self._tensor(v)

    def output(self, i: int = 0) -> Any:
        return self._tensor(self._node.results[i])

    @staticmethod
    def apply_op(name: str, *operands: Any, **attrs: Any) -> Any:
        return _dispatch.apply(name, *operands, **attrs)

    @staticmethod
    def zeros(shape: Sequence[Any], dtype: Any, like: Any = None, device: Any = None) -> Any:
        from ...ops.creation import zeros

        return zeros(*shape, dtype=dtype)


def live_values(graph: Graph, requires: Sequence[int]) -> set[Value]:
    """The values of ``graph`` that depend, through differentiable ops, on the inputs at
    positions ``requires``: those that carry gradients."""
    live = {graph.inputs[i] for i in requires}
    for node in graph.nodes:
        if not any(v is not None and v in live for v in node.inputs):
            continue
        if node.stop_gradient or (node.callee is None and not node.opdef.differentiable):
            continue
        live.update(r for r in node.results if r.type.dtype.is_floating_point)
    return live


def build_joint(graph: Graph, requires: Sequence[int], *, shape_env: Any = None) -> Joint:
    """Trace the backward of ``graph`` for the gradients of its inputs at ``requires``.

    Raises :class:`NotDifferentiable` when a rule cannot be traced (the op, and why)."""
    requires = list(requires)
    live = live_values(graph, requires)
    grad_outputs = [k for k, v in enumerate(graph.outputs) if v in live]
    joint = Joint(graph, requires, grad_outputs, [])
    tape = _Tape(shape_env, None)
    tensors: dict[Value, Tensor] = {}

    def tensor(v: Value) -> Tensor:
        t = tensors.get(v)
        if t is None:
            t = tensors[v] = tape.tensor(v)
        return t

    grads: dict[Value, Tensor] = {}
    with no_grad(), autocast_suspended(), _dispatch.capture_handler(tape):
        for k in grad_outputs:  # (one value returned twice sums its two tangents: a traced add)
            v = graph.outputs[k]
            tangent = Value(v.type, None, len(joint.tangents), f"tangent{len(joint.tangents)}")
            joint.tangents.append(tangent)
            grads[v] = add_gradients(grads.get(v), tensor(tangent))
        _backprop(graph.nodes, live, grads, tensor, tape)
        joint.gradients = [None if graph.inputs[i] not in grads else tape.value_of(grads[graph.inputs[i]])
                           for i in requires]
    joint.backward = tape.nodes
    return joint


def _backprop(nodes: Sequence[Node], live: set[Value], grads: dict[Value, Tensor],
              tensor: Callable[[Value], Tensor], tape: _Tape) -> None:
    """Run the rules of ``nodes`` in reverse, from the gradients in ``grads`` (updated in place)."""
    for node in reversed(nodes):
        if not any(r in grads for r in node.results):
            continue
        needs = [v is not None and v in live for v in node.inputs]
        if node.stop_gradient or not any(needs):
            continue
        tape.loc = node.loc
        if node.callee is not None:
            _backprop_call(node, live, grads, tensor, tape)
            continue
        op = node.opdef
        if op.vjp is None:
            raise NotDifferentiable(f"{op.name} has no gradient rule")
        gs = []
        for r in node.results:
            g = grads.get(r)
            if g is None and r.type.dtype.is_floating_point:
                g = _RuleContext.zeros(tuple(tensor(r).shape), r.type.dtype)
            gs.append(g)
        ctx = _RuleContext(node, tensor, needs)
        outs = op.vjp(ctx, gs)
        if len(outs) != len(node.inputs):
            raise NotDifferentiable(f"the gradient rule of {op.name} returned {len(outs)} gradients for "
                                    f"{len(node.inputs)} operands")
        for v, g, need, meta in zip(node.inputs, outs, needs, ctx.input_meta):
            if need and g is not None:
                grads[v] = add_gradients(grads.get(v), fit_gradient(g, meta))


def _backprop_call(node: Node, live: set[Value], grads: dict[Value, Tensor],
                   tensor: Callable[[Value], Tensor], tape: _Tape) -> None:
    """A nested region: its callee inlined into the backward (recomputing its forward there),
    then differentiated like the caller; a region with a backward compiler of its own gets a
    backward function of its own instead, called from the caller's backward."""
    from ..capture.session import region_backward_compiler

    if region_backward_compiler(node.callee) is not None:
        _backprop_region(node, live, grads, tape)
        return
    callee = node.callee
    mapping: dict[Value, Value] = dict(zip(callee.inputs, node.inputs))
    inlined: list[Node] = []
    for n in callee.nodes:
        copy = Node(n.op, tuple(None if v is None else mapping[v] for v in n.inputs), dict(n.attrs), (),
                    n.loc, n.callee)
        copy.results = tuple(Value(r.type, copy, r.index) for r in n.results)
        mapping.update(zip(n.results, copy.results))
        inlined.append(copy)
    tape.nodes.extend(inlined)
    inner_live = set(live)
    for n in inlined:
        if any(v is not None and v in inner_live for v in n.inputs) and not n.stop_gradient and (
                n.callee is not None or n.opdef.differentiable):
            inner_live.update(r for r in n.results if r.type.dtype.is_floating_point)
    for r, inner in zip(node.results, callee.outputs):
        g = grads.pop(r, None)
        if g is not None:
            target = mapping[inner]
            grads[target] = add_gradients(grads.get(target), g)
    _backprop(inlined, inner_live, grads, tensor, tape)


def _backprop_region(node: Node, live: set[Value], grads: dict[Value, Tensor], tape: _Tape) -> None:
    """``node`` calls a region whose backward compiles with its own backend: its backward is a
    function (the region's forward recomputed, then its rules) taking the call's operands and
    one gradient per differentiable result, called from the caller's backward."""
    from ..capture.programs import _subgraph
    from ..capture.session import region_backward_compiler, set_region_compiler

    callee = node.callee
    requires = [i for i, v in enumerate(node.inputs)
                if v is not None and v in live and v.type.dtype.is_floating_point]
    joint = build_joint(callee, requires)
    produced = [g for g in joint.gradients if g is not None]
    if not produced:
        return
    backward = _subgraph(f"{callee.name}_backward", list(callee.nodes) + list(joint.backward),
                         list(callee.inputs) + list(joint.tangents), produced)
    set_region_compiler(backward, region_backward_compiler(callee))
    operands = []
    for k in joint.grad_outputs:
        r = node.results[k]
        g = grads.pop(r, None)
        operands.append(tape.value_of(g) if g is not None else
                        tape.value_of(_RuleContext.zeros(tuple(r.type.shape), r.type.dtype)))
    call = Node(CALL, tuple(node.inputs) + tuple(operands), {"callee": backward.name}, (), node.loc, backward)
    call.results = tuple(Value(v.type, call, i) for i, v in enumerate(backward.outputs))
    tape.nodes.append(call)
    results = iter(call.results)
    for i, g in zip(requires, joint.gradients):
        if g is None:
            continue
        v = node.inputs[i]
        grads[v] = add_gradients(grads.get(v), tape.tensor(next(results)))
