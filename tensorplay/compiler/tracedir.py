"""Every stage of a capture and compile, written to a folder for people to read.

With ``TENSORPLAY_TRACE_DIR=path`` (or ``options={"trace_dir": path}``) each compiled function
gets a folder under ``path`` and each of its cache entries (a capture: the first call, then
each recompile) a folder in that one::

    path/
      forward/                     one compiled function (named as in the logs)
        function.json              name, source file:line, backend, options
        events.jsonl               captures, recompiles with their reasons, breaks, compiles,
                                   cache hits, first calls: one JSON object per line, in order
        forward/                   an entry (recompiles: forward_1, forward_2, ...)
          entry.json               why it was captured, kind, timings, input labels, graphs
          capture.txt              the captured tp graph, one op per line with its file:line
          breaks.txt               graph breaks: reason, file:line and the line's text
          guards.txt               what a later call must match, with the line behind each
          graph.dot                the entry's graph(s) for Graphviz (segments, breaks, calls)
          forward/                 one compiled graph (segments: forward_segment0, ...;
                                   backward graphs: forward_backward)
            compile.json           backend, ops, timings, cache hits and misses, retries
            01-tp-graph.txt        the graph handed to the backend
            02-tp.mlir             its tp MLIR with locations
            03-passes/NN-<pass>.mlir  the IR after each tp pass
            04-linalg.mlir         the MLIR handed to IREE
            05-iree-flags.txt      iree-compile flags (one per line)
            06-dispatches.txt      IREE's dispatches (names, count)

Nothing is looked up on the hot path: a folder is chosen when a function first captures,
and every write happens on capture and compile paths only. A folder that cannot be written
is reported once (a warning) and tracing stops for it; the compile itself goes on.
``python -m tensorplay.tools.report path`` turns the folder into one HTML page.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import atexit
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ._logging import get_logger

__all__ = ["ENV", "Scope", "FunctionTrace", "requested", "current", "active", "within", "note", "write", "event",
           "graph_scope", "function_trace", "write_hits", "dispatch_names"]

#: the environment variable naming the trace folder
ENV = "TENSORPLAY_TRACE_DIR"

_log = get_logger("perf")
_current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("tensorplay_trace_scope", default=None)
_lock = threading.Lock()
_broken: set[str] = set()
_watched: list[tuple[Scope, weakref.ref]] = []


def write_hits() -> None:
    """Write into each traced entry's record how many calls it served from the in-memory
    cache (at exit, and when ``tensorplay.compiler.reset()`` forgets the entries)."""
    with _lock:
        watched = list(_watched)
        _watched[:] = [(s, r) for s, r in watched if r() is not None]
    for scope, ref in watched:
        entry = ref()
        if entry is not None:
            try:
                scope.update(hits=entry.hits)
            except OSError:
                pass


def requested(options: Mapping[str, Any] | None = None) -> Path | None:
    """The trace folder a compile with ``options`` writes to, or None (the option first,
    then ``TENSORPLAY_TRACE_DIR``)."""
    value = (options or {}).get("trace_dir") or os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "fn"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _unique_dir(parent: Path, name: str) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    base = _safe(name)
    for k in range(10_000):
        path = parent / (base if k == 0 else f"{base}.{k + 1}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise OSError(f"no free folder name for {name!r} in {parent}")


class FunctionTrace:
    """The folder of one compiled function: its description and its event log."""

    def __init__(self, root: Path, name: str, info: Mapping[str, Any]):
        self.root = root
        self.name = name
        self.folder = _unique_dir(root, name)
        self.start = time.time()
        self._events = self.folder / "events.jsonl"
        _atomic_write(self.folder / "function.json", json.dumps({"name": name, **info}, indent=2, default=str))
        self._events.touch()

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event (``kind``, seconds since the function's first capture, fields)."""
        record = {"event": kind, "t": round(time.time() - self.start, 6), **fields}
        with _lock, open(self._events, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")

    def watch(self, scope: Scope, entry: Any) -> None:
        """Write ``entry.hits`` (calls served from the in-memory cache) into the scope's
        record when the process exits."""
        with _lock:
            if not _watched:
                atexit.register(write_hits)
            _watched.append((scope, weakref.ref(entry)))

    def entry(self, name: str, **info: Any) -> Scope:
        """The folder of a new cache entry ``name``."""
        scope = Scope(_unique_dir(self.folder, name), self)
        scope.update(name=name, **info)
        return scope


class Scope:
    """One folder being written: an entry or one compiled graph of it. ``record`` is the
    folder's JSON summary (``entry.json`` or ``compile.json``), rewritten on each update."""

    def __init__(self, folder: Path, function: FunctionTrace, record_name: str = "entry.json"):
        self.folder = folder
        self.function = function
        self.record: dict[str, Any] = {}
        self._record_name = record_name

    def write(self, name: str, text: str) -> None:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, text)

    def update(self, **fields: Any) -> None:
        self.record.update(fields)
        self._flush()

    def append(self, key: str, item: Any) -> None:
        self.record.setdefault(key, []).append(item)
        self._flush()

    def _flush(self) -> None:
        _atomic_write(self.folder / self._record_name, json.dumps(self.record, indent=2, default=str))

    def graph(self, name: str, **info: Any) -> Scope:
        """The folder of a graph compiled within this scope (its stages)."""
        scope = Scope(_unique_dir(self.folder, name), self.function, "compile.json")
        scope.update(graph=name, **info)
        return scope


