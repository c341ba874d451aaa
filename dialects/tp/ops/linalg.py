"""Linear-algebra ops: the matrix product.

``tp.matmul`` is the one contraction op of the dialect: ``mm``, ``bmm``, ``dot``, the 1-D
cases of ``matmul`` and every ``einsum`` contraction are expressed with it (plus reshapes,
permutes and sums), so a backend lowers one op to ``linalg.matmul``/``linalg.batch_matmul``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dtypes import from_numpy_dtype
from ..errors import DTypeError, ShapeError
from ..registry import Op, Operand, register
from ..shapes import broadcast_shapes, same_dim
from ..types import TensorType

if TYPE_CHECKING:  # (only for the annotations: the dialect imports no frontend module)
    from tensorplay.autograd.rule_context import RuleContext

__all__ = ["MatMul", "format_matrix_shape"]


def format_matrix_shape(shape) -> str:
    """``(2, 3)`` as ``2x3``, the way PyTorch prints matrix shapes in its messages."""
    return "x".join("?" if d is None else str(d) for d in shape)


@register
class MatMul(Op):
    """Matrix product with PyTorch's ``matmul`` rules: dims before the last two broadcast as batch dims.

    A 1-D ``lhs`` acts as a row vector and a 1-D ``rhs`` as a column vector, and that dim is
    dropped from the result (so two vectors give a 0-d dot product). Both operands must have
    the same dtype (bool is rejected); integers wrap around, half types accumulate in float32.
    """

    name = "tp.matmul"
    family = "linalg"
    operands = (Operand("lhs"), Operand("rhs"))

    def vjp(self, ctx: RuleContext, grads):
        # 1-d operands as matrices (a row, b a column), batch dims summed away by the engine
        a, b, g = ctx.input(0), ctx.input(1), grads[0]
        a2 = a.unsqueeze(0) if a.dim() == 1 else a
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        gshape = tuple(g.shape)
        if a.dim() == 1:  # the row dim the 1-d lhs lost
            at = len(gshape) - (b.dim() != 1)
            gshape = gshape[:at] + (1,) + gshape[at:]
        if b.dim() == 1:
            gshape = gshape + (1,)
        g2 = g.reshape(gshape)
        ga = gb = None
        if ctx.needs(0):
            ga = g2 @ b2.transpose(-1, -2)
            ga = ga.squeeze(-2) if a.dim() == 1 else ga
        if ctx.needs(1):
            # the lhs's batch dims are more rows of one product (K x rows @ rows x N), not a
            # batched product summed afterwards (a linear layer's weight gradient over a
            # (batch, tokens, features) input: one contraction, no batch-sized partials)
            if b.dim() == 2 and a2.dim() >= 3:
                count = 1
                for d in a2.shape[:-1]:
                    count = count * d  # (a size may be symbolic; -1 is ambiguous for empty tensors)
                rows = a2.reshape(count, a2.shape[-1])
                gb = rows.transpose(-1, -2) @ g2.reshape(count, g2.shape[-1])
            else:
                gb = a2.transpose(-1, -2) @ g2
            gb = gb.squeeze(-1) if b.dim() == 1 else gb
        return ga, gb

    def infer(self, types, attrs):
        a, b = types
        if a.rank == 0 or b.rank == 0:
            raise self.error(ShapeError, f"both arguments to matmul need to be at least 1D, but "
                                         f"they are {a.rank}D and {b.rank}D")
        if a.dtype is not b.dtype:
            raise self.error(DTypeError, f"expected m1 and m2 to have the same dtype, but got: "
                                         f"{a.dtype.name} != {b.dtype.name}")
        if a.dtype.is_bool:
            raise self.error(DTypeError, "not implemented for dtype bool")
        lhs = a.shape if a.rank >= 2 else (1,) + a.shape
        rhs = b.shape if b.rank >= 2 else b.shape + (1,)
        if not same_dim(lhs[-1], rhs[-2]):
            raise self.error(ShapeError, f"mat1 and mat2 shapes cannot be multiplied "
                                         f"({format_matrix_shape(a.shape)} and "
                                         f"{format_matrix_shape(b.shape)})")
        batch = broadcast_shapes(self.name, lhs[:-2], rhs[:-2])
        rows = (lhs[-2],) if a.rank >= 2 else ()
        cols = (rhs[-1],) if b.rank >= 2 else ()
        return (TensorType(batch + rows + cols, a.dtype),)

    def reference(self, arrays, attrs):
        a, b = arrays
        target = from_numpy_dtype(a.dtype).computes_in.np_dtype
        return np.matmul(a.astype(target, copy=False), b.astype(target, copy=False))
