"""Reverse-mode automatic differentiation of eager tensorplay programs.

Every tp op applied while grad mode is on and some operand requires grad records a
:class:`Node` (the result's ``grad_fn``): the op, its attributes, and the operand and result
values it may need. ``backward`` walks these nodes from the outputs back to the leaves in
dependency order, calling each op's gradient rule (``Op.vjp`` in ``dialects/tp/ops/``, a
composition of tp ops) and summing what reaches each tensor.

What is done here once for every op, so no rule repeats it: a rule returns each operand's
gradient in the shape and dtype of the op's (broadcast, promoted) computation, and the
engine sums it over the broadcast dims and casts it back to the operand's shape and dtype.

Saved values are the arrays the op read. An in-place op writes into a tensor's memory when
views share it (``tensorplay/_views.py``), so PyTorch's version counter, shared by a base, its
views and ``detach()``, guards them: a rule that reads an operand modified in place after it
was saved raises PyTorch's error. The op whose result an in-place method writes back keeps a
copy of the operand it overwrites (``Node._rebased``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._grad_mode import no_grad, set_grad_enabled
from ..amp.autocast_mode import suspended as autocast_suspended
from .. import _views
from ..profiler._state import state as _prof_state
from .rule_context import RuleContext

__all__ = ["GraphNode", "Node", "AccumulateGrad", "NoBackward", "record", "run_backward", "RemovableHandle",
           "fit_gradient", "add_gradients", "edge_of", "zero_grads"]

_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
          "have already been freed). Saved intermediate values of the graph are freed when you call "
          ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
          "graph a second time or if you need to access saved tensors after calling backward.")


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` takes the hook away."""

    def __init__(self, hooks: list, hook: Callable):
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass


class _Saved:
    """One operand or result as the op saw it: its array, where it came from in the graph
    (grad_fn, output index) and the version of the tensor it was, to detect later in-place
    changes as PyTorch does."""

    __slots__ = ("data", "grad_fn", "output_nr", "requires_grad", "tensor", "version", "is_output")

    def __init__(self, t: Any, is_output: bool = False):
        self.data = _views.held(t)
        self.grad_fn = None if is_output else t._grad_fn
        self.output_nr = t._output_nr
        self.requires_grad = t.requires_grad
        # a result refers back to its node, which keeps it: held weakly, rebuilt on unpack
        self.tensor = weakref.ref(t) if is_output else t
        self.version = t._version
        self.is_output = is_output

    def unpack(self, node: Node) -> Any:
        from .._tensor import Tensor

        t = self.tensor() if self.is_output else self.tensor
        if t is not None and t._version != self.version:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{_describe(t)}], which is output {self.output_nr} of {node.name()}, is at version "
                f"{t._version}; expected version {self.version} instead. Hint: the backtrace further above "
                f"shows the operation that failed to compute its gradient; the variable in question was "
                f"changed in there or anywhere later. Good luck!")
        if t is not None and _views.held(t) is self.data:
            return t
        out = Tensor._wrap(self.data)
        if self.requires_grad:
            out._requires_grad = True
            out._grad_fn = node if self.is_output else self.grad_fn
            out._output_nr = self.output_nr
        return out


def _describe(t: Any) -> str:
    return f"tensorplay.{t.dtype.name.capitalize()}Tensor {list(t.shape)}"


class GraphNode:
    """What every node of the backward graph has: a name, hooks (``register_hook`` runs
    after the node, ``register_prehook`` and tensor hooks before it), the retained-gradient
    slots of ``retain_grad``, and zeros on a device for the gradients that did not arrive."""

    next_functions: tuple = ()
    output_meta: tuple = ()  # (shape, dtype) of each result
    output_devices: tuple = ()
    #: fill the gradients of results that got none with zeros before the node runs
    materialize_grads = True

    def __init__(self) -> None:
        self._pre_hooks: dict[int, list] = {}  # output index (-1: all outputs) -> hooks
        self._hooks: list = []
        self._retained: dict[int, Any] = {}

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def register_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(grad_inputs, grad_outputs)`` after this node ran; it may return new grad_inputs."""
        self._hooks.append(hook)
        return RemovableHandle(self._hooks, hook)

    def register_prehook(self, hook: Callable) -> RemovableHandle:
        """``hook(grad_outputs)`` before this node runs; it may return new grad_outputs."""
        hooks = self._pre_hooks.setdefault(-1, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def zeros(self, shape: Sequence[int], dtype: Any, like: Any = None, device: Any = None) -> Any:
        """Zeros on ``like``'s device (or ``device``)."""
        from ..ops.creation import zeros

        return zeros(*shape, dtype=dtype, device=like.device if like is not None else device)

    def release(self) -> None:
        """Free what the node saved (after a backward without retain_graph)."""

    def _rebased(self, t: Any, copy: bool = False) -> None:
        """``t``, an operand, was rebound in place to this node's result (nothing saved here)."""


