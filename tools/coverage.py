"""docs/coverage.md: which of PyTorch's public names tensorplay provides.

    python -m tensorplay.tools.regen                          # renders the page with the others
    python -m tensorplay.tools.coverage --refresh-snapshot    # re-read PyTorch's names (needs torch)

PyTorch's names come from a committed snapshot, tests/data/torch_names.json, so the page
renders without PyTorch installed: for each module of :data:`MODULES`, its ``__all__`` where it
has one, else its public names (no leading underscore) less submodules and what it imports
for typing. tensorplay provides a name when the module of the same name under ``tensorplay``
has that attribute (``torch.nn.Linear`` -> ``tensorplay.nn.Linear``), which is also what
``python -m tensorplay.run`` gives a script. :data:`DIFFERENCES` is the hand-kept list of
names that behave differently, one line each.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["MODULES", "DIFFERENCES", "SNAPSHOT", "public_names", "refresh_snapshot", "load_snapshot", "coverage",
           "render", "main"]

#: the PyTorch modules the page covers
MODULES = ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.optim.lr_scheduler",
           "torch.utils.data")

#: the snapshot of PyTorch's names, in the source checkout
SNAPSHOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_names.json"

#: PyTorch name -> how tensorplay's differs (one line; a link to the page that says more)
DIFFERENCES: dict[str, str] = {
    "torch.compile": "tensorplay's backends (`iree-cpu`, `iree-cuda`, `iree-vulkan`, ...; no `inductor`); "
                     "a compiled module's `state_dict` keys have no `_orig_mod.` prefix ([compiler.md](compiler.md))",
    "torch.device": "types `cpu`, `cuda`, `vulkan`, `hip`; only index 0 of each driver ([devices.md](devices.md))",
    "torch.load": "reads tensorplay checkpoints, not PyTorch's pickles ([training.md](training.md))",
    "torch.manual_seed": "seeds tensorplay's generator (numpy's PCG64): reproducible, other numbers than "
                         "PyTorch's ([tensors.md](tensors.md))",
    "torch.Generator": "numpy's PCG64 underneath: other numbers than PyTorch's for the same seed "
                       "([tensors.md](tensors.md))",
    "torch.empty": "returns zeros ([tensors.md](tensors.md))",
    "torch.nn.Embedding": "`sparse=True` and `scale_grad_by_freq` are accepted and have no effect: gradients are "
                          "dense ([nn.md](nn.md))",
    "torch.nn.Dropout": "masks come from tensorplay's generator: other numbers than PyTorch's for the same seed "
                        "([nn.md](nn.md))",
    "torch.nn.functional.dropout": "masks come from tensorplay's generator ([nn.md](nn.md))",
    "torch.optim.Optimizer": "`foreach`, `fused`, `capturable` and `differentiable` are accepted and ignored, in "
                             "every optimizer ([training.md](training.md))",
}

#: names a module imports for its own use (``Tensor`` for annotations), seen where it has no ``__all__``
_HELPERS = frozenset({"TYPE_CHECKING", "has_torch_function", "has_torch_function_unary",
                      "has_torch_function_variadic", "handle_torch_function", "boolean_dispatch",
                      "assert_int_or_pair", "factory_kwargs", "Tensor"})
#: modules whose objects are typing helpers, not the module's API
_TYPING_MODULES = frozenset({"typing", "typing_extensions", "collections.abc", "abc", "builtins", "__future__",
                             "torch._jit_internal", "torch.overrides"})


def public_names(module: types.ModuleType) -> list[str]:
    """``module.__all__`` where it has one, else its public attributes less submodules,
    typing helpers, flags and note dictionaries; sorted."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted(set(names))
    out = []
    for name, value in vars(module).items():
        if name.startswith("_") or name in _HELPERS or isinstance(value, (types.ModuleType, dict, bool)):
            continue
        if getattr(value, "__module__", None) in _TYPING_MODULES:
            continue
        out.append(name)
    return sorted(out)


