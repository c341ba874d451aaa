"""tp.export: entry points (forward, @export methods, overloads), full-graph capture with
is_exporting(), one shared copy of the weights, the MLIR it exposes, and its errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.compiler import GraphCaptureError, export, is_compiling, is_exporting, overload_method, unused
from tensorplay.export import Args, ExportedProgram

pytestmark = pytest.mark.iree


class Scorer(nn.Module):
    """forward, an overloaded @export method, and an eager-only helper."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.calls = []

    def forward(self, x):
        self.calls.append(("forward", is_exporting(), is_compiling()))
        return self.lin(x)

    @overload_method
    def score(self, x: tp.Tensor) -> tp.Tensor: ...

    @overload_method
    def score(self, x: tp.Tensor, y: tp.Tensor) -> dict: ...

    @export
    def score(self, x, y=None):
        self.calls.append(("score", is_exporting(), is_compiling()))
        out = self.lin(x).sum(-1)
        return out if y is None else {"s": out, "d": (self.lin(y) - self.lin(x)).abs()}

    @unused
    def debug(self, x):
        print(x.detach().numpy())


@pytest.fixture(scope="module")
def scorer():
    tp.manual_seed(0)
    model = Scorer()
    x, y = tp.randn(2, 4), tp.randn(2, 4)
    program = tp.export(model, (x,), method_args={"score": [(x,), Args(x, y=y)]})
    return model, x, y, program


def test_export_captures_each_entry_point_once_with_is_exporting(scorer):
    model, _, _, program = scorer
    assert model.calls == [("forward", True, True), ("score", True, True), ("score", True, True)]
    assert not is_exporting() and not is_compiling()
    assert isinstance(program, ExportedProgram)
    assert program.entry_points == ["forward", "score$0", "score$1"]
    assert repr(program) == "<ExportedProgram Scorer for iree-cpu: forward, score$0, score$1; 2 weights (embedded)>"


