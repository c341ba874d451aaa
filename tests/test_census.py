"""tools/census.py: the census of the PyTorch names example code uses, and its report."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import types

import pytest
from tensorplay.tools import census

SAMPLE = textwrap.dedent("""\
    import os
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch import optim
    from torch.utils.data import DataLoader


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            nn.init.zeros_(self.fc.bias)
            self.float()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x.view(x.size(0), -1)
            return F.relu(self.fc(x)).masked_fill_(x[:, :2] > 0, 0.0)


    def main():
        model = Net()
        opt = optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, 1)
        torch.backends.cudnn.benchmark = True
        loader = DataLoader([torch.zeros(4)], batch_size=1)
        a = np.zeros(3).reshape(3, 1)
        words = "a b".split()
        path = os.path.join("a", "b").split("/")
        for k in {}.values():
            pass
        return torch.zeros(2).unsqueeze(0).sum(), sched, loader, a, words, path
    """)

SAMPLE_NAMES = {
    "torch.Tensor", "torch.nn", "torch.nn.Module", "torch.nn.Linear", "torch.nn.init.zeros_",
    "torch.nn.functional", "torch.nn.functional.relu", "torch.optim", "torch.optim.SGD",
    "torch.optim.lr_scheduler.StepLR", "torch.backends.cudnn.benchmark", "torch.utils.data.DataLoader",
    "torch.zeros",
}
SAMPLE_METHODS = {"view", "size", "masked_fill_", "unsqueeze", "sum"}


@pytest.fixture(scope="module")
def data():
    return census.load_census()


def test_census_file_is_sorted_and_deterministic(data):
    text = census.CENSUS.read_text(encoding="utf-8")
    assert text == json.dumps(data, indent=1, sort_keys=True) + "\n"
    assert set(data) == {"sources", "files", "unparsed", "names", "tensor_methods", "tensor_method_names"}
    for key in ("files", "unparsed", "tensor_method_names"):
        assert data[key] == sorted(set(data[key]))
    files = set(data["files"])
    for table in (data["names"], data["tensor_methods"]):
        assert list(table) == sorted(table)
        for uses in table.values():
            assert uses and uses == sorted(set(uses)) and set(uses) <= files
    assert all(name.startswith("torch.") for name in data["names"])
    assert set(data["tensor_methods"]) <= set(data["tensor_method_names"])
    assert {f.partition(":")[0] for f in data["files"]} == set(data["sources"])
    # a few uses every census of this code has
    assert "karpathy/nanoGPT:model.py" in data["names"]["torch.nn.functional.scaled_dot_product_attention"]
    assert "pytorch/examples:mnist/main.py" in data["names"]["torch.nn.Conv2d"]
    assert "karpathy/minGPT:mingpt/model.py" in data["tensor_methods"]["masked_fill"]


def test_census_markdown_renders(data):
    text = census.census_markdown()
    assert text.startswith("## Names used by example code\n")
    assert f"{len(data['files'])} Python files" in text
    assert "### Missing torch names" in text and "### Missing Tensor methods" in text
    assert text.endswith("\n") and not text.endswith("\n\n")
    # tensorplay has these, so they are counted as present and not listed
    for name in ("torch.nn.Linear", "torch.cat"):
        assert name in data["names"] and census.resolve(name)
        assert f"| `{name}`" not in text


def test_resolve_against_tensorplay():
    assert census.resolve("torch.nn.Linear")
    assert census.resolve("torch.nn.functional")  # a module
    assert census.resolve("torch.optim.lr_scheduler.StepLR")
    assert census.resolve("torch.utils.data.DataLoader")
    assert not census.resolve("torch.nn.NoSuchLayer")
    assert not census.resolve("torch.no_such_module.f")
    with pytest.raises(ValueError, match="resolve.*numpy.zeros"):
        census.resolve("numpy.zeros")


def _fake_lookup(modules):
    def lookup(name):
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return modules[name]
    return lookup


def test_render_with_a_module_lookup():
    tp = types.ModuleType("tensorplay")
    tp.Tensor = type("Tensor", (), {"view": None})
    nn = types.ModuleType("tensorplay.nn")
    nn.Linear = object
    tp.nn = nn
    lookup = _fake_lookup({"tensorplay": tp, "tensorplay.nn": nn})
    data = census.census(
        {"r": "abc"}, ["r:a.py", "r:b.py", "r:c.py"], [],
        {"torch.nn.Linear": ["r:a.py"], "torch.nn.Conv9d": ["r:b.py"],
         "torch.fx": ["r:a.py"], "torch.fx.Graph": ["r:b.py", "r:c.py"], "torch.fx.Node": ["r:c.py"]},
        {"view": ["r:a.py"], "masked_fill_": ["r:b.py"]}, ["masked_fill_", "view"])
    assert census.missing_names(data, lookup) == [
        ("torch.fx.Graph", 0, ["r:b.py", "r:c.py"]), ("torch.fx", 0, ["r:a.py"]),
        ("torch.fx.Node", 0, ["r:c.py"]), ("torch.nn.Conv9d", 0, ["r:b.py"])]
    text = census.render(data, lookup)
    assert "tensorplay provides 1 of the 5 torch names and 1 of the 2 `Tensor` methods" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `torch.fx` and 2 names under it | 3 | `r:a.py`, `r:b.py`, `r:c.py` |",
        "| `torch.nn.Conv9d` | 1 | `r:b.py` |",
        "| `Tensor.masked_fill_` | 1 | `r:b.py` |",
    ]


def test_scan_file_names_and_methods(data):
    names, methods = census.scan_file(SAMPLE, data["tensor_method_names"])
    assert names == SAMPLE_NAMES
    assert methods == SAMPLE_METHODS
    with pytest.raises(SyntaxError):
        census.scan_file("print 'python 2'\n", data["tensor_method_names"])


def test_rescan_of_a_sample_tree(tmp_path):
    torch = pytest.importorskip("torch")
    methods = census.tensor_method_names()
    assert "view" in methods and "shape" not in methods and callable(torch.Tensor.view)
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "train.py").write_text(SAMPLE, encoding="utf-8")
    (tree / "setup.py").write_text("import torch\ntorch.ones(1)\n", encoding="utf-8")  # not counted
    (tree / "old.py").write_text("print 'python 2'\n", encoding="utf-8")
    out = tmp_path / "census.json"
    args = ["--scan", f"me/sample={tree}", "--source", "me/sample=v1", "--out", str(out)]
    assert census.main(args) == 0
    first = out.read_text(encoding="utf-8")
    assert census.main(args) == 0
    assert out.read_text(encoding="utf-8") == first
    data = json.loads(first)
    assert data["sources"] == {"me/sample": "v1"}
    assert data["files"] == ["me/sample:pkg/train.py"]
    assert data["unparsed"] == ["me/sample:old.py"]
    assert data["names"] == {name: ["me/sample:pkg/train.py"] for name in sorted(SAMPLE_NAMES)}
    assert data["tensor_methods"] == {name: ["me/sample:pkg/train.py"] for name in sorted(SAMPLE_METHODS)}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_scan_a_git_directory_at_head(tmp_path, data):
    repo = tmp_path / "owner+name" / "repo"
    work = tmp_path / "work"
    (work / "keep").mkdir(parents=True)
    (work / "keep" / "m.py").write_text("import torch.nn as nn\nnn.GELU()\n", encoding="utf-8")
    (work / "other.py").write_text("import torch\ntorch.ones(1)\n", encoding="utf-8")

    def git(*args):
        return subprocess.run(["git", f"--git-dir={repo}", f"--work-tree={work}", *args], check=True,
                              capture_output=True, text=True).stdout

    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    source = census._parse_scan(f"{repo}:keep", {})
    assert source.label == "owner/name" and source.ident == git("rev-parse", "HEAD").strip()
    got = census.scan_sources([source], data["tensor_method_names"])
    assert got["files"] == ["owner/name:keep/m.py"]
    assert got["names"] == {"torch.nn": ["owner/name:keep/m.py"], "torch.nn.GELU": ["owner/name:keep/m.py"]}
