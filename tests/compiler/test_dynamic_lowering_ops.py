"""Every lowered tp op with symbolic operand sizes: a recorded call of the op table per op
(every case in ``TENSORPLAY_DIFFERENTIAL=full`` mode, up to four per op) gets a size symbol
for each non-empty operand dimension; its shape inference runs under a shape environment
holding the call's sizes (so it decides and specializes as a capture would), and the graph
is emitted with its size expressions, lowered with tensor.dim and index arithmetic,
compiled by IREE for llvm-cpu in one module and run on the call's operands."""

from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest

from tensorplay.compiler.backends.iree import compile_mlir, get_iree_backend
from tensorplay.compiler.capture.graphs import substitute_sizes
from tensorplay.compiler.symbolic import ShapeEnv
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp import symbolic as sym
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType
from tensorplay.passes import run_pipeline
from tensorplay.passes.lowering import LOWERINGS, _load
from tensorplay.runtime import Program
from tests.opinfo import record_calls

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

pytestmark = pytest.mark.iree

PER_OP = 4 if os.environ.get("TENSORPLAY_DIFFERENTIAL", "") == "full" else 1


def _cases():
    _load()
    per: dict[str, list] = defaultdict(list)
    for c in record_calls():
        if c.op.name not in LOWERINGS or not any(t is not None and t.rank for t in c.types):
            continue
        key = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in c.types)
        if len(per[c.op.name]) < PER_OP and key not in [k for k, _ in per[c.op.name]]:
            per[c.op.name].append((key, c))
    return [c for cases in per.values() for _, c in cases]


def _symbolic_graph(name, call):
    env = ShapeEnv(name)
    g = Graph(name)
    inputs = []
    for k, t in enumerate(call.types):
        if t is None:
            inputs.append(None)
            continue
        shape = tuple(env.create_symbol(d, f"operand{k}.size({j})") if d else 0 for j, d in enumerate(t.shape))
        inputs.append(g.add_input(TensorType(shape, t.dtype)))
    with sym.deciding(env):
        g.set_outputs(list(g.add(call.op.name, inputs, call.attrs)))
    substitute_sizes(g, env.simplify)
    return g


@pytest.fixture(scope="module")
def compiled():
    calls = _cases()
    graphs = [_symbolic_graph(f"f{i}", c) for i, c in enumerate(calls)]
    module = M.emit(graphs)
    run_pipeline(module, "convert-tp-to-linalg,canonicalize,cse")
    vmfb = compile_mlir(M.print_module(module), get_iree_backend("iree-cpu").flags(), backend="iree-cpu",
                        name="symbolic")
    return calls, graphs, Program(vmfb, "local-sync", name="symbolic")


def test_every_lowered_op_runs_with_symbolic_sizes_like_the_reference(compiled):
    calls, graphs, program = compiled
    # every lowered op but the creation ops (no operands; their symbolic sizes are attributes,
    # covered by test_dynamic_lowering.py)
    assert set(LOWERINGS) - {c.op.name for c in calls} == {"tp.arange", "tp.constant", "tp.full"}
    symbolic = sum(any(sym.is_symbolic(d) for v in g.inputs for d in v.type.shape) for g in graphs)
    assert symbolic >= 0.9 * len(graphs)
    failures = []
    for g, c in zip(graphs, calls):
        results = program.call(g.name, *[a for a in c.operands if a is not None])
        for r, e in zip(results, c.op.evaluate(c.operands, c.attrs, c.result_types)):
            if e.dtype == np.uint8 and r.dtype == np.int8:
                r = r.view(np.uint8)
            if r.shape != e.shape or not np.allclose(r.astype(np.float64), e.astype(np.float64), rtol=2e-3,
                                                     atol=2e-3, equal_nan=True):
                failures.append(f"{c.op.name} {[str(t) for t in c.types]} {c.attrs}: got {list(r.shape)}, "
                                f"expected {list(e.shape)}")
    assert not failures, "\n".join(failures)
