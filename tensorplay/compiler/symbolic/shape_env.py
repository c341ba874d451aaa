"""The shape environment of one capture: its size symbols, what is known about them, and
the guards a call must satisfy to reuse what was captured.

Every question shape inference or user code asks about a symbolic size is answered with
the example sizes of the capture (the *hints*) and the answer is kept as knowledge:

* a relation that pins a symbol to a constant (``s0 == 5``) *specializes* it: the symbol is
  replaced by the constant everywhere, with the reason recorded and logged;
* ``s1 == s0`` makes the two sizes one symbol (the later one is replaced);
* a bound on one symbol (``s0 > 8``, ``2*s0 <= 10``) narrows its range;
* anything else is kept as a relation, after simplification with what is already known.

A question the ranges already settle records nothing, so guards do not pile up.

Sizes the data decides (the row count of ``tp.nonzero``, the length of ``x[mask]``) are
*unbacked* symbols (``u0``, ``u1``, ...): no input defines them, the compiled program
computes them, and a capture has no example value for them. A question about one that the
known ranges do not settle cannot become a guard: it goes to :attr:`ShapeEnv.on_data_dependent`
(the capture breaks the graph there, or raises under fullgraph), else it raises
:class:`DataDependentSizeError`.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

import sympy

from ...dialects.tp import symbolic as sym
from .._logging import get_logger

__all__ = ["ShapeEnv", "SymbolInfo", "Relation", "Specialization", "ClosedShapeEnvError", "DataDependentSizeError",
           "data_dependent_message"]

_log_guards = get_logger("guards")
_oo = sympy.oo
_serials = itertools.count()


class ClosedShapeEnvError(RuntimeError):
    """A symbolic size was used after the capture that made it had finished."""


class DataDependentSizeError(RuntimeError):
    """A question about a size the data decides (an unbacked symbol) that only the values of
    the tensors could answer, asked where nothing can compute them."""


@dataclass
class SymbolInfo:
    """One size symbol: its example value, where it comes from and its known range."""

    symbol: sympy.Symbol
    hint: int | None  # None: an unbacked size not computed yet
    source: str
    lo: int = 0
    hi: int | None = None
    name: str | None = None  # the dynamic_shapes name, when given one
    unbacked: bool = False  # a size the data decides, computed by the program
    loc: Any = None  # where an unbacked size arose


@dataclass
class Relation:
    """A guard that is neither a range nor a replacement, with why and where it arose."""

    expr: Any
    why: str
    loc: Any = None


@dataclass
class Specialization:
    """A symbol that became a constant (or another symbol), and why."""

    source: str
    value: Any
    why: str
    loc: Any = None


class ShapeEnv:
    """Size symbols of one capture and the knowledge recorded about them."""

    def __init__(self, owner: str = "main"):
        self.owner = owner
        self.infos: dict[sympy.Symbol, SymbolInfo] = {}
        self.replacements: dict[sympy.Symbol, Any] = {}
        self.relations: list[Relation] = []
        self.specializations: list[Specialization] = []
        self.named: dict[str, sympy.Symbol] = {}
        self.closed = False
        self.serial = next(_serials)  # unique for the process (ids of dead envs are reused)
        self._backed = 0
        self._unbacked = 0
        #: ``on_data_dependent(cond, why, symbols)``: called for a question about unbacked
        #: sizes the ranges do not settle; it raises, or computes those sizes (resolve())
        self.on_data_dependent: Any = None

    # -- symbols -------------------------------------------------------------------------
    def create_symbol(self, hint: int, source: str, *, name: str | None = None, lo: int | None = None,
                      hi: int | None = None) -> sympy.Symbol:
        """A new size symbol for a size that is ``hint`` now (a named one is shared)."""
        if name is not None and name in self.named:
            return self.named[name]
        s = sym.size_symbol(f"s{self._backed}")
        self._backed += 1
        self.infos[s] = SymbolInfo(s, int(hint), source, 0 if lo is None else lo, hi, name)
        if name is not None:
            self.named[name] = s
        return s

    def create_unbacked(self, source: str, *, hi: int | None = None, loc: Any = None) -> sympy.Symbol:
        """A new symbol for a size the data decides (``u0``, ``u1``, ...): in ``[0, hi]``,
        with no example value; ``source`` says what it is for messages."""
        s = sym.size_symbol(f"u{self._unbacked}")
        self._unbacked += 1
        self.infos[s] = SymbolInfo(s, None, source, 0, hi, unbacked=True, loc=loc)
        return s

    @classmethod
    def of_unbacked(cls, owner: str, symbols: Any) -> ShapeEnv:
        """An environment that knows ``symbols`` as sizes the data decides (a graph's ``u0``,
        ...), for work on that graph after its capture (a segment's backward)."""
        env = cls(owner)
        for s in sorted(symbols, key=str):
            env.infos[s] = SymbolInfo(s, None, f"a size the data decides ({s})", unbacked=True)
        return env

    def unresolved(self, expr: Any = None) -> list[sympy.Symbol]:
        """The unbacked symbols (of ``expr``, or all) whose values are not known yet."""
        if expr is not None and not isinstance(expr, sympy.Basic):
            return []
        symbols = expr.free_symbols if expr is not None else self.infos
        return [s for s in self.infos if s in symbols and self.infos[s].unbacked
                and self.infos[s].hint is None and s not in self.replacements]

    def resolve(self, s: sympy.Symbol, value: int) -> None:
        """An unbacked size's value, computed by a program that ran (a graph segment): from
        now on it is like an argument's size, with that example value (later segments that
        read it from their inputs keep it symbolic)."""
        self.infos[s].hint = int(value)

    def source(self, s: sympy.Symbol) -> str:
        info = self.infos.get(s)
        return info.source if info is not None else str(s)

    def hints(self) -> dict[sympy.Symbol, int]:
        return {s: sympy.Integer(info.hint) for s, info in self.infos.items() if info.hint is not None}

    def hint(self, expr: Any) -> int:
        """The value of ``expr`` for the example sizes."""
        value = sym.hint_of(sym.as_size(expr), self.hints())
        if value is None:
            raise ValueError(f"{expr} has a symbol with no example value")
        return value

    def size_hint(self, expr: Any, unbacked: int = 64) -> int:
        """:meth:`hint` for cost estimates: an unbacked size counts as ``unbacked`` (or its
        upper bound, when smaller)."""
        e = sym.as_size(expr)
        if isinstance(e, int):
            return e
        fill = {s: sympy.Integer(unbacked if self.infos[s].hi is None else min(unbacked, self.infos[s].hi))
                for s in self.unresolved(e)}
        value = sym.hint_of(e.xreplace(fill) if fill else e, self.hints())
        return unbacked if value is None else value

    def wrap(self, d: Any) -> Any:
        """A shape entry as user code sees it: an int, or a :class:`SymInt`."""
        d = self.simplify(d)
        return d if d is None or isinstance(d, int) else sym.SymInt(d, self)

    def describe(self, expr: Any) -> str:
        """``expr`` with symbols named by their sources (``x.size(0) + 1``)."""
        return sym.size_description(expr, {s: str(s) if info.unbacked else info.source
                                           for s, info in self.infos.items()})

    # -- simplification ---------------------------------------------------------------------
    def simplify(self, expr: Any) -> Any:
        """``expr`` with replacements applied and Min/Max settled by the known ranges."""
        if not isinstance(expr, sympy.Basic):
            return expr
        e = expr.xreplace(self.replacements) if self.replacements else expr
        if e.has(sympy.Min, sympy.Max):
            e = e.replace(lambda x: isinstance(x, (sympy.Min, sympy.Max)), self._settle_minmax)
        return sym.as_size(e) if not isinstance(e, sympy.logic.boolalg.BooleanAtom) and e.is_Integer \
            else e

    def _settle_minmax(self, e: Any) -> Any:
        """Min/Max without the arguments the ranges show can never be the result."""
        is_min = isinstance(e, sympy.Min)

        def covers(b: Any, a: Any) -> bool:  # b always wins over a
            lo, _ = self.bounds(sympy.expand(a - b) if is_min else sympy.expand(b - a))
            return lo >= 0

        keep: list[Any] = []
        for a in e.args:
            if any(covers(b, a) for b in keep):
                continue
            keep = [b for b in keep if not covers(a, b)]
            keep.append(a)
        if len(keep) == len(e.args):
            return e
        return keep[0] if len(keep) == 1 else type(e)(*keep)

    # -- ranges ------------------------------------------------------------------------------
    def bounds(self, expr: Any) -> tuple[Any, Any]:
        """An interval holding every value ``expr`` takes within the known ranges."""
        if isinstance(expr, int):
            return (expr, expr)
        e = expr
        if e.is_Integer or e.is_Rational:
            return (e, e)
        if e.is_Symbol:
            info = self.infos.get(e)
            if info is None:
                return (0, _oo) if e.is_nonnegative else (-_oo, _oo)
            return (info.lo, _oo if info.hi is None else info.hi)
        if isinstance(e, sympy.Add):
            lo, hi = sympy.Integer(0), sympy.Integer(0)
            for a in e.args:
                alo, ahi = self.bounds(a)
                lo, hi = lo + alo, hi + ahi
            return (lo, hi)
        if isinstance(e, sympy.Mul):
            lo, hi = sympy.Integer(1), sympy.Integer(1)
            for a in e.args:
                alo, ahi = self.bounds(a)
                lo, hi = _mul_interval((lo, hi), (alo, ahi))
            return (lo, hi)
        if isinstance(e, sympy.floor):
            lo, hi = self.bounds(e.args[0])
            return (sympy.floor(lo), sympy.floor(hi))
        if isinstance(e, sympy.ceiling):
            lo, hi = self.bounds(e.args[0])
            return (sympy.ceiling(lo), sympy.ceiling(hi))
        if isinstance(e, sympy.Mod):
            n = e.args[1]
            if n.is_Integer and n > 0:
                alo, ahi = self.bounds(e.args[0])
                if alo >= 0 and ahi < n:
                    return (alo, ahi)
                return (sympy.Integer(0), n - 1)
            return (sympy.Integer(0), _oo) if e.args[0].is_nonnegative and n.is_positive else (-_oo, _oo)
        if isinstance(e, (sympy.Max, sympy.Min)):
            pairs = [self.bounds(a) for a in e.args]
            pick = max if isinstance(e, sympy.Max) else min
            return (pick(p[0] for p in pairs), pick(p[1] for p in pairs))
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp >= 0:
            lo, hi = self.bounds(e.base)
            if lo >= 0:
                return (lo ** e.exp, hi ** e.exp)
        return (-_oo, _oo)

    def static_truth(self, cond: Any) -> bool | None:
        """The truth of ``cond`` when the known ranges settle it, else None."""
        if cond is sympy.true or cond is True:
            return True
        if cond is sympy.false or cond is False:
            return False
        if isinstance(cond, sympy.And):
            parts = [self.static_truth(a) for a in cond.args]
            return False if False in parts else (True if all(p is True for p in parts) else None)
        if isinstance(cond, sympy.Or):
            parts = [self.static_truth(a) for a in cond.args]
            return True if True in parts else (False if all(p is False for p in parts) else None)
        if isinstance(cond, sympy.Not):
            inner = self.static_truth(cond.args[0])
            return None if inner is None else not inner
        if not isinstance(cond, sympy.core.relational.Relational):
            return None
        # interval arithmetic loses correlations differently on the factored and the expanded
        # form: both are sound, so keep the tighter ends
        diff = cond.lhs - cond.rhs
        lo, hi = self.bounds(diff)
        elo, ehi = self.bounds(sympy.expand(diff))
        lo, hi = max(lo, elo), min(hi, ehi)
        if isinstance(cond, sympy.Eq):
            if lo == hi == 0:
                return True
            return False if (lo > 0 or hi < 0) else None
        if isinstance(cond, sympy.Ne):
            if lo == hi == 0:
                return False
            return True if (lo > 0 or hi < 0) else None
        if isinstance(cond, sympy.StrictLessThan):
            return True if hi < 0 else (False if lo >= 0 else None)
        if isinstance(cond, sympy.LessThan):
            return True if hi <= 0 else (False if lo > 0 else None)
        if isinstance(cond, sympy.StrictGreaterThan):
            return True if lo > 0 else (False if hi <= 0 else None)
        if isinstance(cond, sympy.GreaterThan):
            return True if lo >= 0 else (False if hi < 0 else None)
        return None

    # -- answering questions --------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedShapeEnvError(
                f"a symbolic size of the capture of {self.owner} was used after that capture "
                f"finished; keep sizes inside the compiled function (or convert them with int() there)")

    def decide(self, cond: Any, why: str = "") -> bool:
        """The truth of ``cond`` for the example sizes; recorded as a guard unless the known
        ranges settle it already."""
        self._check_open()
        if isinstance(cond, bool):
            return cond
        c = cond.xreplace(self.replacements) if self.replacements else cond
        c = self._simplified_minmax(c)
        if c is sympy.true or c is sympy.false:
            return bool(c)
        known = self.static_truth(c)
        if known is not None:
            return known
        pending = self.unresolved(c)
        if pending:
            self._data_dependent(c, why, pending)
            return self.decide(cond, why)
        truth = bool(c.xreplace(self.hints()))
        holding = c if truth else _negate(c)
        self._record(holding, why)
        return truth

    def _simplified_minmax(self, c: Any) -> Any:
        if c.has(sympy.Min, sympy.Max):
            c = c.replace(lambda x: isinstance(x, (sympy.Min, sympy.Max)), self._settle_minmax)
        return c

    def specialize(self, expr: Any, why: str) -> int:
        """``expr`` as a plain int (its example value), guarded to keep that value."""
        self._check_open()
        e = self.simplify(expr)
        if isinstance(e, int):
            return e
        pending = self.unresolved(e)
        if pending:
            self._data_dependent(e, why, pending)
            return self.specialize(expr, why)
        value = self.hint(e)
        self._record(sympy.Eq(e, value), why)
        return value

    def describe_unbacked(self, symbols: list[sympy.Symbol]) -> str:
        """``u0 = the number of nonzero elements (tp.nonzero at f.py:3)``, ... for messages
        (an unbacked symbol's source is its meaning and its op)."""
        parts = []
        for s in symbols:
            info = self.infos[s]
            text = info.source[:-1] + f"{_at(info.loc)})" if info.source.endswith(")") else info.source
            parts.append(f"{s} = {text}")
        return ", ".join(parts)

    def _data_dependent(self, expr: Any, why: str, pending: list[sympy.Symbol]) -> None:
        """``expr`` needs unbacked sizes: the handler computes them (a graph break) or raises."""
        if self.on_data_dependent is not None:
            self.on_data_dependent(expr, why, pending)
            if not self.unresolved(expr):
                return
        raise DataDependentSizeError(data_dependent_message(self, expr, why, pending))

    def _record(self, rel: Any, why: str) -> None:
        loc = _user_loc()
        if isinstance(rel, sympy.core.relational.Relational):
            diff = sympy.expand(rel.lhs - rel.rhs)
            symbols = diff.free_symbols
            if len(symbols) == 1:
                (s,) = symbols
                if s in self.infos and self._record_on_symbol(s, diff, type(rel), why, loc):
                    return
            elif len(symbols) == 2 and isinstance(rel, sympy.Eq):
                a, b = sorted(symbols, key=lambda x: int(x.name[1:]) if x.name[1:].isdigit() else 0)
                if diff in (a - b, b - a) and a in self.infos and b in self.infos:
                    self._unify(b, a, why, loc)
                    return
        for r in self.relations:
            if r.expr == rel:
                return
        self.relations.append(Relation(rel, why, loc))
        if _log_guards.isEnabledFor(logging.INFO):
            _log_guards.info("%s: guard %s (%s)%s", self.owner, self.describe(rel), why, _at(loc))

    def _record_on_symbol(self, s: sympy.Symbol, diff: Any, kind: type, why: str, loc: Any) -> bool:
        """A relation ``diff REL 0`` in one symbol becomes a range or a constant: solved when
        linear, searched when monotone (``s // 2 >= 3`` is ``s >= 6``)."""
        try:
            poly = sympy.Poly(diff, s)
        except sympy.PolynomialError:
            return self._record_monotone(s, diff, kind, why, loc)
        if poly.degree() != 1:
            return self._record_monotone(s, diff, kind, why, loc)
        a, b = (sympy.Integer(c) if not isinstance(c, sympy.Basic) else c for c in poly.all_coeffs())
        if not (a.is_Rational and b.is_Rational):
            return False
        root = -b / a
        info = self.infos[s]
        lo, hi = info.lo, info.hi
        if kind is sympy.Eq:
            if not root.is_Integer:
                return False
            self._specialize_to(s, int(root), why, loc)
            return True
        if kind is sympy.Ne:
            if not root.is_Integer:
                return True  # always true for integers
            if int(root) == lo:
                lo += 1
            elif hi is not None and int(root) == hi:
                hi -= 1
            else:
                return False
        else:
            flip = a < 0
            less = kind in (sympy.StrictLessThan, sympy.LessThan)
            strict = kind in (sympy.StrictLessThan, sympy.StrictGreaterThan)
            if flip:
                less = not less
            if less:  # s < root or s <= root
                bound = int(sympy.ceiling(root)) - 1 if strict else int(sympy.floor(root))
                hi = bound if hi is None else min(hi, bound)
            else:
                bound = int(sympy.floor(root)) + 1 if strict else int(sympy.ceiling(root))
                lo = max(lo, bound)
        self._set_range(s, lo, hi, why, loc)
        return True

    def _record_monotone(self, s: sympy.Symbol, diff: Any, kind: type, why: str, loc: Any) -> bool:
        direction = _monotone(diff, s)
        if direction not in (1, -1) or kind is sympy.Ne:
            return False
        f = diff if direction == 1 else -diff
        if direction == -1:
            kind = _FLIPPED.get(kind, kind)
        info = self.infos[s]

        def value(v: int) -> int:
            out = f.xreplace({s: sympy.Integer(v)})
            return int(out) if out.is_Integer else None

        if value(info.hint) is None:
            return False
        tests = {sympy.GreaterThan: lambda v: value(v) >= 0, sympy.StrictGreaterThan: lambda v: value(v) > 0,
                 sympy.LessThan: lambda v: value(v) <= 0, sympy.StrictLessThan: lambda v: value(v) < 0}
        lo, hi = info.lo, info.hi
        if kind in (sympy.GreaterThan, sympy.StrictGreaterThan, sympy.Eq):
            holds = tests[sympy.GreaterThan if kind is sympy.Eq else kind]
            lo = max(lo, _first_true(holds, lo, info.hint))
        if kind in (sympy.LessThan, sympy.StrictLessThan, sympy.Eq):
            holds = tests[sympy.LessThan if kind is sympy.Eq else kind]
            last = _last_true(holds, info.hint, hi)
            hi = last if hi is None else (hi if last is None else min(hi, last))
        self._set_range(s, lo, hi, why, loc)
        if kind is sympy.Eq and self.static_truth(sympy.Eq(f, 0)) is not True:
            return False  # the range is necessary, not sufficient: keep the relation too
        return True

    def _set_range(self, s: sympy.Symbol, lo: int, hi: int | None, why: str, loc: Any) -> None:
        info = self.infos[s]
        if (lo, hi) == (info.lo, info.hi):
            return
        info.lo, info.hi = lo, hi
        if hi is not None and lo == hi:
            self._specialize_to(s, lo, why, loc)
            return
        if _log_guards.isEnabledFor(logging.INFO):
            _log_guards.info("%s: guard %s in [%d, %s] (%s)%s", self.owner, info.source, lo,
                             "inf" if hi is None else hi, why, _at(loc))
        self._prune_relations()

    def _specialize_to(self, s: sympy.Symbol, value: int, why: str, loc: Any) -> None:
        info = self.infos[s]
        self.specializations.append(Specialization(info.source, value, why, loc))
        if _log_guards.isEnabledFor(logging.INFO):
            _log_guards.info("%s: %s specialized to %d: %s%s", self.owner, info.source, value, why, _at(loc))
        self._replace(s, sympy.Integer(value))

    def _unify(self, newer: sympy.Symbol, older: sympy.Symbol, why: str, loc: Any) -> None:
        a, b = self.infos[older], self.infos[newer]
        self.specializations.append(Specialization(b.source, older, why, loc))
        if _log_guards.isEnabledFor(logging.INFO):
            _log_guards.info("%s: guard %s == %s (%s)%s", self.owner, b.source, a.source, why, _at(loc))
        lo = max(a.lo, b.lo)
        hi = b.hi if a.hi is None else (a.hi if b.hi is None else min(a.hi, b.hi))
        self._replace(newer, older)
        self._set_range(older, lo, hi, why, loc)

    def _replace(self, s: sympy.Symbol, value: Any) -> None:
        self.replacements = {k: v.xreplace({s: value}) for k, v in self.replacements.items()}
        self.replacements[s] = value
        self._prune_relations()

    def _prune_relations(self) -> None:
        kept: list[Relation] = []
        for r in self.relations:
            e = r.expr.xreplace(self.replacements)
            truth = e if e in (sympy.true, sympy.false) else self.static_truth(e)
            if truth is True or truth is sympy.true:
                continue
            if truth is False or truth is sympy.false:
                raise AssertionError(f"shape guard {e} contradicts what the capture recorded")
            if any(k.expr == e for k in kept):
                continue
            kept.append(Relation(e, r.why, r.loc))
        self.relations = kept

    def specialize_all(self, why: str) -> None:
        """Make every remaining symbol with an example value that value (unbacked sizes not
        computed yet stay symbols)."""
        for s in self.free():
            if self.infos[s].hint is not None:
                self._specialize_to(s, self.infos[s].hint, why, None)

    # -- the end of the capture -------------------------------------------------------------
    def close(self) -> None:
        self.closed = True

    def free(self) -> list[sympy.Symbol]:
        """Symbols not replaced by anything: the sizes still symbolic."""
        return [s for s in self.infos if s not in self.replacements]


