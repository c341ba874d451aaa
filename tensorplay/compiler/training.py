"""Training through compiled calls: how a compiled graph joins autograd. Which captured
inputs require grad, the ``differentiate`` hook a capture calls to build a graph's backward,
a forward program given the backward it saves values for, an entry's results given their
``grad_fn`` (the compiled backward, or one that says why there is none), and the graph
segments of a function with graph breaks whose inputs need gradients.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import sympy

from .. import _views
from .._grad_mode import is_grad_enabled
from .._tensor import Tensor
from ..autograd.engine import NoBackward
from ..dialects.tp import symbolic as sym
from ..dialects.tp.graph import Graph, data_dependent_symbols
from . import tracedir
from ._logging import get_logger
from .autodiff import Differentiated, differentiate, live_values, replay_eagerly
from .capture.bindings import ArgInput
from .capture.graphs import structural_key, substitute_sizes
from .capture.programs import compile_graph
from .entries import NO_BACKWARD, SEGMENTS_PER_RECOMPILE, Entry, passthrough
from .symbolic.shape_env import ShapeEnv

if TYPE_CHECKING:
    from .api import CompiledFunction
    from .capture.session import TraceResult

__all__ = ["requires_grad", "differentiator", "attach_backward", "wire_backward", "input_symbols",
           "graph_grad_outputs", "run_segment_training"]

_log_perf = get_logger("perf")


def requires_grad(binding: Any, leaves: list[Any]) -> bool:
    """Whether the tensor a graph input is bound to (in this call, ``leaves``) requires grad."""
    if isinstance(binding, ArgInput):
        t = leaves[binding.index]
    else:
        t = getattr(binding, "tensor", None)
        if t is None and getattr(binding, "_weak", None) is not None:
            t = binding._weak()
    return bool(getattr(t, "requires_grad", False))


def differentiator(leaves: list[Any] | None, name: str, partitioner: str, *,
                   log: bool = True) -> Callable[..., Any]:
    """A capture's ``differentiate`` hook: the graph's backward for the inputs that require
    grad (``leaves``: the call's, to tell which bindings do; None: the hook is given the input
    positions), or the reason it cannot be built (logged with ``log``; backward raises it)."""

    def build(graph: Graph, bindings: Any, env: Any = None) -> Any:
        requires = bindings if leaves is None else [i for i, b in enumerate(bindings)
                                                    if requires_grad(b, leaves)]
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


def attach_backward(training: Differentiated, runner: Any, backend: Any) -> None:
    """Let ``training`` compile its backward with ``backend`` (its stages written where the
    forward's are, when traced), and keep the values the forward ``runner`` saves for it on a
    GPU device (an IREE program's results)."""
    if hasattr(runner, "device_results"):
        runner.device_results = frozenset(range(training.n_outputs, len(training.forward.outputs)))
    scope = tracedir.current()
    training.compile = lambda g, arrays: tracedir.within(
        scope, compile_graph, g, arrays, backend) if g.nodes else passthrough(g)


def input_symbols(graph: Graph, arrays: Sequence[Any]) -> dict[Any, int]:
    """The size symbols that are input dimensions of ``graph``, with this call's values."""
    out: dict[Any, int] = {}
    for v, a in zip(graph.inputs, arrays):
        for d, size in enumerate(v.type.shape):
            if sym.is_symbolic(size) and size.is_Symbol and size not in out:
                out[size] = int(a.shape[d])
    return out


def graph_grad_outputs(graph: Graph, requires: list[bool]) -> frozenset[int]:
    """The outputs of ``graph`` that depend, through differentiable ops, on an input whose
    flag in ``requires`` is set: those eager autograd would make require grad."""
    live = live_values(graph, [i for i, r in enumerate(requires) if r])
    return frozenset(k for k, v in enumerate(graph.outputs) if v in live)



def wire_backward(entry: Entry, trace: TraceResult, leaves: list[Any], backend_for: Callable[[], Any]) -> None:
    """A new whole-graph ``entry`` captured under grad mode with inputs that require grad:
    give it the trace's compiled backward (compiled with ``backend_for()``'s backend), or
    the reason backward through its results raises; and the outputs that require grad."""
    requires = [requires_grad(b, leaves) for b in trace.bindings]
    if is_grad_enabled() and any(requires):  # (grad mode and requires_grad are in the guards)
        entry.no_backward = f"{entry.name}Backward"
        training = trace.training
        if isinstance(training, Differentiated) and any(
                requires_grad(target, leaves) for target, _ in trace.writebacks
                if not isinstance(target, weakref.ref)):
            training = "the function updates an input that requires grad in place"
        if isinstance(training, Differentiated):
            attach_backward(training, entry.runner, backend_for())
            entry.training = training
            entry.grad_outputs = frozenset(training.grad_outputs)
        else:
            entry.no_backward_why = training or "its backward could not be built"
            entry.grad_outputs = graph_grad_outputs(trace.graph, requires)


def run_segment_training(cf: CompiledFunction, graph: Graph, arrays: list[Any],
                         sources: list[Any]) -> tuple[list, Any]:
    """Run a segment whose inputs need gradients: its forward (cached with its backward
    by structure and by which inputs require grad), and the grad_fn for its results."""
    group = cf._group
    requires = tuple(i for i, t in enumerate(sources)
                     if t is not None and t._requires_grad and t.dtype.is_floating_point)
    skey = (structural_key(graph), cf._config, "training", requires)
    hit = group.segments.get(skey)
    if hit is None:
        limit = cf.recompile_limit * SEGMENTS_PER_RECOMPILE
        if len(group.segments) >= limit:  # eager from here on, as run_segment (which warns)
            outs = replay_eagerly(graph, [t if t is not None else Tensor._wrap(a)
                                          for t, a in zip(sources, arrays)])

            def follow(t: Tensor, k: int) -> None:
                if outs[k]._grad_fn is not None:
                    t._requires_grad, t._grad_fn, t._output_nr = True, outs[k]._grad_fn, outs[k]._output_nr

            return [_views.held(o) for o in outs], follow
        name = graph.name = f"{cf.name}_segment{len(group.segments)}"
        symbols = data_dependent_symbols(graph)
        sizes = input_symbols(graph, arrays)  # symbolic sizes the segment reads from its inputs
        training = None
        if sizes:  # a backward for every size, if building it asks nothing about them
            env = ShapeEnv.of_unbacked(name, symbols | set(sizes))
            training = cf._differentiator(None, name, log=False)(graph, requires, env)
            if not isinstance(training, Differentiated):  # it did: this call's sizes
                _log_perf.info("%s: backward built for this call's sizes (%s)", name, training)
                substitute_sizes(graph, lambda e: sym.as_size(e.xreplace(sizes))
                                 if isinstance(e, sympy.Basic) else e)
                skey = (structural_key(graph), cf._config, "training", requires)
                hit = group.segments.get(skey)
                training = None
        if hit is None and training is None:
            env = ShapeEnv.of_unbacked(name, symbols) if symbols else None
            training = cf._differentiator(None, name)(graph, requires, env)
    if hit is None:
        backend = cf._backend_for(arrays)
        runner = compile_graph(graph, arrays, backend)
        if isinstance(training, Differentiated):
            attach_backward(training, runner, backend)
            hit = (runner, training, frozenset(training.grad_outputs), None)
        else:
            why = NO_BACKWARD.format(name=name, why=training)
            hit = (runner, None, graph_grad_outputs(graph, [i in requires for i in range(len(sources))]), why)
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
