"""The package list in pyproject.toml covers every package in the tree, so `pip install .`
(not only the editable install) ships all of them; the top-level folders import only under
their installed names."""

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_lists_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top, dotted in config["package-dir"].items():
        base = ROOT / dotted
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join((top, *rel)))
    # a mapped folder's packages are listed under their tensorplay.* name
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert listed - found == set(), f"packages listed but absent: {sorted(listed - found)}"


def test_runtime_dependencies_are_declared():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in deps}
    assert {"numpy", "sympy", "iree-base-compiler", "iree-base-runtime", "ml_dtypes"} <= names


def test_runtime_import_loads_neither_the_compiler_nor_capture():
    import subprocess
    import sys

    code = ("import sys, tensorplay.runtime\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('tensorplay.compiler', 'tensorplay.export',"
            " 'tensorplay.passes', 'iree.compiler')))\n"
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_import_and_eager_static_work_load_neither_sympy_nor_ml_dtypes_nor_iree():
    # they cost more to import than the rest of tensorplay: loaded when symbolic sizes,
    # bfloat16 or a compile first need them
    code = ("import sys, tensorplay as tp\n"
            "x = tp.randn(3, 4); m = tp.nn.Linear(4, 2)\n"
            "y = (m(x).softmax(-1) @ x[:2, 1:3]).reshape(-1).sum(); tp.cat([x, x]).float().detach().numpy()\n"
            "print(sorted(m for m in ('sympy', 'ml_dtypes', 'iree.runtime', 'iree.compiler') if m in sys.modules))\n"
            "b = x.to(tp.bfloat16); assert tp.tensor(b.detach().numpy()).dtype is tp.bfloat16\n"
            "print('ml_dtypes' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True"]


@pytest.mark.parametrize("module", ["dialects", "dialects.tp", "passes", "passes.lowering", "tools.tpc_opt"])
def test_top_level_folders_cannot_be_imported_under_their_bare_names(module):
    # From the repository root the folders are on sys.path; a bare import would load a second
    # op registry and TensorType beside tensorplay.dialects. It must fail, saying what to import.
    top = module.split(".")[0]
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: the folder ") and f"import it as 'tensorplay.{top}'" in last, last
    assert "pip install -e ." in last


def test_the_installed_names_give_one_registry():
    proc = subprocess.run([sys.executable, "-c",
                           "import tensorplay, tensorplay.dialects.tp as d, tensorplay.passes.lowering, sys; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dialects', 'passes', 'tools')))"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