def data_dependent_message(env: ShapeEnv, expr: Any, why: str, symbols: list[sympy.Symbol]) -> str:
    """Why a question about sizes the data decides cannot be answered, in the user's words."""
    plural = len(symbols) > 1
    return (f"{why or 'a question about a size'} ({env.describe(expr)}) depends on "
            f"{env.describe_unbacked(symbols)}: {'sizes' if plural else 'a size'} the data decides, known "
            f"only when the compiled program runs, so no guard can answer it")


_FLIPPED = {sympy.GreaterThan: sympy.LessThan, sympy.LessThan: sympy.GreaterThan,
            sympy.StrictGreaterThan: sympy.StrictLessThan, sympy.StrictLessThan: sympy.StrictGreaterThan}


def _monotone(e: Any, s: sympy.Symbol) -> int:
    """1 when ``e`` never decreases as ``s`` grows, -1 when it never increases, 2 when it does
    not depend on ``s``, 0 when unknown."""
    if s not in e.free_symbols:
        return 2
    if e == s:
        return 1
    if isinstance(e, (sympy.Add, sympy.Max, sympy.Min)):
        dirs = {_monotone(a, s) for a in e.args} - {2}
        return dirs.pop() if len(dirs) == 1 and 0 not in dirs else 0
    if isinstance(e, sympy.Mul):
        const = [a for a in e.args if s not in a.free_symbols]
        rest = [a for a in e.args if s in a.free_symbols]
        c = sympy.Mul(*const)
        if len(rest) != 1 or not c.is_Rational or c == 0:
            return 0
        d = _monotone(rest[0], s)
        return d if c > 0 else -d if d in (1, -1) else 0
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        return _monotone(e.args[0], s)
    return 0


