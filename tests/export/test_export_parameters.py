"""Weights in an IREE parameter archive (.irpa): loaded by the runtime and by
iree-run-module; replacing a weight in the archive changes results without recompiling."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.backends import cache

pytestmark = pytest.mark.iree


def test_external_weights_live_in_the_archive_not_the_vmfb(cnn, cnn_external):
    _, _, embedded, embedded_path, _ = cnn
    _, _, program, path, archive = cnn_external
    assert archive.exists()
    assert path.stat().st_size < embedded_path.stat().st_size - 0.8 * sum(
        a.nbytes for a in embedded.weights.values())
    stored = tp.runtime.load_parameters(archive)
    assert list(stored) == list(program.weights) == ["features.0.weight", "features.0.bias",
                                                     "features.3.weight", "features.3.bias", "fc1.weight",
                                                     "fc1.bias", "fc2.weight", "fc2.bias"]
    for key, array in program.weights.items():
        np.testing.assert_array_equal(stored[key], array)
    assert '#stream.parameter.named<"model"::"fc2.bias">' in program.lowered_mlir


def test_replacing_a_weight_in_the_archive_changes_results_without_recompiling(cnn_external, tmp_path):
    model, images, program, path, archive = cnn_external
    before = tp.runtime.load(path).forward(images)
    np.testing.assert_allclose(before, model(images).detach().numpy(), rtol=1e-5, atol=1e-5)
    compiles = cache.cache_stats()["compiles"]
    vmfb = path.read_bytes()

    weights = tp.runtime.load_parameters(archive)
    weights["fc2.bias"] = weights["fc2.bias"] + np.arange(10, dtype=np.float32)
    replaced = tmp_path / "replaced.irpa"
    tp.runtime.save_parameters(replaced, weights)
    after = tp.runtime.load(path, parameters=replaced).forward(images)

    with tp.no_grad():
        model.fc2.bias.add_(tp.arange(0, 10, dtype=tp.float32))
    try:
        np.testing.assert_allclose(after, model(images).detach().numpy(), rtol=1e-5, atol=1e-5)
    finally:
        with tp.no_grad():
            model.fc2.bias.sub_(tp.arange(0, 10, dtype=tp.float32))
    assert not np.allclose(after, before)
    assert cache.cache_stats()["compiles"] == compiles and path.read_bytes() == vmfb


def test_save_parameters_writes_a_new_state_for_the_same_vmfb(cnn_external, tmp_path):
    model, images, program, path, _ = cnn_external
    state = {k: v.detach().numpy() * 0.5 for k, v in model.state_dict().items()}
    program.save_parameters(tmp_path / "half.irpa", state)
    halved = tp.runtime.load(path, parameters=tmp_path / "half.irpa").forward(images)
    in_memory = tp.runtime.load(path, parameters=state).forward(images)   # {key: array} works too
    np.testing.assert_array_equal(halved, in_memory)
    assert not np.allclose(halved, tp.runtime.load(path).forward(images))
    with pytest.raises(ValueError, match=r"save_parameters: 'fc2.bias' has shape \[3\], the program was "
                                         r"exported with \[10\]"):
        program.save_parameters(tmp_path / "bad.irpa", {**state, "fc2.bias": np.zeros(3, np.float32)})


def test_a_missing_or_incomplete_archive_is_a_clear_error(cnn_external, tmp_path):
    _, _, _, path, archive = cnn_external
    alone = tmp_path / "alone.vmfb"
    alone.write_bytes(path.read_bytes())
    with pytest.raises(FileNotFoundError, match=r"alone keeps its weights in a parameter archive \(saved as "
                                                r"'Net.irpa'\), and none was found next to .*alone.vmfb; pass "
                                                r"parameters='path/to/archive.irpa'"):
        tp.runtime.load(alone)
    partial = tp.runtime.load_parameters(archive)
    del partial["fc1.weight"]
    with pytest.raises(ValueError, match=r"alone: the parameter archive the parameters mapping has no entry "
                                         r"'fc1.weight' \(expected float32\[32, 64\]\)"):
        tp.runtime.load(alone, parameters=partial)
    partial["fc1.weight"] = np.zeros((32, 63), np.float32)
    with pytest.raises(ValueError, match=r"parameter 'fc1.weight' in the parameters mapping has 8064 bytes, "
                                         r"but the program expects float32\[32, 64\] \(8192 bytes\)"):
        tp.runtime.load(alone, parameters=partial)


def test_iree_run_module_reads_the_archive(cnn_external, tmp_path, iree_tool):
    model, images, _, path, archive = cnn_external
    np.save(tmp_path / "images.npy", images.detach().numpy())
    out = tmp_path / "out.npy"
    proc = subprocess.run([iree_tool("iree-run-module"), f"--module={path}", f"--parameters=model={archive}",
                           "--function=forward", f"--input=@{tmp_path / 'images.npy'}", f"--output=@{out}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(out), model(images).detach().numpy(), rtol=1e-5, atol=1e-5)
