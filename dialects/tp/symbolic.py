"""Symbolic sizes: sympy expressions standing for sizes known only when a program runs.

A dimension of a :class:`~.types.TensorType` is an ``int`` (static), a sympy expression over
*size symbols* (symbolic: printed ``?`` in MLIR, its value computed at run time from the
inputs' sizes) or ``None`` (unknown: a ``?`` read back from MLIR without its expression).

Shape inference asks questions about symbolic sizes (are two sizes equal? is this one 1?)
through :func:`decide`. While a capture runs, its shape environment answers them: it
evaluates the question with the sizes of the example inputs and records the answer as a
guard, so the compiled program is used only for inputs that give the same answers. With no
capture, a question sympy cannot settle is answered ``None`` (unknown) and the rules treat the
size like an unknown one.

:class:`SymInt` is what user code sees in ``x.shape`` during a capture: it computes like an
int (arithmetic stays symbolic), compares through :func:`decide`, and becomes a plain int
(the size is then *specialized*, with a guard) where Python needs one (``range(n)``,
``int(n)``, indexing a list).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from ._lazy import lazy

sympy = lazy("sympy")

__all__ = [
    "Size", "SizeOracle", "SymInt", "size_symbol", "is_symbolic", "as_size", "size_text", "parse_size",
    "free_symbols", "decide", "deciding", "current_oracle", "eq", "ne", "lt", "le", "gt", "ge", "same_size",
    "floordiv", "ceildiv", "size_max", "size_min", "substitute", "hint_of", "size_to_python", "known",
    "known_eq", "simplify", "as_user_size", "size_description", "data_dependent",
]

Size = Any  # int | sympy.Expr | None


def size_symbol(name: str) -> sympy.Symbol:
    """The size symbol ``name``: a non-negative integer."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def is_symbolic(d: Any) -> bool:
    """A size given by an expression over size symbols (not an int, not unknown)."""
    if d is None or type(d) is int:
        return False
    return "sympy" in sys.modules and isinstance(d, sympy.Basic)  # (no expression exists before sympy does)


def as_size(v: Any) -> Size:
    """``v`` (an int, numpy integer, :class:`SymInt`, sympy expression or None) as a size:
    an int when it is a constant, else a sympy expression."""
    if v is None or type(v) is int:
        return v
    if isinstance(v, SymInt):
        v = v.env.simplify(v.node)  # what its capture knows now (a specialized size is an int)
        if isinstance(v, int):
            return v
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"a size must be an int, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, sympy.Basic):
        if v.is_Integer:
            return int(v)
        if v.is_Number:
            raise TypeError(f"a size must be an integer, got {v}")
        return v
    raise TypeError(f"a size must be an int, got {type(v).__name__}")


def size_text(d: Size) -> str:
    """A size as text: the int, the expression (``s0*4``, ``floor(s1/2)``) or ``?``."""
    if d is None:
        return "?"
    return str(d)


def size_description(expr: Any, names: dict | None = None) -> str:
    """A size expression or relation as Python-like text for messages: ``x.size(0) // 2``,
    ``(a * b) % 4 == 0``; ``names`` maps symbols to what they stand for."""
    from sympy.printing.precedence import precedence
    from sympy.printing.str import StrPrinter

    names = names or {}

    class Printer(StrPrinter):
        def _print_Symbol(self, e: Any) -> str:
            return names.get(e, e.name)

        def _wrap(self, e: Any, level: int) -> str:
            text = self._print(e)
            return f"({text})" if precedence(e) < level and not text.startswith("(") else text

        # floor division and remainder print in parentheses: Python's precedence then reads
        # them right wherever sympy puts them
        def _print_Mod(self, e: Any) -> str:
            return f"({self._wrap(e.args[0], 50)} % {self._wrap(e.args[1], 51)})"

        def _print_floor(self, e: Any) -> str:
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if den == 1:
                return f"floor({self._print(num)})"
            return f"({self._wrap(sympy.expand(num), 50)} // {self._wrap(den, 51)})"

        def _print_ceiling(self, e: Any) -> str:
            num, den = sympy.fraction(sympy.together(e.args[0]))
            return f"ceil({self._print(sympy.expand(num))} / {self._wrap(den, 51)})"

        def _print_Relational(self, e: Any) -> str:
            op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[e.rel_op]
            return f"{self._print(e.lhs)} {op} {self._print(e.rhs)}"

        def _print_Max(self, e: Any) -> str:
            return "max(" + ", ".join(self._print(a) for a in e.args) + ")"

        def _print_Min(self, e: Any) -> str:
            return "min(" + ", ".join(self._print(a) for a in e.args) + ")"

    if not isinstance(expr, sympy.Basic):
        return str(expr)
    return Printer().doprint(expr)


