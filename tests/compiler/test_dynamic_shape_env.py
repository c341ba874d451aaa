"""The shape environment: what answering questions about symbolic sizes records (ranges,
specializations, unified sizes, relations), how it keeps guards few, and the compiled size
guard that checks a call."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from tensorplay.compiler.symbolic import ShapeEnv, ShapeGuard, SymInt
from tensorplay.dialects.tp import symbolic as sym


class _Leaf:
    def __init__(self, *shape):
        self._data = np.zeros(shape)


@pytest.fixture
def env():
    return ShapeEnv("f")


def test_comparisons_become_ranges_and_settled_questions_record_nothing(env):
    n = env.wrap(env.create_symbol(10, "x.size(0)"))
    assert isinstance(n, SymInt) and repr(n) == "s0"
    assert n > 8 and not n < 9 and n >= 9  # the second and third follow from the first
    assert (env.infos[n.node].lo, env.infos[n.node].hi) == (9, None)
    assert n <= 100
    assert env.infos[n.node].hi == 100 and env.relations == []


def test_monotone_relations_in_one_size_become_ranges(env):
    n = env.wrap(env.create_symbol(13, "x.size(2)"))
    assert n // 2 >= 3 and (n // 2) // 2 - 1 >= 1 and (n + 1) // 4 <= 3
    info = env.infos[n.node]
    assert (info.lo, info.hi) == (8, 14) and env.relations == []


def test_equal_sizes_become_one_symbol_and_a_pinned_size_a_constant(env):
    a = env.wrap(env.create_symbol(4, "x.size(0)"))
    b = env.wrap(env.create_symbol(4, "y.size(0)"))
    c = env.wrap(env.create_symbol(3, "x.size(1)"))
    assert a == b
    assert env.simplify(b.node) == a.node
    assert c * 2 == 6
    assert env.simplify(c.node) == 3
    (spec,) = [s for s in env.specializations if s.value == 3]
    assert spec.source == "x.size(1)" and spec.why == "== on a size"


def test_other_relations_are_kept_once_and_described_in_the_users_words(env):
    a = env.wrap(env.create_symbol(6, "x.size(0)"))
    b = env.wrap(env.create_symbol(4, "x.size(1)"))
    assert (a * b) % 8 == 0
    assert (a * b) % 8 == 0
    (rel,) = env.relations
    assert env.describe(rel.expr) == "(x.size(0)*x.size(1) % 8) == 0"


def test_int_specializes_and_division_guards_a_nonzero_divisor(env):
    a = env.wrap(env.create_symbol(5, "x.size(0)"))
    d = env.wrap(env.create_symbol(2, "x.size(1)"))
    q = a // d
    assert isinstance(q, SymInt) and env.infos[d.node].lo == 1
    assert int(q) == 2
    assert env.relations[-1].expr == sympy.Eq(sympy.floor(a.node / d.node), 2)


def test_min_and_max_are_settled_by_ranges(env):
    t = env.create_symbol(5, "t")
    env.decide(sympy.Le(t, 16), "assert")
    assert env.simplify(sympy.Min(t, 16)) == t
    assert env.simplify(sympy.Max(t - 20, 0)) == 0


def test_sizes_hash_by_expression_and_die_with_their_capture(env):
    n = env.wrap(env.create_symbol(3, "x.size(0)"))
    assert {n: 1}[env.wrap(n.node)] == 1 and env.relations == [] and env.infos[n.node].lo == 0
    env.close()
    with pytest.raises(RuntimeError, match="used after that capture finished"):
        n > 1  # noqa: B015


def test_size_guard_checks_shared_sizes_ranges_and_relations(env):
    a = env.create_symbol(10, "x.size(0)")
    b = env.create_symbol(10, "y.size(0)")
    c = env.create_symbol(6, "x.size(1)")
    env.decide(sympy.Eq(a, b), "broadcasting")
    env.decide(sympy.Gt(a, 8), "branch")
    env.decide(sympy.Eq(sympy.Mod(c, 3), 0), "reshape")
    guard = ShapeGuard(env, [(0, 0, "x.size(0)", a), (0, 1, "x.size(1)", c), (1, 0, "y.size(0)", b)])
    assert guard.describe() == ["y.size(0) == x.size(0)", "x.size(0) >= 9", "(x.size(1) % 3) == 0 (reshape)"]
    assert guard([_Leaf(12, 9), _Leaf(12)])
    assert not guard([_Leaf(12, 9), _Leaf(11)])
    assert guard.failure([_Leaf(4, 9), _Leaf(4)]) == "x.size(0) >= 9"
    assert guard.failure([_Leaf(12, 7), _Leaf(12)]) == "(x.size(1) % 3) == 0 (reshape)"
    assert "sympy" not in guard.source


def test_size_expressions_print_parse_and_run_as_python():
    s0, s1 = sym.size_symbol("s0"), sym.size_symbol("s1")
    for e in [s0 * s1, sympy.floor((s0 + 1) / 2), sympy.Mod(s0, 4) + sympy.Max(s1 - 3, 0), sympy.ceiling(s0 / 3)]:
        assert sym.parse_size(sym.size_text(e)) == e
        code = sym.size_to_python(e)
        for v0, v1 in [(0, 0), (5, 2), (7, 9)]:
            assert eval(code, {}, {"s0": v0, "s1": v1}) == int(e.subs({s0: v0, s1: v1}))  # noqa: S307


def test_size_guard_as_portable_checks_for_a_runtime(env):
    a = env.create_symbol(10, "x.size(0)")
    b = env.create_symbol(10, "y.size(0)")
    env.decide(sympy.Eq(a, b), "broadcasting")
    env.decide(sympy.Le(a, 64), "assert")
    guard = ShapeGuard(env, [(0, 0, "x.size(0)", a), (2, 0, "y.size(0)", b)])
    spec = guard.portable({0: 0, 2: 1})
    assert spec == {"bind": [["v0", 0, 0]],
                    "checks": [["a1[0] == v0", "y.size(0) == x.size(0)"], ["v0 <= 64", "x.size(0) <= 64"]]}

    def holds(shapes):
        scope = {f"a{i}": s for i, s in enumerate(shapes)}
        scope.update({name: shapes[k][d] for name, k, d in spec["bind"]})
        return all(eval(text, {"__builtins__": {}}, scope) for text, _ in spec["checks"])  # noqa: S307

    assert holds([(7,), (7,)]) and not holds([(7,), (8,)]) and not holds([(65,), (65,)])
