"""Markers acting on the marked callable itself, so that code calling the original (library
code, ``from helpers import f``, a method called on ``self``) gets the marker's behaviour
under capture, not only code calling the wrapper a marker returns.

Capture runs the Python program, so a call can only be redirected where the callable itself
routes it:

* A Python function keeps its identity but gets a new ``__code__``: a *trampoline* with the
  same parameters (so ``inspect.signature`` and the defaults are unchanged), the same free
  variables (its closure cells stay the function's), file, first line and name (so
  ``inspect.getsource`` and tracebacks still find it). The trampoline calls its
  :class:`_Route`, which runs the marker's handler when this thread is capturing and
  otherwise the original body, kept in a copy of the function that shares globals, closure
  and defaults. Frames of trampolines are not the user's for the capture
  (``reads.hide_code``): break locations name the caller, and the read recorder does not
  follow them. A bound method routes its function for that instance only. A function of an
  installed package called by tensorplay or the standard library runs its original (see
  :func:`_is_library_function`).
* A callable without Python code (numpy's functions and ufuncs, ``math.floor``) cannot be
  changed, so the module attributes that hold it are replaced by a :class:`_StandIn` while
  any capture runs and restored when the last one ends (also when it raises). The places
  are the module named by its ``__module__`` and the user's modules that hold it under its
  name (``from numpy import ptp``); a stand-in called by tensorplay's own code or the
  standard library, or from a thread that is not capturing, calls the original. Reads of a
  stand-in are guarded as reads of the original (``reads.StandIn``). Tensorplay's own C
  callables are not routed this way (its code calls them everywhere).

Thread safety: the handler runs only for a thread that is capturing (``current_capture()``
is per thread), so an eager call in another thread runs the original even while a capture
redirects; the patched module attributes are visible to every thread while some capture runs
(``np.ptp is original`` is False there), and a thread that is not capturing calls through
them to the original. Patching and restoring happen under a lock, counted over all threads'
captures.

Marks persist across ``tensorplay.compiler.reset()``, as torch's do; :func:`unroute` undoes
one (tests use it).

Nothing is installed until a marker routes a callable; a capture entered with no C callable
routed patches nothing.
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from typing import Any

from .._logging import get_logger
from ..capture.code_hiding import StandIn, hide_code, unhide_code
from ._session import current_capture, describe

__all__ = ["route", "unroute", "routed_marker", "capture_entered", "capture_exited"]

#: ``handler(cap, args, kwargs)``: what a call does under capture ``cap``
Handler = Callable[[Any, tuple, dict], Any]

_log = get_logger("breaks")
_PLACEHOLDER = "__tensorplay_marker_route__"
_UNROUTABLE = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
               | inspect.CO_ITERABLE_COROUTINE)


# -- Python functions ------------------------------------------------------------------------

class _Route:
    """The marker of one Python function (for all calls, or per bound instance), found by its
    trampoline, which holds it as a constant."""

    __slots__ = ("fn", "body", "code", "marker", "handler", "instances", "foreign")

    def __init__(self, fn: types.FunctionType, body: types.FunctionType):
        self.fn = fn
        self.body = body
        self.code: types.CodeType | None = None  # the trampoline
        self.marker: str | None = None
        self.handler: Handler | None = None
        self.instances: dict[int, tuple[Any, str, Handler]] = {}
        self.foreign = _is_library_function(fn)

    def dispatch(self, args: tuple, kwargs: dict) -> Any:
        cap = current_capture()
        if cap is not None and not (self.foreign and _called_by_library(sys._getframe(2))):
            handler = self.handler
            if self.instances and args:
                hit = self.instances.get(id(args[0]))
                if hit is not None and hit[0] is args[0]:
                    handler = hit[2]
            if handler is not None:
                return handler(cap, args, kwargs)
        return self.body(*args, **kwargs)


def _route_of(fn: types.FunctionType) -> _Route | None:
    for const in fn.__code__.co_consts:
        if type(const) is _Route and const.fn is fn:
            return const
    return None


def _trampoline(fn: types.FunctionType, route: _Route) -> types.CodeType:
    """Code with ``fn``'s parameters and free variables that hands its arguments to ``route``."""
    code = fn.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    pos, kwonly = list(names[:npos]), list(names[npos:npos + nkw])
    i = npos + nkw
    varargs = names[i] if code.co_flags & inspect.CO_VARARGS else None
    varkw = names[i + (varargs is not None)] if code.co_flags & inspect.CO_VARKEYWORDS else None
    params = list(pos)
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    params += [f"*{varargs}"] if varargs else (["*"] if kwonly else [])
    params += kwonly + ([f"**{varkw}"] if varkw else [])
    items = pos + ([f"*{varargs}"] if varargs else [])
    positional = "(" + ", ".join(items) + ("," if items else "") + ")"
    keywords = "{" + ", ".join([f"{k!r}: {k}" for k in kwonly] + ([f"**{varkw}"] if varkw else [])) + "}"
    call = f"{_PLACEHOLDER!r}.dispatch({positional}, {keywords})"
    if code.co_freevars:  # named (never read) so that the trampoline takes the same closure
        call += f" if True else ({', '.join(code.co_freevars)},)"
    # the trampoline's whole body is on its def line, which becomes the function's first line
    source = (f"def __tp_factory__({', '.join(code.co_freevars)}):\n"
              f" def __tp_trampoline__({', '.join(params)}): return {call}\n"
              f" return __tp_trampoline__\n")
    module = compile(source, code.co_filename, "exec", dont_inherit=True)
    factory = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory.co_consts if isinstance(c, types.CodeType))
    consts = tuple(route if type(c) is str and c == _PLACEHOLDER else c for c in inner.co_consts)
    changes: dict[str, Any] = {"co_consts": consts, "co_name": code.co_name,
                               "co_firstlineno": code.co_firstlineno}
    if hasattr(code, "co_qualname"):
        changes["co_qualname"] = code.co_qualname
    inner = inner.replace(**changes)
    if inner.co_freevars != code.co_freevars:  # pragma: no cover - a compiler we do not know
        raise RuntimeError(f"cannot route {describe(fn)}: free variables differ")
    return inner


