"""Exports with dynamic dimensions: one vmfb runs every size its dynamic_shapes allow, the
signature names the dynamic dims, and the runtime checks the bounds and relations the
capture recorded before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, runtime
from tensorplay.export import Dim
from tensorplay.runtime.signature import EntrySignature

from tests.export.conftest import gpt_with_encode

pytestmark = pytest.mark.iree

SEQ = Dim("seq", min=1, max=16)


@pytest.fixture(scope="module")
def gpt_dynamic(tmp_path_factory):
    """The nanoGPT-style model exported once with a dynamic sequence length (forward) and a
    dynamic batch and sequence (encode), saved: (model, program, vmfb path)."""
    model = gpt_with_encode()
    tokens = tp.tensor(np.random.default_rng(1).integers(0, 61, (2, 8)))
    program = tp.export(model, (tokens,), method_args={"encode": (tokens,)}, dynamic_shapes={"idx": {1: SEQ}},
                        method_dynamic_shapes={"encode": {"idx": {0: "batch", 1: SEQ}}})
    path = program.save(tmp_path_factory.mktemp("gpt-dynamic") / "gpt.vmfb")
    return model, program, path


def test_signatures_name_the_dynamic_dims(gpt_dynamic):
    _, program, _ = gpt_dynamic
    forward, encode = program.signatures["forward"], program.signatures["encode"]
    assert str(forward) == "forward(idx: int64[2, seq]) -> (float32[2, 1, 61], None)"
    assert str(encode) == "encode(idx: int64[batch, seq]) -> float32[batch, seq, 32]"
    assert forward.dynamic and encode.dynamic
    # the Dim's bounds are the only checks: the model's `t <= block_size` holds within them
    assert [why for _, why in forward.dims["checks"]] == ["idx.size(1) >= 1", "idx.size(1) <= 16"]
    assert "tensor<2x?xi64>" in program.lowered_mlir


def test_one_file_runs_several_sequence_lengths(gpt_dynamic):
    model, _, path = gpt_dynamic
    loaded = runtime.load(path)
    rng = np.random.default_rng(3)
    for t in (1, 5, 16, 9):
        idx = rng.integers(0, 61, (2, t))
        logits, loss = loaded.forward(idx)
        want, _ = model(tp.tensor(idx))
        assert loss is None
        np.testing.assert_allclose(logits, want.detach().numpy(), rtol=1e-5, atol=1e-5)
    for b, t in ((1, 3), (5, 16), (3, 1)):
        idx = rng.integers(0, 61, (b, t))
        hidden = loaded.encode(idx)
        assert hidden.shape == (b, t, 32)
        np.testing.assert_allclose(hidden, model.encode(tp.tensor(idx)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_calls_outside_the_bounds_are_clear_errors(gpt_dynamic):
    _, _, path = gpt_dynamic
    loaded = runtime.load(path)
    with pytest.raises(ValueError, match=r"forward\(idx: int64\[2, seq\]\) -> .*: the argument sizes break "
                                         r"idx.size\(1\) <= 16 \(got idx=\[2, 17\]\)"):
        loaded.forward(np.zeros((2, 17), np.int64))
    with pytest.raises(ValueError, match=r"idx.size\(1\) >= 1"):
        loaded.encode(np.zeros((2, 0), np.int64))
    with pytest.raises(ValueError, match=r"argument 'idx' has size 3 at dim 0, expected 2 \(only the named "
                                         r"dims of \[2, seq\] may vary\)"):
        loaded.forward(np.zeros((3, 4), np.int64))
    with pytest.raises(ValueError, match=r"argument 'idx' has 3 dims \[2, 4, 1\], expected 2: \[2, seq\]"):
        loaded.forward(np.zeros((2, 4, 1), np.int64))


def test_inputs_sharing_a_dim_are_checked_together(tmp_path):
    def add(x, y):
        return x * 2 + y

    program = tp.export(add, (tp.ones(3, 2), tp.ones(3, 2)), dynamic_shapes={"x": {0: "n"}, "y": {0: "n"}})
    signature = program.signatures["forward"]
    assert str(signature) == "forward(x: float32[n, 2], y: float32[n, 2]) -> float32[n, 2]"
    assert signature.dims["checks"] == [["a1[0] == v0", "y.size(0) == x.size(0)"]]
    loaded = runtime.load(program.save(tmp_path / "add.vmfb"))
    x, y = np.arange(14, dtype=np.float32).reshape(7, 2), np.ones((7, 2), np.float32)
    np.testing.assert_array_equal(loaded(x, y), x * 2 + y)
    with pytest.raises(ValueError, match=r"the argument sizes break y.size\(0\) == x.size\(0\) "
                                         r"\(got x=\[7, 2\], y=\[6, 2\]\)"):
        loaded(x, np.ones((6, 2), np.float32))


def test_relations_the_program_needs_become_runtime_checks():
    def halves(x):
        n = x.shape[0]
        assert n % 2 == 0, "needs an even length"
        return x[: n // 2] + x[n // 2:]

    program = tp.export(halves, (tp.arange(8.0),), dynamic_shapes={"x": {0: Dim("n", max=100)}})
    signature = program.signatures["forward"]
    assert str(signature) == "forward(x: float32[n]) -> float32[n // 2]"
    loaded = program.load()
    for n in (2, 10, 64):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(loaded(x), x[: n // 2] + x[n // 2:])
    with pytest.raises(ValueError, match=r"the argument sizes break .*x.size\(0\) % 2.* \(got x=\[7\]\)"):
        loaded(np.arange(7, dtype=np.float32))
    with pytest.raises(ValueError, match=r"x.size\(0\) <= 100"):
        loaded(np.zeros(102, np.float32))


def test_a_named_dim_the_program_pins_is_an_error_with_the_reason():
    def fixed(x):
        return x.reshape(2, 3)

    with pytest.raises(ValueError, match=r"dynamic_shapes: x.size\(0\) is named 'batch' \(dynamic\), but the "
                                         r"program requires it to be the constant 2"):
        tp.export(fixed, (tp.ones(2, 3),), dynamic_shapes={"x": {0: "batch"}})


def test_dynamic_shapes_errors_name_the_argument():
    linear = nn.Linear(4, 3)
    with pytest.raises(ValueError, match=r"dynamic_shapes: input dim 0 \('batch'\) has size 2, outside "
                                         r"Dim\('batch', min=4, max=8\)'s range \[4, 8\]"):
        tp.export(linear, (tp.ones(2, 4),), dynamic_shapes={"input": {0: Dim("batch", min=4, max=8)}})
    with pytest.raises(ValueError, match=r"dynamic_shapes names 'x', which is not a parameter"):
        tp.export(linear, (tp.ones(2, 4),), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(ValueError, match=r"method_dynamic_shapes\['decode'\]=...\) describes decode's "
                                         r"arguments, but 'decode' is not an exported method"):
        tp.export(linear, (tp.ones(2, 4),), method_dynamic_shapes={"decode": {"x": {0: "n"}}})


def test_static_signatures_keep_format_1_and_tampered_checks_are_refused():
    program = tp.export(nn.Linear(4, 3), (tp.ones(2, 4),))
    text = program.signatures["forward"].to_json()
    assert json.loads(text)["v"] == 1 and "dims" not in json.loads(text)
    dynamic = tp.export(nn.Linear(4, 3), (tp.ones(2, 4),), dynamic_shapes={"input": {0: "batch"}})
    data = json.loads(dynamic.signatures["forward"].to_json())
    assert data["v"] == 2 and data["inputs"][0]["shape"] == ["batch", 4]
    data["dims"]["checks"] = [["__import__('os').system('true') == 0", "evil"]]
    with pytest.raises(ValueError, match=r"size check .* holds Call, which size checks never use"):
        EntrySignature.from_json(json.dumps(data))


def test_a_dynamic_file_runs_in_a_process_without_the_compiler(gpt_dynamic, tmp_path, subprocess_env):
    model, _, path = gpt_dynamic
    script = (
        "import sys, json, numpy as np\n"
        "sys.modules['iree.compiler'] = None\n"
        "from tensorplay import runtime\n"
        "m = runtime.load(sys.argv[1])\n"
        "out = {t: m.forward(np.arange(2 * t).reshape(2, t) % 61)[0].tolist() for t in (2, 11)}\n"
        "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          env=subprocess_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for t in (2, 11):
        want, _ = model(tp.tensor(np.arange(2 * t).reshape(2, t) % 61))
        np.testing.assert_allclose(np.array(out[str(t)]), want.detach().numpy(), rtol=1e-5, atol=1e-5)
