"""Control flow: a loop over the leading dim of its per-step operands (``tp.scan``).

``tp.scan`` runs a body function ``length`` times. Its operands are, in order, the initial
carried values (``num_carries``), the sequences it slices per step along dim 0 (``num_xs``,
each ``length`` long) and loop invariants (the rest: weights the body reads). The body takes
one carried value per carry, one slice per sequence and the invariants, and returns the next
carried values (the same types) and one per-step output each; the op's results are the final
carried values and the per-step outputs stacked along a new dim 0 (``length`` long). With
``reverse`` the steps run from the last index down, each output stored at its step's index.

The trip count may be symbolic (``length = s0``): one program serves every length. The body
is a function of the same module (``body = @name``), a private ``func.func`` whose ops are tp
ops, so every pass and the lowering treat it like any other function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import symbolic as sym
from ..errors import OpAttributeError, OpError, ShapeError
from ..registry import Attr, AttrKind, Op, Operand, register, signature_of
from ..types import TensorType

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

__all__ = ["Scan", "scan_layout"]


def scan_layout(n_operands: int, attrs: dict[str, Any]) -> tuple[int, int, int]:
    """(carries, sequences, invariants) of a ``tp.scan`` with ``n_operands`` operands."""
    nc, nx = attrs["num_carries"], attrs["num_xs"]
    return nc, nx, n_operands - nc - nx


def _same(a: Any, b: Any) -> bool:
    """Two sizes that may be equal: equal ints, expressions the sizes' oracle (a capture's shape
    environment) finds equal, or sizes nothing can compare (``?`` in MLIR, or symbolic with no
    oracle)."""
    if a is None or b is None:
        return True
    equal = sym.eq(a, b, "tp.scan: a loop value's sizes from step to step")
    return equal is None or equal


def _matches(t: TensorType, want: TensorType) -> bool:
    return t.dtype is want.dtype and t.rank == want.rank and all(_same(a, b) for a, b in zip(t.shape, want.shape))


@register
class Scan(Op):
    """A loop: a body function applied to carried values and per-step slices, its outputs stacked."""

    name = "tp.scan"
    family = "control"
    operands = (Operand("operands", variadic=True,
                        doc="initial carried values, then the sequences, then loop invariants"),)
    attributes = (
        Attr("body", AttrKind.FUNC, doc="(carries..., slices..., invariants...) -> (carries..., outputs...)"),
        Attr("num_carries", AttrKind.INT, doc="how many operands (and results) are carried values"),
        Attr("num_xs", AttrKind.INT, doc="how many operands after the carries are sliced per step"),
        Attr("length", AttrKind.INT, symbolic=True, doc="the trip count: dim 0 of every sequence"),
        Attr("reverse", AttrKind.BOOL, False, doc="run from the last step to the first"),
    )
    results = ("results",)

    def infer(self, types, attrs):
        body = signature_of(attrs["body"])
        nc, nx, nk = scan_layout(len(types), attrs)
        length = attrs["length"]
        if nc < 0 or nx < 0 or nk < 0:
            raise self.error(OpAttributeError, f"num_carries={nc} and num_xs={nx} do not fit its {len(types)} "
                                              f"operand(s)")
        if not sym.is_symbolic(length) and length < 0:
            raise self.error(OpAttributeError, f"length must be at least 0, got {length}")
        if len(body.inputs) != len(types):
            raise self.error(OpError, f"body @{body.name} takes {len(body.inputs)} argument(s), but the loop "
                                      f"passes {len(types)} ({nc} carried, {nx} per step, {nk} invariant)")
        if len(body.outputs) < nc:
            raise self.error(OpError, f"body @{body.name} returns {len(body.outputs)} value(s), fewer than the "
                                      f"{nc} carried value(s)")
        for i in range(nc):
            t, arg, out = types[i], body.inputs[i], body.outputs[i]
            if not _matches(t, arg) or not _matches(out, arg):
                raise self.error(ShapeError, f"carried value {i}: the loop passes {t}, body @{body.name} takes "
                                             f"{arg} and returns {out}; a carried value keeps its type")
        for j in range(nx):
            t, arg = types[nc + j], body.inputs[nc + j]
            if t.rank != arg.rank + 1 or not _same(t.shape[0], length) or not _matches(
                    TensorType(tuple(t.shape[1:]), t.dtype), arg):
                raise self.error(ShapeError, f"sequence {j} has type {t}: body @{body.name} takes slices of "
                                             f"{arg}, so it must be {length} x {arg}")
        for k in range(nk):
            t, arg = types[nc + nx + k], body.inputs[nc + nx + k]
            if not _matches(t, arg):
                raise self.error(ShapeError, f"invariant {k} has type {t}, body @{body.name} takes {arg}")
        carries = tuple(types[i] for i in range(nc))
        stacked = tuple(TensorType((length, *o.shape), o.dtype) for o in body.outputs[nc:])
        return carries + stacked

    def reference(self, arrays, attrs):
        body = attrs["body"]
        if not hasattr(body, "nodes"):
            raise OpError(f"{self.name}: body @{body.name} is a function of the MLIR module; evaluate the "
                          f"graphs read back with to_graphs")
        from ..graph import interpret

        nc, nx, _ = scan_layout(len(arrays), attrs)
        length = int(attrs["length"])
        carries = [np.asarray(a) for a in arrays[:nc]]
        xs = arrays[nc:nc + nx]
        invariants = list(arrays[nc + nx:])
        outs: list[list[np.ndarray]] = [[] for _ in body.outputs[nc:]]
        steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
        for t in steps:
            results = interpret(body, carries + [np.asarray(x)[t] for x in xs] + invariants)
            carries = [np.asarray(r) for r in results[:nc]]
            for k, r in enumerate(results[nc:]):
                outs[k].append(np.asarray(r))
        if attrs["reverse"]:
            for seq in outs:
                seq.reverse()
        stacked = []
        for seq, o in zip(outs, body.outputs[nc:]):
            if seq:
                stacked.append(np.stack(seq))
            else:  # no steps: an empty sequence of the output's per-step shape
                shape = [int(d) if not sym.is_symbolic(d) else 0 for d in o.type.shape]
                stacked.append(np.zeros([0, *shape], o.type.dtype.np_dtype))
        return tuple(carries + stacked)

    @staticmethod
    def vjp(ctx: RuleContext, grads):
        # the reverse loop is built by differentiating the body graph, which the compiler's
        # autodiff does (tensorplay/compiler/autodiff/scan.py)
        from tensorplay.compiler.autodiff.scan import scan_vjp

        return scan_vjp(ctx, grads)
