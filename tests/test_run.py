"""The PyTorch script runner (``python -m tensorplay.run``), the torch-name alias, and the device
probes scripts use (docs/runner.md)."""

import contextlib
import importlib
import io
import os
import re
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tensorplay as tp
from tensorplay.run import TorchNameError, compile_modules, main, run_path, torch_alias

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "data" / "runner_script.py"


def _has_data_loading() -> bool:
    try:
        data = importlib.import_module("tensorplay.utils.data")
    except ImportError:
        return False
    return hasattr(data, "DataLoader") and hasattr(data, "TensorDataset")


def _run(*args, cwd=None, env=None):
    # on the host, as the CPU build of PyTorch the losses are compared with (the script picks
    # "cuda" when tp.cuda.is_available())
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=300, check=False,
                          cwd=cwd, env=env)


def _losses(stdout: str) -> list[float]:
    return [float(v) for v in re.findall(r"^step \d+ loss (\S+)", stdout, re.MULTILINE)]


# the script's options for both runs: batches from torch.utils.data where tensorplay has it
_OPTIONS = ["--steps", "6"] + (["--loader"] if _has_data_loading() else [])


@pytest.fixture(scope="module")
def pytorch_runs():
    """The script's output under PyTorch itself, per optimizer (run in this process, as
    ``python SCRIPT`` would run it: the script only prints)."""
    torch = pytest.importorskip("torch")
    out = {}
    argv, benchmark = sys.argv[:], torch.backends.cudnn.benchmark
    try:
        for name in ("sgd", "adam"):
            sys.argv = [str(SCRIPT), "--optim", name, *_OPTIONS]
            with contextlib.redirect_stdout(io.StringIO()) as stdout:
                runpy.run_path(str(SCRIPT), run_name="__main__")
            out[name] = stdout.getvalue()
    finally:
        sys.argv, torch.backends.cudnn.benchmark = argv, benchmark
    return out


def _check_same_run(ours: str, theirs: str) -> None:
    a, b = _losses(ours), _losses(theirs)
    assert len(a) == len(b) == 6, ours
    # float32 training, sums in another order than PyTorch's kernels: the losses differ by at
    # most 2.4e-7 here (measured); 2e-6 leaves room for the compiled kernels' order
    assert a == pytest.approx(b, rel=0, abs=2e-6), (ours, theirs)
    # everything else the script prints (argv, device, learning rates, accuracy) is the same
    strip = re.compile(r" loss \S+")
    assert strip.sub("", ours) == strip.sub("", theirs)