class Node(GraphNode, RuleContext):
    """The backward of one op application (a tensor's ``grad_fn``), and the
    :class:`RuleContext` its op's gradient rule is given."""

    def __init__(self, op: Any, attrs: dict, operands: Sequence[Any], outputs: Sequence[Any]):
        super().__init__()
        self.op = op
        self.attrs = attrs
        self.next_functions: tuple = tuple(edge_of(o) for o in operands)
        self.needs_input_grad = tuple(e is not None for e in self.next_functions)
        self.input_meta = tuple(None if o is None else (tuple(o.shape), o.dtype) for o in operands)
        self.output_meta = tuple((tuple(o.shape), o.dtype) for o in outputs)
        self.output_devices = tuple(o.device for o in outputs)
        self._inputs: tuple | None = tuple(None if o is None else _Saved(o) for o in operands)
        self._outputs: tuple | None = tuple(_Saved(o, True) for o in outputs)
        self.metadata: dict = {}

    def name(self) -> str:
        base = self.op.name.split(".", 1)[-1]
        return "".join(p.capitalize() for p in base.split("_")) + "Backward0"

    # the rule's view of the op ----------------------------------------------------------------
    @property
    def inputs(self) -> tuple:
        if self._inputs is None:
            raise RuntimeError(_FREED)
        return tuple(None if s is None else s.unpack(self) for s in self._inputs)

    @property
    def outputs(self) -> tuple:
        if self._outputs is None:
            raise RuntimeError(_FREED)
        return tuple(s.unpack(self) for s in self._outputs)

    def needs(self, i: int) -> bool:
        return self.needs_input_grad[i]

    def input(self, i: int) -> Any:
        """Operand ``i`` as the op saw it (PyTorch's error if it was changed in place since)."""
        if self._inputs is None:
            raise RuntimeError(_FREED)
        s = self._inputs[i]
        return None if s is None else s.unpack(self)

    def output(self, i: int = 0) -> Any:
        if self._outputs is None:
            raise RuntimeError(_FREED)
        return self._outputs[i].unpack(self)

    @staticmethod
    def apply_op(name: str, *operands: Any, **attrs: Any) -> Any:
        from .._dispatch import apply

        return apply(name, *operands, **attrs)

    def release(self) -> None:
        self._inputs = self._outputs = None

    def _rebased(self, t: Any, copy: bool = False) -> None:
        """``t``, an operand of this op, takes its result in place (``x.mul_(y)``): the saved
        value is what the rule needs, so the change is not an error; ``copy``: the result is
        written into ``t``'s memory, so the saved value is copied first."""
        for s in self._inputs or ():
            if s is not None and s.tensor is t:
                s.tensor = None  # the value before the change, kept: later changes do not matter
                if copy and s.data is _views.held(t):
                    s.data = s.data.copy()

    def apply(self, grads: list) -> tuple:
        if self._inputs is None:
            raise RuntimeError(_FREED)
        rule = self.op.vjp
        if rule is None:
            raise RuntimeError(f"the derivative for {self.op.name} is not implemented")
        return rule(self, grads)


class AccumulateGrad(GraphNode):
    """The end of the graph at a leaf: sums what arrives into ``leaf.grad``; its hooks run
    after the sum (``register_post_accumulate_grad_hook``)."""

    def __init__(self, leaf: Any):
        super().__init__()
        self.variable = leaf


class NoBackward(GraphNode):
    """The ``grad_fn`` of a result whose backward cannot run: it requires grad as eager's
    result would, and backward through it raises ``why``."""

    def __init__(self, name: str, why: str):
        super().__init__()
        self._name = name
        self.why = why

    def name(self) -> str:
        return self._name

    def apply(self, grads: list) -> tuple:
        raise RuntimeError(self.why)


