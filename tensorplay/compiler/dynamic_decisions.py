"""Automatic dynamic decisions kept on disk, so a new process starts with the dynamic graph.

When automatic dynamic (``dynamic=None``) makes argument dimensions of a compiled callable
symbolic, the decision (argument path -> dims) is stored in the artifact cache under an id of
the callable that holds across processes: its module, qualified name, file, first line and a
digest of its code (an edit of the function starts afresh). The first capture of that
callable in a later process reads it and captures with those dims symbolic already, so a
sweep over sizes captures once, and the symbolic program is an artifact cache hit.

Decisions are cache entries like compiled programs (same atomic writes, checksums and version
record; ``TENSORPLAY_CACHE=0`` turns them off with the rest, ``clear_cache()`` removes them,
and a cache bundle carries them). ``TENSORPLAY_REMEMBER_DYNAMIC=0`` turns off only this:
every process then starts from static sizes, whatever earlier runs saw.
"""

from __future__ import annotations

import hashlib
import json
import os
import types
from typing import Any

from ._logging import get_logger
from .backends import cache

__all__ = ["enabled", "function_id", "load", "store"]

_log = get_logger("recompiles")


def _code_digest(code: types.CodeType, h: Any) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode())


def function_id(fn: Any) -> str | None:
    """An id of ``fn`` (a Python function or method) stable across processes, or None when it
    has no Python code to name it by (a builtin, a callable object without ``__code__``)."""
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        call = getattr(type(fn), "__call__", None)
        code = getattr(call, "__code__", None)
        target = call
        if not isinstance(code, types.CodeType):
            return None
    h = hashlib.sha256()
    _code_digest(code, h)
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
    return f"{name}|{code.co_filename}:{code.co_firstlineno}|{h.hexdigest()[:16]}"


def enabled() -> bool:
    """Whether decisions are kept and read (the artifact cache on, ``TENSORPLAY_REMEMBER_DYNAMIC``
    not 0)."""
    flag = os.environ.get("TENSORPLAY_REMEMBER_DYNAMIC", "1").strip().lower()
    return cache.cache_enabled() and flag not in ("0", "off", "false", "no")


def _key(decision_id: str) -> str:
    return cache.cache_key(mlir="", backend="automatic-dynamic", flags=[decision_id], target="")


def load(decision_id: str) -> tuple[dict[str, set[int]], str | None]:
    """The dims earlier processes made dynamic for ``decision_id`` ({} if none) and the name
    of the graph they captured with them."""
    if not enabled():
        return {}, None
    key = _key(decision_id)
    payload = cache.load_entry(key)
    if payload is None:
        return {}, None
    cache.note_used(key)
    try:
        data = json.loads(payload.decode())
        dims = {str(path): {int(d) for d in ds} for path, ds in data["dims"].items()}
        name = data.get("name")
        return dims, name if isinstance(name, str) and name.isidentifier() else None
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        _log.warning("automatic dynamic decisions of %s are unreadable: ignored", decision_id)
        return {}, None


def store(decision_id: str, dims: dict[str, set[int]], name: str) -> None:
    """Remember ``dims`` (argument path -> dynamic dims) for ``decision_id``, captured as the
    graph ``name`` (a later first capture takes that name, so its program is the same)."""
    if not enabled():
        return
    payload = json.dumps({"function": decision_id, "name": name,
                          "dims": {p: sorted(d) for p, d in sorted(dims.items())}}, sort_keys=True).encode()
    key = _key(decision_id)
    if cache.store_entry(key, payload) is not None:
        cache.note_used(key)
