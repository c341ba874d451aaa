"""Cross-compilation: the captured CNN compiled for Vulkan, CUDA and ROCm without those
devices, each file holding that target's executable; Vulkan runs on the software device."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import get_backend_capabilities

pytestmark = pytest.mark.iree

FORMATS = {"iree-vulkan": "vulkan-spirv-fb", "iree-cuda": "cuda-nvptx-fb", "iree-rocm": "rocm-hsaco-fb"}


@pytest.fixture(scope="module")
def targets(cnn, tmp_path_factory):
    """The CNN export compiled for each GPU backend (from the captured graphs), saved."""
    folder = tmp_path_factory.mktemp("targets")
    model, _, program, _, _ = cnn
    forward_calls = []
    hook = model.register_forward_hook(lambda *a: forward_calls.append(1))
    try:
        out = {b: program.to(b) for b in FORMATS}
    finally:
        hook.remove()
    assert forward_calls == []  # retargeting never runs the Python again
    return {b: (p, p.save(folder / f"cnn-{b}.vmfb")) for b, p in out.items()}


@pytest.mark.parametrize("backend", list(FORMATS))
def test_cross_compiled_files_hold_the_targets_executable(targets, backend, iree_tool):
    program, path = targets[backend]
    dump = subprocess.run([iree_tool("iree-dump-module"), str(path)], capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    assert f"`{FORMATS[backend]}`" in dump.stdout  # the executable format IREE selects at load time
    assert "embedded-elf-" not in dump.stdout
    assert "sync func @forward(%input0: tensor<2x1x12x12xf32>) -> (%output0: tensor<2x10xf32>)" in dump.stdout
    assert program.backend == backend and program.entry_points == ["forward"]


def test_gpu_targets_default_to_portable_architectures(targets):
    assert "--iree-cuda-target=sm_80" in targets["iree-cuda"][0].compile_flags
    assert "--iree-rocm-target=gfx942" in targets["iree-rocm"][0].compile_flags
    assert not any(f.startswith("--iree-vulkan-target") for f in targets["iree-vulkan"][0].compile_flags)
    tuned = tp.export(lambda x: x + 1, (tp.ones(2),), backend="iree-cuda", options={"cuda_target": "sm_86"})
    assert "--iree-cuda-target=sm_86" in tuned.compile_flags  # flags need no compile


@pytest.mark.vulkan
def test_vulkan_export_runs_on_the_software_device(targets, cnn):
    caps = get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"no Vulkan device: {caps.reason}")
    _, images, _, _, probs = cnn
    module = tp.runtime.load(targets["iree-vulkan"][1])
    assert module.driver == "vulkan"
    np.testing.assert_allclose(module.forward(images), probs, rtol=1e-5, atol=1e-5)


@pytest.mark.vulkan
def test_vulkan_small_dtypes_travel_widened_and_come_back_declared():
    caps = get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"no Vulkan device: {caps.reason}")

    def keep(mask, x):
        return tp.where(mask, x, tp.zeros_like(x)).to(tp.uint8), mask.logical_not()

    mask = tp.tensor(np.array([True, False, True, True, False]))
    x = tp.tensor(np.array([1, -2, 3, 4, 5], np.int8))
    program = tp.export(keep, (mask, x), backend="iree-vulkan")
    inputs = program.signatures["forward"].inputs
    assert [(s.dtype, s.abi_dtype) for s in inputs] == [("bool", "int32"), ("int8", "int32")]
    values, flipped = program.load()(mask, x)
    assert values.dtype == np.uint8 and values.tolist() == [1, 0, 3, 4, 0]
    assert flipped.dtype == np.bool_ and flipped.tolist() == [False, True, False, False, True]


@pytest.mark.cuda
def test_cuda_export_runs_on_a_gpu(targets, cnn):
    caps = get_backend_capabilities("iree-cuda")
    if not caps.available:
        pytest.skip(f"no CUDA device here ({caps.reason}); the file was still built and inspected")
    _, images, _, _, probs = cnn
    module = tp.runtime.load(targets["iree-cuda"][1])
    np.testing.assert_allclose(module.forward(images), probs, rtol=1e-4, atol=1e-5)


def test_a_cuda_file_is_not_loaded_on_the_cpu(targets):
    with pytest.raises(ValueError, match=r"was exported for iree-cuda \(cuda sm_80 code\), which the "
                                         r"'local-task' driver cannot run; load it with device='cuda'"):
        tp.runtime.load(targets["iree-cuda"][1], device="local-task")


def test_unsupported_dtypes_fail_at_export_not_at_save():
    with pytest.raises(TypeError, match="iree-vulkan cannot compile graph 'forward_impl': float64"):
        tp.export(lambda x: x * 2, (tp.ones(3, dtype=tp.float64),), backend="iree-vulkan")
