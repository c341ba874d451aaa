"""Which PyTorch names public example code uses, and which of them tensorplay provides.

    python -m tensorplay.tools.census --scan pytorch/examples=/path/to/examples ...  # rescan, write the JSON
    python -m tensorplay.tools.census --markdown                                    # print the report

The census is a committed file, tests/data/example_census.json, so the report renders without
the example sources or PyTorch installed. :func:`scan_sources` reads Python files with ``ast``
and records, per file:

* every ``torch`` name the code reads, written out in full whatever the import looked like:
  ``torch.nn.functional.relu`` for ``F.relu`` after ``import torch.nn.functional as F``,
  ``torch.utils.data.DataLoader`` for ``DataLoader`` after ``from torch.utils.data import
  DataLoader``; an attribute chain is kept up to its first dunder (``nn.Module.__init__`` is
  ``torch.nn.Module``), imported modules count as names too (``torch.distributed``);
* every call of a ``Tensor`` method: ``obj.attr(...)`` where ``attr`` is the name of a public
  method of ``torch.Tensor`` and ``obj`` is not a literal, ``self``, ``super()``, or an
  expression that starts at a module or name imported from elsewhere than torch
  (``np.zeros(3)``). This is a heuristic: ``model.to(device)`` counts as a use of
  ``Tensor.to``; ``str.split`` (no argument, or a string first argument), ``dict.values()``,
  ``tracer.trace(m)``, ``index`` and ``resize`` do not count.

The method names are ``dir(torch.Tensor)`` when PyTorch is installed, else the list kept in
the census file itself. :func:`render` checks each name against tensorplay the way
``python -m tensorplay.run`` would see it (``torch.a.b.C`` is ``tensorplay.a.b.C``) and
:func:`census_markdown` is the section of docs/coverage.md made from it.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import types
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CENSUS", "SKIPPED_FILES", "Source", "census", "census_markdown", "load_census", "main", "missing_names",
           "render", "resolve", "scan_file", "scan_sources", "tensor_method_names", "write_census"]

#: the committed census, in the source checkout
CENSUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "example_census.json"

#: file names that are packaging or documentation set-up, not model or training code
SKIPPED_FILES = frozenset({"setup.py", "conf.py", "noxfile.py"})

#: how many files a row of the report lists before it says how many more there are
_FILES_SHOWN = 6

_TORCH = "torch"


def tensor_method_names(census_data: dict[str, Any] | None = None) -> list[str]:
    """The public method names of ``torch.Tensor``: from PyTorch when it is installed, else
    the list kept in ``census_data`` (the committed census when ``None``)."""
    try:
        import torch
    except ImportError:
        if census_data is None and not CENSUS.is_file():
            raise SystemExit(f"census: PyTorch is not installed and there is no {CENSUS} to read the "
                             "Tensor method names from; pip install torch") from None
        data = load_census() if census_data is None else census_data
        return list(data["tensor_method_names"])
    return sorted(n for n in dir(torch.Tensor) if not n.startswith("_") and callable(getattr(torch.Tensor, n)))


# --- scanning one file -------------------------------------------------------------------------------

def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; ``None`` when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _root(node: ast.AST) -> str | None:
    """The name an expression of attributes, calls and subscripts starts at (``a`` for
    ``a.b(c)[0].d``); ``None`` when it starts at something else."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_torch(module: str) -> bool:
    return module == _TORCH or module.startswith(_TORCH + ".")


def _cut_dunder(parts: list[str]) -> list[str]:
    for i, part in enumerate(parts):
        if part.startswith("__") and part.endswith("__"):
            return parts[:i]
    return parts


def _imports(tree: ast.AST) -> tuple[dict[str, str], set[str], set[str]]:
    """The file's bindings of torch names (local name -> full name), the torch names its
    imports read, and every local name an import binds (torch's or not)."""
    bound: dict[str, str] = {}
    read: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                imported.add(local)
                if not _is_torch(alias.name):
                    continue
                bound[local] = alias.name if alias.asname else _TORCH
                read.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.name == "*":
                    if _is_torch(node.module):
                        read.add(node.module)
                    continue
                local = alias.asname or alias.name
                imported.add(local)
                if _is_torch(node.module):
                    bound[local] = f"{node.module}.{alias.name}"
                    read.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.ImportFrom):  # relative: binds names, none of them torch's
            imported.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
    read.discard(_TORCH)
    return bound, read, imported


