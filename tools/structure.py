"""Print the package's structure figures: the largest modules and classes, and the import
cycles between modules (imports inside functions included).

    python -m tools.structure [--top N] [--under tensorplay/compiler]

The import graph joins module A to module B when A imports B or a name from B, at any depth
in A's code. A cycle is a strongly connected group of two or more modules; each is printed
with the edges that close it, so the edge to cut can be chosen by reading them.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tensorplay"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(under: str = PACKAGE) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / under).rglob("*.py"))}


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name: str, path: Path, known: set[str]) -> dict[str, int]:
    """The package modules ``name`` imports, each with the first line that does."""
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        # the deepest known module the dotted name names
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, node.lineno)
    return found


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, {}))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups, key=len, reverse=True)


def classes(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(n.end_lineno - n.lineno + 1, n.name) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="rows per table (default 12)")
    parser.add_argument("--under", default=PACKAGE, help="folder to report on (default tensorplay)")
    parser.add_argument("--into", default="tensorplay.compiler",
                        help="list the imports of this package from modules outside it that are "
                             "not part of the compiler's own layers (default tensorplay.compiler)")
    args = parser.parse_args(argv)
    everything = sources()
    known = set(everything)
    shown = {m: p for m, p in everything.items() if p.is_relative_to(ROOT / args.under)}

    lines = sorted(((len(p.read_text().splitlines()), m) for m, p in shown.items()), reverse=True)
    print(f"largest modules under {args.under}/ (lines)")
    for n, m in lines[: args.top]:
        print(f"  {n:6d}  {m}")
    cls = sorted(((n, f"{m}.{c}") for m, p in shown.items() for n, c in classes(p)), reverse=True)
    print(f"largest classes under {args.under}/ (lines)")
    for n, c in cls[: args.top]:
        print(f"  {n:6d}  {c}")

    graph = {m: imports(m, p, known) for m, p in everything.items()}
    # a package's __init__ importing its own submodules is how packages are made, not a cycle
    graph = {m: {t: ln for t, ln in e.items() if not t.startswith(m + ".")} for m, e in graph.items()}
    groups = [g for g in cycles(graph) if any(m in shown for m in g)]
    print(f"import cycles touching {args.under}/: {len(groups)}")
    for g in groups:
        members = set(g)
        print(f"  {len(g)} modules: " + ", ".join(g[:8]) + (" ..." if len(g) > 8 else ""))
        if len(g) <= 4:
            for m in g:
                for t, ln in sorted(graph[m].items()):
                    if t in members:
                        print(f"      {m}:{ln} -> {t}")
    # the eager library (anything outside the compiler, its dialect, passes, tools and runtime)
    # reaching into the compiler
    layers = (args.into, "tensorplay.dialect", "tensorplay.passes", "tensorplay.tools", "tensorplay.export")
    edges = sorted((m, ln, t) for m, e in graph.items() for t, ln in e.items()
                   if t.startswith(args.into) and not m.startswith(layers))
    print(f"imports of {args.into} from the eager library: {len(edges)}")
    for m, ln, t in edges:
        print(f"  {m}:{ln} -> {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