_FUNCTIONS = ("floor", "ceiling", "Mod", "Max", "Min", "Abs")  # the sympy functions a size text may use


def parse_size(text: str) -> Size:
    """The inverse of :func:`size_text` for ints and expressions (symbols become size symbols)."""
    text = text.strip()
    if text == "?":
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    names = {n: size_symbol(n) for n in re.findall(r"[A-Za-z_]\w*", text) if n not in _FUNCTIONS}
    try:
        expr = sympy.parse_expr(text, local_dict={**names, **{f: getattr(sympy, f) for f in _FUNCTIONS}})
    except (SyntaxError, TypeError, sympy.SympifyError) as exc:
        raise ValueError(f"not a size expression: {text!r} ({exc})") from None
    return as_size(expr)


def free_symbols(sizes: Sequence[Size]) -> set[sympy.Symbol]:
    out: set[sympy.Symbol] = set()
    for d in sizes:
        if is_symbolic(d):
            out |= d.free_symbols
    return out


def substitute(d: Size, mapping: dict) -> Size:
    """``d`` with symbols replaced per ``mapping`` (an int when that makes it constant)."""
    if not is_symbolic(d) or not mapping:
        return d
    return as_size(d.xreplace(mapping))


def hint_of(d: Size, hints: dict) -> int | None:
    """The value of ``d`` for the symbol values ``hints`` (None when one is missing)."""
    if d is None or isinstance(d, int):
        return d
    value = sympy.sympify(d.xreplace(hints))
    return int(value) if value.is_Integer else None


# -- questions about sizes -------------------------------------------------------------------

class SizeOracle(Protocol):
    """What answers questions about symbolic sizes during a capture (a shape environment)."""

    def decide(self, cond: Any, why: str) -> bool: ...

    def specialize(self, expr: Any, why: str) -> int: ...

    def simplify(self, expr: Any) -> Any: ...

    def static_truth(self, cond: Any) -> bool | None: ...


_local = threading.local()


def current_oracle() -> SizeOracle | None:
    stack = getattr(_local, "oracles", None)
    return stack[-1] if stack else None


@contextmanager
def deciding(oracle: SizeOracle | None) -> Iterator[None]:
    """Let ``oracle`` answer :func:`decide` in this thread for the block (None: nobody)."""
    stack = getattr(_local, "oracles", None)
    if stack is None:
        stack = _local.oracles = []
    stack.append(oracle)
    try:
        yield
    finally:
        stack.pop()


def decide(cond: Any, why: str = "") -> bool | None:
    """The truth of ``cond`` (a bool or a sympy relation over sizes): settled by sympy, else
    by the current oracle (recording a guard), else None (unknown)."""
    if isinstance(cond, (bool, np.bool_)):
        return bool(cond)
    if cond is sympy.true:
        return True
    if cond is sympy.false:
        return False
    oracle = current_oracle()
    if oracle is None:
        return None
    return oracle.decide(cond, why)


def known(cond: Any) -> bool | None:
    """The truth of ``cond`` when it is settled without recording a guard (by sympy, or by
    the ranges the current oracle knows); None otherwise."""
    if isinstance(cond, (bool, np.bool_)):
        return bool(cond)
    if cond is sympy.true or cond is sympy.false:
        return bool(cond)
    oracle = current_oracle()
    if oracle is None:
        return None
    return oracle.static_truth(oracle.simplify(cond))


def known_eq(a: Any, b: Any) -> bool:
    """``a == b`` is certain (ints, SymInts or expressions), without recording a guard."""
    a, b = as_size(a), as_size(b)
    if not is_symbolic(a) and not is_symbolic(b):
        return a == b
    return known(sympy.Eq(a, b)) is True


def simplify(d: Size) -> Size:
    """``d`` simplified with what the current oracle knows (replacements, ranges)."""
    oracle = current_oracle()
    if oracle is None or not is_symbolic(d):
        return d
    return as_size(oracle.simplify(d))


def data_dependent(d: Any) -> bool:
    """Whether ``d`` (a user size) depends on a size the data decides that is not known yet
    (an unbacked symbol of the capture): code that only asks "is it 1?" to take a shortcut
    takes the general path for such a size instead of a question no guard can answer."""
    if not isinstance(d, SymInt):
        return False
    unresolved = getattr(d.env, "unresolved", None)
    return bool(unresolved is not None and unresolved(d.env.simplify(d.node)))