def _is_str_split(call: ast.Call) -> bool:
    if any(k.arg in ("sep", "maxsplit") for k in call.keywords):
        return True
    if not call.args and not call.keywords:
        return True
    first = call.args[0] if call.args else None
    return isinstance(first, (ast.JoinedStr,)) or (isinstance(first, ast.Constant) and isinstance(first.value, str))


#: ``Tensor`` method names left out of the census: in example code they are nearly always
#: another type's method (``list.index``, PIL's ``Image.resize``)
_NOT_COUNTED = frozenset({"index", "resize"})


def _not_a_tensor_call(call: ast.Call, attr: str) -> bool:
    """The calls that are certainly not ``Tensor`` methods although the name is one."""
    if attr in _NOT_COUNTED:
        return True
    if attr == "split":
        return _is_str_split(call)
    if attr == "values":  # dict.values()
        return not call.args and not call.keywords
    if attr == "trace":  # Tensor.trace() takes no argument; a tracer's trace(module) does
        return bool(call.args or call.keywords)
    return False


def scan_file(text: str, methods: Iterable[str]) -> tuple[set[str], set[str]]:
    """The torch names and the ``Tensor`` method names that the Python source ``text`` uses.

    Raises ``SyntaxError`` when ``text`` is not Python 3."""
    tree = ast.parse(text)
    methods = frozenset(methods)
    bound, names, imported = _imports(tree)
    used_methods: set[str] = set()
    inner: set[int] = set()  # Attribute nodes that are part of a longer chain
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = _chain(node)
            if parts is not None and parts[0] in bound:
                parts = _cut_dunder(bound[parts[0]].split(".") + parts[1:])
                if len(parts) > 1:
                    names.add(".".join(parts))
        elif (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound
              and bound[node.id] != _TORCH):
            names.add(bound[node.id])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods:
            receiver = node.func.value
            if isinstance(receiver, (ast.Constant, ast.JoinedStr, ast.List, ast.Dict, ast.Tuple, ast.Set)):
                continue
            if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
                continue
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
                continue
            chain = _chain(receiver)
            if chain is not None and chain[0] in imported:  # a module or imported name: torch.nn.init.zeros_
                continue
            root = _root(receiver)
            if root is not None and root in imported and root not in bound:  # np.zeros(3).reshape(...)
                continue
            if _not_a_tensor_call(node, node.func.attr):
                continue
            used_methods.add(node.func.attr)
    return names, used_methods


# --- reading the sources -----------------------------------------------------------------------------

@dataclass
class Source:
    """A tree of Python files to scan: a folder, or a git directory read at its ``HEAD``.

    ``label`` names it in the census (``"pytorch/examples"``), ``prefixes`` keeps only the files
    under those folders, ``ident`` is what the census records as its version (the commit of a
    git directory when not given)."""

    label: str
    path: Path
    prefixes: tuple[str, ...] = ()
    ident: str | None = None
    _git: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not self.path.is_dir():
            raise ValueError(f"census: {self.path} is not a folder")
        self._git = (self.path / "HEAD").is_file() and (self.path / "objects").is_dir()
        if self.ident is None:
            self.ident = self._git_out("rev-parse", "HEAD").strip() if self._git else "working tree"

    def _git_out(self, *args: str) -> str:
        return subprocess.run(["git", f"--git-dir={self.path}", *args], check=True, capture_output=True,
                              text=True, encoding="utf-8", errors="replace").stdout

    def _wanted(self, rel: str) -> bool:
        if not rel.endswith(".py") or rel.rpartition("/")[2] in SKIPPED_FILES:
            return False
        if "/docs/" in f"/{rel}" or "/.github/" in f"/{rel}":
            return False
        return not self.prefixes or any(rel.startswith(p.rstrip("/") + "/") for p in self.prefixes)

    def files(self) -> Iterator[tuple[str, str]]:
        """``(path in the tree, text)`` of each Python file kept, in path order."""
        if self._git:
            listing = self._git_out("ls-tree", "-r", "-z", "--full-tree", "HEAD").split("\0")
            for entry in sorted(e for e in listing if e):
                meta, _, rel = entry.partition("\t")
                if meta.split()[1] == "blob" and self._wanted(rel):
                    yield rel, self._git_out("show", f"HEAD:{rel}")
            return
        for path in sorted(self.path.rglob("*.py")):
            rel = path.relative_to(self.path).as_posix()
            if path.is_file() and self._wanted(rel):
                yield rel, path.read_text(encoding="utf-8", errors="replace")


