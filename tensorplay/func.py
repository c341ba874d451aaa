"""Function transforms over tensor programs: :func:`scan`, a loop the compiler keeps as a loop.

``scan(fn, init, xs)`` is ``jax.lax.scan``'s contract (``torch._higher_order_ops.scan`` has the
same one): ``fn(carry, x) -> (carry, y)`` runs once per index of dim 0 of ``xs``, and the call
returns the last carry and the ``y`` of every step stacked along a new dim 0. ``init``,
``xs``, the carry and ``y`` may be tensors or nested tuples, lists and dicts of them.

Eagerly it is a Python loop. Inside a compiled function ``fn`` is traced once, into the body
of one ``tp.scan`` op whose trip count is ``xs``'s length: the program has one copy of the body
whatever the length, and under ``dynamic=True`` (or automatic dynamic) one program serves
every length (docs/recurrent.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._tensor import Tensor

__all__ = ["scan"]


def scan(fn: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any, *, reverse: bool = False) -> tuple[Any, Any]:
    """Loop ``fn`` over dim 0 of ``xs`` carrying ``init``; returns ``(last carry, stacked ys)``.

    ``fn(carry, x)`` must return ``(new_carry, y)`` with ``new_carry`` of ``init``'s structure,
    shapes and dtypes. With ``reverse=True`` the steps run from the last index to the first and
    each ``y`` is stored at its step's index. Tensors ``fn`` reads besides its arguments (weights)
    are loop invariants. Inside a compiled function, ``fn`` must capture without a graph break
    and draw no random numbers (draw them before the loop and pass them in ``xs``)."""
    from .compiler.capture import current_capture
    from .compiler.capture import pytree

    x_leaves, x_tree = pytree.flatten(xs)
    carry_leaves, carry_tree = pytree.flatten(init)
    for what, leaves in (("init", carry_leaves), ("xs", x_leaves)):
        for leaf in leaves:
            if not isinstance(leaf, Tensor):
                raise TypeError(f"scan: {what} must hold tensors only, found {type(leaf).__name__}")
    if not x_leaves:
        raise ValueError("scan: xs holds no tensor; the loop runs once per index of dim 0 of xs")
    for leaf in x_leaves:
        if leaf.dim() == 0:
            raise ValueError("scan: every tensor of xs needs a dim 0 to loop over, got a 0-d tensor")
    length = x_leaves[0].shape[0]
    for leaf in x_leaves[1:]:
        if leaf.shape[0] != length:
            raise ValueError(f"scan: the tensors of xs differ in length (dim 0): {length} and {leaf.shape[0]}")
    session = current_capture()
    if session is not None:
        from .compiler.capture.regions import call_scan

        return call_scan(session, fn, init, xs, reverse)
    return _loop(fn, init, carry_tree, x_leaves, x_tree, int(length), reverse)


def _loop(fn: Callable[[Any, Any], tuple[Any, Any]], init: Any, carry_tree: Any, x_leaves: list[Tensor],
          x_tree: Any, length: int, reverse: bool) -> tuple[Any, Any]:
    from . import ops
    from .compiler.capture import pytree

    if length == 0:
        raise ValueError("scan: xs has length 0; eagerly the loop cannot know the shapes of ys without a step")
    carry = init
    ys: list[list[Tensor]] = []
    y_tree = None
    steps = range(length - 1, -1, -1) if reverse else range(length)
    for t in steps:
        x = pytree.unflatten(x_tree, [leaf[t] for leaf in x_leaves])
        result = fn(carry, x)
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError(f"scan: fn must return a pair (carry, y), got {type(result).__name__}")
        carry, y = result
        if pytree.flatten(carry)[1] != carry_tree:
            raise TypeError("scan: fn returned a carry of another structure than init")
        y_leaves, y_tree = pytree.flatten(y)
        ys.append(y_leaves)
    if reverse:
        ys.reverse()
    stacked = [ops.shape.stack([step[k] for step in ys]) for k in range(len(ys[0]))]
    return carry, pytree.unflatten(y_tree, stacked)
