"""Calls to ``disallow_in_graph`` callables, seen while a capture runs.

``disallow_in_graph`` returns the callable unchanged, so the tracer cannot see its calls
through a wrapper. While a capture session is active (and only if something is registered) a
``sys.setprofile`` hook watches for frames of registered code: on entry it ends the current
segment and suspends capture, on return it resumes. Builtins are matched on ``c_call``.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from typing import Any

from ._session import current_capture, describe, eager_after_break
from .._logging import get_logger

__all__ = ["register_disallowed", "is_disallowed_in_graph", "capture_entered", "capture_exited"]

_log = get_logger("breaks")


class _Entry:
    """One registered callable: its code (or builtin object) plus what tells its calls apart
    from other functions sharing that code (closure cells, the bound instance)."""

    def __init__(self, fn: Any, code: Any, bound_self: Any, cells: tuple | None,
                 self_name: str | None):
        self.name = describe(fn)
        self.ref = fn
        self.code = code
        self.bound_self = bound_self
        self.cells = cells
        self.self_name = self_name

    def matches(self, frame: types.FrameType) -> bool:
        if self.cells is None and self.bound_self is None:
            return True
        f_locals = frame.f_locals
        if self.bound_self is not None and f_locals.get(self.self_name) is not self.bound_self:
            return False
        if self.cells is not None:
            for name, cell in zip(self.code.co_freevars, self.cells):
                try:
                    if f_locals.get(name) is not cell.cell_contents:
                        return False
                except ValueError:  # an empty cell
                    continue
        return True


_by_code: dict[types.CodeType, list[_Entry]] = {}
_builtins: dict[int, tuple[Any, str]] = {}
#: code object -> whether it is tensorplay's own (its calls to a marked builtin, such as size
#: arithmetic with math.floor inside F.interpolate, are the library's, not the user's program)
_own_code: dict[types.CodeType, bool] = {}


@functools.lru_cache(maxsize=None)
def _library_roots() -> tuple[str, ...]:
    """The folders of tensorplay and of the packages installed inside its namespace from
    folders of their own (dialects, passes, tools), found without importing them."""
    import importlib.util
    import os

    roots = []
    for name in ("tensorplay", "tensorplay.dialects", "tensorplay.passes", "tensorplay.tools"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            roots.append(os.path.dirname(os.path.abspath(spec.origin)) + os.sep)
    return tuple(roots)


def _is_library(code: types.CodeType) -> bool:
    own = _own_code.get(code)
    if own is None:
        import os

        own = _own_code[code] = os.path.abspath(code.co_filename).startswith(_library_roots())
    return own


def _entry_for(fn: Any) -> _Entry | None:
    bound_self = None
    target = fn
    if isinstance(fn, types.MethodType):
        bound_self, target = fn.__self__, fn.__func__
    elif not isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)) \
            and not isinstance(fn, type) and callable(fn):
        call = getattr(type(fn), "__call__", None)
        if isinstance(call, types.FunctionType):
            bound_self, target = fn, call
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    self_name = code.co_varnames[0] if bound_self is not None and code.co_argcount else None
    if bound_self is not None and self_name is None:
        return None
    cells = target.__closure__ if target.__closure__ else None
    return _Entry(fn, code, bound_self, cells, self_name)


def register_disallowed(fn: Any) -> None:
    """Record ``fn`` so that its calls during capture run eagerly between graphs."""
    if isinstance(fn, type):
        raise TypeError(f"disallow_in_graph(): {describe(fn)} is a class; wrap its construction "
                        f"in a function and mark that function")
    entry = _entry_for(fn)
    if entry is not None:
        entries = _by_code.setdefault(entry.code, [])
        if not any(e.ref is fn for e in entries):
            entries.append(entry)
        return
    if isinstance(fn, types.BuiltinFunctionType):
        _builtins[id(fn)] = (fn, describe(fn))
        return
    raise TypeError(f"disallow_in_graph(): cannot watch calls to a {type(fn).__qualname__}; "
                    f"mark the Python function it calls, or wrap it in a def and mark that")


def is_disallowed_in_graph(fn: Any) -> bool:
    """Whether calls to ``fn`` are graph boundaries."""
    if id(fn) in _builtins:
        return True
    entry = _entry_for(fn)
    return entry is not None and any(e.ref is fn or e.ref == fn for e in _by_code.get(entry.code, ()))


class _Interceptor:
    """The profile hook of one capture session."""

    def __init__(self, cap: Any, previous: Any):
        self.cap = cap
        self.previous = previous
        self.active: tuple[Any, Any, Any] | None = None  # (frame, builtin or None, context)

    def _suspend(self, frame: types.FrameType, builtin: Any, name: str) -> None:
        if current_capture() is not self.cap:  # already eager (run_eagerly, disable_capture)
            return
        caller = frame if builtin is not None else frame.f_back
        where = f" (called at {caller.f_code.co_filename}:{caller.f_lineno})" if caller else ""
        reason = f"call to {name}, marked with tensorplay.compiler.disallow_in_graph{where}"
        _log.info("%s: running it eagerly between graphs", reason)
        context = eager_after_break(self.cap, reason)
        context.__enter__()
        self.active = (frame, builtin, context)

    def _resume(self) -> None:
        context = self.active[2]
        self.active = None
        context.__exit__(None, None, None)

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if self.previous is not None:
            self.previous(frame, event, arg)
        active = self.active
        if event == "call":
            if active is None:
                entries = _by_code.get(frame.f_code)
                if entries:
                    for entry in entries:
                        if entry.matches(frame):
                            self._suspend(frame, None, entry.name)
                            break
        elif event == "return":
            if active is not None and active[0] is frame and active[1] is None:
                self._resume()
        elif event == "c_call":
            if active is None and _builtins:
                hit = _builtins.get(id(arg))
                if hit is not None and hit[0] is arg and not _is_library(frame.f_code):
                    self._suspend(frame, arg, hit[1])
        elif active is not None and active[1] is arg and active[0] is frame:  # c_return/c_exception
            self._resume()


_local = threading.local()


def _entries() -> list[tuple[Any, _Interceptor | None, Any]]:
    """This thread's active sessions: (capture, its watcher or None, profile function replaced)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def capture_entered(cap: Any) -> None:
    """Install the call watcher for ``cap`` when any callable is disallowed in graphs."""
    stack = _entries()
    previous = sys.getprofile()
    hook = None
    watched = any(entry[0] is cap and entry[1] is not None for entry in stack)
    if (_by_code or _builtins) and not watched:
        if previous is not None and not callable(previous):
            _log.warning("disallow_in_graph: a profiler is active, so calls to disallowed callables "
                         "are traced inline during this capture")
        else:
            hook = _Interceptor(cap, previous)
            sys.setprofile(hook)
    stack.append((cap, hook, previous))


def capture_exited(cap: Any) -> None:
    """Remove the call watcher of ``cap`` (restoring the profile function it replaced)."""
    stack = _entries()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] is cap:
            _, hook, previous = stack.pop(i)
            if hook is not None:
                if hook.active is not None:
                    hook._resume()
                sys.setprofile(previous)
            return