def test_script_runs_unmodified_with_pytorch_losses(pytorch_runs, tmp_path):
    # run from another folder: the script's own folder is on sys.path, argv is the script's
    proc = _run("-m", "tensorplay.run", SCRIPT, "--optim", "adam", *_OPTIONS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"argv {['--optim', 'adam', *_OPTIONS]}" in proc.stdout
    _check_same_run(proc.stdout, pytorch_runs["adam"])


@pytest.mark.iree  # compiles, in a subprocess the watch in conftest.py does not see
def test_compile_option_compiles_the_model_with_the_same_losses(pytorch_runs):
    # SGD with momentum here, Adam in the eager run above
    proc = _run("-m", "tensorplay.run", "--compile", "--backend", "iree-cpu", "--", SCRIPT, "--optim", "sgd",
                *_OPTIONS, env={"TENSORPLAY_LOGS": "perf"})
    assert proc.returncode == 0, proc.stderr
    _check_same_run(proc.stdout, pytorch_runs["sgd"])
    # the model and the loss module are the graphs compiled, not their submodules
    assert "'MLP'" in proc.stderr and "'CrossEntropyLoss'" in proc.stderr
    assert "'Linear'" not in proc.stderr


def test_missing_torch_names_fail_naming_them(tmp_path):
    script = tmp_path / "uses_missing.py"
    script.write_text("import torch\nimport torch.nn as nn\nlayer = nn.NoSuchLayer(3)\n")
    proc = _run("-m", "tensorplay.run", script)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tensorplay.run.TorchNameError: torch.nn.NoSuchLayer ")
    assert "docs/coverage.md" in last
    assert f'File "{script}", line 3' in proc.stderr  # the script's frame, not the runner's
    assert "runpy" not in proc.stderr and "_torch_alias.py" not in proc.stderr


def test_alias_maps_torch_modules_to_tensorplay_and_restores_sys_modules():
    try:  # a real PyTorch loaded before is set aside, then put back
        import torch as real
    except ImportError:
        real = None
    before = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    meta_path = list(sys.meta_path)
    with torch_alias() as alias:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.optim.lr_scheduler
        from torch.optim.lr_scheduler import StepLR

        assert alias is torch is tp and nn is tp.nn and F is tp.nn.functional
        assert sys.modules["torch.nn"] is tp.nn and torch.nn.Module is tp.nn.Module
        assert StepLR is tp.optim.lr_scheduler.StepLR and torch.optim.lr_scheduler is tp.optim.lr_scheduler
        assert tp.nn.__spec__.name == "tensorplay.nn"  # the module keeps its own spec
        for owner, expr, name in ((torch, "torch.foo", "foo"), (nn, "torch.nn.Foo", "Foo"),
                                  (F, "torch.nn.functional.bar", "bar")):
            assert not hasattr(owner, name)
            assert getattr(owner, name, 7) == 7
            with pytest.raises(TorchNameError, match=re.escape(expr) + ".*docs/coverage.md"):
                getattr(owner, name)
        with pytest.raises(ModuleNotFoundError, match=r"'torch\.no_such'.*docs/coverage\.md") as info:
            importlib.import_module("torch.no_such")
        assert info.value.name == "torch.no_such"
        with torch_alias():  # nested: the same alias
            assert sys.modules["torch"] is tp
        assert sys.modules["torch"] is tp
    assert {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")} == before
    assert sys.modules.get("torch") is real and sys.meta_path == meta_path
    # tensorplay's modules are as they were: a plain AttributeError, no hook left
    assert "__getattr__" not in vars(tp.nn) and "__getattr__" not in vars(tp.nn.functional)
    with pytest.raises(AttributeError) as info:
        _ = tp.nn.Foo
    assert type(info.value) is AttributeError


def test_run_path_gives_the_script_argv_main_and_its_folder(tmp_path):
    (tmp_path / "helper_mod_for_run.py").write_text("VALUE = 3\n")
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import helper_mod_for_run
        ARGV = list(sys.argv)
        NAME = __name__
        OUT = torch.ones(2).sum().item() * helper_mod_for_run.VALUE
    """))
    argv, path = sys.argv[:], sys.path[:]
    try:
        result = run_path(script, ["-x", "1"])
    finally:
        sys.modules.pop("helper_mod_for_run", None)
    assert result["ARGV"] == [str(script), "-x", "1"] and result["NAME"] == "__main__" and result["OUT"] == 6.0
    assert sys.argv == argv and sys.path == path
    assert sys.modules.get("torch") is not tp


def test_compile_modules_compiles_top_level_calls_only(monkeypatch):
    from tensorplay.compiler import api

    compiled = []
    real_compile = api.compile

    def counting(model, **options):
        compiled.append(type(model).__name__)
        return real_compile(model, **options)

    monkeypatch.setattr(api, "compile", counting)
    original = tp.nn.Module.__call__
    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(4, 3), tp.nn.ReLU(), tp.nn.Linear(3, 2))
    x = tp.randn(5, 4)
    expected = model(x)
    with compile_modules(backend="eager"):
        for _ in range(2):
            out = model(x)
            assert tp.allclose(out, expected, rtol=0, atol=0)  # the eager backend runs the same references
        model[0](x)  # a submodule called on its own is a top-level call too
    assert compiled == ["Sequential", "Linear"]
    assert tp.nn.Module.__call__ is original
    model(x)
    assert compiled == ["Sequential", "Linear"]  # afterwards modules run eagerly again


def test_command_line_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "--compile" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["--compile"])
    assert info.value.code == 2 and "the script to run is missing" in capsys.readouterr().err
    assert main([str(tmp_path / "absent.py")]) == 2
    assert "can't open file" in capsys.readouterr().err
    script = tmp_path / "ok.py"
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(SystemExit) as info:
        main(["--backend", "no-such-backend", str(script)])
    assert info.value.code == 2 and "no-such-backend" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--", str(script)])
    assert info.value.code == 3  # the script's own exit status


def test_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'tensorplay-run = "tensorplay.run:main"' in text


# --- device probes ---------------------------------------------------------------------------------

def test_cuda_probe_agrees_with_the_backend_probe():
    from tensorplay.compiler.backends import probe

    available = probe.capabilities("iree-cuda").available
    assert tp.cuda.is_available() is available
    assert tp.cuda.device_count() == (1 if available else 0)
    tp.cuda.manual_seed(1)
    tp.cuda.manual_seed_all(1)
    with pytest.raises(TypeError, match="manual_seed"):
        tp.cuda.manual_seed(1.5)
    if available:
        assert tp.cuda.current_device() == 0 and isinstance(tp.cuda.get_device_name(), str)
        tp.cuda.synchronize()
        with pytest.raises(ValueError, match="cuda device 0"):
            tp.cuda.synchronize("cuda:1")
    else:
        for fn in (tp.cuda.current_device, tp.cuda.get_device_name, tp.cuda.synchronize):
            with pytest.raises(RuntimeError, match=r"tp\.cuda\.\w+\(\): no CUDA device"):
                fn()


def test_accelerator_is_the_first_hardware_gpu():
    from tensorplay.compiler.backends import probe

    expected = None
    for kind, backend in (("cuda", "iree-cuda"), ("hip", "iree-rocm"), ("vulkan", "iree-vulkan")):
        caps = probe.capabilities(backend)
        if caps.available and not caps.extra.get("software_device"):
            expected = kind
            break
    acc = tp.accelerator.current_accelerator()
    assert (acc.type if acc is not None else None) == expected
    assert acc is None or isinstance(acc, tp.device)
    assert tp.accelerator.is_available() is (expected is not None)
    assert tp.accelerator.device_count() == (expected is not None)
    if expected is None:
        with pytest.raises(RuntimeError, match="no accelerator"):
            tp.accelerator.synchronize()
    else:
        assert tp.accelerator.current_device_index() == 0
        tp.accelerator.synchronize()


def test_backend_flags_are_settable_and_mps_is_absent(monkeypatch):
    assert tp.backends.mps.is_available() is False and tp.backends.mps.is_built() is False
    assert tp.backends.cudnn.is_available() is False
    assert (tp.backends.cudnn.enabled, tp.backends.cudnn.benchmark, tp.backends.cudnn.deterministic) == (
        True, False, False)
    assert tp.backends.cuda.matmul.allow_tf32 is False
    monkeypatch.setattr(tp.backends.cudnn, "benchmark", True)
    assert tp.backends.cudnn.benchmark is True
    matmul = tp.backends.cuda.matmul
    monkeypatch.setattr(matmul, "allow_tf32", True)
    assert matmul.allow_tf32 is True
    with pytest.raises(AttributeError):
        matmul.allow_tf64 = True


def test_torch_names_of_the_probes_match_pytorch():
    torch = pytest.importorskip("torch")
    for module, names in ((tp.cuda, ("is_available", "device_count", "current_device", "get_device_name",
                                     "synchronize", "manual_seed", "manual_seed_all")),
                          (tp.accelerator, ("is_available", "current_accelerator", "device_count",
                                            "current_device_index", "set_device_index", "synchronize"))):
        torch_module = getattr(torch, module.__name__.rpartition(".")[2])
        for name in names:
            assert hasattr(torch_module, name), name
    assert torch.backends.cudnn.enabled is True  # PyTorch's defaults, the ones tensorplay starts with
    assert torch.backends.cuda.matmul.allow_tf32 == tp.backends.cuda.matmul.allow_tf32


# --- docs/coverage.md ------------------------------------------------------------------------------

def test_coverage_snapshot_and_page():
    from tensorplay.tools import coverage

    snapshot = coverage.load_snapshot()
    assert list(snapshot["modules"]) == list(coverage.MODULES)
    for module, names in snapshot["modules"].items():
        assert names == sorted(set(names)) and names, module
    table = coverage.coverage(snapshot)
    # what the page says is present is what the runner gives a script, and the reverse
    with torch_alias():
        for module, entry in table.items():
            try:
                torch_module = importlib.import_module(module)
            except ModuleNotFoundError:
                assert not entry["present"]
                continue
            for name in entry["present"][:40] + entry["missing"][:40]:
                assert hasattr(torch_module, name) == (name in entry["present"]), (module, name)
    assert "Linear" in table["torch.nn"]["present"] and "SGD" in table["torch.optim"]["present"]
    # every documented difference is a name tensorplay provides
    for name in coverage.DIFFERENCES:
        module, _, attr = name.rpartition(".")
        assert attr in table[module]["present"], name
    page = coverage.render()
    for module, entry in table.items():
        n = len(entry["present"]) + len(entry["missing"])
        assert f"| [`{module}`](#{module.replace('.', '')}) | {n} | {len(entry['present'])} |" in page
        assert f"\n### {module}\n" in page
    missing = next(n for n in table["torch"]["missing"])
    assert f"`{missing}`" in page


def test_coverage_snapshot_is_pytorch_names():
    torch = pytest.importorskip("torch")
    from tensorplay.tools import coverage

    snapshot = coverage.load_snapshot()
    if torch.__version__.split("+")[0] != snapshot["torch_version"]:
        pytest.skip(f"the snapshot is of PyTorch {snapshot['torch_version']}, {torch.__version__} is installed")
    for module in coverage.MODULES:
        assert coverage.public_names(importlib.import_module(module)) == snapshot["modules"][module], (
            f"{module}: tests/data/torch_names.json is stale; run python -m tensorplay.tools.coverage "
            "--refresh-snapshot")
    # no submodules or typing helpers among the names of modules without __all__
    assert "functional" not in snapshot["modules"]["torch.nn"] and "Optional" not in snapshot["modules"][
        "torch.nn.functional"]
    assert "relu" in snapshot["modules"]["torch.nn.functional"]
