"""Sizes at run time.

A :data:`Size` is an ``int`` when it is known statically, else an ``index`` value (a
``tensor.dim`` or ``arith`` on index values); the helpers here read, combine and split
them without emitting code for what is static.

Symbolic sizes (sympy, from ``tp.shapes`` / ``tp.arg_shapes``) become such values through
:class:`SizeValues`. A function with symbolic sizes names, for each argument dimension that
is not static, the expression of its size (``s0``, ``s1``, ...); a size the data decides
(``u0``) is a dim of a data-dependent op's result (``tp.nonzero``), read from that result
right after it. Every other symbolic size in the function is an expression over those symbols, so one compiled function serves every
size: the symbols are read from the arguments with ``tensor.dim`` and the expressions
computed with ``arith`` on ``index`` values (``floor`` is ``arith.floordivsi``, ``Mod`` is a
floor remainder, ``Max``/``Min`` are ``arith.maxsi``/``arith.minsi``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import sympy

from ...dialects.ir import arith, ir, tensor
from ...dialects.tp import symbolic as sym
from ...dialects.tp.types import TensorType, is_static

__all__ = ["Size", "index_const", "as_index", "dim_value", "sizes_of", "index_add", "product", "split_sizes",
           "has_static_zero", "SizeValues"]

#: a size: an int when static, else an ``index`` value
Size = Union[int, ir.Value]


def index_const(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), ir.IntegerAttr.get(ir.IndexType.get(), value)).result


def as_index(size: Size) -> ir.Value:
    """``size`` as an ``index`` value (a constant when it is static)."""
    return index_const(size) if isinstance(size, int) else size


def dim_value(value: ir.Value, index: int) -> ir.Value:
    """``tensor.dim`` of ``value`` at dimension ``index``."""
    return tensor.DimOp(value, index_const(index)).result


def sizes_of(value: ir.Value, t: TensorType, dims: Sequence[int] | None = None) -> list[Size]:
    """The sizes of ``value`` (of type ``t``) at ``dims`` (all by default): an int where ``t``
    knows the size, else its ``tensor.dim``."""
    dims = range(t.rank) if dims is None else dims
    return [int(t.shape[i]) if is_static(t.shape[i]) else dim_value(value, i) for i in dims]


def index_add(a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return arith.AddIOp(as_index(a), as_index(b)).result


def product(sizes: Sequence[Size]) -> Size:
    """The product of ``sizes``: an int when all are static."""
    static = 1
    dynamic: list[ir.Value] = []
    for s in sizes:
        if isinstance(s, int):
            static *= s
        else:
            dynamic.append(s)
    if not dynamic:
        return static
    value = dynamic[0]
    for s in dynamic[1:]:
        value = arith.MulIOp(value, s).result
    if static != 1:
        value = arith.MulIOp(value, index_const(static)).result
    return value


def split_sizes(sizes: Sequence[Size | None]) -> tuple[list[ir.Value], list[int]]:
    """The dynamic and static operands of ops with mixed sizes (``tensor.expand_shape``,
    ``tensor.extract_slice``, ...): the values, and every size with MLIR's dynamic marker
    standing for what is not an int."""
    dyn = ir.ShapedType.get_dynamic_size()
    return [s for s in sizes if isinstance(s, ir.Value)], [s if isinstance(s, int) else dyn for s in sizes]


def has_static_zero(sizes: Sequence[Size]) -> bool:
    """Whether one of ``sizes`` is a static 0 (the tensor has no elements)."""
    return any(isinstance(s, int) and s == 0 for s in sizes)


class SizeValues:
    """Computes symbolic sizes as ``index`` values inside one function."""

    def __init__(self, block: ir.Block, arg_types: Sequence[TensorType] | None):
        self.block = block
        self.sources: dict[sympy.Symbol, tuple[ir.Value, int]] = {}
        self._symbols: dict[sympy.Symbol, ir.Value] = {}
        for arg, t in zip(block.arguments, arg_types or ()):
            for d, size in enumerate(t.shape):
                if sym.is_symbolic(size) and size.is_Symbol and size not in self.sources:
                    self.sources[size] = (arg, d)

    def define(self, t: TensorType, value: ir.Value) -> None:
        """Symbols that first occur as dims of ``value`` (a data-dependent op's result, of
        symbolic type ``t``) are read from it with ``tensor.dim`` at the insertion point."""
        for d, size in enumerate(t.shape):
            if sym.is_symbolic(size) and size.is_Symbol and size not in self.sources and size not in self._symbols:
                self._symbols[size] = dim_value(value, d)

    def value(self, expr: Any) -> ir.Value:
        """``expr`` (an int or a size expression) as an ``index`` value at the current
        insertion point; symbols are read once, at the top of the function."""
        if isinstance(expr, int):
            return index_const(expr)
        return self._build(expr)

    def _symbol(self, s: sympy.Symbol) -> ir.Value:
        v = self._symbols.get(s)
        if v is None:
            src = self.sources.get(s)
            if src is None:
                raise ValueError(f"the symbolic size {s} is not the size of any argument dimension")
            arg, d = src
            first = self.block.operations[0] if len(self.block.operations) else None
            point = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(self.block)
            with point:
                v = dim_value(arg, d)
            self._symbols[s] = v
        return v

    def _build(self, e: Any) -> ir.Value:
        if e.is_Integer:
            return index_const(int(e))
        if e.is_Symbol:
            return self._symbol(e)
        if isinstance(e, sympy.Add):
            acc = self._build(e.args[0])
            for a in e.args[1:]:
                acc = arith.AddIOp(acc, self._build(a)).result
            return acc
        if isinstance(e, sympy.Mul):
            if sympy.fraction(e)[1] != 1:
                return self._build(sympy.floor(e))  # only exact quotients reach here
            acc = self._build(e.args[0])
            for a in e.args[1:]:
                acc = arith.MulIOp(acc, self._build(a)).result
            return acc
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp >= 0:
            acc = index_const(1)
            base = self._build(e.base)
            for _ in range(int(e.exp)):
                acc = arith.MulIOp(acc, base).result
            return acc
        if isinstance(e, (sympy.floor, sympy.ceiling)):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            a, b = self._build(sympy.expand(num)), self._build(den)
            op = arith.FloorDivSIOp if isinstance(e, sympy.floor) else arith.CeilDivSIOp
            return op(a, b).result
        if isinstance(e, sympy.Mod):
            a, b = self._build(e.args[0]), self._build(e.args[1])
            q = arith.FloorDivSIOp(a, b).result
            return arith.SubIOp(a, arith.MulIOp(b, q).result).result
        if isinstance(e, (sympy.Max, sympy.Min)):
            op = arith.MaxSIOp if isinstance(e, sympy.Max) else arith.MinSIOp
            acc = self._build(e.args[0])
            for a in e.args[1:]:
                acc = op(acc, self._build(a)).result
            return acc
        raise ValueError(f"cannot compute the size expression {e} at run time ({type(e).__name__})")
