"""Seeded random tensor programs, compiled and compared with eager tensorplay and PyTorch.

:func:`generate` builds program ``index`` of a ``seed``: one to three input tensors and a
chain (a DAG: later statements may use any earlier value) of frontend calls drawn from the
op families of the op table (elementwise math, broadcasting, comparisons and logic,
``where``, casts, reductions with ``keepdim``, softmax/log_softmax/logsumexp, cumsum, matmul,
reshape/permute/slicing/cat/stack/split/expand) over float32, float16, bfloat16, int32,
int64 and bool, with sizes 0 and 1 among the others. Every value's shape and dtype is
tracked while generating, so each program is type-correct by construction; the tracked
types are checked against eager results too.

Each value also carries a bound on its magnitude and a rule giving how far any faithful
implementation (one that rounds each op's result to its dtype, computing half types in
float32, as eager tensorplay and PyTorch do) can be from the exact result, from its operands'
magnitudes and errors. The generator evaluates the rules with the magnitude bounds; the
comparison evaluates them again with the magnitudes an eager run measured (:func:`measure`,
:meth:`Program.errors`), and a float element passes within four units of roundoff of the
reference element plus twice that bound: the tolerance grows with what the chain can lose (a
float16 sum of 60 terms gets more room than one add) and follows the values, not the bound
of the program; integers and bools compare exactly, NaN positions must match. Ops whose
result jumps on a rounding difference (comparisons, casts to integers, floor, argmax,
conditions) only take exact values (inputs, and values computed without rounding from
them), so two correct implementations can never disagree on them.

:func:`run` executes programs in three variants, each compared with eager tensorplay
(running the function uncompiled) and with PyTorch where installed:

- ``static``: ``tp.compile(f, fullgraph=True)``;
- ``dynamic``: ``tp.compile(f, fullgraph=True, dynamic=True)``;
- ``break``: the program with a graph break inserted in the middle (``float(t)``,
  ``t.item()``, ``int(t)`` or a data-dependent ``if``, whose value the rest of the program
  uses), compiled with ``fullgraph=False``.

Programs are compiled in groups (one function computing several programs, each on its own
inputs, returning each program's outputs) to share IREE compiles; a group that fails is run
again program by program, so every failure is attributed to one program and reported with
a self-contained reproducer. ``python -m tests.fuzz.programs --count N --seed S`` runs
long campaigns; ``--index I`` reruns one program.
"""

from __future__ import annotations

import argparse
import linecache
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import tensorplay as tp
from tests.opinfo import to_numpy

try:
    import torch
except ImportError:  # the comparison with PyTorch is skipped
    torch = None

__all__ = ["Value", "Stmt", "Program", "Failure", "Report", "VARIANTS", "DTYPES", "generate", "run",
           "run_group", "tolerance", "main"]

FLOATS = (tp.float32, tp.float16, tp.bfloat16)
INTS = (tp.int32, tp.int64)
DTYPES = FLOATS + INTS + (tp.bool,)

#: the compile keywords of each variant (every run adds isolate_recompiles=True)
VARIANTS = {
    "static": {"fullgraph": True},
    "dynamic": {"fullgraph": True, "dynamic": True},
    "break": {},
}

#: the backend the programs compile for (``--backend``; None: tp.compile's default) and the factor
#: that multiplies the first and last dims of each new input shape (``--scale``: sizes where IREE
#: vectorizes, hundreds of rows; the programs are the same, larger)
BACKEND: str | None = None
SCALE = 1

#: unit roundoff of each float dtype
_UNIT = {tp.float32: 2.0 ** -24, tp.float16: 2.0 ** -11, tp.bfloat16: 2.0 ** -8}
_U32 = _UNIT[tp.float32]
#: error of a float32 math function (exp, tanh, erf, ...), relative to a bound of its result
_LIBM = 16 * _U32
_MAX_FLOAT = 1e4
_MAX_INT = 2 ** 24
_MAX_NUMEL = 256
#: a value whose error bound passes this fraction of its magnitude bound is not produced
_MAX_REL_ERR = 0.03

#: how program inputs are made; the reproducers carry this text
PREAMBLE = '''\
def arg(seed, shape, dtype, nan=0.0):
    """Random input: floats in [-3, 3) (a fraction `nan` of them NaN), ints in [-9, 10),
    bools half true."""
    rng = np.random.default_rng(seed)
    if dtype == tp.bool:
        return tp.tensor(np.asarray(rng.random(shape) < 0.5))
    if dtype in (tp.int32, tp.int64):
        return tp.tensor(np.asarray(rng.integers(-9, 10, size=shape))).to(dtype)
    a = np.asarray(rng.uniform(-3, 3, size=shape))
    if nan:
        a = np.where(rng.random(shape) < nan, np.nan, a)
    return tp.tensor(a.astype(np.float32)).to(dtype)
'''


# --- types ----------------------------------------------------------------------------------

def _is_float(d: Any) -> bool:
    return d in _UNIT


def _kind(d: Any) -> int:
    return 0 if d is tp.bool else 1 if d in INTS else 2


def promote(a: Any, b: Any) -> Any:
    """PyTorch's pairwise promotion over DTYPES."""
    if a is b:
        return a
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return a if ka > kb else b
    return tp.int64 if ka == 1 else tp.float32


def _combine(higher: Any, lower: Any) -> Any:
    """Promotion across priority groups (dimensioned tensors, 0-d tensors, Python numbers):
    a lower group only matters when it brings a higher category."""
    if higher is None:
        return lower
    if lower is None or _is_float(higher):
        return higher
    if higher is tp.bool or _is_float(lower):
        return promote(higher, lower)
    return higher


