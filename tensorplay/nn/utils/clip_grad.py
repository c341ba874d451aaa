"""Gradient clipping with PyTorch's semantics (the total norm over all gradients)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..._grad_mode import no_grad
from ..._tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: Any) -> list[Tensor]:
    from ... import _dispatch

    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    note = getattr(_dispatch.current_handler(), "note_grad_read", None)
    if note is not None:  # a compiled function: which .grad are None is guarded
        for p in params:
            note(p)
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their total ``norm_type`` norm is at most
    ``max_norm`` (scaled by ``max_norm / (norm + 1e-6)`` when above); returns the total norm."""
    from ...ops import creation as C
    from ...ops import elementwise as E
    from ...ops import reduction as R

    params = _grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return C.tensor(0.0)
    from ...ops.shape import stack

    # PyTorch's form: a norm per gradient, the norm of those, a clamped tensor coefficient, all
    # in the gradients' dtype (no .item() on the way: inside a compiled function it stays in
    # the graph)
    with no_grad():
        if norm_type == math.inf:
            total = R.amax(stack([R.amax(E.abs(p.grad)) for p in params]))
        else:
            norms = [R.sum(E.abs(p.grad) ** norm_type) ** (1.0 / norm_type) for p in params]
            total = R.sum(stack(norms) ** norm_type) ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               f"so it cannot be clipped. To disable this error and scale the gradients by the "
                               f"non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = E.clamp(max_norm / (total + 1e-6), max=1.0)
        for p in params:
            p.grad.mul_(coef.to(p.grad.dtype))
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient elementwise to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _grads(parameters):
            p.grad.clamp_(-clip_value, clip_value)