def _first_true(holds: Any, lo: int, hint: int) -> int:
    """The smallest v in [lo, hint] where the monotone test ``holds`` (true at hint)."""
    a, b = lo, hint
    while a < b:
        m = (a + b) // 2
        if holds(m):
            b = m
        else:
            a = m + 1
    return a


def _last_true(holds: Any, hint: int, hi: int | None) -> int | None:
    """The largest v >= hint where ``holds`` (true at hint) still holds; None when it holds
    for every size (up to ``hi`` or 2**40)."""
    cap = hi if hi is not None else 2 ** 40
    step, a = 1, hint
    b = None
    while a + step <= cap:
        if not holds(a + step):
            b = a + step
            break
        a += step
        step *= 2
    if b is None:
        if hi is None or holds(cap):
            return hi
        b = cap
    while b - a > 1:  # holds(a), not holds(b)
        m = (a + b) // 2
        if holds(m):
            a = m
        else:
            b = m
    return a


def _negate(c: Any) -> Any:
    if isinstance(c, sympy.core.relational.Relational):
        return c.negated
    return sympy.Not(c)


def _mul_interval(x: tuple[Any, Any], y: tuple[Any, Any]) -> tuple[Any, Any]:
    products = []
    for a in x:
        for b in y:
            products.append(sympy.Integer(0) if (a == 0 or b == 0) else a * b)
    return (min(products), max(products))


def _user_loc() -> Any:
    from ..capture.user_frames import user_loc

    try:
        return user_loc(3)
    except ValueError:
        return None


def _at(loc: Any) -> str:
    return f" at {loc}" if loc is not None else ""
