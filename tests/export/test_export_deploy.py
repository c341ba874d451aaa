"""Deployment of exported vmfbs: a fresh Python without the IREE compiler loads and runs
them through tensorplay.runtime, and IREE's own tools run and describe the same files."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tests.export.conftest import WITHOUT_COMPILER

pytestmark = pytest.mark.iree

ROOT = Path(__file__).resolve().parents[2]

# deployment machines have iree-base-runtime and numpy, not the compiler
DEPLOY = WITHOUT_COMPILER + textwrap.dedent("""
    import tensorplay as tp
    from tensorplay import runtime

    case = json.loads(sys.argv[1])
    data = np.load(case["inputs"])
    gpt = runtime.load(case["gpt"])
    logits, loss = gpt.forward(data["tokens"])
    hidden = gpt.encode(tp.tensor(data["tokens"]))        # tensorplay tensors work as well
    cnn = runtime.load(case["cnn"], device="local-sync")
    probs = cnn(data["images"])
    cnn_irpa = runtime.load(case["cnn_irpa"])              # finds cnn.irpa next to the vmfb
    probs_irpa = cnn_irpa.forward(data["images"])
    np.savez(case["outputs"], logits=logits, hidden=hidden, probs=probs, probs_irpa=probs_irpa)
    print(json.dumps({"loss": loss, "entry_points": gpt.entry_points,
                      "types": [type(x).__name__ for x in (logits, hidden, probs)],
                      "compiler_modules": sorted(m for m in sys.modules if m.startswith("iree.compiler")),
                      "blocked": "iree.compiler" not in sys.modules}))
""")


def test_exported_models_run_in_a_process_without_the_compiler(gpt, cnn, cnn_external, tmp_path,
                                                                subprocess_env):
    _, tokens, _, gpt_path, logits, hidden = gpt
    cnn_model, images, _, cnn_path, probs = cnn
    irpa_model, irpa_images, _, irpa_path, _ = cnn_external
    np.testing.assert_array_equal(images.detach().numpy(), irpa_images.detach().numpy())
    np.savez(tmp_path / "inputs.npz", tokens=tokens.detach().numpy(), images=images.detach().numpy())
    case = {"inputs": str(tmp_path / "inputs.npz"), "outputs": str(tmp_path / "outputs.npz"),
            "gpt": str(gpt_path), "cnn": str(cnn_path), "cnn_irpa": str(irpa_path)}
    proc = subprocess.run([sys.executable, "-c", DEPLOY, json.dumps(case)], capture_output=True, text=True,
                          cwd=tmp_path, env=subprocess_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"loss": None, "entry_points": ["forward", "encode"], "types": ["ndarray"] * 3,
                      "compiler_modules": [], "blocked": True}
    assert "leaked" not in proc.stderr
    out = np.load(tmp_path / "outputs.npz")
    np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["hidden"], hidden, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["probs"], probs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["probs_irpa"], irpa_model(irpa_images).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_runtime_package_imports_only_the_iree_runtime_and_numpy():
    allowed = {"iree.runtime", "numpy", "ml_dtypes"}
    for path in sorted((ROOT / "tensorplay" / "runtime").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # inside tensorplay.runtime
                    assert node.level == 1, f"{path.name} imports from outside tensorplay.runtime"
                    continue
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert name in allowed or top in sys.stdlib_module_names or top == "__future__", \
                    f"{path.name} imports {name}"


def test_same_vmfb_runs_under_iree_run_module(gpt, cnn, tmp_path, iree_tool):
    run = iree_tool("iree-run-module")
    _, tokens, _, gpt_path, logits, hidden = gpt
    _, images, _, cnn_path, probs = cnn
    np.save(tmp_path / "tokens.npy", tokens.detach().numpy())
    np.save(tmp_path / "images.npy", images.detach().numpy())
    cases = [(gpt_path, "forward", "tokens.npy", logits), (gpt_path, "encode", "tokens.npy", hidden),
             (cnn_path, "forward", "images.npy", probs)]
    for path, function, inputs, expected in cases:
        out = tmp_path / f"{path.stem}-{function}.npy"
        proc = subprocess.run([run, f"--module={path}", "--device=local-task", f"--function={function}",
                               f"--input=@{tmp_path / inputs}", f"--output=@{out}"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-5, atol=1e-5)


def test_iree_dump_module_shows_entry_point_signatures(gpt, iree_tool):
    dump = subprocess.run([iree_tool("iree-dump-module"), str(gpt[3])], capture_output=True, text=True,
                          timeout=60)
    assert dump.returncode == 0, dump.stderr
    text = dump.stdout
    assert "sync func @forward(%input0: tensor<2x8xi64>) -> (%output0: tensor<2x1x61xf32>)" in text
    assert "sync func @encode(%input0: tensor<2x8xi64>) -> (%output0: tensor<2x8x32xf32>)" in text
    signatures = [json.loads(line.split("tensorplay.signature: ", 1)[1]) for line in text.splitlines()
                  if "tensorplay.signature: " in line]
    assert [(s["name"], s["inputs"][0]["name"], s["inputs"][0]["shape"]) for s in signatures] == \
        [("forward", "idx", [2, 8]), ("encode", "idx", [2, 8])]
    assert signatures[0]["tree"] == {"t": "tuple", "c": [{"t": "out", "i": 0}, {"t": "const", "v": None}]}
    assert "embedded-elf-" in text  # the llvm-cpu executable


def test_loaded_entry_points_check_arguments_before_running(cnn):
    _, images, program, path, probs = cnn
    module = tp.runtime.load(path, device="local-sync")
    assert repr(module) == "<ExportedModule cnn on local-sync: forward>"
    assert str(module.signatures["forward"]) == "forward(x: float32[2, 1, 12, 12]) -> float32[2, 10]"
    np.testing.assert_allclose(module.forward(images), probs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(module(x=images.detach().numpy()), probs, rtol=1e-5, atol=1e-5)
    signature = r"forward\(x: float32\[2, 1, 12, 12\]\) -> float32\[2, 10\]"
    with pytest.raises(TypeError, match=signature + r" takes 1 tensor argument\(s\) but 2 were given"):
        module.forward(images, images)
    with pytest.raises(ValueError, match=signature + r": argument 'x' has shape \[1, 1, 12, 12\], expected "
                                                     r"\[2, 1, 12, 12\] \(this entry point was exported with static "
                                                     r"shapes; .* or with dynamic_shapes naming the dims "
                                                     r"that vary\)"):
        module.forward(np.zeros((1, 1, 12, 12), np.float32))
    with pytest.raises(TypeError, match=signature + r": argument 'x' has dtype float64, expected float32"):
        module.forward(np.zeros((2, 1, 12, 12)))
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'images'"):
        module.forward(images=images)
    with pytest.raises(AttributeError, match="cnn has no entry point 'encode'; entry points: forward"):
        module.encode
    module.close()


def test_load_rejects_a_device_the_file_was_not_compiled_for(cnn):
    with pytest.raises(ValueError, match=r"cnn was exported for iree-cpu \(llvm-cpu [\w-]+ code\), which the "
                                         r"'vulkan' driver cannot run; load it with device='local-task' or "
                                         r"'local-sync'"):
        tp.runtime.load(cnn[3], device="vulkan")
