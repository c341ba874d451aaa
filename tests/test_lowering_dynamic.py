"""convert-tp-to-linalg with sizes known only at run time (``?`` dims) for the shape and
indexing families: lowered, compiled by IREE for llvm-cpu, run on concrete arrays and
compared with the reference; inputs the reference rejects must still run in bounds."""

from __future__ import annotations

import numpy as np
import pytest

from tensorplay.compiler.backends.iree import compile_mlir, get_iree_backend
from tensorplay.dialects.tp import lookup
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.ops.shape import SLICE_END as END
from tensorplay.dialects.tp.types import TensorType, type_of_array
from tensorplay.passes import run_pipeline
from tensorplay.runtime import Program

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

pytestmark = pytest.mark.iree

_rng = np.random.default_rng(7)


def _f(*shape):
    return _rng.standard_normal(shape).astype(np.float32)


def _i(values):
    return np.array(values, np.int64)


# (op, operands, attrs, per operand: the dims that are dynamic)
MATCHING = [
    ("tp.reshape", [_f(4, 6)], {"shape": (-1, 3)}, [(0,)]),
    ("tp.reshape", [_f(4, 6)], {"shape": (2, -1, 3)}, [(0, 1)]),
    ("tp.reshape", [_f(4, 6)], {"shape": (6, 4)}, [(0,)]),
    ("tp.reshape", [_f(1, 1)], {"shape": ()}, [(0,)]),
    ("tp.permute", [_f(2, 3, 4)], {"dims": (2, 0, 1)}, [(0, 2)]),
    ("tp.broadcast_to", [_f(3, 1)], {"shape": (2, -1, 4)}, [(0,)]),
    ("tp.broadcast_to", [_f(1, 4)], {"shape": (3, 4)}, [(0, 1)]),  # a run-time 1 stretches
    ("tp.concat", [_f(2, 3), _f(2, 5)], {"dim": 1}, [(1,), (0,)]),
    ("tp.slice", [_f(7, 5)], {"starts": (1, -3), "ends": (END, -1), "steps": (2, 1)}, [(0, 1)]),
    ("tp.slice", [_f(7, 5)], {"starts": (-10, 9), "ends": (4, END), "steps": (3, 1)}, [(0, 1)]),
    ("tp.slice_update", [_f(6, 4), _f(3, 2)], {"starts": (0, 1), "ends": (END, 5), "steps": (2, 2)},
     [(0, 1), ()]),
    ("tp.flip", [_f(3, 4)], {"dims": (0, 1)}, [(0,)]),
    ("tp.gather", [_f(5, 4), _i([[4, 3], [1, 1], [2, 0]])], {"dim": 0}, [(0, 1), (1,)]),
    ("tp.index_select", [_f(5, 3), _i([4, 0, 2, 2])], {"dim": 0}, [(0,), (0,)]),
    ("tp.index", [_f(3, 4, 5), _i([[0], [-1]]), _i([1, 4, -5])], {"dims": (0, 2)}, [(1,), (), (0,)]),
    ("tp.index", [_f(3, 4, 5), _i([[0], [-1]]), _i([1, 3, -4])], {"dims": (1, 2)}, [(0, 1), (0,), ()]),
    ("tp.index_put", [_f(5, 3), _f(4, 3), _i([1, -1, 1, 0])], {"dims": (0,), "accumulate": True},
     [(0,), (0,), (0,)]),
    ("tp.index_put", [_f(3, 4, 5), _f(3, 2, 4), _i([[0], [2], [1]]), _i([0, -1])],
     {"dims": (0, 2), "accumulate": False}, [(1,), (0,), (0,), ()]),
    ("tp.triu", [_f(2, 4, 5)], {"diagonal": 1}, [(0, 2)]),
    ("tp.nonzero", [(_f(4, 3) > 0).astype(np.float32)], {}, [(0,)]),
]

# The reference raises for these (an index into an empty dimension, index tensors or
# values whose run-time sizes disagree); compiled code must not touch memory outside.
REJECTED = [
    ("tp.gather", [_f(0, 4), _i([[1, 2]])], {"dim": 0}, [(0,), ()]),
    ("tp.index", [_f(0, 4), _i([1, 2])], {"dims": (0,)}, [(0,), ()]),
    ("tp.index", [_f(3, 4, 5), _i([0, 1, 2]), _i([0, 1])], {"dims": (0, 1)}, [(), (0,), (0,)]),
    ("tp.index_put", [_f(0, 4), _f(2, 4), _i([1, 2])], {"dims": (0,), "accumulate": False}, [(0,), (), ()]),
    ("tp.index_put", [_f(5, 3), _f(4, 7), _i([1, 2, 3, 4])], {"dims": (0,), "accumulate": True},
     [(1,), (1,), ()]),
]


def _graph(name, op, arrays, attrs, dynamic):
    g = Graph(name)
    inputs = []
    for a, dims in zip(arrays, dynamic, strict=True):
        t = type_of_array(a)
        inputs.append(g.add_input(TensorType(tuple(None if i in dims else s for i, s in enumerate(t.shape)),
                                             t.dtype)))
    g.set_outputs(list(g.add(op, inputs, attrs)))
    return g


@pytest.fixture(scope="module")
def compiled():
    cases = MATCHING + REJECTED
    module = M.emit([_graph(f"f{i}", *case) for i, case in enumerate(cases)])
    run_pipeline(module, "convert-tp-to-linalg,canonicalize,cse")
    vmfb = compile_mlir(M.print_module(module), get_iree_backend("iree-cpu").flags(), backend="iree-cpu",
                        name="dynamic")
    program = Program(vmfb, "local-sync", name="dynamic")
    return lambda i, arrays: program.call(f"f{i}", *arrays)[0]


@pytest.mark.parametrize("i", range(len(MATCHING)), ids=[f"{c[0]}-{n}" for n, c in enumerate(MATCHING)])
def test_dynamic_sizes_lower_to_code_matching_the_reference(compiled, i):
    op, arrays, attrs, _ = MATCHING[i]
    opdef = lookup(op)
    expected = opdef.reference(arrays, opdef.normalize_attrs(attrs))
    got = compiled(i, arrays)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("i", range(len(REJECTED)), ids=[f"{c[0]}-{n}" for n, c in enumerate(REJECTED)])
def test_inputs_the_reference_rejects_run_in_bounds(compiled, i):
    op, arrays, attrs, _ = REJECTED[i]
    opdef = lookup(op)
    with pytest.raises((IndexError, ValueError)):
        opdef.reference(arrays, opdef.normalize_attrs(attrs))
    got = compiled(len(MATCHING) + i, arrays)
    if op == "tp.index_put":
        np.testing.assert_array_equal(got, arrays[0])  # the update is skipped