def edge_of(t: Any) -> tuple | None:
    """Where gradient for operand ``t`` goes: (node, output index), or None."""
    if t is None or not t.requires_grad:
        return None
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    acc = t._grad_acc() if t._grad_acc is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_acc = weakref.ref(acc)
    return (acc, 0)


def record(op: Any, operands: Sequence[Any], attrs: dict, outputs: Sequence[Any]) -> None:
    """Attach ``op``'s backward to its floating-point ``outputs`` (grad mode is on and an
    operand requires grad)."""
    if not op.differentiable:
        return
    float_outs = [o for o in outputs if o.dtype.is_floating_point]
    if not float_outs:
        return
    node = Node(op, attrs, operands, outputs)
    for i, o in enumerate(outputs):
        if o.dtype.is_floating_point:
            o._requires_grad = True
            o._grad_fn = node
            o._output_nr = i


# --- running backward ------------------------------------------------------------------------

def _same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are equal; symbolic sizes (a traced backward) are compared as
    expressions, so that no size decision is taken that the forward did not take."""
    na, nb = getattr(a, "node", None), getattr(b, "node", None)
    if na is not None or nb is not None:
        return bool(na is not None and nb is not None and na == nb) or (
            na is None and nb is None and a == b)
    return a == b


def _sum_to(g: Any, shape: tuple) -> Any:
    """``g`` summed over the dims that broadcasting added to reach its shape from ``shape``."""
    gshape = tuple(g.shape)
    if len(gshape) == len(shape) and all(_same_size(a, b) for a, b in zip(gshape, shape)):
        return g
    lead = len(gshape) - len(shape)
    # a dim of size 1 that g has larger; a symbolic dim in shape is never a broadcast one
    dims = list(range(lead)) + [lead + i for i, n in enumerate(shape)
                                if getattr(n, "node", None) is None and n == 1
                                and not _same_size(gshape[lead + i], 1)]
    if dims:
        g = g.sum(dim=tuple(dims), keepdim=True)
    if len(g.shape) == len(shape) and all(_same_size(a, b) for a, b in zip(tuple(g.shape), shape)):
        return g
    return g.reshape(shape)


def fit_gradient(g: Any, meta: tuple) -> Any:
    """``g`` summed to the operand's shape and cast to its dtype (``meta``: (shape, dtype))."""
    shape, dtype = meta
    g = _sum_to(g, shape)
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g


