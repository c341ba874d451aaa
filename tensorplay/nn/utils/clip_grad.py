"""Gradient clipping with PyTorch's semantics (the total norm over all gradients)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..._grad_mode import no_grad
from ..._tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: Any) -> list[Tensor]:
    from ..._capture_hooks import active_handler

    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    handler = active_handler()
    for p in params:  # (a compiled function guards which .grad are None)
        handler.note_grad_read(p)
    return [p for p in params if p.grad is not None]


#: calls with the same parameters that clip eagerly before the clipping runs as one compiled
#: program (as Optimizer.EAGER_STEPS: a short run never waits for a compile)
EAGER_CALLS = 2
#: (parameter ids, norm type) -> eager calls made so far, and the compiled program of each such
#: set (one per set: a model's gradients never count against another's recompile budget)
_calls: dict[tuple, int] = {}
_programs: dict[tuple, Any] = {}
#: the most parameter sets remembered (the oldest forgotten first)
KEEP = 32


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their total ``norm_type`` norm is at most
    ``max_norm`` (scaled by ``max_norm / (norm + 1e-6)`` when above); returns the total norm.

    From the third call with the same parameters, the norms and the scaling of all gradients
    run as one cached program (``tp.compile`` of the per-gradient form, ``max_norm`` an input)
    while the gradients live on the host, unless ``foreach=False`` or ``error_if_nonfinite``
    (which must look at the norm before any gradient changes): PyTorch's multi-tensor clipping
    without a kernel per gradient and op."""
    from ...ops import creation

    params = _grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return creation.tensor(0.0)
    grads = [p.grad for p in params]
    program = None if error_if_nonfinite or foreach is False else _program(params, grads, norm_type)
    if program is not None:
        return program(grads, float(max_norm))
    with no_grad():
        total = _total_norm(grads, norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               f"so it cannot be clipped. To disable this error and scale the gradients by the "
                               f"non-finite norm anyway, set `error_if_nonfinite=False`")
        _scale(grads, max_norm, total)
    return total


def _total_norm(grads: list[Tensor], norm_type: float) -> Tensor:
    """PyTorch's form: a norm per gradient, then the norm of those, in the gradients' dtype (no
    .item() on the way: inside a compiled function it stays in the graph)."""
    from ...ops import elementwise
    from ...ops import reduction
    from ...ops.shape import stack

    if norm_type == math.inf:
        return reduction.amax(stack([reduction.amax(elementwise.abs(g)) for g in grads]))
    norms = [reduction.sum(elementwise.abs(g) ** norm_type) ** (1.0 / norm_type) for g in grads]
    return reduction.sum(stack(norms) ** norm_type) ** (1.0 / norm_type)


def _scale(grads: list[Tensor], max_norm: float, total: Tensor) -> None:
    from ...ops import elementwise

    coef = elementwise.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))


def _program(params: list[Tensor], grads: list[Tensor], norm_type: float) -> Any:
    """The compiled clipping for these gradients, or None to clip eagerly: while a compiled
    function traces the call (its graph takes the clipping), for the first
    :data:`EAGER_CALLS` calls with these parameters, and for gradients on a device (each op
    runs there already)."""
    from ... import _dispatch, _views

    if _dispatch.current_handler() is not None or any(_views.is_device(g) for g in grads):
        return None
    key = (tuple(id(p) for p in params), norm_type)
    taken = _calls.get(key, 0)
    if taken < EAGER_CALLS:
        _remember(_calls, key, taken + 1)
        return None
    program = _programs.get(key)
    if program is None:
        from ... import compile as compile_fn  # (tp.compile: loads the compiler on first use)

        def clip(grads: list[Tensor], max_norm: float) -> Tensor:
            with no_grad():
                total = _total_norm(grads, norm_type)
                _scale(grads, max_norm, total)
            return total

        program = compile_fn(clip, name="clip_grad_norm_", dynamic=False)
        _remember(_programs, key, program)
    return program


def _remember(table: dict[tuple, Any], key: tuple, value: Any) -> None:
    """``table[key] = value``, forgetting the oldest entries past :data:`KEEP` (parameter sets
    come and go in tests and notebooks)."""
    table.pop(key, None)
    table[key] = value
    while len(table) > KEEP:
        del table[next(iter(table))]


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient elementwise to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _grads(parameters):
            p.grad.clamp_(-clip_value, clip_value)
