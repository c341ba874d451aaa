"""Compiled training: backward graphs for captured graphs.

When a capture runs under grad mode and some of its inputs require grad, the captured graph
is differentiated (:mod:`.joint`: the ops' gradient rules traced into a backward), split into
a forward that also returns the values the backward needs and a backward graph
(:mod:`.partition`), and both are compiled: the forward at once, the backward on the first
``backward()`` that reaches it. Each compiled call gives its results one
:class:`CompiledBackward` grad_fn, which eager autograd runs like any other node, so compiled
segments, eager ops and nested compiled calls chain.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._grad_mode import is_grad_enabled
from ..._tensor import Tensor
from ...autograd.engine import GraphNode, edge_of
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph
from ...runtime.storage import DeviceArray
from .._logging import get_logger
from .joint import Joint, NotDifferentiable, build_joint, live_values
from .partition import PARTITIONERS, Partition, partition, value_bytes
from ... import _views

__all__ = ["Differentiated", "CompiledBackward", "NotDifferentiable", "differentiate", "replay_eagerly", "PARTITIONERS",
           "live_values", "value_bytes"]

_log_perf = get_logger("perf")

_FREED = ("Trying to backward through the compiled graph {name!r} a second time: its saved values were "
          "freed by the first backward. Specify retain_graph=True if you need to backward through the graph "
          "a second time")
_DOUBLE = ("backward through the compiled graph {name!r} with create_graph=True: the backward of a compiled "
           "graph is itself compiled and is not differentiable again. For higher-order gradients run the "
           "model eagerly (without tp.compile) or call tp.compiler.disable() around it")


class Differentiated:
    """A captured graph with its backward: the forward to compile (outputs, then the saved
    values) and the backward graph, compiled on first use."""

    def __init__(self, joint: Joint, parts: Partition, name: str):
        self.name = name
        self.requires = joint.requires
        self.grad_outputs = joint.grad_outputs
        self.parts = parts
        self.forward = parts.forward
        self.backward_graph = parts.backward
        self.n_outputs = parts.n_outputs
        self.compile: Callable[[Graph, Sequence[Any]], Callable[..., list]] | None = None
        self._runner: Callable[..., list] | None = None
        self.backward_compiles = 0
        self.tangent_dtypes = [joint.forward.outputs[k].type.dtype for k in joint.grad_outputs]

    def describe(self) -> str:
        p = self.parts
        return (f"backward graph {p.backward.name}: {len(p.backward.nodes)} ops ({p.recomputed} recomputed from "
                f"the forward); saved for backward: {len(p.saved_inputs)} inputs and {len(p.saved)} values, "
                f"{p.saved_bytes} bytes ({p.partitioner}; saving every value the backward reads: "
                f"{p.saved_all_bytes} bytes)")

    def run_backward(self, arrays: list[Any]) -> list[Any]:
        if self._runner is None:
            if self.compile is None:
                from ..capture.graphs import interpret

                self._runner = lambda *a: interpret(self.backward_graph, list(a))
            else:
                self._runner = self.compile(self.backward_graph, arrays)
                self.backward_compiles += 1
        return self._runner(*arrays)

    def node(self, sources: Sequence[Any], arrays: Sequence[Any], outs: Sequence[Any]) -> CompiledBackward:
        """The grad_fn of one call's results: ``sources`` are the tensors bound to the forward's
        inputs (their autograd edges), ``arrays`` the inputs as passed, ``outs`` the forward's
        results (saved values after the outputs)."""
        saved = [arrays[i] for i in self.parts.saved_inputs] + list(outs[self.n_outputs:])
        targets = [sources[i] for i in self.requires]
        return CompiledBackward(self, saved, targets, outs)


class CompiledBackward(GraphNode):
    """The grad_fn of a compiled call's results: runs the compiled backward graph."""

    def __init__(self, program: Differentiated, saved: list[Any], targets: Sequence[Any], outs: Sequence[Any]):
        super().__init__()
        self.program = program
        self._saved: list[Any] | None = saved
        self.next_functions = tuple(edge_of(t) for t in targets)
        self.input_meta = tuple((tuple(t.shape), t.dtype) for t in targets)
        self.input_devices = tuple(t.device for t in targets)
        self.output_meta = tuple((tuple(outs[k].shape), dtype)
                                 for k, dtype in zip(program.grad_outputs, program.tangent_dtypes))
        self.output_devices = tuple(Tensor._wrap(outs[k]).device for k in program.grad_outputs)

    def name(self) -> str:
        return "CompiledFunctionBackward"

    def apply(self, grads: list) -> tuple:
        if self._saved is None:
            raise RuntimeError(_FREED.format(name=self.program.name))
        if is_grad_enabled():
            raise RuntimeError(_DOUBLE.format(name=self.program.name))
        tangents = []
        for i, (g, dtype) in enumerate(zip(grads, self.program.tangent_dtypes)):
            if g is None:  # (the engine fills missing gradients with zeros first)
                g = self.zeros(self.output_meta[i][0], dtype, device=self.output_devices[i])
            if g.dtype is not dtype:
                g = g.to(dtype)
            d = _views.array(g)
            tangents.append(d if _views.is_device(g) else np.asarray(d))
        outs = self.program.run_backward(self._saved + tangents)
        result = []
        for slot, device in zip(self.program.parts.gradient_slots, self.input_devices):
            if slot is None:
                result.append(None)
                continue
            out = outs[slot]
            g = Tensor._wrap(out if type(out) is DeviceArray else np.asarray(out))
            result.append(g if g.device == device else g.to(device))  # (a host parameter's gradient: on the host)
        return tuple(result)

    def release(self) -> None:
        self._saved = None


def replay_eagerly(graph: Graph, tensors: Sequence[Tensor]) -> list[Tensor]:
    """Run ``graph`` op by op through eager dispatch on ``tensors`` (one per input), so eager
    autograd records it; nodes captured under no_grad run under no_grad again."""
    from ... import _dispatch
    from ..._grad_mode import no_grad

    env: dict[Any, Tensor] = dict(zip(graph.inputs, tensors))
    for node in graph.nodes:
        operands = [None if v is None else env[v] for v in node.inputs]
        if node.callee is not None:
            outs = tuple(replay_eagerly(node.callee, operands))
        elif node.stop_gradient:
            with no_grad():
                out = _dispatch.apply(node.op, *operands, **node.attrs)
            outs = out if isinstance(out, tuple) else (out,)
        else:
            out = _dispatch.apply(node.op, *operands, **node.attrs)
            outs = out if isinstance(out, tuple) else (out,)
        env.update(zip(node.results, outs))
    return [env[v] for v in graph.outputs]


def differentiate(graph: Graph, requires: Sequence[int], name: str, *, shape_env: Any = None,
                  partitioner: str = "min_cut") -> Differentiated:
    """Build the backward of ``graph`` for its inputs at ``requires`` and split the two
    (``graph`` gains the saved values as outputs). Raises :class:`NotDifferentiable`."""
    with sym.deciding(shape_env) if shape_env is not None else contextlib.nullcontext():
        joint = build_joint(graph, requires, shape_env=shape_env)
    hint = None
    if shape_env is not None:
        hint = shape_env.size_hint  # (sizes the data decides count as a typical size)
    parts = partition(joint, name, partitioner=partitioner, hint=hint)
    out = Differentiated(joint, parts, name)
    if _log_perf.isEnabledFor(logging.INFO):
        _log_perf.info("%s: %s", name, out.describe())
    return out