def _python_route(fn: types.FunctionType) -> _Route:
    route = _route_of(fn)
    if route is not None:
        return route
    body = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    body.__qualname__, body.__module__, body.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    route = _Route(fn, body)
    route.code = _trampoline(fn, route)
    hide_code(route.code, body.__code__)
    fn.__code__ = route.code
    return route


def _routable_function(fn: Any) -> bool:
    return isinstance(fn, types.FunctionType) and not fn.__code__.co_flags & _UNROUTABLE


# -- callables without Python code, reached as module attributes ----------------------------

_library_cache: dict[str, bool] = {}


def _dirs(*paths: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.join(q, "") for p in paths if p for q in (p, os.path.realpath(p))))


_STDLIB = _dirs(sysconfig.get_paths().get("stdlib"))
_INSTALLED = _dirs(*(p for p in sysconfig.get_paths().values() if "-packages" in p))


def _is_tensorplay_file(filename: str) -> bool:
    from ..capture.user_frames import _is_ours

    return _is_ours(filename)


def _is_library_function(fn: types.FunctionType) -> bool:
    """A function of an installed package or the standard library (numpy's Python functions):
    calls of it made by tensorplay or the standard library are not redirected. The user's
    functions and tensorplay's own are redirected whoever calls them (``Module.__call__``
    calling a marked ``forward``, a callback run by a tensorplay function)."""
    filename = fn.__code__.co_filename
    return not _is_tensorplay_file(filename) and filename.startswith(_STDLIB + _INSTALLED)


def _called_by_library(frame: types.FrameType | None) -> bool:
    """Whether the caller is tensorplay's own code or the standard library's: their calls of
    another library's callable are implementation details (an interpreter running numpy
    kernels between segments, ``len`` in logging), never redirected."""
    if frame is None:
        return False
    filename = frame.f_code.co_filename
    hit = _library_cache.get(filename)
    if hit is None:
        hit = _library_cache[filename] = _is_tensorplay_file(filename) or filename.startswith("<frozen") or (
            filename.startswith(_STDLIB) and not filename.startswith(_INSTALLED))
    return hit