def test_overloads_become_entry_points_named_by_declaration(scorer):
    model, x, y, program = scorer
    sigs = {name: str(s) for name, s in program.signatures.items()}
    assert sigs == {"forward": "forward(x: float32[2, 4]) -> float32[2, 3]",
                    "score$0": "score$0(x: float32[2, 4]) -> float32[2]",
                    "score$1": "score$1(x: float32[2, 4], y: float32[2, 4]) -> {'s': float32[2], 'd': float32[2, 3]}"}
    loaded = program.load()
    np.testing.assert_allclose(loaded.score(x), model.score(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    both = loaded.score(x, y)                     # the overload whose signature fits
    expected = model.score(x, y)
    assert set(both) == {"s", "d"}
    np.testing.assert_allclose(both["d"], expected["d"].detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loaded["score$1"](x, y=y)["s"], expected["s"].detach().numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=r"no overload of score accepts these arguments; the overloads are:\n"
                                        r"  score\$0\(x: float32\[2, 4\]\) -> float32\[2\]\n  score\$1"):
        loaded.score(x, y, y)


def test_weights_are_module_globals_shared_by_all_entry_points(scorer):
    _, _, _, program = scorer
    text = program.lowered_mlir
    globals_ = re.findall(r'util\.global private @"([^"]+)"', text)
    assert globals_ == ["__weight.lin.weight", "__weight.lin.bias"]
    loads = re.findall(r'util\.global\.load @"__weight\.lin\.weight"', text)
    assert len(loads) == 3  # one load per entry point, one global
    for entry in ("forward", "score$0", "score$1"):
        assert f'func.func @"{entry}"(' in text
    assert "func.func private @forward_impl(" in text and "linalg." in text
    assert list(program.weights) == ["lin.weight", "lin.bias"]
    tp_text = program.tp_mlir
    assert '"tp.matmul"' in tp_text or '"tp.linear"' in tp_text
    assert "func.func @score_1_impl(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<3x4xf32>" \
        in tp_text


def test_large_weights_are_elided_in_lowered_mlir_and_complete_in_save_mlir(gpt, tmp_path):
    program = gpt[2]
    assert 'util.global private @"__weight.transformer.wte.weight" = dense_resource<__elided__> : ' \
           'tensor<61x32xf32>' in program.lowered_mlir
    full = program.save_mlir(tmp_path / "gpt.mlir").read_text()
    assert 'util.global private @"__weight.transformer.wte.weight" = dense<"0x' in full
    assert full.count("util.global private") == program.lowered_mlir.count("util.global private") == 30
    # tied weights (wte and lm_head) are one global, read by both entry points
    assert program.lowered_mlir.count('util.global.load @"__weight.transformer.wte.weight"') == 2


def test_a_graph_break_is_an_error_with_the_users_line():
    def clamp_if_positive(x):
        if x.sum() > 0:  # break: needs a value
            return x.clamp(max=1.0)
        return x

    line = clamp_if_positive.__code__.co_firstlineno + 1
    with pytest.raises(GraphCaptureError) as info:
        tp.export(clamp_if_positive, (tp.ones(3),))
    message = str(info.value)
    assert f"graph break in forward at {__file__}:{line}: bool(tensor) needs the value of a captured tensor" \
        in message
    assert "if x.sum() > 0:" in message and "(export captures the whole program as one graph)" in message


def test_a_function_exports_as_forward_with_its_closure_tensors_as_weights():
    scale = tp.arange(0, 32, dtype=tp.float32).reshape(4, 8)
    program = tp.export(lambda x: x * scale + 1, (tp.ones(4, 8),), name="affine")
    assert program.entry_points == ["forward"] and program.name == "affine"
    assert list(program.weights) == ["tensor_0"]
    out = program.load(device="local-sync")(np.full((4, 8), 2, np.float32))
    np.testing.assert_array_equal(out, 2 * scale.detach().numpy() + 1)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(method_args={"score": (tp.ones(2, 4),)}), ValueError,
     r"Scorer.score has 2 @overload_method declarations, so it exports score\$0, score\$1: give a list with "
     r"example arguments for each declaration, in order \(got tuple\)"),
    (dict(method_args={"score": [(tp.ones(2, 4),), (tp.ones(2, 4), tp.ones(2, 4), 1)]}), TypeError,
     r"example arguments 1 of Scorer.score do not fit overload 1 score\(self, x: .*y: .*\) -> .?dict.?: too many "
     r"positional arguments"),
    (dict(method_args={"score": [(tp.ones(2, 4),), (tp.ones(2, 4),)], "debug": (tp.ones(2, 4),)}), ValueError,
     r"method_args names Scorer.debug, which is marked @tp.compiler.unused \(eager-only\) and cannot be "
     r"exported"),
    (dict(method_args={"score": [(tp.ones(2, 4),), (tp.ones(2, 4),)], "train": (True,)}), ValueError,
     r"method_args names Scorer.train, which is not marked @tp.compiler.export; mark it"),
    (dict(), ValueError,
     r"Scorer marks score with @tp.compiler.export; give example arguments: export\(model, args, "
     r"method_args=\{'score': \(...\)\}\)"),
    (dict(backend="eager"), ValueError,
     r"export compiles for the IREE backends iree-cpu, .*got backend='eager'"),
    (dict(options={"target_cpu": ""}), ValueError, r"compile option 'target_cpu' expects an LLVM CPU name"),
])
def test_export_argument_errors_say_what_to_do(kwargs, error, match):
    with pytest.raises(error, match=match):
        tp.export(Scorer(), (tp.ones(2, 4),), **kwargs)


def test_dynamic_shapes_static_entries_must_match_the_example():
    with pytest.raises(ValueError, match=r"input dim 0 is specified as 5 but has size 2"):
        tp.export(nn.Linear(4, 3), (tp.ones(2, 4),), dynamic_shapes={"input": (5, 4)})


def test_random_draws_and_in_place_updates_are_rejected():
    dropout = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train()
    with pytest.raises(ValueError, match=r"the method draws random numbers .*Call model.eval\(\) \(dropout\)"):
        tp.export(dropout, (tp.ones(2, 4),))
    norm = nn.BatchNorm1d(4).train()
    with pytest.raises(ValueError, match=r"the method updates buffer running_mean in place; .*call "
                                         r"model.eval\(\) before exporting"):
        tp.export(norm, (tp.ones(3, 4),))
    static = tp.export(norm.eval(), (tp.ones(3, 4),), dynamic_shapes={"input": (3, 4)})
    assert static.entry_points == ["forward"]
