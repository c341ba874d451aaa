"""Where the user's code is: the frame a graph node or a graph break is reported at."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig

from ...dialects.tp.graph import SourceLoc
from .code_hiding import is_hidden_code


def _dirs(*paths: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.join(q, "") for p in paths if p for q in (p, os.path.realpath(p))))


def _package_roots() -> list[tuple[tuple[str, ...], bool]]:
    """Folders and whether frames there are the user's, most specific first: tensorplay's
    examples are; tensorplay, installed packages (numpy calling back into tensorplay) and
    the standard library are not."""
    import importlib.util

    import tensorplay

    package = os.path.dirname(tensorplay.__file__)
    ours = [package]
    for sub in ("tensorplay.dialects", "tensorplay.passes", "tensorplay.tools"):
        spec = importlib.util.find_spec(sub)
        if spec is not None and spec.origin:
            ours.append(os.path.dirname(spec.origin))
    paths = sysconfig.get_paths()
    installed = [p for p in paths.values() if "-packages" in p]
    return [(_dirs(os.path.join(package, "examples")), True), (_dirs(*ours), False),
            (_dirs(*installed), False), (_dirs(paths.get("stdlib", "")), False)]


_ROOTS: list[tuple[tuple[str, ...], bool]] | None = None
_user_file_cache: dict[str, bool] = {}


def _is_user_file(filename: str) -> bool:
    hit = _user_file_cache.get(filename)
    if hit is None:
        global _ROOTS
        if _ROOTS is None:
            _ROOTS = _package_roots()
        hit = not filename.startswith("<frozen")
        if hit:
            for prefixes, is_user in _ROOTS:
                if filename.startswith(prefixes):
                    hit = is_user
                    break
        _user_file_cache[filename] = hit
    return hit


def user_loc(depth: int = 1) -> SourceLoc | None:
    """The first frame outside tensorplay, the standard library and installed packages (or,
    when the whole stack is there, the first frame outside tensorplay); markers' trampolines
    (see ``reads.hide_code``) are skipped."""
    frame = sys._getframe(depth)
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if _is_user_file(filename) and not is_hidden_code(frame.f_code):
            return SourceLoc(filename, frame.f_lineno)
        if fallback is None and not _is_ours(filename):
            fallback = SourceLoc(filename, frame.f_lineno)
        frame = frame.f_back
    return fallback


def _is_ours(filename: str) -> bool:
    if _ROOTS is None:
        _is_user_file(filename)
    examples, ours = _ROOTS[0][0], _ROOTS[1][0]
    return filename.startswith(ours) and not filename.startswith(examples)


def source_line(loc: SourceLoc | None) -> str:
    if loc is None:
        return ""
    return linecache.getline(loc.file, loc.line).strip()
