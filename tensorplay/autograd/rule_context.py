"""What a gradient rule sees of the op application it differentiates: :class:`RuleContext`.

Each op's rule (``Op.vjp(ctx, grads)``, declared next to the op in ``dialects/tp/ops/``) is
written once and runs in two places: eagerly, where ``ctx`` is the autograd engine's
``Node`` (``tensorplay/autograd/engine.py``), and traced into a backward graph, where it is
the compiled differentiator's context (``compiler/autodiff/joint.py``). Both implement this
protocol, and a rule asks nothing else of ``ctx``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["RuleContext"]


@runtime_checkable
class RuleContext(Protocol):
    """One application of an op, as its gradient rule sees it: the op and its attributes,
    which operands want a gradient, the operands and results (tensors: concrete ones
    eagerly, values of the backward graph when traced), their shapes and dtypes, and the
    ways to make new tensors (``apply_op``, ``zeros``) that work in both settings."""

    #: the op (its registry instance)
    op: Any
    #: the op's attributes, normalized (every attribute present)
    attrs: dict[str, Any]
    #: whether each operand wants a gradient
    needs_input_grad: tuple[bool, ...]
    #: (shape, dtype) of each operand as the op saw it (None for an absent optional operand)
    input_meta: tuple[tuple[tuple, Any] | None, ...]
    #: (shape, dtype) of each result
    output_meta: tuple[tuple[tuple, Any], ...]

    @property
    def inputs(self) -> tuple:
        """Every operand, as the op saw it (None for an absent optional one)."""
        ...

    @property
    def outputs(self) -> tuple:
        """Every result."""
        ...

    def needs(self, i: int) -> bool:
        """Whether operand ``i`` wants a gradient."""
        ...

    def input(self, i: int) -> Any:
        """Operand ``i`` as the op saw it (None for an absent optional one)."""
        ...

    def output(self, i: int = 0) -> Any:
        """Result ``i``."""
        ...

    def apply_op(self, name: str, *operands: Any, **attrs: Any) -> Any:
        """Apply tp op ``name`` (what ``tensorplay._dispatch.apply`` does)."""
        ...

    def zeros(self, shape: Sequence[Any], dtype: Any, like: Any = None, device: Any = None) -> Any:
        """Zeros of ``shape`` and ``dtype`` on ``like``'s device (or ``device``)."""
        ...