def as_user_size(d: Size) -> Any:
    """A size as user code sees it during a capture: an int or a :class:`SymInt`."""
    d = simplify(as_size(d))
    oracle = current_oracle()
    return SymInt(d, oracle) if is_symbolic(d) and oracle is not None else d


def _compare(rel: Any, a: Size, b: Size, why: str) -> bool | None:
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return bool(rel(sympy.Integer(a), sympy.Integer(b)))
    return decide(rel(a, b), why)


def eq(a: Size, b: Size, why: str = "") -> bool | None:
    """``a == b``: True, False, or None when unknown."""
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return a == b
    if is_symbolic(a) and is_symbolic(b) and a == b:
        return True
    return decide(sympy.Eq(a, b), why)


def ne(a: Size, b: Size, why: str = "") -> bool | None:
    r = eq(a, b, why)
    return None if r is None else not r


def lt(a: Size, b: Size, why: str = "") -> bool | None:
    return _compare(sympy.Lt, a, b, why)


def le(a: Size, b: Size, why: str = "") -> bool | None:
    return _compare(sympy.Le, a, b, why)


def gt(a: Size, b: Size, why: str = "") -> bool | None:
    return _compare(sympy.Gt, a, b, why)


def ge(a: Size, b: Size, why: str = "") -> bool | None:
    return _compare(sympy.Ge, a, b, why)


def same_size(a: Size, b: Size, why: str = "") -> bool:
    """False only when ``a`` and ``b`` are known to differ (unknown sizes are checked at run
    time)."""
    return eq(a, b, why) is not False


def floordiv(a: Size, b: Size) -> Size:
    """``a // b`` for sizes (Python's floor division)."""
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return a // b
    return as_size(sympy.floor(sympy.Integer(a) / b if isinstance(a, int) else a / b))


def ceildiv(a: Size, b: Size) -> Size:
    """``ceil(a / b)`` for sizes."""
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return -(-a // b)
    return as_size(sympy.ceiling(sympy.Integer(a) / b if isinstance(a, int) else a / b))


def size_max(a: Size, b: Size) -> Size:
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return max(a, b)
    return as_size(sympy.Max(a, b))


def size_min(a: Size, b: Size) -> Size:
    if a is None or b is None:
        return None
    if not is_symbolic(a) and not is_symbolic(b):
        return min(a, b)
    return as_size(sympy.Min(a, b))


# -- expressions as Python -------------------------------------------------------------------

def size_to_python(expr: Any, names: dict | None = None) -> str:
    """Python source computing ``expr`` (a size expression or relation) with integer
    arithmetic: symbols are their names (or ``names[symbol]``), ``floor(a/b)`` is ``a // b``."""
    names = names or {}

    def go(e: Any) -> str:
        if isinstance(e, (bool, np.bool_)) or e is sympy.true or e is sympy.false:
            return "True" if bool(e) else "False"
        if isinstance(e, int):
            return str(e)
        if e.is_Symbol:
            return names.get(e, e.name)
        if e.is_Integer:
            return str(int(e))
        if e.is_Rational:
            raise ValueError(f"size expression {expr} has a fractional part outside floor/ceiling")
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            num, den = sympy.fraction(e)
            if den != 1:
                raise ValueError(f"size expression {expr} has a fractional part outside floor/ceiling")
            return "(" + " * ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp >= 0:
            return f"({go(e.base)} ** {int(e.exp)})"
        if isinstance(e, (sympy.floor, sympy.ceiling)):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if isinstance(e, sympy.floor):
                return f"({go(sympy.expand(num))} // {go(den)})"
            return f"(-((-{go(sympy.expand(num))}) // {go(den)}))"
        if isinstance(e, sympy.Mod):
            return f"({go(e.args[0])} % {go(e.args[1])})"
        if isinstance(e, sympy.Max):
            return "max(" + ", ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Min):
            return "min(" + ", ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Abs):
            return f"abs({go(e.args[0])})"
        ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
        for cls, op in ops.items():
            if isinstance(e, cls):
                return f"({go(e.lhs)} {op} {go(e.rhs)})"
        if isinstance(e, sympy.And):
            return "(" + " and ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Or):
            return "(" + " or ".join(go(a) for a in e.args) + ")"
        if isinstance(e, sympy.Not):
            return f"(not {go(e.args[0])})"
        raise ValueError(f"size expression {expr}: {type(e).__name__} is not supported")

    return go(expr)


# -- the int stand-in user code sees -----------------------------------------------------------

def _operand(other: Any) -> Any:
    if isinstance(other, SymInt):
        return other.node
    if isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_)):
        return sympy.Integer(int(other))
    if isinstance(other, (bool, np.bool_)):
        return sympy.Integer(int(other))
    if isinstance(other, sympy.Basic) and other.is_integer:
        return other
    return None