def result_type(*operands: Any) -> Any:
    """The result dtype of an elementwise op over Values and Python numbers."""
    dim = zero = wrapped = None
    for o in operands:
        if isinstance(o, Value):
            if o.shape:
                dim = o.dtype if dim is None else promote(dim, o.dtype)
            else:
                zero = o.dtype if zero is None else promote(zero, o.dtype)
        else:
            d = tp.bool if isinstance(o, bool) else tp.int64 if isinstance(o, int) else tp.float32
            wrapped = d if wrapped is None else promote(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The broadcast shape, or None where the shapes do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _rnd(dtype: Any, mag: float) -> float:
    """Error of computing a result of magnitude ``mag`` in float32 and rounding it to dtype."""
    return (_U32 + _UNIT[dtype]) * mag if _is_float(dtype) else 0.0


def _same(a: Value, mag: float) -> float:
    """The error rule of an op that moves or selects elements without computing: ``a``'s."""
    return a.err


# --- programs -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Value:
    """A tensor of a program: its type, a bound on the magnitude of its (non-NaN) elements,
    a bound on the error of any faithful implementation (0: computed without rounding, so
    every implementation gives the same elements) and whether it may hold NaN."""

    name: str
    shape: tuple[int, ...]
    dtype: Any
    mag: float
    err: float = 0.0
    nan: bool = False
    #: how ``err`` follows from the operands: ``rule(*operands, mag)`` gives the error bound
    #: from the operands' magnitudes and errors and this value's magnitude. The generator
    #: calls it with the bounds; :meth:`Program.errors` again with the magnitudes a run
    #: measured, for the tolerances. None: ``err`` is fixed (0 for inputs and non-floats).
    rule: Callable[..., float] | None = field(default=None, compare=False, repr=False)
    operands: tuple[Value, ...] = field(default=(), compare=False, repr=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def exact(self) -> bool:
        return self.err == 0.0

    @property
    def is_float(self) -> bool:
        return _is_float(self.dtype)

    def describe(self) -> str:
        return f"{self.name} ({self.dtype.name}, {list(self.shape)})"


@dataclass(frozen=True)
class Stmt:
    """Source lines defining ``out`` from the values named ``uses``; ``op`` names the
    template (for coverage counts)."""

    lines: tuple[str, ...]
    out: Value | None
    uses: tuple[str, ...]
    op: str


@dataclass(frozen=True)
class Input:
    value: Value
    seed: int
    nan: float = 0.0

    def expr(self) -> str:
        nan = f", nan={self.nan}" if self.nan else ""
        return f"arg({self.seed}, {self.value.shape}, tp.{self.value.dtype.name}{nan})"


@dataclass(frozen=True)
class Program:
    seed: int
    index: int
    inputs: tuple[Input, ...]
    body: tuple[Stmt, ...]
    outputs: tuple[Value, ...]
    #: the break variant: ``prep`` ends the first ``split`` statements, ``brk`` (the break and
    #: the statement using its value) follows, then the rest of the body
    split: int
    prep: Stmt
    brk: Stmt

    def statements(self, variant: str) -> tuple[list[Stmt], list[Stmt], list[Stmt]]:
        """The statements before, at and after the graph break of ``variant``."""
        if variant != "break":
            return list(self.body), [], []
        return list(self.body[:self.split]) + [self.prep], [self.brk], list(self.body[self.split:])

    def results(self, variant: str) -> tuple[Value, ...]:
        return self.outputs + ((self.brk.out,) if variant == "break" else ())

    def source(self, variant: str, *, every: bool = False) -> str:
        """The program as a function ``f`` of its inputs returning a tuple of its outputs
        (``every``: a dict of all its values, inputs included)."""
        first, mid, rest = self.statements(variant)
        lines = [f"def f({', '.join(i.value.name for i in self.inputs)}):"]
        lines += ["    " + line for s in first + mid + rest for line in s.lines]
        if every:
            lines.append(f"    return {{{', '.join(f'{v.name!r}: {v.name}' for v in self.values())}}}")
        else:
            names = [v.name for v in self.results(variant)]
            lines.append(f"    return ({', '.join(names)},)")
        return "\n".join(lines) + "\n"

    def values(self) -> list[Value]:
        """Every value in the order computed: inputs, the body's, the break variant's."""
        return [i.value for i in self.inputs] + [s.out for s in self.body] + [self.brk.out]

    def errors(self, mags: Mapping[str, float]) -> dict[str, float]:
        """The error bound of every value, from the rules of :attr:`Value.rule` evaluated with
        the magnitudes ``mags`` (the largest ``|element|`` of each value in one run, NaN
        ignored) in place of the generator's bounds on them."""
        errs: dict[str, float] = {}
        views: dict[str, Value] = {}
        ops = {s.out.name: s.op for s in self.body}
        for v in self.values():
            m = mags[v.name]
            e = v.err
            if ops.get(v.name) == "sub" and len({o.name for o in v.operands}) == 1:
                # a value less itself is 0 (or NaN) in every implementation (the generator's
                # bound, which chose the program, does not know it: kept as it was)
                e = 0.0
            elif v.rule is not None:
                operands = [views[o.name] for o in v.operands]
                e = v.rule(*operands, m)
                e = v.rule(*operands, m + e)  # the exact result may be that much larger
            errs[v.name] = e
            views[v.name] = replace(v, mag=m + e, err=e)
        return errs

    def args_source(self) -> str:
        return f"({', '.join(i.expr() for i in self.inputs)},)"

    @property
    def ops(self) -> list[str]:
        return [s.op for s in self.body]


_NAME = re.compile(r"\b([xvcs]\d+)\b")


def _renamed(lines: Iterable[str], prefix: str) -> list[str]:
    return [_NAME.sub(lambda m: prefix + m.group(1), line) for line in lines]


def group_source(programs: Sequence[Program], variant: str) -> str:
    """One function ``f`` computing every program on its own inputs (names prefixed ``pK_``),
    returning one tuple of outputs per program. In the break variant every program's first
    part runs before the breaks, so the group breaks its graph once: the later conversions
    read tensors that the first break made concrete."""
    parts = [p.statements(variant) for p in programs]
    params = [f"p{k}_{i.value.name}" for k, p in enumerate(programs) for i in p.inputs]
    lines = [f"def f({', '.join(params)}):"]
    for stage in range(3):
        for k, part in enumerate(parts):
            lines += ["    " + line for s in part[stage] for line in _renamed(s.lines, f"p{k}_")]
    outs = [f"({', '.join(f'p{k}_{v.name}' for v in p.results(variant))},)" for k, p in enumerate(programs)]
    lines.append(f"    return ({', '.join(outs)},)")
    return "\n".join(lines) + "\n"


# --- generation -----------------------------------------------------------------------------

def _dt(d: Any) -> str:
    return f"tp.{d.name}"


def _conv(v: Value, d: Any) -> float:
    """Error of ``v`` converted to ``d`` for an op computing in ``d``: widening and rounding
    exact values are deterministic, rounding an inexact float adds a rounding."""
    if not v.is_float or v.exact or not _is_float(d) or d is v.dtype:
        return v.err
    widening = d is tp.float32
    return v.err if widening else v.err + _UNIT[d] * v.mag


def _scalar(s: Any) -> str:
    return repr(s)


def _dims_str(dims: Sequence[int]) -> str:
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(map(str, dims))})"


