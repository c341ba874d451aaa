"""Creation ops: tensors made from attributes alone (constants, fills, ranges)."""

from __future__ import annotations

import numpy as np

from .._lazy import lazy

from .. import dtypes as dt
from .. import symbolic as sym
from ..errors import OpAttributeError, ShapeError
from ..registry import Attr, AttrKind, Op, register
from ..types import TensorType, type_of_array

sympy = lazy("sympy")


class Creation(Op):
    family = "creation"
    operands = ()


@register
class Constant(Creation):
    """A tensor whose value is held in the ``value`` attribute."""

    name = "tp.constant"
    differentiable = False
    attributes = (Attr("value", AttrKind.DENSE),)

    def infer(self, types, attrs):
        try:
            return (type_of_array(attrs["value"]),)
        except TypeError as exc:
            raise self.error(OpAttributeError, str(exc)) from None

    def reference(self, arrays, attrs):
        return attrs["value"].copy()


def _check_shape(op: Op, shape: tuple[int, ...]) -> None:
    for d in shape:
        if (d < 0 if type(d) is int else sym.lt(d, 0, f"{op.name} size")):
            raise op.error(ShapeError, f"Trying to create tensor with negative dimension {d}: "
                                       f"{list(shape)}")


@register
class Full(Creation):
    """A tensor of ``shape`` filled with ``value``, converted to ``dtype``."""

    name = "tp.full"
    differentiable = False
    attributes = (Attr("shape", AttrKind.INTS, symbolic=True),
                  Attr("value", AttrKind.FLOAT, symbolic=True, doc="a number, or a symbolic size"),
                  Attr("dtype", AttrKind.DTYPE))

    def infer(self, types, attrs):
        _check_shape(self, attrs["shape"])
        return (TensorType(attrs["shape"], attrs["dtype"]),)

    def reference(self, arrays, attrs):
        dtype: dt.DType = attrs["dtype"]
        value = attrs["value"]
        if dtype.is_bool:
            value = value != 0
        elif dtype.is_integer:
            value = int(value)
        return np.full(attrs["shape"], value, dtype=dtype.np_dtype)


def arange_length(start: float, end: float, step: float) -> int:
    """Number of elements of ``arange(start, end, step)``: ceil((end - start) / step)."""
    if sym.is_symbolic(start) or sym.is_symbolic(end) or sym.is_symbolic(step):
        exact = [sympy.Rational(v) if not sym.is_symbolic(v) else v for v in (start, end, step)]
        n = sym.size_max(sym.as_size(sympy.ceiling((exact[1] - exact[0]) / exact[2])), 0)
        oracle = sym.current_oracle()
        return sym.as_size(oracle.simplify(n)) if oracle is not None else n
    return max(0, int(np.ceil((end - start) / step)))


@register
class Arange(Creation):
    """The values ``start, start + step, ...`` below ``end`` (above it for negative steps)."""

    name = "tp.arange"
    differentiable = False
    attributes = (Attr("start", AttrKind.FLOAT, 0.0, symbolic=True), Attr("end", AttrKind.FLOAT, symbolic=True),
                  Attr("step", AttrKind.FLOAT, 1.0, symbolic=True), Attr("dtype", AttrKind.DTYPE))

    def infer(self, types, attrs):
        start, end, step = attrs["start"], attrs["end"], attrs["step"]
        if any(sym.is_symbolic(v) for v in (start, end, step)):
            if sym.eq(step, 0, "arange step"):
                raise self.error(OpAttributeError, "step must be nonzero")
            a, b, c = (sympy.Rational(v) if not sym.is_symbolic(v) else v for v in (start, end, step))
            backwards = sympy.Lt((b - a) * c, 0)
            if sym.decide(backwards, "arange bounds") and sym.ne(end, start, "arange bounds"):
                raise self.error(OpAttributeError, f"upper bound and larger bound inconsistent with step "
                                                  f"sign (start={start}, end={end}, step={step})")
            return (TensorType((arange_length(start, end, step),), attrs["dtype"]),)
        if step == 0:
            raise self.error(OpAttributeError, "step must be nonzero")
        if (end - start) * step < 0 and end != start:
            raise self.error(OpAttributeError, f"upper bound and larger bound inconsistent with step "
                                              f"sign (start={start:g}, end={end:g}, step={step:g})")
        return (TensorType((arange_length(start, end, step),), attrs["dtype"]),)

    def reference(self, arrays, attrs):
        dtype: dt.DType = attrs["dtype"]
        n = arange_length(attrs["start"], attrs["end"], attrs["step"])
        values = attrs["start"] + attrs["step"] * np.arange(n, dtype=np.float64)
        if dtype.is_integer:
            return values.astype(np.int64).astype(dtype.np_dtype)
        return values.astype(dtype.np_dtype)
