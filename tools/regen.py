"""Regenerate every generated file of the source tree, or check that none is stale.

    python -m tensorplay.tools.regen            # rewrite the files that changed
    python -m tensorplay.tools.regen --check    # exit 1 naming the stale files

The files are listed in :data:`GENERATED` (path in the checkout -> the function that renders
it); tests fail when one is stale. Run it after adding or changing an op.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["GENERATED", "ROOT", "render", "stale", "write_atomic", "main"]

#: the source checkout this module belongs to (tools/ sits at its top)
ROOT = Path(__file__).resolve().parent.parent

#: generated file (relative to the checkout) -> "module:function" that returns its text
GENERATED: dict[str, str] = {
    "docs/dialect.md": "tensorplay.tools.gen_dialect_docs:render",
    "tests/lit/roundtrip.mlir": "tensorplay.tools.gen_lit_roundtrip:render",
    "docs/coverage.md": "tensorplay.tools.coverage:render",
}


def _checkout(root: Path) -> Path:
    if not (root / "pyproject.toml").is_file() or not (root / "tests" / "opinfo").is_dir():
        raise SystemExit(f"regen: {root} is not a tensorplay source checkout (no pyproject.toml and "
                         "tests/opinfo there); run it from a clone installed with pip install -e .")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # the op table the lit file is made from lives in tests/
    return root


def render(path: str) -> str:
    """The current text of the generated file ``path`` (a key of :data:`GENERATED`)."""
    _checkout(ROOT)
    module, _, name = GENERATED[path].partition(":")
    fn: Callable[[], str] = getattr(importlib.import_module(module), name)
    return fn()


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, so a reader
    never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def stale(root: Path = ROOT) -> dict[str, str]:
    """The generated files under ``root`` whose text differs from a fresh render -> that text."""
    out = {}
    for rel in GENERATED:
        text = render(rel)
        target = root / rel
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            out[rel] = text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree whose files are checked or written (default: this checkout)")
    args = parser.parse_args(argv)
    changed = stale(args.root)
    if args.check:
        for rel in changed:
            print(f"{rel} is stale; run: python -m tensorplay.tools.regen", file=sys.stderr)
        return 1 if changed else 0
    for rel, text in changed.items():
        write_atomic(args.root / rel, text)
        print(f"wrote {rel}")
    if not changed:
        print(f"{len(GENERATED)} generated files are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