def _factor(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


# IREE 3.13 computes a reduction over the last dim of a splat wrongly (tp.ones_like(x).sum()
# of a (7, 5) x gives 5.0; (x == x).sum() of integers gives 2, its canonicalizer having made
# the comparison a splat): not a tensorplay bug, so programs avoid the folds that make splats
# of computed values (an integer or bool value compared with, subtracted from or xor-ed with
# itself) instead of reporting it again and again.
_SPLAT_FOLDS = "x == x, x - x, x ^ x, logical_xor(x, x) on integers and bools; ~x == x, x | ~x, ..."

# Templates: (method, family, weight). Each method returns the new Value (committed) or None
# when it does not apply to the values at hand.
TEMPLATES = (
    ("unary_math", "elementwise", 9),
    ("unary_exact", "elementwise", 6),
    ("binary", "elementwise", 14),
    ("binary_scalar", "elementwise", 5),
    ("compare", "compare/logical", 5),
    ("logical", "compare/logical", 3),
    ("where", "where", 5),
    ("cast", "cast", 7),
    ("reduce", "reduction", 10),
    ("softmax", "softmax", 7),
    ("cumsum", "cumsum", 3),
    ("matmul", "matmul", 6),
    ("reshape", "shape", 6),
    ("permute", "shape", 4),
    ("index", "shape", 6),
    ("cat", "shape", 5),
    ("expand", "shape", 2),
)


class _Builder:
    def __init__(self, seed: int, index: int):
        self.seed, self.index = seed, index
        self.rng = np.random.default_rng([seed, index])
        self.inputs: list[Input] = []
        self.values: list[Value] = []
        self.body: list[Stmt] = []
        self.count = 0
        #: value name -> the name of the bool value it negates (see _SPLAT_FOLDS)
        self.negates: dict[str, str] = {}
        self._tmpl = [t for t, _, _ in TEMPLATES]
        w = np.array([w for _, _, w in TEMPLATES], dtype=float)
        self._tmpl_p = w / w.sum()

    # random helpers
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def pick(self, pred: Callable[[Value], bool] | None = None,
             among: Sequence[Value] | None = None) -> Value | None:
        """A value satisfying ``pred``, recent ones likelier (so programs form chains)."""
        cands = [v for v in (self.values if among is None else among) if pred is None or pred(v)]
        if not cands:
            return None
        w = np.arange(1, len(cands) + 1, dtype=float) ** 2
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def dim(self, v: Value) -> int:
        """A dim of ``v`` (0 or -1 for a 0-d tensor), negative half the time."""
        r = max(v.rank, 1)
        d = int(self.rng.integers(r))
        return d - r if self.chance(0.5) else d

    def dims(self, v: Value, *, single: bool = False, allow_all: bool = True) -> tuple[int, ...] | None:
        """None (all dims), one dim or a tuple of distinct dims of ``v``."""
        roll = self.rng.random()
        if allow_all and roll < 0.25:
            return None
        if single or v.rank <= 1 or roll < 0.65:
            return (self.dim(v),)
        k = int(self.rng.integers(2, v.rank + 1))
        picked = sorted(self.rng.choice(v.rank, size=k, replace=False).tolist())
        return tuple(d - v.rank if self.chance(0.3) else d for d in picked)

    # inputs
    def shape(self) -> tuple[int, ...]:
        rank = self.choice((0, 1, 1, 2, 2, 2, 3, 3, 3, 4))
        sizes = (1, 1, 2, 3, 3, 4, 5, 6, 7) if rank < 4 else (1, 2, 3)
        shape = [0 if self.chance(0.04) else self.choice(sizes) for _ in range(rank)]
        return tuple(s * SCALE if i in (0, rank - 1) else s for i, s in enumerate(shape))

    def related(self, base: tuple[int, ...]) -> tuple[int, ...]:
        """A shape broadcasting with ``base``: leading dims dropped, some dims 1."""
        drop = int(self.rng.integers(len(base) + 1)) if self.chance(0.5) else 0
        return tuple(1 if self.chance(0.4) else s for s in base[drop:])

    def dtype(self) -> Any:
        return DTYPES[int(self.rng.choice(len(DTYPES), p=[0.3, 0.15, 0.15, 0.12, 0.13, 0.15]))]

    def make_inputs(self) -> None:
        n = self.choice((1, 1, 2, 2, 2, 3, 3))
        base, main = self.shape(), self.dtype()
        for i in range(n):
            if i == 0 or self.chance(0.45):
                shape = base
            else:
                shape = self.related(base) if self.chance(0.7) else self.shape()
            dtype = main if self.chance(0.6) else self.dtype()
            nan = 0.2 if _is_float(dtype) and self.chance(0.08) else 0.0
            mag = 3.0 if _is_float(dtype) else 9.0 if dtype in INTS else 1.0
            value = Value(f"x{i}", shape, dtype, mag, 0.0, nan > 0)
            self.inputs.append(Input(value, int(self.rng.integers(2 ** 31)), nan))
            self.values.append(value)

    def folds(self, a: Value, b: Value) -> bool:
        """Whether comparing or combining ``a`` with ``b`` folds to a splat (_SPLAT_FOLDS)."""
        if a.is_float or b.is_float:
            return False
        return a is b or self.negates.get(a.name) == b.name or self.negates.get(b.name) == a.name

    # committing a statement
    def emit(self, rhs: str, shape: Sequence[int], dtype: Any, mag: float,
             err: float | Callable[..., float] = 0.0, nan: bool = False, *, op: str, uses: Sequence[Value],
             args: Sequence[Value] | None = None) -> Value | None:
        """Commit ``out = rhs``; ``err`` is a fixed bound or a rule ``err(*args, mag)`` over the
        operands ``args`` (default: ``uses``), see :attr:`Value.rule`."""
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) > _MAX_NUMEL:
            return None
        if dtype is tp.bool:
            mag = 1.0
        rule, operands = None, ()
        if callable(err):
            rule, operands = err, tuple(uses if args is None else args)
            err = rule(*operands, mag)
        if _is_float(dtype):
            if not mag <= _MAX_FLOAT or err > _MAX_REL_ERR * max(mag, 1.0):
                return None
        elif not mag <= _MAX_INT:
            return None
        else:
            err, rule, operands = 0.0, None, ()
        value = Value(f"v{self.count}", shape, dtype, float(mag), float(err), nan, rule, operands)
        self.count += 1
        self.values.append(value)
        self.body.append(Stmt((f"{value.name} = {rhs}",), value, tuple(u.name for u in uses), op))
        return value

    # --- elementwise ---
    _MATH = {
        # name: (forms, Lipschitz constant on |x| <= m, bound of the result, largest m, int/bool inputs)
        "exp": (("tp.exp({a})", "{a}.exp()"), math.exp, math.exp, 4.0, True),
        "tanh": (("tp.tanh({a})", "{a}.tanh()"), lambda m: 1.0, lambda m: 1.0, None, False),
        "sigmoid": (("tp.sigmoid({a})", "{a}.sigmoid()"), lambda m: 0.25, lambda m: 1.0, None, False),
        "sin": (("tp.sin({a})", "{a}.sin()"), lambda m: 1.0, lambda m: 1.0, 8.0, False),
        "cos": (("tp.cos({a})", "{a}.cos()"), lambda m: 1.0, lambda m: 1.0, 8.0, False),
        "atan": (("tp.atan({a})", "{a}.atan()"), lambda m: 1.0, lambda m: math.pi / 2, None, False),
        "erf": (("tp.erf({a})", "{a}.erf()"), lambda m: 1.13, lambda m: 1.0, None, False),
        "gelu": (("tp.nn.functional.gelu({a})", "tp.nn.functional.gelu({a}, approximate='tanh')"),
                 lambda m: 1.13, lambda m: m, None, False),
        "silu": (("tp.nn.functional.silu({a})",), lambda m: 1.1, lambda m: m, None, False),
        "log": (("tp.log({a}.abs() + 1)", "({a}.abs() + 1).log()"), lambda m: 1.0,
                lambda m: math.log(m + 1), None, True),
        "sqrt": (("tp.sqrt({a}.abs())", "{a}.abs().sqrt()"), None, math.sqrt, None, True),
    }

    def t_unary_math(self) -> Value | None:
        a = self.pick()
        name = self.choice(sorted(self._MATH))
        forms, lip, bound, limit, ints = self._MATH[name]
        if not a.is_float and not ints or a.dtype is tp.bool and name != "exp":
            return None
        if limit is not None and a.mag > limit:
            return None
        out = a.dtype if a.is_float else tp.float32

        def err(a: Value, mag: float) -> float:
            e = a.err
            if name == "log" and a.is_float:  # |a| + 1 rounds first
                e += _rnd(a.dtype, a.mag + 1)
            prop = math.sqrt(e) if lip is None else lip(a.mag) * e
            # the function's error scales with its bound at |a|, not with the result: gelu(-2)
            # = -2 * (1 + erf(-1.41)) / 2 loses to cancellation what erf gets wrong at 1
            return prop + _LIBM * max(mag, bound(a.mag)) + _rnd(out, mag)

        return self.emit(self.choice(forms).format(a=a.name), a.shape, out, bound(a.mag), err, a.nan,
                         op=name, uses=[a])

    def t_unary_exact(self) -> Value | None:
        a = self.pick()
        if a.dtype is tp.bool:
            rhs = self.choice(("~{a}", "tp.logical_not({a})", "{a}.logical_not()")).format(a=a.name)
            out = self.emit(rhs, a.shape, tp.bool, 1, op="not", uses=[a])
            if out is not None:
                self.negates[out.name] = a.name
            return out
        name = self.choice(("abs", "neg", "relu", "clamp", "sign", "rounding", "square"))
        if name == "abs":
            rhs, mag = self.choice(("{a}.abs()", "tp.abs({a})")), a.mag
        elif name == "neg":
            rhs, mag = self.choice(("-{a}", "tp.neg({a})")), a.mag
        elif name == "relu":
            rhs, mag = self.choice(("{a}.relu()", "tp.relu({a})")), a.mag
        elif name == "clamp":
            lo, hi = sorted(self.rng.choice([-2, -1, 0, 1, 2, 3], size=2, replace=False).tolist())
            if a.is_float:
                lo, hi = lo / 2, hi / 2
            form = self.choice(("tp.clamp({a}, {lo}, {hi})", "{a}.clamp(min={lo})", "{a}.clamp(max={hi})"))
            rhs, mag = form.replace("{lo}", str(lo)).replace("{hi}", str(hi)), a.mag + abs(lo) + abs(hi)
        elif name == "sign":
            # tp.sign keeps NaN (docs/dialect.md), PyTorch's gives 0
            if not a.exact or a.nan:
                return None
            rhs, mag = self.choice(("tp.sign({a})", "{a}.sign()")), 1.0
        elif name == "rounding":
            if not (a.is_float and a.exact):
                return None
            fn = self.choice(("floor", "ceil", "round", "trunc"))
            rhs, mag = self.choice((f"tp.{fn}({{a}})", f"{{a}}.{fn}()")), a.mag + 1
        else:
            if a.is_float:
                return None  # square of floats is unary_math's
            rhs, mag = self.choice(("tp.square({a})", "{a} * {a}")), a.mag * a.mag
        return self.emit(rhs.format(a=a.name), a.shape, a.dtype, mag, _same, a.nan, op=name, uses=[a])

    def t_binary(self) -> Value | None:
        a = self.pick()
        b = None
        if self.chance(0.5):  # broadcasting: another shape
            b = self.pick(lambda v: v.shape != a.shape and broadcast(a.shape, v.shape) is not None)
        if b is None:
            b = self.pick(lambda v: broadcast(a.shape, v.shape) is not None)
        shape = broadcast(a.shape, b.shape)
        name = self.choice(("add", "sub", "mul", "maximum", "minimum", "div", "floor_divide", "remainder"))
        bools = a.dtype is tp.bool or b.dtype is tp.bool
        if bools and name in ("sub", "maximum", "minimum") or a.dtype is tp.bool and b.dtype is tp.bool \
                and name not in ("add", "mul"):
            return None
        if name in ("div", "floor_divide", "remainder") and b.dtype is tp.bool:
            return None
        if name == "sub" and self.folds(a, b):
            return None  # folds to a splat: see _SPLAT_FOLDS
        if name in ("floor_divide", "remainder") and not (a.dtype in INTS and b.dtype in INTS):
            return None
        forms = {
            "add": ("{a} + {b}", "tp.add({a}, {b})", "{a}.add({b})"),
            "sub": ("{a} - {b}", "tp.sub({a}, {b})"),
            "mul": ("{a} * {b}", "tp.mul({a}, {b})", "{a}.mul({b})"),
            "maximum": ("tp.maximum({a}, {b})", "{a}.maximum({b})"),
            "minimum": ("tp.minimum({a}, {b})", "{a}.minimum({b})"),
            "div": ("{a} / ({b}.abs() + 1)", "tp.div({a}, {b}.abs() + 1)"),
            "floor_divide": ("{a} // ({b}.abs() + 1)", "tp.floor_divide({a}, {b}.abs() + 1)"),
            "remainder": ("{a} % ({b}.abs() + 1)", "tp.remainder({a}, {b}.abs() + 1)"),
        }[name]
        rhs = self.choice(forms).format(a=a.name, b=b.name)
        nan = a.nan or b.nan
        if name in ("div", "floor_divide", "remainder"):
            def denominator(b: Value) -> Value:  # |b| + 1, rounded to b's dtype
                return Value("", b.shape, b.dtype, b.mag + 1, b.err + _rnd(b.dtype, b.mag + 1))

            d = result_type(a, denominator(b))
            if name == "div":
                d = d if _is_float(d) else tp.float32

                def quotient(a: Value, b: Value, mag: float) -> float:
                    ea = _conv(a, d)
                    return ea + (a.mag + ea) * _conv(denominator(b), d) + _rnd(d, mag)

                return self.emit(rhs, shape, d, a.mag, quotient, nan, op=name, uses=[a, b])
            mag = a.mag if name == "floor_divide" else b.mag + 1
            return self.emit(rhs, shape, d, mag, op=name, uses=[a, b])
        d = result_type(a, b)

        def err(a: Value, b: Value, mag: float) -> float:
            ea, eb = _conv(a, d), _conv(b, d)
            if name in ("maximum", "minimum"):
                return max(ea, eb)
            if name == "mul":
                return a.mag * eb + b.mag * ea + ea * eb + _rnd(d, mag)
            return ea + eb + _rnd(d, mag)

        mag = max(a.mag, b.mag) if name in ("maximum", "minimum") else a.mag * b.mag if name == "mul" \
            else a.mag + b.mag
        family = name if a.shape == b.shape else f"{name} broadcast"
        return self.emit(rhs, shape, d, mag, err, nan, op=family, uses=[a, b])

    def t_binary_scalar(self) -> Value | None:
        a = self.pick()
        c = self.choice((2, 3, -1, 0.5, 1.5, -2.5, 0.25))
        name = self.choice(("add", "radd", "sub", "rsub", "mul", "rmul"))
        if a.dtype is tp.bool and name in ("sub", "rsub"):
            return None
        form = {"add": ("{a} + {c}", "tp.add({a}, {c})"), "radd": ("{c} + {a}",),
                "sub": ("{a} - {c}", "{a}.sub({c})"), "rsub": ("{c} - {a}",),
                "mul": ("{a} * {c}", "tp.mul({a}, {c})"), "rmul": ("{c} * {a}",)}[name]
        rhs = self.choice(form).format(a=a.name, c=_scalar(c))
        d = result_type(a, c)
        if d is tp.bool:
            return None
        scale = abs(c) if name.endswith("mul") else 1.0

        def err(a: Value, mag: float) -> float:
            return scale * _conv(a, d) + _rnd(d, mag)

        mag = a.mag * abs(c) if name.endswith("mul") else a.mag + abs(c)
        return self.emit(rhs, a.shape, d, mag, err, a.nan, op=f"{name} scalar", uses=[a])

    def t_compare(self) -> Value | None:
        a = self.pick(lambda v: v.exact)
        if a is None:
            return None
        ops = ("==", "!=") if a.dtype is tp.bool else ("<", "<=", ">", ">=", "==", "!=")
        if self.chance(0.4) and a.dtype is not tp.bool:
            # thresholds every dtype holds exactly
            b_name = _scalar(self.choice((0, 0.5, -1, 1.5, 2) if a.is_float or self.chance(0.3) else (0, 1, -2, 3)))
            shape, uses = a.shape, [a]
        else:
            b = self.pick(lambda v: v.exact and broadcast(a.shape, v.shape) is not None
                          and (v.dtype is tp.bool) == (a.dtype is tp.bool) and not self.folds(a, v))
            if b is None:
                return None
            b_name, shape, uses = b.name, broadcast(a.shape, b.shape), [a, b]
        op = self.choice(ops)
        fn = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}[op]
        form = self.choice(("{a} {op} {b}", "tp.{fn}({a}, {b})", "{a}.{fn}({b})"))
        rhs = form.format(a=a.name, b=b_name, op=op, fn=fn)
        return self.emit(rhs, shape, tp.bool, 1, op="compare", uses=uses)

    def t_logical(self) -> Value | None:
        a = self.pick(lambda v: v.exact)
        if a is None:
            return None
        b = self.pick(lambda v: v.exact and v is not a and not self.folds(a, v)
                      and broadcast(a.shape, v.shape) is not None)
        if b is None:
            return None
        shape = broadcast(a.shape, b.shape)
        if a.is_float or b.is_float or self.chance(0.5):
            fn = self.choice(("logical_and", "logical_or", "logical_xor"))
            rhs = self.choice(("tp.{fn}({a}, {b})", "{a}.{fn}({b})")).format(fn=fn, a=a.name, b=b.name)
            return self.emit(rhs, shape, tp.bool, 1, op="logical", uses=[a, b])
        op = self.choice(("&", "|", "^"))
        d = result_type(a, b)
        mag = 2.0 ** math.ceil(math.log2(max(a.mag, b.mag) + 1))
        return self.emit(f"{a.name} {op} {b.name}", shape, d, mag, op="bitwise", uses=[a, b])

    def t_where(self) -> Value | None:
        c = self.pick(lambda v: v.dtype is tp.bool)
        if c is None or self.chance(0.3):
            e = self.pick(lambda v: v.exact and v.dtype is not tp.bool)
            if e is None:
                return None
            c_name, c_uses = f"{e.name} > 0", [e]
            c = Value("", e.shape, tp.bool, 1)
        else:
            c_name, c_uses = c.name, [c]
        a = self.pick(lambda v: broadcast(c.shape, v.shape) is not None)
        if a is None:
            return None
        if self.chance(0.3):
            b = self.choice((0, 1, 0.5, -1.5))
            b_name, b_uses, shape = _scalar(b), [], broadcast(c.shape, a.shape)
            d = result_type(a, b)
            mag, nan, args = max(a.mag, abs(b)), a.nan, [a]
        else:
            b = self.pick(lambda v: broadcast(c.shape, a.shape, v.shape) is not None)
            if b is None:
                return None
            b_name, b_uses, shape = b.name, [b], broadcast(c.shape, a.shape, b.shape)
            d = result_type(a, b)
            mag, nan, args = max(a.mag, b.mag), a.nan or b.nan, [a, b]
        rhs = f"tp.where({c_name}, {a.name}, {b_name})"
        if c_name == c.name and b_uses and self.chance(0.3):
            rhs = f"{a.name}.where({c_name}, {b_name})"

        def err(*operands: Value) -> float:  # the branches, then the magnitude
            return max(_conv(v, d) for v in operands[:-1])

        return self.emit(rhs, shape, d, mag, err, nan, op="where", uses=c_uses + [a] + b_uses, args=args)

    _CAST_METHODS = {tp.float32: "float", tp.float16: "half", tp.bfloat16: "bfloat16", tp.int32: "int",
                     tp.int64: "long", tp.bool: "bool"}

    def t_cast(self) -> Value | None:
        a = self.pick()
        d = self.choice([t for t in DTYPES if t is not a.dtype])
        if a.is_float and not _is_float(d):
            if not a.exact or a.nan and d is not tp.bool:
                return None  # rounding differences and NaN would jump
        mag = math.floor(a.mag) if a.is_float and d in INTS else a.mag

        def err(a: Value, mag: float) -> float:
            return _conv(a, d) if a.is_float and _is_float(d) else 0.0

        rhs = f"{a.name}.to({_dt(d)})" if self.chance(0.5) else f"{a.name}.{self._CAST_METHODS[d]}()"
        return self.emit(rhs, a.shape, d, mag, err, a.nan and _is_float(d), op="cast", uses=[a])

    # --- reductions ---
    def _reduced(self, a: Value, dims: tuple[int, ...] | None, keepdim: bool) -> tuple[tuple[int, ...], int]:
        """The result shape and the number of elements reduced into each result element."""
        if a.rank == 0:
            return (), 1
        axes = range(a.rank) if dims is None else {d % a.rank for d in dims}
        n = math.prod(a.shape[d] for d in axes)
        if keepdim:
            return tuple(1 if i in axes else s for i, s in enumerate(a.shape)), n
        return tuple(s for i, s in enumerate(a.shape) if i not in axes), n

    @staticmethod
    def _dim_arg(dims: tuple[int, ...]) -> str:
        return str(dims[0]) if len(dims) == 1 else _dims_str(dims)

    def t_reduce(self) -> Value | None:
        a = self.pick()
        name = self.choice(("sum", "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any"))
        single = name in ("max", "min", "argmax", "argmin")
        dims = self.dims(a, single=single, allow_all=name not in ("max", "min") or self.chance(0.5))
        keepdim = dims is not None and self.chance(0.4)
        shape, n = self._reduced(a, dims, keepdim)
        kd = ", keepdim=True" if keepdim else ""
        if dims is None:
            call = self.choice((f"{a.name}.{{fn}}()", f"tp.{{fn}}({a.name})"))
        else:
            dim = self._dim_arg(dims)
            call = self.choice((f"{a.name}.{{fn}}({dim}{kd})", f"tp.{{fn}}({a.name}, dim={dim}{kd})"))
        if name in ("sum", "mean"):
            if name == "mean" and not a.is_float:
                return None
            d = a.dtype if a.is_float else tp.int64
            if name == "sum":
                def err(a: Value, mag: float) -> float:  # n terms, each at most a.mag
                    return n * a.err + n * n * _U32 * a.mag + _rnd(d, mag)

                mag = n * a.mag
            else:
                def err(a: Value, mag: float) -> float:
                    return a.err + n * _U32 * a.mag + _rnd(d, mag)

                mag = a.mag
            nan = a.nan or (name == "mean" and n == 0 and math.prod(shape) > 0)
            return self.emit(call.format(fn=name), shape, d, mag, err, nan, op=name, uses=[a])
        if name in ("all", "any"):
            if not a.exact:
                return None
            return self.emit(call.format(fn=name), shape, tp.bool, 1, op=name, uses=[a])
        if a.dtype is tp.bool or n == 0 or a.numel == 0 and dims is None:
            return None  # extrema of nothing are errors
        if name in ("argmax", "argmin"):
            if not a.exact:
                return None  # a rounding difference could move the index
            return self.emit(call.format(fn=name), shape, tp.int64, max(a.numel, 1), op=name, uses=[a])
        if name in ("max", "min") and dims is not None:
            dim = self._dim_arg(dims)
            rhs = self.choice((f"tp.{name}({a.name}, {dim}{kd}).values", f"{a.name}.{name}(dim={dim}{kd})[0]"))
        else:
            rhs = call.format(fn=name)
        return self.emit(rhs, shape, a.dtype, a.mag, _same, a.nan, op="amax/amin" if name[0] == "a" else name,
                         uses=[a])

    def t_softmax(self) -> Value | None:
        a = self.pick(lambda v: v.is_float)
        if a is None:
            return None
        name = self.choice(("softmax", "log_softmax", "logsumexp"))
        if name == "logsumexp":
            dims = self.dims(a, allow_all=False)
            keepdim = self.chance(0.4)
            shape, n = self._reduced(a, dims, keepdim)
            if n == 0 and math.prod(shape) > 0:
                return None  # -inf
            dim = self._dim_arg(dims)
            kd = ", keepdim=True" if keepdim else ""
            rhs = self.choice((f"tp.logsumexp({a.name}, {dim}{kd})", f"{a.name}.logsumexp(dim={dim}{kd})"))
            def lse(a: Value, mag: float) -> float:
                # max(a) + log(sum(exp(a - max(a)))): math on values up to |a| + log(n)
                return a.err + _LIBM * (a.mag + math.log(max(n, 1))) + _rnd(a.dtype, mag)

            return self.emit(rhs, shape, a.dtype, a.mag + math.log(max(n, 1)), lse, a.nan, op=name, uses=[a])
        d = self.dim(a)
        forms = (f"tp.{name}({a.name}, dim={d})", f"{a.name}.{name}({d})",
                 f"tp.nn.functional.{name}({a.name}, dim={d})")
        log_n = math.log(max(a.shape[d] if a.shape else 1, 1))

        def err(a: Value, mag: float) -> float:
            # exp(a - max(a)) is at most 1; log_softmax's a - max(a) - log(sum) at most 2|a| + log(n)
            inner = 1.0 if name == "softmax" else max(2 * a.mag + log_n, 1.0)
            return 2 * a.err + _LIBM * inner + _rnd(a.dtype, mag)

        mag = 1.0 if name == "softmax" else 2 * a.mag + log_n
        return self.emit(self.choice(forms), a.shape, a.dtype, mag, err, a.nan, op=name, uses=[a])

    def t_cumsum(self) -> Value | None:
        a = self.pick()
        d = self.dim(a)
        n = a.shape[d] if a.shape else 1
        out = a.dtype if a.is_float else tp.int64

        def err(a: Value, mag: float) -> float:
            return n * a.err + n * n * _U32 * a.mag + _rnd(out, mag)

        rhs = self.choice((f"tp.cumsum({a.name}, dim={d})", f"{a.name}.cumsum({d})"))
        return self.emit(rhs, a.shape, out, n * a.mag, err, a.nan, op="cumsum", uses=[a])

    # --- matmul ---
    def t_matmul(self) -> Value | None:
        a = self.pick(lambda v: v.rank >= 1 and v.dtype is not tp.bool)
        if a is None:
            return None
        k = a.shape[-1]
        options = []
        for b in self.values:
            if b.dtype is tp.bool or a.is_float != b.is_float:
                continue
            if b.rank == 1 and b.shape[0] == k:
                options.append((b, b.name, b.shape))
            if b.rank >= 2 and b.shape[-2] == k:
                options.append((b, b.name, b.shape))
            if b.rank >= 2 and b.shape[-1] == k:
                options.append((b, f"{b.name}.transpose(-2, -1)", b.shape[:-2] + (b.shape[-1], b.shape[-2])))
        if not options:
            return None
        b, b_name, b_shape = options[int(self.rng.integers(len(options)))]
        if a.rank == 1 and len(b_shape) == 1:
            shape = ()
        elif len(b_shape) == 1:
            shape = a.shape[:-1]
        elif a.rank == 1:
            shape = b_shape[:-2] + b_shape[-1:]
        else:
            batch = broadcast(a.shape[:-2], b_shape[:-2])
            if batch is None:
                return None
            shape = batch + (a.shape[-2], b_shape[-1])
        if b.dtype is not a.dtype:  # matmul takes one dtype
            b_name = f"{b_name}.to({_dt(a.dtype)})"
        rhs = self.choice((f"{a.name} @ {b_name}", f"tp.matmul({a.name}, {b_name})"))

        def err(a: Value, b: Value, mag: float) -> float:  # k products, each at most |a| |b|
            eb = _conv(b, a.dtype) if b.dtype is not a.dtype else b.err
            return k * (a.mag * eb + b.mag * a.err + a.err * eb) + k * k * _U32 * a.mag * b.mag + _rnd(a.dtype, mag)

        return self.emit(rhs, shape, a.dtype, k * a.mag * b.mag, err, a.nan or b.nan, op="matmul", uses=[a, b])

    # --- shapes ---
    def _new_shape(self, numel: int) -> tuple[int, ...]:
        if numel == 0:
            dims = [self.choice((1, 2, 3)) for _ in range(int(self.rng.integers(0, 3)))]
            dims.insert(int(self.rng.integers(len(dims) + 1)), 0)
            return tuple(dims)
        rank = int(self.rng.integers(0 if numel == 1 else 1, 5))
        if rank == 0:
            return ()
        dims = [1] * rank
        for p in _factor(numel):
            dims[int(self.rng.integers(rank))] *= p
        return tuple(dims)

    def t_reshape(self) -> Value | None:
        a = self.pick()
        name = self.choice(("reshape", "reshape", "flatten", "unsqueeze", "squeeze"))
        if name == "reshape":
            shape = self._new_shape(a.numel)
            spec = list(shape)
            if shape and a.numel > 0 and self.chance(0.3):
                spec[int(self.rng.integers(len(spec)))] = -1
            if not spec:
                rhs = f"{a.name}.reshape(())"
            elif self.chance(0.5):
                rhs = f"{a.name}.reshape({', '.join(map(str, spec))})"
            else:
                rhs = f"tp.reshape({a.name}, {_dims_str(spec)})"
        elif name == "flatten":
            if a.rank <= 1:
                rhs, shape = f"{a.name}.flatten()", (a.numel,)
            else:
                start = int(self.rng.integers(a.rank))
                end = int(self.rng.integers(start, a.rank))
                shape = a.shape[:start] + (math.prod(a.shape[start:end + 1]),) + a.shape[end + 1:]
                rhs = self.choice((f"{a.name}.flatten({start}, {end})", f"tp.flatten({a.name}, {start}, {end})"))
                if end == a.rank - 1 and self.chance(0.5):
                    rhs = f"{a.name}.flatten({start})"
        elif name == "unsqueeze":
            d = int(self.rng.integers(-a.rank - 1, a.rank + 1))
            pos = d % (a.rank + 1)
            shape = a.shape[:pos] + (1,) + a.shape[pos:]
            rhs = self.choice((f"{a.name}.unsqueeze({d})", f"tp.unsqueeze({a.name}, {d})"))
        else:
            if a.rank == 0 or self.chance(0.3):
                rhs, shape = f"{a.name}.squeeze()", tuple(s for s in a.shape if s != 1)
            else:
                d = self.dim(a)
                shape = a.shape if a.shape[d] != 1 else a.shape[:d % a.rank] + a.shape[d % a.rank + 1:]
                rhs = f"{a.name}.squeeze({d})"
        return self.emit(rhs, shape, a.dtype, a.mag, _same, a.nan, op=name, uses=[a])

    def t_permute(self) -> Value | None:
        a = self.pick(lambda v: v.rank >= 2)
        if a is None:
            return None
        name = self.choice(("permute", "transpose", "t"))
        if name == "t" and a.rank == 2:
            rhs, shape = f"{a.name}.t()", a.shape[::-1]
        elif name == "permute":
            perm = self.rng.permutation(a.rank).tolist()
            shape = tuple(a.shape[p] for p in perm)
            rhs = self.choice((f"{a.name}.permute({', '.join(map(str, perm))})",
                               f"tp.permute({a.name}, {_dims_str(perm)})"))
        else:
            d0, d1 = self.rng.choice(a.rank, size=2, replace=False).tolist()
            s = list(a.shape)
            s[d0], s[d1] = s[d1], s[d0]
            shape = tuple(s)
            if self.chance(0.5):
                d0 -= a.rank
            rhs = self.choice((f"{a.name}.transpose({d0}, {d1})", f"tp.transpose({a.name}, {d0}, {d1})"))
        return self.emit(rhs, shape, a.dtype, a.mag, _same, a.nan, op="permute", uses=[a])

    def _index_item(self, n: int) -> tuple[str, int | None]:
        """An index of a dim of size ``n`` and the resulting size (None: the dim is dropped)."""
        roll = self.rng.random()
        if roll < 0.2 and n > 0:
            i = int(self.rng.integers(-n, n))
            return str(i), None
        if roll < 0.35:
            return ":", n
        start = int(self.rng.integers(-n - 1, n + 2)) if self.chance(0.7) else None
        stop = int(self.rng.integers(-n - 1, n + 2)) if self.chance(0.6) else None
        step = self.choice((2, 3)) if self.chance(0.3) else None
        size = len(range(*slice(start, stop, step).indices(n)))
        text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
        if step is not None:
            text += f":{step}"
        return text, size

    def t_index(self) -> Value | None:
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        name = self.choice(("getitem", "getitem", "narrow", "flip", "split", "chunk"))
        if name == "getitem":
            m = int(self.rng.integers(1, a.rank + 1))
            trailing = m < a.rank and self.chance(0.4)
            dims = range(a.rank - m, a.rank) if trailing else range(m)
            items, shape = [], []
            for d in dims:
                text, size = self._index_item(a.shape[d])
                items.append(text)
                if size is not None:
                    shape.append(size)
            if trailing:
                items.insert(0, "...")
                shape = list(a.shape[:a.rank - m]) + shape
            else:
                shape += list(a.shape[m:])
            if self.chance(0.2):
                # None inserts a dim at its place among the kept and explicit dims
                at = int(self.rng.integers(len(items) + 1))
                before = items[:at]
                kept = sum(1 for t in before if t != "..." and ":" in t)
                if "..." in before:
                    kept += a.rank - m
                items.insert(at, "None")
                shape.insert(kept, 1)
            rhs = f"{a.name}[{', '.join(items)}]"
        elif name == "narrow":
            d = self.dim(a)
            n = a.shape[d]
            start = int(self.rng.integers(n + 1))
            length = int(self.rng.integers(n - start + 1))
            shape = list(a.shape)
            shape[d] = length
            rhs = self.choice((f"{a.name}.narrow({d}, {start}, {length})",
                               f"tp.narrow({a.name}, {d}, {start}, {length})"))
        elif name == "flip":
            dims = self.dims(a, allow_all=False)
            shape = a.shape
            rhs = self.choice((f"{a.name}.flip({', '.join(map(str, dims))})", f"tp.flip({a.name}, {_dims_str(dims)})"))
        else:
            d = self.dim(a)
            n = a.shape[d]
            shape = list(a.shape)
            if name == "split":
                k = int(self.rng.integers(1, max(n, 1) + 2))
                pieces = max(-(-n // k), 1)
                i = int(self.rng.integers(pieces))
                shape[d] = min(k, n - i * k)
                if self.chance(0.3):
                    i -= pieces
                rhs = self.choice((f"tp.split({a.name}, {k}, dim={d})[{i}]", f"{a.name}.split({k}, {d})[{i}]"))
            else:
                if n == 0:
                    return None
                c = int(self.rng.integers(1, n + 2))
                size = -(-n // c)
                i = int(self.rng.integers(-(-n // size)))
                shape[d] = min(size, n - i * size)
                rhs = self.choice((f"{a.name}.chunk({c}, {d})[{i}]", f"tp.chunk({a.name}, {c}, dim={d})[{i}]"))
        return self.emit(rhs, shape, a.dtype, a.mag, _same, a.nan, op=name, uses=[a])

    def t_cat(self) -> Value | None:
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        name = self.choice(("cat", "cat", "stack"))
        if name == "cat":
            d = self.dim(a)
            ax = d % a.rank
            fits = [v for v in self.values if v.rank == a.rank
                    and all(s == t for i, (s, t) in enumerate(zip(v.shape, a.shape)) if i != ax)]
            parts = [a] + [self.pick(among=fits) for _ in range(int(self.rng.integers(1, 3)))]
            shape = list(a.shape)
            shape[ax] = sum(p.shape[ax] for p in parts)
            names = ", ".join(p.name for p in parts)
            rhs = self.choice((f"tp.cat([{names}], dim={d})", f"tp.cat(({names}), {d})"))
        else:
            fits = [v for v in self.values if v.shape == a.shape and v.dtype is a.dtype]
            parts = [a] + [self.pick(among=fits) for _ in range(int(self.rng.integers(1, 3)))]
            d = int(self.rng.integers(-a.rank - 1, a.rank + 1))
            pos = d % (a.rank + 1)
            shape = list(a.shape[:pos]) + [len(parts)] + list(a.shape[pos:])
            rhs = f"tp.stack([{', '.join(p.name for p in parts)}], {d})"
        d_out = parts[0].dtype
        for p in parts[1:]:
            d_out = promote(d_out, p.dtype)

        def err(*operands: Value) -> float:  # the parts, then the magnitude
            return max(_conv(p, d_out) for p in operands[:-1])

        mag = max(p.mag for p in parts)
        return self.emit(rhs, shape, d_out, mag, err, any(p.nan for p in parts), op=name, uses=parts)

    def t_expand(self) -> Value | None:
        a = self.pick()
        lead = [self.choice((1, 2, 3))] if a.rank < 3 and self.chance(0.4) else []
        sizes = [self.choice((2, 3, 4)) if s == 1 and self.chance(0.7) else s for s in a.shape]
        shape = tuple(lead + sizes)
        if shape == a.shape:
            return None
        if self.chance(0.5):
            spec = lead + [-1 if s == t and self.chance(0.5) else s for s, t in zip(sizes, a.shape)]
            rhs = f"{a.name}.expand({', '.join(map(str, spec))})" if spec else f"{a.name}.expand(())"
        else:
            rhs = f"tp.broadcast_to({a.name}, {_dims_str(shape)})"
        return self.emit(rhs, shape, a.dtype, a.mag, _same, a.nan, op="expand", uses=[a])

    # --- the graph break ---
    def graph_break(self) -> tuple[int, Stmt, Stmt]:
        """Where the break variant breaks, the tensor it reads (``c0``, computed before the
        break) and the break with the statement that uses the Python value it gives."""
        split = int(self.rng.integers(1, len(self.body))) if len(self.body) > 1 else 1
        early = [i.value for i in self.inputs] + [s.out for s in self.body[:split]]
        out = f"v{self.count}"
        kind = self.choice(("float", "item", "int", "if"))
        numeric = [v for v in early if v.dtype is not tp.bool]
        exact = [v for v in early if v.exact]
        if kind == "if" and numeric and exact:
            j = self.pick(among=exact)
            cond = f"{j.name}.any()" if j.dtype is tp.bool else f"({j.name} > 0).any()"
            prep = Stmt((f"c0 = {cond}",), None, (j.name,), "break")
            a = self.pick(among=numeric)
            test = self.choice(("bool(c0)", "c0", "c0.item()"))
            def doubled(a: Value, mag: float) -> float:
                return 2 * a.err + _rnd(a.dtype, mag)

            mag = max(2 * a.mag, a.mag + 1)
            v = Value(out, a.shape, a.dtype, mag, doubled(a, mag), a.nan, doubled if a.is_float else None, (a,))
            lines = (f"if {test}:", f"    {out} = {a.name} * 2", "else:", f"    {out} = {a.name} - 1")
            return split, prep, Stmt(lines, v, (a.name,), "break if")
        ints = [v for v in early if not v.is_float]
        a = self.pick(among=early)
        if kind == "int" and ints:
            j = self.pick(among=ints)
            prep = Stmt((f"c0 = {j.name}.sum()",), None, (j.name,), "break")
            s_mag, conv, s = j.numel * j.mag, "int(c0)", 1
        else:
            j = self.pick(among=early)
            fn = "mean" if j.numel else "sum"
            prep = Stmt((f"c0 = {j.name}.float().{fn}()",), None, (j.name,), "break")
            s_mag = j.mag
            conv, s = ("float(c0)" if kind != "item" else "c0.item()"), 1.0
        d = result_type(a, s)

        def shifted(a: Value, j: Value, mag: float) -> float:  # a + s0, s0 the (float) mean of j
            s_err = 0.0 if isinstance(s, int) else _conv(j, tp.float32) + j.numel * _U32 * j.mag + 2 * _U32 * j.mag
            return _conv(a, d) + s_err + _rnd(d, mag)

        mag = a.mag + s_mag
        v = Value(out, a.shape, d, mag, shifted(a, j, mag), a.nan or j.nan, shifted if _is_float(d) else None,
                  (a, j))
        lines = (f"s0 = {conv}", f"{out} = {a.name} + s0")
        return split, prep, Stmt(lines, v, (a.name,), f"break {kind if kind != 'if' else 'float'}")

    def build(self) -> Program:
        self.make_inputs()
        target = int(self.rng.integers(3, 11))
        for _ in range(200):
            if len(self.body) >= target:
                break
            name = self._tmpl[int(self.rng.choice(len(self._tmpl), p=self._tmpl_p))]
            getattr(self, "t_" + name)()
        used = {u for s in self.body for u in s.uses}
        outputs = tuple(s.out for s in self.body if s.out.name not in used)
        split, prep, brk = self.graph_break()
        return Program(self.seed, self.index, tuple(self.inputs), tuple(self.body), outputs, split, prep, brk)


def generate(seed: int, index: int) -> Program:
    """Program ``index`` of ``seed``: the same pair always gives the same program."""
    return _Builder(seed, index).build()


# --- comparing ------------------------------------------------------------------------------

def tolerance(value: Value, err: float | None = None) -> tuple[float, float]:
    """(rtol, atol) for comparing ``value`` between two implementations: exact for integers
    and bools; for floats, relative to each element four units of roundoff of the dtype (each
    side may round it differently) and, absolute, twice the value's error bound ``err`` (each
    side may be that far from the exact result): :meth:`Program.errors` gives it from the
    magnitudes a run measured; without it, the generator's bound ``value.err``."""
    if not value.is_float:
        return 0.0, 0.0
    return 4 * _UNIT[value.dtype], 2 * (value.err if err is None else err)


def measure(p: Program) -> dict[str, float] | None:
    """The largest ``|element|`` (NaN ignored, 0 for empty values) of every value of ``p`` in
    an eager run of its break variant, which computes all of them; None if that run raises."""
    filename = f"<fuzz {p.seed}:{p.index} measure>"
    fn = _define(p.source("break", every=True), tp, filename)
    try:
        got = fn(*_args(p, tp))
    except Exception:  # noqa: BLE001 - the eager run reports it
        return None
    finally:
        linecache.cache.pop(filename, None)
    mags = {}
    for name, t in got.items():
        a = np.asarray(to_numpy(t), dtype=np.float64)
        a = np.abs(a[np.isfinite(a)])
        mags[name] = float(a.max()) if a.size else 0.0
    return mags


def _dtype_name(t: Any) -> str:
    return str(t.dtype).rsplit(".", 1)[-1]


def compare(got: Any, want: Any, value: Value, err: float | None = None) -> str | None:
    """None if ``got`` matches ``want`` (results of either library) for ``value`` (whose error
    bound is ``err``, see :func:`tolerance`), else why not."""
    if _dtype_name(got) != _dtype_name(want) or tuple(got.shape) != tuple(want.shape):
        return f"{_dtype_name(got)} {list(got.shape)} vs {_dtype_name(want)} {list(want.shape)}"
    g, w = np.asarray(to_numpy(got)), np.asarray(to_numpy(want))
    if not value.is_float:
        bad = g != w
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return f"{int(bad.sum())} of {bad.size} elements differ, first at {at}: {g[at]} vs {w[at]}"
        return None
    g, w = g.astype(np.float64), w.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    if (gn != wn).any():
        at = tuple(int(i) for i in np.argwhere(gn != wn)[0])
        return f"NaN positions differ ({int(gn.sum())} vs {int(wn.sum())} NaNs), first at {at}: {g[at]} vs {w[at]}"
    rtol, atol = tolerance(value, err)
    with np.errstate(invalid="ignore"):
        diff = np.where(gn | (g == w), 0.0, np.abs(g - w))
    bad = diff > atol + rtol * np.abs(w)
    if bad.any():
        at = tuple(int(i) for i in np.unravel_index(np.argmax(np.where(bad, diff, -1)), bad.shape))
        return (f"{int(bad.sum())} of {bad.size} elements differ, most at {at}: {g[at]!r} vs {w[at]!r} "
                f"(|diff| {diff[at]:.3g} > atol {atol:.3g} + rtol {rtol:.3g} * |want|)")
    return None


# --- running --------------------------------------------------------------------------------

@dataclass
class Failure:
    """One program whose results disagree (or that raised) in one variant."""

    program: Program
    #: "static", "dynamic", "break" (compiled), "eager" or "torch" (the uncompiled runs)
    variant: str
    message: str
    #: for "eager" and "torch": which source ran, "static" (the program) or "break"
    source: str = "static"
    #: the programs compiled together, where the program alone does not fail
    group: tuple[Program, ...] = ()
    #: each value's error bound from measured magnitudes (Program.errors), for the tolerances
    errors: Mapping[str, float] | None = None

    def reproducer(self) -> str:
        """A script that reruns the failing comparison on its own."""
        p = self.program
        variant = self.source if self.variant in ("eager", "torch") else self.variant
        errors = self.errors or {}
        tols = ", ".join(f"({r:.4g}, {a:.4g})" for r, a in (tolerance(v, errors.get(v.name))
                                                             for v in p.results(variant)))
        types = ", ".join(f"({v.dtype.name!r}, {v.shape})" for v in p.results(variant))
        kw = "".join(f", {k}={v!r}" for k, v in VARIANTS[variant].items())
        lines = [f"# tensorplay fuzz program: seed {p.seed}, index {p.index}, {self.variant}",
                 f"# rerun: python -m tests.fuzz.programs --seed {p.seed} --index {p.index}",
                 "import numpy as np", "", "import tensorplay as tp", "", "", PREAMBLE, "",
                 p.source(variant), "",
                 "def make_args():", f"    return {p.args_source()}", "", "",
                 f"TOLERANCES = [{tols}]  # (rtol, atol) of each output", "", "",
                 "def check(got, want):",
                 "    for g, w, (rtol, atol) in zip(got, want, TOLERANCES):",
                 "        assert (str(g.dtype), tuple(g.shape)) == (str(w.dtype), tuple(w.shape))",
                 "        np.testing.assert_allclose(g.double().detach().numpy(), w.double().detach().numpy(), rtol=rtol, "
                 "atol=atol, equal_nan=True)",
                 "", "", "want = f(*make_args())"]
        if self.variant == "eager":
            # eager raised, or gave other types than the generator's rules: the types, then
            # the compiled program against eager
            lines += [f"TYPES = [{types}]  # (dtype, shape) of each output by PyTorch's rules",
                      "assert [(str(w.dtype).rsplit('.', 1)[-1], tuple(w.shape)) for w in want] == TYPES",
                      f"check(tp.compile(f{kw})(*make_args()), want)"]
        elif self.variant == "torch":
            lines += ["import torch as tp  # noqa: E402  - the same program on PyTorch",
                      "check(f(*make_args()), want)"]
        else:
            lines.append(f"check(tp.compile(f{kw})(*make_args()), want)")
        return "\n".join(lines) + "\n"

    def report(self) -> str:
        p = self.program
        lines = [f"seed {p.seed} index {p.index} [{self.variant}]: {self.message}"]
        if self.group:
            lines.append("only when compiled together with programs "
                         + ", ".join(str(q.index) for q in self.group if q is not p)
                         + f" (the group's source:)\n{group_source(self.group, self.variant)}")
        lines += [f"rerun: python -m tests.fuzz.programs --seed {p.seed} --index {p.index}",
                  "reproducer:", self.reproducer()]
        return "\n".join(lines)


@dataclass
class Report:
    programs: int = 0
    runs: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    ops: Counter = field(default_factory=Counter)
    dtypes: Counter = field(default_factory=Counter)

    def add(self, other: Report) -> None:
        self.programs += other.programs
        self.runs.update(other.runs)
        self.failures += other.failures
        self.ops.update(other.ops)
        self.dtypes.update(other.dtypes)


def _define(source: str, lib: Any, filename: str) -> Callable[..., Any]:
    """``f`` of ``source``, with ``tp`` bound to ``lib`` (tensorplay or torch); the source is
    registered with linecache so that messages quote its lines."""
    ns: dict[str, Any] = {"tp": lib, "np": np}
    exec(PREAMBLE, ns)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)
    return ns["f"]


def _args(p: Program, lib: Any) -> tuple[Any, ...]:
    ns: dict[str, Any] = {"tp": lib, "np": np}
    exec(PREAMBLE, ns)
    return eval(p.args_source(), ns)


def _error() -> str:
    return traceback.format_exc(limit=-6).rstrip()


def _check(p: Program, results: tuple[Value, ...], got: Any, want: Any, what: str,
           errors: Mapping[str, float] | None = None) -> list[str]:
    out = []
    if not isinstance(got, tuple) or len(got) != len(results):
        return [f"{what}: expected a tuple of {len(results)} results, got {type(got).__name__}"]
    for i, (v, g, w) in enumerate(zip(results, got, want)):
        msg = compare(g, w, v, None if errors is None else errors[v.name])
        if msg:
            out.append(f"{what}: output {i} {v.describe()}: {msg}")
    return out


def _eager(p: Program, variant: str, lib: Any) -> tuple[Any, str | None]:
    fn = _define(p.source(variant), lib, f"<fuzz {p.seed}:{p.index} {variant}>")
    try:
        got = fn(*_args(p, lib))
    except Exception:  # noqa: BLE001 - reported as a failure
        return None, f"raised:\n{_error()}"
    finally:
        linecache.cache.pop(f"<fuzz {p.seed}:{p.index} {variant}>", None)
    results = p.results(variant)
    for i, (v, g) in enumerate(zip(results, got)):
        if (_dtype_name(g), tuple(g.shape)) != (v.dtype.name, v.shape):
            return got, (f"output {i} {v.describe()} came out {_dtype_name(g)} {list(g.shape)} "
                         f"(the generator's type rules disagree)")
    return got, None


def run_group(programs: Sequence[Program], *, use_torch: bool = True,
              variants: Sequence[str] = tuple(VARIANTS)) -> Report:
    """Run ``programs`` eagerly (and on PyTorch) and compiled in each variant, compiled
    together; every disagreement becomes a Failure of one program."""
    report = Report(programs=len(programs))
    lib_torch = torch if use_torch else None
    wants: dict[tuple[int, str], Any] = {}
    errors: dict[int, dict[str, float]] = {}
    live = []
    for p in programs:
        report.ops.update(p.ops)
        report.dtypes.update(i.value.dtype.name for i in p.inputs)
        ok = True
        mags = measure(p)
        errs = errors[p.index] = p.errors(mags) if mags is not None else None
        for family in ("static", "break"):
            label = " (break variant)" if family == "break" else ""
            want, err = _eager(p, family, tp)
            report.runs["eager"] += 1
            if err:
                report.failures.append(Failure(p, "eager", f"eager tensorplay{label}: {err}", family, errors=errs))
                ok = False
                continue
            wants[p.index, family] = want
            if lib_torch is not None:
                theirs, terr = _eager(p, family, lib_torch)
                report.runs["torch"] += 1
                if terr:
                    report.failures.append(Failure(p, "torch", f"PyTorch{label}: {terr}", family, errors=errs))
                else:
                    diffs = _check(p, p.results(family), want, theirs, f"eager vs PyTorch{label}", errs)
                    if diffs:
                        report.failures.append(Failure(p, "torch", "\n".join(diffs), family, errors=errs))
                    wants[p.index, family + " torch"] = theirs
        if ok:
            live.append(p)
    for variant in variants:
        if live:
            report.runs[variant] += len(live)
            report.failures += _compiled(live, variant, wants, errors)
    return report


def _compiled(programs: Sequence[Program], variant: str, wants: dict,
              errors: Mapping[int, Mapping[str, float] | None]) -> list[Failure]:
    family = "break" if variant == "break" else "static"
    source = group_source(programs, variant)
    filename = f"<fuzz {programs[0].seed}:{programs[0].index}..{programs[-1].index} {variant}>"
    got = error = None
    try:
        fn = _define(source, tp, filename)
        compiled = tp.compile(fn, isolate_recompiles=True, **VARIANTS[variant],
                              **({"backend": BACKEND} if BACKEND else {}))
        got = compiled(*[a for p in programs for a in _args(p, tp)])
    except Exception:  # noqa: BLE001 - reported below
        error = f"compiled ({variant}) raised:\n{_error()}"
    finally:
        tp.compiler.reset()
        linecache.cache.pop(filename, None)
    if error is not None:
        if len(programs) == 1:
            return [Failure(programs[0], variant, error, errors=errors[programs[0].index])]
        alone = [f for p in programs for f in _compiled([p], variant, wants, errors)]
        return alone or [Failure(programs[0], variant, error, group=tuple(programs),
                                     errors=errors[programs[0].index])]
    failures = []
    for p, g in zip(programs, got):
        errs = errors[p.index]
        diffs = _check(p, p.results(family), g, wants[p.index, family], f"compiled ({variant}) vs eager", errs)
        theirs = wants.get((p.index, family + " torch"))
        if diffs and theirs is not None:
            vs_torch = _check(p, p.results(family), g, theirs, f"compiled ({variant}) vs PyTorch", errs)
            agree = not _check(p, p.results(family), wants[p.index, family], theirs, "", errs)
            diffs += vs_torch or [f"compiled ({variant}) agrees with PyTorch"]
            if agree:
                diffs.append("eager tensorplay and PyTorch agree: the compiled program is wrong")
        if not diffs:
            continue
        if len(programs) > 1:
            alone = _compiled([p], variant, wants, errors)
            failures += alone or [Failure(p, variant, "\n".join(diffs), group=tuple(programs), errors=errs)]
        else:
            failures.append(Failure(p, variant, "\n".join(diffs), errors=errs))
    return failures


def run(seed: int, indices: Iterable[int], *, group: int = 16, use_torch: bool = True,
        variants: Sequence[str] = tuple(VARIANTS),
        progress: Callable[[Report], None] | None = None) -> Report:
    """Generate and run programs ``indices`` of ``seed``, ``group`` to a compile."""
    report = Report()
    indices = list(indices)
    for start in range(0, len(indices), group):
        batch = [generate(seed, i) for i in indices[start:start + group]]
        report.add(run_group(batch, use_torch=use_torch and torch is not None, variants=variants))
        if progress is not None:
            progress(report)
    return report


# --- command line ---------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.programs",
                                     description="Run seeded random tensor programs compiled and eagerly, "
                                                 "compared with each other and with PyTorch.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=200, help="programs to run (default 200)")
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--index", type=int, action="append", help="run only this program (repeatable)")
    parser.add_argument("--group", type=int, default=16, help="programs compiled together (default 16)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of "
                        + ", ".join(VARIANTS))
    parser.add_argument("--no-torch", action="store_true", help="skip the comparison with PyTorch")
    parser.add_argument("--show", action="store_true", help="print the programs' sources")
    parser.add_argument("--backend", help="compile for this backend (default: tp.compile's); dtypes it "
                        "lacks are replaced by float32 in the generated programs")
    parser.add_argument("--scale", type=int, default=1, help="multiply the first and last dims of the "
                        "inputs by this (default 1)")
    args = parser.parse_args(argv)
    global BACKEND, SCALE, DTYPES
    BACKEND, SCALE = args.backend, args.scale
    if BACKEND:
        kept = set(tp.compiler.get_backend_capabilities(BACKEND).dtypes)
        DTYPES = tuple(d if d.name in kept else tp.float32 for d in DTYPES)
    os.environ.setdefault("TENSORPLAY_CACHE_DIR", tempfile.mkdtemp(prefix="tensorplay-fuzz-cache-"))
    indices = args.index or range(args.start, args.start + args.count)
    variants = [v for v in args.variants.split(",") if v]
    if args.show:
        for i in indices:
            p = generate(args.seed, i)
            print(f"# index {i}\n{p.source('break')}\nargs = {p.args_source()}\n")
    t0 = time.monotonic()
    last, shown = [t0], [0]

    def progress(r: Report) -> None:
        for f in r.failures[shown[0]:]:  # as soon as they are found
            print("\n" + "=" * 100 + "\n" + f.report(), flush=True)
        shown[0] = len(r.failures)
        now = time.monotonic()
        if now - last[0] > 30 or r.programs == len(indices):
            last[0] = now
            print(f"[fuzz] {r.programs}/{len(indices)} programs, {len(r.failures)} failures, "
                  f"{now - t0:.0f} s", flush=True)

    report = run(args.seed, indices, group=args.group, use_torch=not args.no_torch, variants=variants,
                 progress=progress)
    wall = time.monotonic() - t0
    runs = ", ".join(f"{k} {v}" for k, v in sorted(report.runs.items()))
    failed = Counter(f.variant for f in report.failures)
    print(f"\n[fuzz] seed {args.seed}: {report.programs} programs ({runs}), {len(report.failures)} failures "
          f"{dict(failed) or ''}, {len({f.program.index for f in report.failures})} failing programs, "
          f"{wall:.1f} s, torch: {'yes' if torch is not None and not args.no_torch else 'no'}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
