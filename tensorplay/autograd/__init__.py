"""``tp.autograd``: reverse-mode differentiation with PyTorch's API (docs/autograd.md).

``backward`` and ``grad`` run the graph that eager ops record while grad mode is on (see
:mod:`.engine`); :class:`Function` defines an op with a forward and a backward of your own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .engine import AccumulateGrad, Node, run_backward
from .function import Function, FunctionCtx, once_differentiable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "Node", "AccumulateGrad",
           "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled"]


def _as_tuple(x: Any) -> tuple:
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _roots(outputs: tuple, grad_outputs: tuple, create_graph: bool) -> list[tuple]:
    from .._tensor import Tensor
    from ..ops.creation import ones_like

    if grad_outputs and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got {len(grad_outputs)} "
                           f"gradients for {len(outputs)} outputs")
    roots = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"backward: outputs must be tensors, got {type(out).__name__}")
        g = grad_outputs[i] if grad_outputs else None
        if g is None:
            if not out.requires_grad:
                raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = ones_like(out)
        elif not isinstance(g, Tensor):
            from ..ops.creation import tensor

            g = tensor(g, dtype=out.dtype)
        elif tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and output[{i}] "
                               f"has a shape of {list(out.shape)}.")
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append((out, g if create_graph else g.detach()))
    return roots


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
             grad_variables: Any = None, inputs: Any = None) -> None:
    """Sum the gradients of ``tensors`` with respect to the graph's leaves into their ``.grad``
    (only into ``inputs`` where given)."""
    outputs = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors if grad_tensors is not None else grad_variables)
    if retain_graph is None:
        retain_graph = create_graph
    from .. import _dispatch
    from .._capture_hooks import active_handler

    handler = _dispatch.current_handler()
    if handler is not None and any(getattr(t, "_data", 0) is None for t in outputs):
        targets = None if inputs is None else _as_tuple(inputs)
        if active_handler().backward_in_graph(outputs, list(grads), targets, create_graph):
            return  # (a compiled training step: the gradients are part of its graph)
    if handler is not None:
        # eager autograd inside a compiled function (after a graph break made the roots
        # concrete): the engine's ops run eagerly, not into the capture
        with _dispatch.capture_handler(None):
            _backward(outputs, grads, retain_graph, create_graph, inputs)
        return
    _backward(outputs, grads, retain_graph, create_graph, inputs)


def _backward(outputs: tuple, grads: tuple, retain_graph: bool, create_graph: bool, inputs: Any) -> None:
    roots = _roots(outputs, grads, create_graph)
    if inputs is None:
        run_backward(roots, retain_graph=retain_graph, create_graph=create_graph)
        return
    targets = _as_tuple(inputs)
    got = _grad(roots, targets, retain_graph, create_graph, allow_unused=True)
    for t, g in zip(targets, got):
        if g is None:
            continue
        g = g if create_graph else g.detach()
        t.grad = g if t.grad is None else t.grad + g


def _grad(roots: list, inputs: Sequence[Any], retain_graph: bool, create_graph: bool, allow_unused: bool) -> tuple:
    from .engine import edge_of

    capture = {}
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad (input {i})")
        capture[edge_of(t)] = i
    captured = run_backward(roots, retain_graph=retain_graph, create_graph=create_graph, capture=capture,
                            accumulate=False)
    out = []
    for i, t in enumerate(inputs):
        g = captured.get(i)
        if g is None and not allow_unused:
            raise RuntimeError(f"One of the differentiated Tensors appears to not have been used in the graph (input "
                               f"{i}). Set allow_unused=True if this is the desired behavior.")
        if g is not None and not create_graph:
            g = g.detach()
        out.append(g)
    return tuple(out)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``."""
    if is_grads_batched:
        raise ValueError("grad(is_grads_batched=True) is not supported by tensorplay; call grad once per "
                         "batch element")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    inputs_t = _as_tuple(inputs)
    roots = _roots(_as_tuple(outputs), _as_tuple(grad_outputs), create_graph)
    got = _grad(roots, inputs_t, retain_graph, create_graph, allow_unused)
    if materialize_grads:
        from ..ops.creation import zeros_like

        got = tuple(zeros_like(t) if g is None else g for t, g in zip(inputs_t, got))
    return got