def refresh_snapshot(path: Path = SNAPSHOT) -> dict[str, Any]:
    """Read PyTorch's public names of :data:`MODULES` and write them to ``path``."""
    try:
        import torch
    except ImportError:
        raise SystemExit("coverage --refresh-snapshot: PyTorch is not installed; "
                         "pip install torch (the snapshot is made from it)") from None
    data = {"torch_version": torch.__version__.split("+")[0],
            "modules": {m: public_names(importlib.import_module(m)) for m in MODULES}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def load_snapshot(path: Path = SNAPSHOT) -> dict[str, Any]:
    """The snapshot: ``{"torch_version": ..., "modules": {module: [names]}}``."""
    return json.loads(path.read_text(encoding="utf-8"))


def _tensorplay_module(torch_module: str) -> types.ModuleType | None:
    name = "tensorplay" + torch_module[len("torch"):]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None
        raise


def coverage(snapshot: dict[str, Any] | None = None) -> dict[str, dict[str, list[str]]]:
    """Per module of the snapshot: ``{"present": [...], "missing": [...]}``."""
    snapshot = load_snapshot() if snapshot is None else snapshot
    out = {}
    for module, names in snapshot["modules"].items():
        ours = _tensorplay_module(module)
        present = [n for n in names if ours is not None and hasattr(ours, n)]
        out[module] = {"present": present, "missing": [n for n in names if n not in set(present)]}
    return out


def _anchor(module: str) -> str:
    return module.replace(".", "")


def render() -> str:
    """The text of docs/coverage.md."""
    snapshot = load_snapshot()
    table = coverage(snapshot)
    modules = list(snapshot["modules"])
    differ = {name for name in DIFFERENCES if name.rpartition(".")[0] in table
              and name.rpartition(".")[2] in table[name.rpartition(".")[0]]["present"]}
    lines = [
        "# PyTorch coverage",
        "",
        ("<!-- generated by python -m tensorplay.tools.regen from tools/coverage.py and "
         "tests/data/torch_names.json; do not edit -->"),
        "",
        (f"Which public names of PyTorch {snapshot['torch_version']} tensorplay provides under the same name: "
         "`torch.nn.Linear` is `tensorplay.nn.Linear`, and it is what "
         "[`python -m tensorplay.run`](runner.md) gives a PyTorch script for `torch.nn.Linear`. PyTorch's names "
         "are each module's `__all__`, or its public attributes where it has none (submodules and typing "
         "helpers left out); `Tensor` methods are in [tensors.md](tensors.md). A name listed as "
         "provided behaves as in PyTorch except for the differences below and those each page lists."),
        "",
        "| module | PyTorch names | in tensorplay | missing | documented differences |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for module in modules:
        present, missing = table[module]["present"], table[module]["missing"]
        n_diff = sum(1 for name in differ if name.rpartition(".")[0] == module)
        lines.append(f"| [`{module}`](#{_anchor(module)}) | {len(present) + len(missing)} | {len(present)} | "
                     f"{len(missing)} | {n_diff} |")
    lines += ["", "## Differences", "", "| name | difference |", "| --- | --- |"]
    for name in sorted(differ):
        lines.append(f"| `{name}` | {DIFFERENCES[name]} |")
    lines += ["", "## Missing names", "",
              ("A script that reads one of these under the runner stops with an `AttributeError` naming it "
               "(`ModuleNotFoundError` for a module)."), ""]
    for module in modules:
        missing = table[module]["missing"]
        lines += [f"### {module}", ""]
        if _tensorplay_module(module) is None:
            lines += [f"The whole module: tensorplay has no `{'tensorplay' + module[len('torch'):]}`.", ""]
        if missing:
            lines += [", ".join(f"`{n}`" for n in missing), ""]
        else:
            lines += ["None.", ""]
    from .census import census_markdown  # what the public examples use, from tests/data/example_census.json

    lines += census_markdown().rstrip("\n").splitlines() + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh-snapshot", action="store_true",
                        help="re-read PyTorch's names into tests/data/torch_names.json (needs torch), "
                             "then write docs/coverage.md")
    args = parser.parse_args(argv)
    if args.refresh_snapshot:
        data = refresh_snapshot()
        print(f"wrote {SNAPSHOT} (PyTorch {data['torch_version']})")
    from .regen import ROOT, write_atomic

    write_atomic(ROOT / "docs" / "coverage.md", render())
    print("wrote docs/coverage.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
