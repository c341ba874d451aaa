"""tp graphs as MLIR: every op the op table exercises is emitted, printed, parsed back,
verified through the registry and re-emitted to the same text; bad IR is reported with
MLIR-style locations."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp.graph import Graph, SourceLoc
from tensorplay.dialects.tp.types import TensorType
from tests.opinfo import record_calls


CALLS = [(c.op, tuple(c.types), c.attrs) for c in record_calls()]


def _graph_for(i, op, types, attrs):
    g = Graph(f"case{i}")
    inputs = [None if t is None else g.add_input(t) for t in types]
    results = g.add(op.name, inputs, attrs, SourceLoc("model.py", i + 1, 3))
    g.set_outputs(list(results))
    return g


def test_every_registered_op_round_trips_through_mlir_text():
    graphs = [_graph_for(i, *call) for i, call in enumerate(CALLS)]
    module = M.emit(graphs)
    text = M.print_module(module, debuginfo=True)
    parsed = M.parse(text, "roundtrip.mlir")
    again = M.print_module(M.emit(M.to_graphs(parsed)), debuginfo=True)
    assert again == text
    seen = {op.name for op, _, _ in CALLS}
    from tensorplay.dialects.tp import all_ops

    assert {op.name for op in all_ops()} <= seen


def test_source_locations_are_kept():
    g = Graph("f")
    x = g.add_input(TensorType((2,), tp.float32))
    y = g.add1("tp.exp", [x], loc=SourceLoc("/home/me/model.py", 42, 8))
    g.set_outputs([y])
    text = M.print_module(M.emit(g), debuginfo=True)
    assert 'loc("/home/me/model.py":42:8)' in text
    (back,) = M.to_graphs(M.parse(text))
    assert back.nodes[0].loc == SourceLoc("/home/me/model.py", 42, 8)


def test_dynamic_dims_print_as_question_marks():
    g = Graph("f")
    x = g.add_input(TensorType((None, 3), tp.float32))
    g.set_outputs([g.add1("tp.relu", [x])])
    text = M.print_module(M.emit(g))
    assert "tensor<?x3xf32>" in text


def test_constants_of_every_dtype_round_trip():
    g = Graph("f")
    outs = []
    for d in (tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64, tp.uint8,
              tp.bool):
        value = np.array([[1, 0, 3]], dtype=np.float64)
        value = (value != 0) if d is tp.bool else value.astype(d.np_dtype)
        outs.append(g.add1("tp.constant", [], {"value": value}))
    outs.append(g.add1("tp.constant", [], {"value": np.full((2, 2), 1.5, tp.bfloat16.np_dtype)}))
    g.set_outputs(outs)
    (back,) = M.to_graphs(M.parse(M.print_module(M.emit(g))))
    for a, b in zip(g.nodes, back.nodes):
        assert a.attrs["value"].dtype == b.attrs["value"].dtype
        np.testing.assert_array_equal(a.attrs["value"].astype(np.float64), b.attrs["value"].astype(np.float64))


@pytest.mark.parametrize("body,message", [
    ('%0 = "tp.add"(%a, %b) : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32> loc("m.py":7:5)',
     r"m\.py:7:5: error: tp\.add: The size of tensor a \(2\) must match the size of tensor b \(3\)"),
    ('%0 = "tp.frobnicate"(%a) : (tensor<2xf32>) -> tensor<2xf32>',
     r"bad\.mlir:2:8: error: unknown tp op 'tp\.frobnicate'"),
    ('%0 = "tp.gelu"(%a) {approximate = 3 : i64} : (tensor<2xf32>) -> tensor<2xf32>',
     r"error: tp\.gelu: attribute 'approximate' expects a string attribute"),
    ('%0 = "tp.gelu"(%a) {approximate = "fast"} : (tensor<2xf32>) -> tensor<2xf32>',
     r"error: tp\.gelu: attribute 'approximate' must be one of 'none', 'tanh'"),
    ('%0 = "tp.exp"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>',
     r"error: tp\.exp: expected 1 operand"),
    ('%0 = "tp.exp"(%a) : (tensor<2xf32>) -> tensor<2xf64>',
     r"error: tp\.exp: result 0 has type tensor<2xf64>, but the operands give tensor<2xf32>"),
    ('%0 = "tp.exp"(%a) {bogus = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>',
     r"error: tp\.exp: unknown attribute 'bogus'"),
])
def test_invalid_ir_gives_located_diagnostics(body, message):
    text = ("func.func @f(%a: tensor<2xf32>, %b: tensor<3xf32>) {\n  " + body + "\n  return\n}\n")
    with pytest.raises(M.DiagnosticError, match=message):
        M.parse(text, "bad.mlir")


def test_syntax_errors_are_diagnostics_not_tracebacks():
    with pytest.raises(M.DiagnosticError, match=r"bad\.mlir:1:14: error: expected non-function type"):
        M.parse("func.func @f( {", "bad.mlir")


def _layered_graph():
    t = TensorType((2, 3), tp.float32)
    layer = Graph("layer")
    a, b = layer.add_input(t), layer.add_input(t)
    layer.set_outputs([layer.add1("tp.add", [layer.add1("tp.mul", [a, b]), a])])
    main = Graph("main")
    x, w = main.add_input(t), main.add_input(t)
    h = main.add_call(layer, [x, w], SourceLoc("model.py", 7))[0]
    main.set_outputs([main.add_call(layer, [h, w], SourceLoc("model.py", 8))[0]])
    return main, layer


def test_calls_of_a_shared_graph_emit_one_private_callee_and_round_trip():
    main, layer = _layered_graph()
    assert main.callees() == [layer]
    text = M.print_module(M.emit([main]), debuginfo=True)
    assert text.count("func.func private @layer") == 1
    assert text.count("call @layer(") == 2
    graphs = M.to_graphs(M.parse(text))
    assert [g.name for g in graphs] == ["layer", "main"]
    calls = graphs[1].nodes
    assert [n.op for n in calls] == ["func.call", "func.call"] and calls[0].callee is graphs[0]
    assert calls[1].loc == SourceLoc("model.py", 8, 0)
    # the parsed graphs emit the same text again
    assert M.print_module(M.emit([graphs[1]]), debuginfo=True) == text


def test_call_operands_must_match_the_callee():
    main, layer = _layered_graph()
    g = Graph("bad")
    x = g.add_input(TensorType((3, 2), tp.float32))
    with pytest.raises(ValueError, match="expected 2 operands, got 1"):
        g.add_call(layer, [x])
    with pytest.raises(TypeError, match="operand 0 has type"):
        g.add_call(layer, [x, x])


def test_two_different_graphs_with_one_name_are_rejected():
    main, layer = _layered_graph()
    other = Graph("layer")
    v = other.add_input(TensorType((2, 3), tp.float32))
    other.set_outputs([v])
    with pytest.raises(ValueError, match="both named @layer"):
        M.emit([main, other])
