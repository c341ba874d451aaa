"""What the instrumented places call while a profile records, and the recorder they fill.

Every event is a span (wall start, duration, thread, args) pushed on its thread's stack when
it begins and recorded when it ends, so nesting follows the call structure; graph breaks are
instants. Nothing here runs unless ``_state.state.active`` is set.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from ._state import state

_now = time.perf_counter_ns


class Span:
    """One recorded interval (or instant, ``dur_ns is None``)."""

    __slots__ = ("id", "name", "cat", "start_ns", "dur_ns", "tid", "args", "parent", "shapes", "kids")

    def __init__(self, name: str, cat: str, start_ns: int, tid: int, parent: Span | None,
                 args: dict | None = None, shapes: tuple | None = None):
        self.id = 0
        self.name = name
        self.cat = cat
        self.start_ns = start_ns
        self.dur_ns: int | None = 0
        self.tid = tid
        self.args = args if args is not None else {}
        self.parent = parent
        self.shapes = shapes
        #: the children recorded so far, kept only for spans that ask (see Recorder.begin)
        self.kids: list[Span] | None = None


class _Stacks(threading.local):
    def __init__(self) -> None:
        self.stack: list[Span] = []
        self.tid = threading.get_native_id()


class Recorder:
    """The events of one profile, from every thread."""

    def __init__(self, record_shapes: bool):
        self.record_shapes = record_shapes
        self.spans: list[Span] = []
        self.local = _Stacks()
        self.start_ns = _now()
        self.thread_names: dict[int, str] = {}
        self._next = 0
        self._lock = threading.Lock()

    def begin(self, name: str, cat: str, args: dict | None = None, shapes: tuple | None = None,
              kids: bool = False) -> Span:
        local = self.local
        stack = local.stack
        span = Span(name, cat, _now(), local.tid, stack[-1] if stack else None, args, shapes)
        if kids:
            span.kids = []
        stack.append(span)
        return span

    def end(self, span: Span) -> None:
        span.dur_ns = _now() - span.start_ns
        stack = self.local.stack
        # an exception may have skipped inner ends: close everything above this span
        while stack:
            top = stack.pop()
            if top is span:
                break
            top.dur_ns = span.start_ns + span.dur_ns - top.start_ns
            self._add(top)
        self._add(span)

    def _add(self, span: Span) -> None:
        with self._lock:
            self._next += 1
            span.id = self._next
            self.spans.append(span)
            parent = span.parent
            if parent is not None and parent.kids is not None:
                parent.kids.append(span)
            if span.tid not in self.thread_names:
                self.thread_names[span.tid] = threading.current_thread().name

    def instant(self, name: str, cat: str, args: dict) -> None:
        stack = self.local.stack
        span = Span(name, cat, _now(), self.local.tid, stack[-1] if stack else None, args)
        span.dur_ns = None
        self._add(span)

    def complete(self, name: str, cat: str, start_ns: int, dur_ns: int, args: dict) -> Span:
        """A span measured by its caller, recorded after the fact: spans of this thread
        recorded inside its interval under the same parent become its children."""
        stack = self.local.stack
        parent = stack[-1] if stack else None
        span = Span(name, cat, start_ns, self.local.tid, parent, args)
        span.dur_ns = dur_ns
        end = start_ns + dur_ns
        with self._lock:  # (a thread's spans are recorded in the order they end)
            for s in reversed(self.spans):
                if s.tid != span.tid:
                    continue
                if s.start_ns + (s.dur_ns or 0) < start_ns:
                    break
                if s.parent is parent and s.start_ns >= start_ns and s.start_ns + (s.dur_ns or 0) <= end:
                    s.parent = span
        self._add(span)
        return span


#: the recorder of the profile now recording (set by profile.start, cleared by stop)
recorder: Recorder | None = None


# -- the instrumented places -------------------------------------------------------------------

def apply(op_name: str, operands: tuple, attrs: dict) -> Any:
    """``_dispatch.apply`` while recording: one span per op, with where it ran."""
    _dispatch, _views, Tensor, DeviceArray = _library()
    rec = recorder
    if rec is None:
        return _dispatch.apply(op_name, *operands, _profiled=True, **attrs)
    driver = None
    shapes = None
    if rec.record_shapes:
        shapes = tuple(tuple(_dim(d) for d in o.shape) if isinstance(o, Tensor) else () for o in operands)
    for o in operands:
        d = _views.held(o) if isinstance(o, Tensor) else None
        if type(d) is DeviceArray:
            driver = d.driver
            break
    handler = _dispatch.current_handler()
    span = rec.begin(op_name, "op", None, shapes)
    try:
        out = _dispatch.apply(op_name, *operands, _profiled=True, **attrs)
    finally:
        rec.end(span)
    first = out[0] if isinstance(out, tuple) and out else out
    if handler is not None and isinstance(first, Tensor) and not _views.has_memory(first):
        span.args["ran"] = "captured into a graph"
        span.cat = "capture"
    elif driver is None:
        span.args["ran"] = "numpy"
    elif driver.startswith("local"):
        span.args["ran"] = f"IREE kernel on the host ({driver})"
    else:
        span.args["ran"] = f"IREE kernel on the device ({driver})"
    if shapes is not None:
        span.args["input_shapes"] = [list(s) for s in shapes]
    return out


@functools.cache
def _library() -> tuple:
    from .. import _dispatch, _views
    from .._tensor import Tensor
    from ..runtime.storage import DeviceArray

    return _dispatch, _views, Tensor, DeviceArray


def _dim(d: Any) -> Any:
    # a symbolic size (while captured) is shown, never turned into an int: that would guard on it
    return d if type(d) is int else str(d)


def backward_node_runner(run_node: Callable[..., Any]) -> Callable[..., Any]:
    """The autograd engine's per-node function, recording one span per backward node."""

    def run(node: Any, *args: Any) -> Any:
        rec = recorder
        if rec is None:
            return run_node(node, *args)
        span = rec.begin(f"autograd::engine::evaluate_function: {node.name()}", "autograd")
        try:
            return run_node(node, *args)
        finally:
            rec.end(span)

    return run