def scan_sources(sources: Iterable[Source], methods: Iterable[str]) -> dict[str, Any]:
    """Scan ``sources`` and return the census (the JSON object, sorted)."""
    methods = sorted(set(methods))
    names: dict[str, set[str]] = defaultdict(set)
    used: dict[str, set[str]] = defaultdict(set)
    files: list[str] = []
    unparsed: list[str] = []
    idents: dict[str, str] = {}
    for source in sources:
        if source.label in idents:
            raise ValueError(f"census: the label {source.label!r} is given twice")
        idents[source.label] = str(source.ident)
        for rel, text in source.files():
            key = f"{source.label}:{rel}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old code
                    found, calls = scan_file(text, methods)
            except (SyntaxError, ValueError):
                unparsed.append(key)
                continue
            files.append(key)
            for name in found:
                names[name].add(key)
            for name in calls:
                used[name].add(key)
    return census(idents, files, unparsed, names, used, methods)


def census(sources: dict[str, str], files: Iterable[str], unparsed: Iterable[str],
           names: dict[str, Iterable[str]], tensor_methods: dict[str, Iterable[str]],
           methods: Iterable[str]) -> dict[str, Any]:
    """The census object with every dict and list sorted."""
    return {
        "sources": dict(sorted(sources.items())),
        "files": sorted(files),
        "unparsed": sorted(unparsed),
        "names": {k: sorted(set(v)) for k, v in sorted(names.items())},
        "tensor_methods": {k: sorted(set(v)) for k, v in sorted(tensor_methods.items())},
        "tensor_method_names": sorted(set(methods)),
    }


def write_census(data: dict[str, Any], path: Path = CENSUS) -> None:
    """Write ``data`` as the census file (sorted keys, one item a line)."""
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_census(path: Path = CENSUS) -> dict[str, Any]:
    """The census: ``{"sources", "files", "unparsed", "names", "tensor_methods", "tensor_method_names"}``."""
    return json.loads(path.read_text(encoding="utf-8"))


# --- checking the names against tensorplay -------------------------------------------------------------

