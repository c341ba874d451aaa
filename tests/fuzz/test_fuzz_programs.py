"""Seeded random programs (tests/fuzz/programs.py) compiled with fullgraph=True, with
dynamic=True and with a graph break, each compared with eager tensorplay and with PyTorch
where installed. The suite runs TENSORPLAY_FUZZ_COUNT programs (default 48: the smallest
multiple of a group that covers every op family, dtype and break kind, which the coverage
test checks; each program costs about three IREE compiles) of seed TENSORPLAY_FUZZ_SEED
(default 0); ``TENSORPLAY_FUZZ_COUNT=160`` or ``python -m tests.fuzz.programs --count N`` runs more."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

import tensorplay as tp
from tests.fuzz import programs as P
from tests.fuzz.programs import Failure, generate, run, run_group, tolerance

pytest.importorskip("iree.compiler")

COUNT = int(os.environ.get("TENSORPLAY_FUZZ_COUNT", "48"))
SEED = int(os.environ.get("TENSORPLAY_FUZZ_SEED", "0"))
#: programs compiled together
GROUP = 16


def _groups():
    return [range(s, min(s + GROUP, COUNT)) for s in range(0, COUNT, GROUP)]


@pytest.mark.parametrize("indices", _groups(), ids=lambda r: f"seed{SEED}-{r.start}-{r.stop - 1}")
@pytest.mark.iree
@pytest.mark.slow
def test_random_programs_compile_to_the_eager_and_pytorch_results(indices):
    report = run_group([generate(SEED, i) for i in indices])
    assert report.runs["static"] == report.runs["dynamic"] == report.runs["break"] == len(indices)
    assert not report.failures, "\n\n".join(f.report() for f in report.failures)


def test_a_seed_and_index_give_the_same_program():
    def text(seed, i):
        p = generate(seed, i)
        return p.source("break") + p.args_source()

    assert [text(5, i) for i in range(30)] == [text(5, i) for i in reversed(range(30))][::-1]
    assert len({text(5, i) for i in range(30)}) == 30
    assert text(5, 0) != text(6, 0)


def test_the_sample_covers_the_op_families_dtypes_and_sizes():
    programs = [generate(SEED, i) for i in range(COUNT)]
    ops = Counter(op for p in programs for op in p.ops)
    for op in ("softmax", "log_softmax", "logsumexp", "cumsum", "matmul", "sum", "mean", "amax/amin", "reshape",
               "permute", "getitem", "cat", "stack", "split", "expand", "where", "cast", "compare", "add broadcast",
               "mul", "exp", "tanh"):
        assert ops[op] > 0, op
    inputs = [i.value for p in programs for i in p.inputs]
    assert {v.dtype for v in inputs} == set(P.DTYPES)
    assert any(0 in v.shape for v in inputs) and any(1 in v.shape for v in inputs)
    assert any(v.rank == 0 for v in inputs) and any(v.nan for v in inputs)
    assert {p.brk.op for p in programs} == {"break float", "break item", "break int", "break if"}
    assert max(len(p.body) for p in programs) >= 8 and max(len(p.inputs) for p in programs) == 3


def test_generated_types_are_those_of_eager_and_pytorch():
    # many more programs than the compiled sample: eager runs are cheap
    report = run(SEED + 1, range(400), variants=())
    assert report.runs["eager"] == 800
    assert not report.failures, "\n\n".join(f.report() for f in report.failures[:5])


def test_tolerances_are_far_below_a_wrong_result():
    for i in range(COUNT):
        for v in generate(SEED, i).results("break"):
            rtol, atol = tolerance(v)
            if v.is_float:
                assert atol + rtol * v.mag < 0.1 * max(v.mag, 1.0), v
            else:
                assert (rtol, atol) == (0.0, 0.0)


def test_the_break_variant_breaks_the_graph():
    seen = set()
    for i in range(40):
        p = generate(SEED, i)
        fn = P._define(p.source("break"), tp, f"<fuzz test {i}>")
        explained = tp.compiler.explain(fn, *P._args(p, tp))
        assert explained.graph_break_count == 1, p.source("break")
        seen.add(p.brk.op)
    assert len(seen) == 4


def _wrong(value):
    """A result no correct program gives: floats shifted by 1000, ints by 1, bools negated."""
    if isinstance(value, (tuple, list)):
        return type(value)(_wrong(v) for v in value)
    if value.dtype is tp.bool:
        return ~value
    return value + (1000 if value.dtype.is_floating_point else 1)


def test_a_wrong_result_is_reported_per_program_with_a_reproducer(monkeypatch):
    def miscompile(fn, **kwargs):
        return lambda *args: _wrong(fn(*args))

    monkeypatch.setattr(tp, "compile", miscompile)
    programs = [generate(SEED, i) for i in range(3)]
    report = run_group(programs, use_torch=False)
    assert sorted((f.program.index, f.variant) for f in report.failures) == \
        sorted((p.index, v) for p in programs for v in P.VARIANTS)
    for f in report.failures:
        assert not f.group  # each fails alone too
        text = f.report()
        assert f"python -m tests.fuzz.programs --seed {SEED} --index {f.program.index}" in text
        assert "differ" in f.message and "compiled" in f.message
        with pytest.raises(AssertionError):  # the reproducer, run on its own, fails the same way
            exec(compile(f.reproducer(), "<reproducer>", "exec"), {})


@pytest.mark.iree
def test_a_reproducer_passes_where_the_program_is_compiled_right():
    p = generate(SEED, 0)
    tp.compiler.reset()
    try:
        exec(compile(Failure(p, "dynamic", "").reproducer(), "<reproducer>", "exec"), {})
    finally:
        tp.compiler.reset()


def test_nan_positions_and_exact_types_must_match():
    v = P.Value("v0", (3,), tp.float32, 3.0)
    nan = float("nan")
    assert P.compare(tp.tensor([1.0, nan, 2.0]), tp.tensor([1.0, nan, 2.0]), v) is None
    assert "NaN" in P.compare(tp.tensor([1.0, 0.0, 2.0]), tp.tensor([1.0, nan, 2.0]), v)
    assert P.compare(tp.tensor([1.0, 0.0, 2.0]).half(), tp.tensor([1.0, 0.0, 2.0]), v).startswith("float16")
    i = P.Value("v1", (2,), tp.int64, 9.0)
    assert P.compare(tp.tensor([1, 2]), tp.tensor([1, 3]), i).startswith("1 of 2 elements differ")
    near = P.Value("v2", (1,), tp.float32, 2.0)
    assert P.compare(tp.tensor([1.5]), tp.tensor([1.5 + 2e-5]), near) is None  # within TOLERANCE