def span(name: str, cat: str, fn: Callable[..., Any], *args: Any, **fields: Any) -> Any:
    """Run ``fn(*args)`` inside a span ``name``; ``fields`` become its args."""
    rec = recorder
    if rec is None:
        return fn(*args)
    s = rec.begin(name, cat, dict(fields))
    try:
        return fn(*args)
    finally:
        rec.end(s)


def compiled_call(name: str, kind: str, since: int | bool, fn: Callable[..., Any], *args: Any) -> Any:
    """One call of a compiled function: a span with the bytes moved, and its phases: finding
    the cache entry whose guards hold (from ``since``, a ``perf_counter_ns`` time, when the
    profile already recorded then), and around the program calls, argument conversion before
    the first and result wrapping after the last."""
    from ..runtime.storage import stats

    rec = recorder
    if rec is None:
        return fn(*args)
    before = stats()
    s = rec.begin(f"tp.compile: {name}", "compiled", {"entry": kind}, kids=True)
    began = s.start_ns
    if since and rec.start_ns <= since <= began:
        s.start_ns = since
        _phase(rec, "compiled: guards", "compiled", s, since, began)
    try:
        return fn(*args)
    finally:
        rec.end(s)
        _moved(s.args, stats() - before)
        calls = [c for c in s.kids if c.cat == "runtime"]
        if calls and kind == "graph":  # (a segmented entry reruns the Python between its programs)
            first = min(calls, key=lambda c: c.start_ns)
            last = max(calls, key=lambda c: c.start_ns + c.dur_ns)
            _phase(rec, "compiled: arguments", "compiled", s, began, first.start_ns)
            _phase(rec, "compiled: results", "compiled", s, last.start_ns + last.dur_ns, s.start_ns + s.dur_ns)


def program_call(program: Any, fn: Any, arrays: Any) -> Any:
    """``runtime.Program._invoke`` while recording: upload, invoke and download of one call,
    with the bytes each direction moved."""
    from ..runtime.storage import TransferStats, stats

    rec = recorder
    if rec is None:
        return program._call(fn, arrays)
    label = fn.label
    before = stats().by_program.get(label, TransferStats())
    s = rec.begin(f"iree: @{fn.name}", "runtime", {"driver": program.driver}, kids=True)
    try:
        return program._call(fn, arrays)
    finally:
        rec.end(s)
        _moved(s.args, stats().by_program.get(label, TransferStats()) - before)
        invokes = [c for c in s.kids if c.name == "iree: invoke"]
        if invokes:
            inv = invokes[0]
            _phase(rec, "iree: upload", "runtime", s, s.start_ns, inv.start_ns,
                   uploads=s.args["uploads"], upload_bytes=s.args["upload_bytes"],
                   read_in_place=s.args["read_in_place"])
            _phase(rec, "iree: download", "runtime", s, inv.start_ns + inv.dur_ns, s.start_ns + s.dur_ns,
                   downloads=s.args["downloads"], download_bytes=s.args["download_bytes"])


def invoke(fn: Callable[..., Any], *args: Any) -> Any:
    """The IREE VM invoke itself (the program's dispatches, and their wait on a sync driver)."""
    return span("iree: invoke", "runtime", fn, *args)


def graph_break(name: str, reason: str, loc: Any) -> None:
    rec = recorder
    if rec is not None:
        rec.instant("graph break", "compile", {"function": name, "reason": reason,
                                                "loc": str(loc) if loc is not None else None})


def compiled_graph(graph: str, backend: str, ops: int, start_s: float, seconds: float) -> None:
    """A backend compile that took ``seconds`` from ``start_s`` (``time.perf_counter``)."""
    rec = recorder
    if rec is not None:
        rec.complete(f"compile @{graph}", "compile", int(start_s * 1e9), int(seconds * 1e9),
                     {"backend": backend, "ops": ops})


def _moved(args: dict, moved: Any) -> None:
    args.update(uploads=moved.uploads, upload_bytes=moved.upload_bytes, downloads=moved.downloads,
                download_bytes=moved.download_bytes, read_in_place=moved.imports)


def _phase(rec: Recorder, name: str, cat: str, parent: Span, start: int, end: int, **args: Any) -> None:
    if end <= start:
        return
    s = Span(name, cat, start, parent.tid, parent, args)
    s.dur_ns = end - start
    rec._add(s)


class _Steps(threading.local):
    def __init__(self) -> None:
        self.running: set[int] = set()


_steps = _Steps()


def in_step(opt: Any) -> bool:
    """Whether ``opt.step`` is already recorded on this thread (its body runs now)."""
    return id(opt) in _steps.running


def optimizer_step(opt: Any, closure: Any) -> Any:
    """One span per ``Optimizer.step``, named as PyTorch names it."""
    rec = recorder
    key = id(opt)
    _steps.running.add(key)
    try:
        if rec is None:
            return opt.step(closure)
        s = rec.begin(f"Optimizer.step#{type(opt).__name__}.step", "optimizer")
        try:
            return opt.step(closure)
        finally:
            rec.end(s)
    finally:
        _steps.running.discard(key)