def add_gradients(a: Any, b: Any) -> Any:
    """The sum of two gradients of one value, either of which may be None."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def zero_grads(params: Any, set_to_none: bool) -> None:
    """``zero_grad()`` of a module or an optimizer: each tensor's ``.grad`` to None, or (not
    ``set_to_none``) a gradient it holds to zeros. Inside a compiled function the capture
    does it (``Capture.zero_grad``), so that every call clears the gradients again."""
    from .._capture_hooks import active_handler

    handler = active_handler()
    for p in params:
        if handler.zero_grad(p, set_to_none):
            continue
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            with no_grad():
                p.grad = p.grad.detach().zero_()


def _collect(roots: Sequence[tuple]) -> dict:
    """The number of edges into each node reachable from ``roots``."""
    deps: dict[Any, int] = {}
    seen: set[int] = set()
    stack = list(dict.fromkeys(n for n, _ in roots))  # two outputs of one node are one root node
    for n in stack:
        seen.add(id(n))
    while stack:
        node = stack.pop()
        for edge in node.next_functions:
            if edge is None:
                continue
            nxt = edge[0]
            deps[nxt] = deps.get(nxt, 0) + 1
            if id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append(nxt)
    return deps


def run_backward(roots: Sequence[tuple[Any, Any]], *, retain_graph: bool, create_graph: bool,
                 capture: dict | None = None, accumulate: bool = True) -> dict:
    """Propagate ``roots`` ((tensor, gradient) pairs) back through the graph.

    With ``accumulate`` the leaves' ``.grad`` receive the sums; ``capture`` maps (node,
    output index) to a key and returns the gradient that reached each (``autograd.grad``)."""
    edges = []
    for t, g in roots:
        edge = edge_of(t)
        if edge is None:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        edges.append((edge, g))
    deps = _collect([e for e, _ in edges])
    buffers: dict[Any, dict[int, Any]] = {}
    for (node, nr), g in edges:
        slot = buffers.setdefault(node, {})
        slot[nr] = add_gradients(slot.get(nr), g)
    ready = [n for n in dict.fromkeys(node for (node, _), _ in edges) if deps.get(n, 0) == 0]
    captured: dict = {}
    run_node = _prof_state.hooks.backward_node_runner(_run_node) if _prof_state.active else _run_node
    outer = not _backward_depth
    _backward_depth.append(1)
    try:
        with set_grad_enabled(create_graph), autocast_suspended():  # gradients in the forward's dtypes
            while ready:
                node = ready.pop()
                grads = buffers.pop(node, {})
                run_node(node, grads, captured, capture, accumulate, create_graph, buffers, deps, ready)
                if not retain_graph:
                    node.release()
    finally:
        _backward_depth.pop()
        callbacks = list(_final_callbacks) if outer else []
        if outer:
            _final_callbacks.clear()
    for callback in callbacks:  # queue_callback: after the whole backward pass, in order
        callback()
    return captured


_backward_depth: list = []  # run_backward calls in progress (a hook may call backward() again)
_final_callbacks: list = []


def queue_callback(callback: Callable[[], Any]) -> None:
    """Run ``callback()`` once the backward pass now running has finished (PyTorch's
    ``Variable._execution_engine.queue_callback``): DistributedDataParallel waits for its last
    gradient buckets there."""
    if not _backward_depth:
        raise RuntimeError("queue_callback() can only be called while a backward pass runs (from a hook)")
    _final_callbacks.append(callback)


def _run_node(node: Any, grads: dict, captured: dict, capture: dict | None, accumulate: bool,
              create_graph: bool, buffers: dict, deps: dict, ready: list) -> None:
    for nr, hooks in node._pre_hooks.items():
        if nr < 0 or nr not in grads or grads[nr] is None:
            continue
        for hook in list(hooks):
            new = hook(grads[nr])
            if new is not None:
                grads[nr] = new
    for nr, ref in node._retained.items():
        t = ref()
        if t is not None and grads.get(nr) is not None:
            t.grad = grads[nr] if create_graph else grads[nr].detach()
    if capture is not None:
        for nr, g in grads.items():
            key = capture.get((node, nr))
            if key is not None:
                captured[key] = add_gradients(captured.get(key), g)
    if isinstance(node, NoBackward):
        node.apply([])
    if isinstance(node, AccumulateGrad):
        g = grads.get(0)
        if accumulate and g is not None:
            leaf = node.variable
            if leaf.grad is None:
                leaf.grad = g if create_graph else g.detach()
            elif create_graph:
                leaf.grad = leaf.grad + g
            else:
                with no_grad():  # in place, as PyTorch: the same .grad tensor object
                    leaf.grad.add_(g.detach())
            for hook in list(node._hooks):  # register_post_accumulate_grad_hook
                hook(leaf)
        return
    if all(g is None for g in grads.values()) or not grads:
        outs: tuple = (None,) * len(node.next_functions)
    else:
        full = [grads.get(i) for i in range(len(node.output_meta))]
        for i, g in enumerate(full):
            if g is None and node.materialize_grads:
                shape, dtype = node.output_meta[i]
                if dtype.is_floating_point:
                    full[i] = node.zeros(shape, dtype, device=node.output_devices[i])
        for hook in list(node._pre_hooks.get(-1, ())):
            new = hook(tuple(full))
            if new is not None:
                full = list(new)
        outs = tuple(node.apply(full))
        if len(outs) != len(node.next_functions):
            raise RuntimeError(f"{node.name()}: the gradient rule of {node.op.name} returned {len(outs)} "
                               f"gradients for {len(node.next_functions)} operands")
        for hook in list(node._hooks):
            new = hook(outs, tuple(full))
            if new is not None:
                outs = tuple(new)
    for i, edge in enumerate(node.next_functions):
        if edge is None:
            continue
        nxt, nr = edge
        g = outs[i]
        if g is not None:
            g = fit_gradient(g, node.input_meta[i])
            slot = buffers.setdefault(nxt, {})
            slot[nr] = add_gradients(slot.get(nr), g)
        deps[nxt] -= 1
        if deps[nxt] == 0:
            ready.append(nxt)