class SymInt:
    """A size that is symbolic in the program being captured: ``x.shape[0]`` under
    ``dynamic=True``. Arithmetic with ints and other SymInts stays symbolic; comparisons and
    ``bool`` are decided with the example sizes and recorded as guards; ``int()``,
    ``operator.index`` (``range(n)``, list indexing) and ``float()`` specialize the size.
    Hashing uses the expression, so sizes can key dicts (signatures of nested regions)."""

    __slots__ = ("node", "env")

    def __init__(self, node: Any, env: SizeOracle):
        self.node = node
        self.env = env

    def _new(self, node: Any) -> Any:
        node = self.env.simplify(node)
        if isinstance(node, int) or node.is_Integer:
            return int(node)
        return SymInt(node, self.env)

    # arithmetic
    def __add__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(self.node + o)

    def __radd__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(o + self.node)

    def __sub__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(self.node - o)

    def __rsub__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(o - self.node)

    def __mul__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(self.node * o)

    def __rmul__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else self._new(o * self.node)

    def _nonzero_divisor(self, o: Any) -> None:
        if o.is_Integer:
            if o == 0:
                raise ZeroDivisionError("integer division or modulo by zero")
        elif not self.env.decide(sympy.Ne(o, 0), "division by a size"):
            raise ZeroDivisionError("integer division or modulo by zero")

    def __floordiv__(self, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        self._nonzero_divisor(o)
        return self._new(sympy.floor(self.node / o))

    def __rfloordiv__(self, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        self._nonzero_divisor(self.node)
        return self._new(sympy.floor(o / self.node))

    def __mod__(self, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        self._nonzero_divisor(o)
        return self._new(sympy.Mod(self.node, o))

    def __rmod__(self, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        self._nonzero_divisor(self.node)
        return self._new(sympy.Mod(o, self.node))

    def __divmod__(self, other: Any) -> Any:
        return (self // other, self % other)

    def __pow__(self, other: Any) -> Any:
        o = _operand(other)
        if o is None or not o.is_Integer or o < 0:
            return float(self) ** other if isinstance(other, float) else int(self) ** other
        return self._new(self.node ** o)

    def __truediv__(self, other: Any) -> float:
        return float(self) / other

    def __rtruediv__(self, other: Any) -> float:
        return other / float(self)

    def __neg__(self) -> Any:
        return self._new(-self.node)

    def __pos__(self) -> SymInt:
        return self

    def __abs__(self) -> Any:
        if self.env.decide(sympy.Ge(self.node, 0), "abs() of a size"):
            return self
        return -self

    # comparisons: decided now, recorded as guards
    def _cmp(self, rel: Any, other: Any, why: str) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        return self.env.decide(rel(self.node, o), why)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        o = _operand(other)
        if o is None:
            return False if not isinstance(other, (float, np.floating)) else float(self) == other
        return self.env.decide(sympy.Eq(self.node, o), "== on a size")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        r = self.__eq__(other)
        return not r

    def __lt__(self, other: Any) -> Any:
        return self._cmp(sympy.Lt, other, "< on a size")

    def __le__(self, other: Any) -> Any:
        return self._cmp(sympy.Le, other, "<= on a size")

    def __gt__(self, other: Any) -> Any:
        return self._cmp(sympy.Gt, other, "> on a size")

    def __ge__(self, other: Any) -> Any:
        return self._cmp(sympy.Ge, other, ">= on a size")

    def __bool__(self) -> bool:
        return self.env.decide(sympy.Ne(self.node, 0), "bool() of a size")

    # becoming a plain int: the size is specialized
    def __index__(self) -> int:
        return self.env.specialize(self.node, "the size was used as a Python int (operator.index)")

    def __int__(self) -> int:
        return self.env.specialize(self.node, "int() of the size")

    def __float__(self) -> float:
        return float(self.env.specialize(self.node, "float() of the size"))

    def __trunc__(self) -> SymInt:
        return self

    def __floor__(self) -> SymInt:
        return self

    def __ceil__(self) -> SymInt:
        return self

    def __round__(self, ndigits: Any = None) -> SymInt:
        return self

    def __hash__(self) -> int:
        # the hash of what the capture knows the size to be now (a specialized size hashes
        # like its int): equal sizes meet in a dict without a decision; only a hash collision
        # asks ``==``, which may record a guard
        return hash(self.env.simplify(self.node))

    def __repr__(self) -> str:
        return str(self.node)

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)
