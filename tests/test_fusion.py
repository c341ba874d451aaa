"""Lowered elementwise chains over broadcast operands do not materialize the broadcasts, so
IREE fuses the whole chain into one dispatch."""

from __future__ import annotations

import re

import pytest

import tensorplay as tp
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType
from tensorplay.passes import run_pipeline


def _chain() -> Graph:
    g = Graph("chain")
    x = g.add_input(TensorType((64, 128), tp.float32))
    bias = g.add_input(TensorType((128,), tp.float32))
    scale = g.add_input(TensorType((64, 1), tp.float32))
    y = g.add1("tp.add", [x, bias])
    y = g.add1("tp.mul", [y, scale])
    y = g.add1("tp.gelu", [y], {"approximate": "tanh"})
    y = g.add1("tp.sub", [y, bias])
    g.set_outputs([g.add1("tp.exp", [y])])
    return g


def _lowered_text() -> str:
    module = M.emit(_chain())
    run_pipeline(module, "tp-to-linalg")
    return M.print_module(module)


def test_broadcast_operands_are_never_materialized():
    text = _lowered_text()
    assert "linalg.broadcast" not in text
    assert "tp." not in text.replace("tensor<", "")  # every tp op is lowered
    # every generic reads the bias and scale at their own shapes
    for ins in re.findall(r"ins\(([^)]*)\)", text):
        types = ins.split(":")[1]
        assert "tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>" not in types
    assert "tensor<128xf32>" in text and "tensor<64x1xf32>" in text


def test_iree_fuses_the_chain_into_one_dispatch():
    iree_compiler = pytest.importorskip("iree.compiler")
    flow = iree_compiler.compile_str(_lowered_text(), target_backends=["llvm-cpu"],
                                     extra_args=["--compile-to=flow"]).decode()
    dispatches = re.findall(r"flow\.dispatch @", flow)
    assert len(dispatches) == 1, flow