def _guarded(fn: Any) -> Any:
    """Run a trace write; an OSError stops tracing into that folder with one warning."""

    def run(scope: Scope | None, *args: Any, **kwargs: Any) -> Any:
        if scope is None or str(scope.function.root) in _broken:
            return None
        try:
            return fn(scope, *args, **kwargs)
        except OSError as exc:
            with _lock:
                first = str(scope.function.root) not in _broken
                _broken.add(str(scope.function.root))
            if first:
                _log.warning("trace folder %s cannot be written (%s); tracing into it stops, compiling "
                             "goes on", scope.function.root, exc)
            return None

    return run


def current() -> Scope | None:
    """The scope compiles now write into (None when nothing is traced)."""
    return _current.get()


@contextlib.contextmanager
def active(scope: Scope | None) -> Iterator[Scope | None]:
    """Make ``scope`` the one stages are written into, for the ``with`` block."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def within(scope: Scope | None, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with ``scope`` active (a backward compiled after its capture)."""
    if scope is None:
        return fn(*args, **kwargs)
    with active(scope):
        return fn(*args, **kwargs)


@_guarded
def write(scope: Scope, name: str, text: str) -> None:
    """Write stage file ``name`` into ``scope`` (no-op when ``scope`` is None)."""
    scope.write(name, text)


@_guarded
def note(scope: Scope, key: str | None = None, item: Any = None, **fields: Any) -> None:
    """Add ``fields`` to the scope's JSON record, or append ``item`` to its list ``key``."""
    if key is not None:
        scope.append(key, item)
    if fields:
        scope.update(**fields)


@_guarded
def event(scope: Scope, kind: str, **fields: Any) -> None:
    """Append an event to the function's log."""
    scope.function.event(kind, **fields)


@_guarded
def graph_scope(scope: Scope, name: str, **info: Any) -> Scope:
    return scope.graph(name, **info)


@_guarded
def entry_scope(scope: Scope, name: str, **info: Any) -> Scope:
    return scope.function.entry(name, **info)


def function_trace(root: Path, name: str, info: Mapping[str, Any]) -> FunctionTrace | None:
    """A new function folder under ``root``; None (with one warning) when it cannot be made."""
    if str(root) in _broken:
        return None
    try:
        return FunctionTrace(root, name, info)
    except OSError as exc:
        with _lock:
            _broken.add(str(root))
        _log.warning("trace folder %s cannot be written (%s); compiling goes on without traces", root, exc)
        return None


def dispatch_names(vmfb: bytes, graph_name: str) -> list[str]:
    """The names of the dispatches (kernels) a vmfb compiled from graph ``graph_name`` holds, in
    dispatch order: read from the executables' export names it embeds
    (``<graph>_dispatch_<n>_<what>``); where one dispatch's name appears with trailing bytes of a
    neighbouring string, the shortest reading is kept."""
    pattern = re.compile(re.escape(graph_name.encode()) + rb"_dispatch_(\d+)[A-Za-z0-9_]*")
    best: dict[int, bytes] = {}
    for m in pattern.finditer(vmfb):
        k = int(m.group(1))
        if k not in best or len(m.group(0)) < len(best[k]):
            best[k] = m.group(0)
    return [best[k].decode("ascii", "replace") for k in sorted(best)]
