"""benchmarks/bench.py: the machine header, the input styles and the ResNet-18 case's architecture
(the timings themselves are not asserted)."""

import importlib.util
import io
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_under_test", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up there)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_machine_header_names_cpu_target_and_versions(bench):
    lines = bench.machine_lines("iree-cpu", None, None)
    assert lines[0].startswith("machine: ") and platform.machine() in lines[0]
    assert "cores" in lines[1] and "load average" in lines[1]
    target = next(line for line in lines if "IREE target" in line)
    assert "--iree-hal-target-backends=llvm-cpu" in target and "--iree-llvmcpu-target-cpu=" in target
    versions = lines[-1] if "environment" not in lines[-1] else lines[-2]
    for name in ("tensorplay", "iree-base-compiler", "iree-base-runtime", "numpy", "torch"):
        assert f"{name} " in versions


def test_large_models_only_in_all(bench):
    assert {"resnet64", "resnet224", "gpt2"} <= set(bench.CASES)
    assert not {"resnet64", "resnet224", "gpt2"} & set(bench.DEFAULT_CASES)
    assert set(bench.DEFAULT_CASES) | {"resnet64", "resnet224", "gpt2"} == set(bench.CASES)


def test_input_styles(bench):
    built = (tp.tensor(np.arange(8192, dtype=np.float32)),)
    aligned = bench._styled(tp, built, "aligned")
    viewed = bench._styled(tp, built, "from_numpy")
    np.testing.assert_array_equal(np.asarray(aligned[0]), np.asarray(built[0]))
    np.testing.assert_array_equal(np.asarray(viewed[0]), np.asarray(built[0]))
    assert bench._offsets(aligned) == {0}  # tensorplay's own storage: 64-byte aligned
    # from_numpy shares the fresh array: a write through the tensor is seen in its memory
    viewed[0][0] = -1.0
    assert np.asarray(viewed[0])[0] == -1.0 and np.asarray(built[0])[0] == 0.0


@pytest.mark.iree
def test_run_prints_a_table_per_style(bench):
    out = io.StringIO()
    assert bench.run(["tiny"], "iree-cpu", 3, use_torch=False, out=out)
    text = out.getvalue()
    assert "inputs aligned:" in text and "inputs from_numpy:" in text
    rows = [line for line in text.splitlines() if line.startswith("tiny call")]
    assert len(rows) == 2 and all(" OK " in r for r in rows)


def test_resnet18_has_torchvisions_parameter_count(bench):
    model = bench._resnet18_model(tp)
    # torchvision.models.resnet18(): 11,689,512 parameters; 20 batch norms (the stem's, two in
    # each of the 8 blocks, one on each of the 3 downsampling shortcuts)
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    assert len([m for m in model.modules() if isinstance(m, tp.nn.BatchNorm2d)]) == 20