class _StandIn(StandIn):
    """Takes a C callable's place in module attributes while captures run."""

    __slots__ = ("marker", "handler")

    def __init__(self, original: Any, marker: str, handler: Handler):
        super().__init__(original)
        self.marker = marker
        self.handler = handler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None or _called_by_library(sys._getframe(1)):
            return self.stands_for(*args, **kwargs)
        return self.handler(cap, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("stands_for", "marker", "handler"):
            raise AttributeError(name)
        return getattr(self.stands_for, name)

    @property
    def __doc__(self) -> Any:  # type: ignore[override]
        return self.stands_for.__doc__

    def __repr__(self) -> str:
        return repr(self.stands_for)


_stand_ins: dict[int, _StandIn] = {}  # id(original) -> its stand-in
_places: dict[int, list[tuple[dict, str]]] = {}  # id(original) -> module dicts and names
_patched: list[tuple[dict, str, _StandIn]] = []
_lock = threading.RLock()
_depth = 0  # captures running, all threads together
_modules_seen = 0  # len(sys.modules) when the places were last looked up


def _user_module(module: Any) -> bool:
    from ..capture.user_frames import _is_user_file

    filename = getattr(module, "__file__", None)
    return isinstance(filename, str) and _is_user_file(os.path.abspath(filename))


def _find_places(original: Any) -> list[tuple[dict, str]]:
    name = getattr(original, "__name__", None)
    if not isinstance(name, str):
        return []
    places = []
    home = sys.modules.get(getattr(original, "__module__", None) or "")
    for module in [home, *list(sys.modules.values())]:
        try:
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or namespace.get(name) is not original:
                continue
            if (module is home or _user_module(module)) and all(d is not namespace for d, _ in places):
                places.append((namespace, name))
        except Exception:  # noqa: BLE001 - a lazy module object that fails when asked
            continue
    return places


def _c_route(original: Any, marker: str, handler: Handler) -> bool:
    if (getattr(original, "__module__", None) or "").split(".")[0] == "tensorplay":
        return False  # tensorplay's own code calls it everywhere: not redirected
    with _lock:
        places = _places.get(id(original)) or _find_places(original)
        if not places:
            return False
        _places[id(original)] = places
        old = _stand_ins.get(id(original))
        if old is not None and old.stands_for is original:
            old.marker, old.handler = marker, handler
            return True
        _stand_ins[id(original)] = _StandIn(original, marker, handler)
        if _depth:
            _patch()
        return True


def _patch() -> None:
    """Put every stand-in in its places (under ``_lock``, while some capture runs)."""
    global _modules_seen
    if len(sys.modules) != _modules_seen:  # modules imported since: look again
        _modules_seen = len(sys.modules)
        for key, stand_in in _stand_ins.items():
            _places[key] = _find_places(stand_in.stands_for) or _places.get(key, [])
    done = {(id(d), n) for d, n, _ in _patched}
    for key, stand_in in _stand_ins.items():
        for namespace, name in _places.get(key, ()):
            if (id(namespace), name) not in done and namespace.get(name) is stand_in.stands_for:
                namespace[name] = stand_in
                _patched.append((namespace, name, stand_in))


def _restore(only: _StandIn | None = None) -> None:
    keep = []
    for namespace, name, stand_in in _patched:
        if only is not None and stand_in is not only:
            keep.append((namespace, name, stand_in))
        elif namespace.get(name) is stand_in:
            namespace[name] = stand_in.stands_for
    _patched[:] = keep


_counted: dict[int, int] = {}  # id(capture) -> how many of its entries _depth counts


def capture_entered(cap: Any) -> None:
    """A capture starts (any thread): stand-ins go in place unless they already are."""
    global _depth
    if not _stand_ins:
        return  # nothing routed through module attributes: no cost
    with _lock:
        _depth += 1
        _counted[id(cap)] = _counted.get(id(cap), 0) + 1
        _patch()


def capture_exited(cap: Any) -> None:
    """A capture ended (also by an exception): the last one restores the module attributes."""
    global _depth
    if not _counted:
        return
    with _lock:
        n = _counted.get(id(cap), 0)
        if not n:
            return
        if n == 1:
            del _counted[id(cap)]
        else:
            _counted[id(cap)] = n - 1
        _depth -= 1
        if not _depth:
            _restore()


# -- what markers call -------------------------------------------------------------------------

def route(fn: Any, marker: str, make_handler: Callable[[Callable[..., Any]], Handler]) -> Callable[..., Any] | None:
    """Make calls of ``fn`` itself run ``make_handler(body)(cap, args, kwargs)`` while the
    calling thread captures, ``body`` being what runs ``fn``'s original code without
    redirection. Returns ``body``, or None when ``fn`` cannot be routed (a generator or
    coroutine function, a callable object, a partial, a C callable that no module holds):
    then only the marker's wrapper acts. A later marker replaces an earlier one's handler."""
    instance = None
    target = fn
    if isinstance(fn, (staticmethod, classmethod)):
        target = fn.__func__
    elif isinstance(fn, types.MethodType) and _routable_function(fn.__func__):
        instance, target = fn.__self__, fn.__func__
    if _routable_function(target):
        r = _python_route(target)
        handler = make_handler(r.body)
        if instance is None:
            if r.marker not in (None, marker):
                _log.info("%s: marked with %s, which replaces its earlier mark %s", describe(target), marker,
                          r.marker)
            r.marker, r.handler = marker, handler
        else:
            r.instances[id(instance)] = (instance, marker, handler)
        return r.body
    if isinstance(fn, (types.FunctionType, types.MethodType, type)) or \
            isinstance(getattr(type(fn), "__call__", None), types.FunctionType):
        return None  # a generator function, or an object whose class defines __call__ in Python
    if _c_route(fn, marker, make_handler(fn)):
        return fn
    return None


def unroute(fn: Any) -> None:
    """Undo :func:`route` for ``fn`` (the function's own code back, module attributes left
    alone): for tests and re-registration."""
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        r = _route_of(fn.__func__)
        if r is not None:
            r.instances.pop(id(fn.__self__), None)
        return
    if isinstance(fn, types.FunctionType):
        r = _route_of(fn)
        if r is not None:
            fn.__code__ = r.body.__code__
            unhide_code(r.code)
        return
    with _lock:
        stand_in = _stand_ins.pop(id(fn), None)
        _places.pop(id(fn), None)
        if stand_in is not None:
            _restore(only=stand_in)


def routed_marker(fn: Any) -> str | None:
    """The marker that acts on calls of ``fn`` itself (for all calls of a function), or None."""
    target = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
    if isinstance(target, types.MethodType) and isinstance(target.__func__, types.FunctionType):
        r = _route_of(target.__func__)
        if r is None:
            return None
        hit = r.instances.get(id(target.__self__))
        return hit[1] if hit is not None and hit[0] is target.__self__ else r.marker
    if isinstance(target, types.FunctionType):
        r = _route_of(target)
        return r.marker if r is not None else None
    stand_in = _stand_ins.get(id(target))
    return stand_in.marker if stand_in is not None and stand_in.stands_for is target else None