def resolve(name: str, module_lookup: Callable[[str], types.ModuleType] = importlib.import_module) -> bool:
    """Whether tensorplay has the torch name ``name``: the longest module prefix of
    ``tensorplay.a.b.C`` that ``module_lookup`` imports, then attributes for the rest."""
    if not _is_torch(name):
        raise ValueError(f"resolve(): {name!r} is not a torch name")
    parts = ["tensorplay", *name.split(".")[1:]]
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = module_lookup(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing == module_name or module_name.startswith(missing + "."):
                continue
            raise
        for attr in parts[cut:]:
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                return False
        return True
    return False


def _missing_rows(uses: dict[str, list[str]], present: Callable[[str], bool],
                  fold: bool) -> tuple[list[tuple[str, int, list[str]]], int]:
    """``([(name, names folded into it, files)], how many names are present)``, most used first.

    With ``fold``, a missing name under another missing name of the census (``torch.fx.Graph``
    under ``torch.fx``) is counted in the row of the shortest such name, whose files are then
    the files that use any of them."""
    missing = sorted(name for name in uses if not present(name))
    rows: dict[str, tuple[int, set[str]]] = {}
    lost = set(missing)
    for name in missing:
        head = name
        if fold:
            parts = name.split(".")
            head = next((".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in lost), name)
        count, files = rows.get(head, (0, set()))
        rows[head] = (count + (head != name), files | set(uses[name]))
    out = [(name, folded, sorted(files)) for name, (folded, files) in rows.items()]
    out.sort(key=lambda row: (-len(row[2]), row[0]))
    return out, len(uses) - len(missing)


def _table(rows: list[tuple[str, int, list[str]]], label: Callable[[str], str]) -> list[str]:
    if not rows:
        return ["None.", ""]
    lines = ["| name | files | used in |", "| --- | ---: | --- |"]
    for name, folded, files in rows:
        shown = ", ".join(f"`{f}`" for f in files[:_FILES_SHOWN])
        if len(files) > _FILES_SHOWN:
            shown += f" and {len(files) - _FILES_SHOWN} more"
        under = f" and {folded} name{'s' if folded > 1 else ''} under it" if folded else ""
        lines.append(f"| `{label(name)}`{under} | {len(files)} | {shown} |")
    return lines + [""]


def missing_names(census_data: dict[str, Any],
                  module_lookup: Callable[[str], types.ModuleType] = importlib.import_module,
                  fold: bool = False) -> list[tuple[str, int, list[str]]]:
    """The torch names of ``census_data`` that tensorplay lacks: ``(name, names folded into it,
    files)``, most used first (see :func:`render` for ``fold``)."""
    return _missing_rows(census_data["names"], lambda n: resolve(n, module_lookup), fold)[0]


def render(census_data: dict[str, Any],
           module_lookup: Callable[[str], types.ModuleType] = importlib.import_module) -> str:
    """The markdown section reporting, for each name of ``census_data``, whether tensorplay has
    it; modules are imported with ``module_lookup`` (``Tensor`` methods are attributes of
    ``module_lookup("tensorplay").Tensor``)."""
    tensor = module_lookup("tensorplay").Tensor
    names, n_names = _missing_rows(census_data["names"], lambda n: resolve(n, module_lookup), fold=True)
    methods, n_methods = _missing_rows(census_data["tensor_methods"], lambda n: hasattr(tensor, n), fold=False)
    per_source: dict[str, int] = defaultdict(int)
    for key in census_data["files"]:
        per_source[key.partition(":")[0]] += 1
    sources = ", ".join(f"`{label}` at {ident[:12]} ({per_source[label]} files)"
                        for label, ident in census_data["sources"].items())
    lines = [
        "## Names used by example code",
        "",
        (f"The PyTorch names that {len(census_data['files'])} Python files of public example and model code "
         f"use ({sources}), found by reading the code (`python -m tensorplay.tools.census`; the list is "
         "tests/data/example_census.json). Each row is a name that tensorplay does not provide, with the "
         "number of files that use it, most used first; the names under a missing module or class "
         "(`torch.distributed.init_process_group` under `torch.distributed`) are counted in its row. A `Tensor` method counts when a file calls a "
         "method of that name on something that is not a module, so a few of those uses are calls on "
         "other objects (`model.to(device)`)."),
        "",
        (f"tensorplay provides {n_names} of the {len(census_data['names'])} torch names and {n_methods} of the "
         f"{len(census_data['tensor_methods'])} `Tensor` methods these files use."),
        "",
        "### Missing torch names",
        "",
        *_table(names, lambda n: n),
        "### Missing Tensor methods",
        "",
        *_table(methods, lambda n: f"Tensor.{n}"),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def census_markdown() -> str:
    """The section of docs/coverage.md on the names example code uses, from the committed census."""
    return render(load_census())


# --- command line ------------------------------------------------------------------------------------

def _label_of(path: Path) -> str:
    """``.../owner+name/repo`` (a fetched git directory) -> ``owner/name``; else the folder name."""
    path = path.resolve()
    if path.name in ("repo", ".git") and "+" in path.parent.name:
        return path.parent.name.replace("+", "/", 1)
    return path.name


def _parse_scan(spec: str, idents: dict[str, str]) -> Source:
    label, sep, rest = spec.partition("=")
    if not sep:
        label, rest = "", spec
    path, _, prefixes = rest.partition(":")
    label = label or _label_of(Path(path))
    return Source(label, Path(path), tuple(p for p in prefixes.split(",") if p), idents.get(label))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scan", nargs="+", metavar="[LABEL=]DIR[:PREFIX,...]",
                        help="folders or git directories to scan (a git directory is read at HEAD); LABEL "
                             "names it in the census, PREFIXes keep only the files under those folders")
    parser.add_argument("--source", action="append", default=[], metavar="LABEL=ID",
                        help="the version to record for LABEL (default: the git commit, or 'working tree')")
    parser.add_argument("--out", type=Path, default=CENSUS, help=f"the census file (default: {CENSUS})")
    parser.add_argument("--markdown", action="store_true", help="print the report on the census file")
    args = parser.parse_args(argv)
    if not args.scan and not args.markdown:
        parser.error("give --scan DIR... and/or --markdown")
    if args.scan:
        idents = {}
        for item in args.source:
            label, sep, ident = item.partition("=")
            if not sep:
                parser.error(f"--source takes LABEL=ID, not {item!r}")
            idents[label] = ident
        try:
            sources = [_parse_scan(spec, idents) for spec in args.scan]
        except ValueError as exc:
            parser.error(str(exc))
        data = scan_sources(sources, tensor_method_names(load_census(args.out) if args.out.exists() else None))
        write_census(data, args.out)
        print(f"wrote {os.path.relpath(args.out)}: {len(data['files'])} files, {len(data['names'])} torch names, "
              f"{len(data['tensor_methods'])} Tensor methods; {len(data['unparsed'])} files not Python 3")
    if args.markdown:
        print(render(load_census(args.out)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
