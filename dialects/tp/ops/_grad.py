"""Helpers of the gradient rules (``Op.vjp``): small compositions of tp ops over tensors,
written with tensor methods and ``ctx.apply_op`` only, so that a rule runs eagerly under
autograd and is traced the same way into a backward graph."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

__all__ = ["scalar", "where", "arange", "mask", "unreduce", "reduced_dims", "count", "zeros_like", "on", "zero_vjp"]


def scalar(ctx: RuleContext, value: float, like: Any) -> Any:
    """A 0-d tensor holding ``value`` in ``like``'s dtype."""
    return ctx.apply_op("tp.full", shape=(), value=float(value), dtype=like.dtype)


def where(ctx: RuleContext, cond: Any, a: Any, b: Any) -> Any:
    """``tp.where`` accepting Python numbers for either branch."""
    like = a if not isinstance(a, (int, float)) else b
    if isinstance(a, (int, float)):
        a = scalar(ctx, a, like)
    if isinstance(b, (int, float)):
        b = scalar(ctx, b, like)
    return ctx.apply_op("tp.where", cond, a, b)


def arange(ctx: RuleContext, n: Any, dtype: Any, like: Any) -> Any:
    """``0 .. n-1`` on ``like``'s device; a symbolic ``n`` (a traced backward under dynamic
    sizes) stays symbolic."""
    from .. import symbolic as sym

    end = n if isinstance(n, sym.SymInt) else float(n)
    return on(ctx.apply_op("tp.arange", start=0.0, end=end, step=1.0, dtype=dtype), like)


def mask(cond: Any, like: Any) -> Any:
    """A bool tensor as 0/1 in ``like``'s dtype."""
    return cond.to(like.dtype)


def zeros_like(ctx: RuleContext, like: Any) -> Any:
    """Zeros of ``like``'s shape, dtype and device."""
    return ctx.zeros(tuple(like.shape), like.dtype, like)


def on(t: Any, like: Any) -> Any:
    """``t`` (made on the host: a constant, an arange) on ``like``'s device."""
    return t if t.device == like.device else t.to(like.device)


def reduced_dims(dims: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """A reduction's ``dims`` attribute as non-negative dims (None: all of them)."""
    if dims is None or rank == 0:
        return tuple(range(rank))  # (a 0-d tensor reduced over dim 0 or -1 is itself)
    return tuple(sorted({d % rank for d in dims}))


def unreduce(g: Any, shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> Any:
    """A reduction's result gradient broadcast back over the input ``shape``."""
    from .. import symbolic as sym

    shape = tuple(shape)
    if not keepdim:
        kept = tuple(1 if i in dims else n for i, n in enumerate(shape))
        g = g.reshape(kept)
    # compared without deciding anything: a size the data decides cannot be asked about
    same = len(g.shape) == len(shape) and all(sym.known_eq(a, b) for a, b in zip(g.shape, shape))
    return g if same else g.expand(shape)


def count(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def at_least_one(n: Any) -> Any:
    """``max(n, 1)`` for a size; one the data decides stays symbolic (``Max(u0, 1)``,
    computed by the program) instead of a question no guard can answer."""
    from .. import symbolic as sym

    if sym.data_dependent(n):
        return n._new(sym.sympy.Max(n.node, 1))
    return max(n, 1)


def zero_vjp(op: Any, ctx: RuleContext, grads: Sequence[Any]) -> tuple:
    """The rule of a piecewise-constant op (rounding, sign, rounded division): zero almost
    everywhere, for every operand, as PyTorch's."""
    zero = zeros_like(ctx, grads[0])
    return (zero,) * len(ctx.input_meta)
