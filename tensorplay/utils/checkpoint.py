"""``tp.utils.checkpoint``: activation checkpointing with ``torch.utils.checkpoint``'s names.

``checkpoint(fn, *args, use_reentrant=True)`` runs ``fn`` without keeping its intermediate
values for backward and runs it again during ``backward()`` to rebuild them: memory for
compute. ``use_reentrant=False`` records ``fn``'s ops like any other call (the same gradients
in every case, including ``tp.autograd.grad`` and inputs that do not require grad; no memory is
saved eagerly). Under ``tp.compile`` both run ``fn`` in the captured graph, and the compiled
backward's partitioner chooses which values to keep and which to recompute.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from .._dispatch import current_handler
from .._grad_mode import enable_grad
from .._tensor import Tensor
from ..autograd import backward as _backward
from ..autograd.function import Function
from ..ops.random import get_rng_state, set_rng_state

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Recompute(Function):
    """The reentrant form: forward without a graph, backward reruns ``fn`` with grad on."""

    @staticmethod
    def forward(ctx: Any, fn: Callable, preserve_rng_state: bool, kwargs: dict, *args: Any) -> Any:
        ctx.fn, ctx.kwargs = fn, kwargs
        ctx.rng = get_rng_state() if preserve_rng_state else None
        ctx.layout = [isinstance(a, Tensor) for a in args]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        saved = iter(ctx.saved_tensors)
        inputs = []
        for is_tensor, other in zip(ctx.layout, ctx.others):
            if is_tensor:
                t = next(saved)
                d = t.detach()
                d.requires_grad_(t.requires_grad)
                inputs.append(d)
            else:
                inputs.append(other)
        outer = None
        if ctx.rng is not None:  # the same random draws (dropout masks) as the first run
            outer = get_rng_state()
            set_rng_state(ctx.rng)
        try:
            with enable_grad():
                out = ctx.fn(*inputs, **ctx.kwargs)
        finally:
            if outer is not None:
                set_rng_state(outer)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("checkpoint: none of the function's outputs requires grad; nothing "
                               "to differentiate (do its inputs or parameters require grad?)")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, *(a.grad if isinstance(a, Tensor) and a.requires_grad else None
                                     for a in inputs))


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable | None = None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, its intermediate values recomputed in backward instead
    of kept (module docstring). ``context_fn``, ``determinism_check`` and ``debug`` are
    accepted for PyTorch's signature: only their defaults are supported."""
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn("tp.utils.checkpoint: the use_reentrant parameter should be passed explicitly "
                      "(True is the default, as in PyTorch; False is recommended)", UserWarning, stacklevel=2)
        use_reentrant = True
    if context_fn is not None or determinism_check != "default" or debug:
        raise ValueError("checkpoint: context_fn, determinism_check and debug are not supported; "
                         "leave them at their defaults")
    if not use_reentrant or current_handler() is not None:
        return function(*args, **kwargs)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None "
                      "(use_reentrant=True needs an input that requires grad; use_reentrant=False "
                      "does not)", UserWarning, stacklevel=2)
    return _Recompute.apply(function, preserve_rng_state, kwargs, *args)


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                          **kwargs: Any) -> Any:
    """Run ``functions`` (a Sequential or a list of modules) in ``segments`` checkpointed
    chunks; the last chunk runs normally, as in PyTorch."""
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    size = len(fns) // segments
    if size < 1:
        raise ValueError(f"checkpoint_sequential: {segments} segments for {len(fns)} functions")

    def run(chunk: Iterable) -> Callable:
        def forward(x: Any) -> Any:
            for f in chunk:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(fns[start:end + 1]), input, use_reentrant=use_reentrant, **kwargs)
    return run(fns[end + 1:])(input)
