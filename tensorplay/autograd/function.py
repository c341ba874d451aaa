"""``tp.autograd.Function``: an op with a forward and backward of your own, as in PyTorch.

    class Exp(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = Exp.apply(x)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._grad_mode import is_grad_enabled, no_grad
from .engine import _FREED, GraphNode, _Saved, edge_of
from .. import _views

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` of a custom Function's forward and backward."""

    def __init__(self) -> None:
        self._saved: tuple | None = ()
        self._non_differentiable: set[int] = set()
        self._dirty: tuple = ()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError(_FREED)
        return tuple(None if s is None else s.unpack(self._node) for s in self._saved)

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: Any) -> None:
        self._dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class _FunctionOp:
    """Stands where a tp op stands in a Node, for a custom Function."""

    differentiable = True

    def __init__(self, cls: type):
        self.cls = cls
        self.name = f"custom.{cls.__name__}"

    def vjp(self, node: Any, grads: list) -> tuple:
        ctx = node.ctx
        out = self.cls.backward(ctx, *grads)
        out = out if isinstance(out, tuple) else (out,)
        n = len(node.next_functions)
        if len(out) < n or any(g is not None for g in out[n:]):
            raise RuntimeError(f"function {self.cls.__name__}Backward returned an incorrect number of gradients "
                               f"(expected {n}, got {len(out)})")
        return tuple(out[:n])


class _FunctionNode(GraphNode):
    """A custom Function's node: the engine calls its ``apply`` like an op's."""

    def __init__(self, cls: type, ctx: FunctionCtx, tensor_args: list, outputs: list):
        super().__init__()
        self.op = _FunctionOp(cls)
        self.ctx = ctx
        self.attrs: dict = {}
        self.next_functions = tuple(None if t is None else edge_of(t) for t in tensor_args)
        self.needs_input_grad = tuple(e is not None for e in self.next_functions)
        self.input_meta = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in tensor_args)
        self.output_meta = tuple((tuple(o.shape), o.dtype) for o in outputs)
        self.output_devices = tuple(o.device for o in outputs)
        self.metadata: dict = {}
        ctx._node = self

    @property
    def materialize_grads(self) -> bool:  # type: ignore[override]
        return self.ctx.materialize_grads  # (ctx.set_materialize_grads(False): None for the missing)

    def name(self) -> str:
        return f"{self.op.cls.__name__}Backward"

    def release(self) -> None:
        self.ctx._saved = None

    def apply(self, grads: list) -> tuple:
        if self.ctx._saved is None:
            raise RuntimeError(_FREED)
        return self.op.vjp(self, grads)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call ``apply``."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a tp.autograd.Function subclass defines forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError("a tp.autograd.Function subclass defines backward(ctx, ...) to be differentiated")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from .._capture_hooks import active_handler
        from .._tensor import Tensor

        handler = active_handler()
        if handler.captures_program and is_grad_enabled() and any(
                isinstance(a, Tensor) and (a._requires_grad or not _views.has_memory(a)) for a in args):
            # a capture under grad mode: the backward is this class's Python, which a compiled
            # backward cannot run, so the call runs eagerly (a graph break; an error under fullgraph)
            return handler.run_eagerly(cls.apply, args, kwargs,
                                       f"{cls.__name__}.apply (a custom autograd.Function: its backward is Python)")
        ctx = FunctionCtx()
        tensors = [a if isinstance(a, Tensor) else None for a in args]
        ctx.needs_input_grad = tuple(t is not None and t.requires_grad for t in tensors)
        track = is_grad_enabled() and any(ctx.needs_input_grad)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if track:
            results = [o for o in outs if isinstance(o, Tensor)]
            node = _FunctionNode(cls, ctx, tensors, results)
            fresh = []
            for i, o in enumerate(results):
                if id(o) in {id(t) for t in tensors if t is not None} and o not in ctx._dirty:
                    o = Tensor._wrap(_views.array(o))  # an input returned as it is: a new tensor, as PyTorch's view
                fresh.append(o)
                if o.dtype.is_floating_point and id(o) not in ctx._non_differentiable and \
                        id(results[i]) not in ctx._non_differentiable:
                    o._requires_grad = True
                    o._grad_fn = node
                    o._output_nr = i
            ctx._saved = tuple(None if t is None else _Saved(t) for t in getattr(ctx, "_to_save", ()))
            it = iter(fresh)
            outs = tuple(next(it) if isinstance(o, Tensor) else o for o in outs)
        else:
            ctx._saved = tuple(None if t is None else _Saved(t) for t in getattr(ctx, "_to_save", ()))
            ctx._node = None
        return outs[0] if single else outs


def once_differentiable(fn: Callable) -> Callable:
    """A backward that is not itself differentiated: it runs with grad mode off."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            return fn(ctx, *grads)

    return wrapper


class _Moved(Function):
    """``Tensor.to(device)`` of a tensor that requires grad: the gradient returns to the
    tensor's own device (PyTorch's ToCopyBackward)."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Any, target: Any) -> Any:
        ctx.source = x.device
        return x._copied_to(target)

    @staticmethod
    def backward(ctx: FunctionCtx, g: Any) -> Any:
        return g._moved(ctx.source), None
