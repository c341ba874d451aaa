"""The read tracer: follows the user's frames while a trace runs and records what they read.

:class:`ReadRecorder` uses ``sys.settrace`` with opcode events (frames of tensorplay, the
standard library and installed packages are not followed), mirrors the top of the value stack
for runs of loads, and records each read from state that outlives the call as a
:data:`~.read_guards.Read`; stores into such state are reported as side effects. See
:mod:`.reads` for what is read and guarded.
"""

from __future__ import annotations

import dis
import functools
import gc
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from ...dialects.tp.graph import SourceLoc
from .code_hiding import code_of, is_hidden_code, stood_for
from .read_guards import (AttrRead, CellRead, ContentRead, FunctionRead, GlobalRead, ItemRead, Read, ReadGuard,
                          function_like, sign_reads)
from .static_lookup import Opaque, _class_lookup, static_attr, static_item
from .value_signatures import (_CONST_TYPES, ARRAY_VALUE_BYTES, MISSING, SIGNATURE_BUDGET, _const_like,
                               _is_module_instance, _is_plain_object, _tensor_types)

__all__ = ["ReadRecorder", "SideEffect"]

_MUTATORS = {
    list: {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
           "__delitem__", "__iadd__", "__imul__"},
    dict: {"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__", "__ior__"},
    set: {"add", "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
          "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"},
}


def _modules_under(root: Any) -> list[Any]:
    out, stack, seen = [], [root], set()
    while stack:
        m = stack.pop()
        if m is None or id(m) in seen:
            continue
        seen.add(id(m))
        out.append(m)
        stack.extend(m.__dict__.get("_modules", {}).values())
    return out


class SideEffect(Exception):
    pass


# -- the recorder -----------------------------------------------------------------------------

_instructions: dict[types.CodeType, dict[int, dis.Instruction]] = {}
_NEUTRAL = {"NOP", "CACHE", "EXTENDED_ARG", "RESUME", "PRECALL", "COPY_FREE_VARS", "MAKE_CELL"}
_LOAD_FAST = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW", "LOAD_FAST_AND_CLEAR"}
_LOAD_FAST2 = {"LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"}
_STORES = {"STORE_ATTR", "DELETE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR"}
_UNKNOWN = object()
_NULL = object()
# simple stack effects (pops, pushes) kept so that augmented assignments stay followed
_EFFECTS = {"BINARY_OP": (2, 1), "COMPARE_OP": (2, 1), "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1),
            "UNARY_INVERT": (1, 1), "UNARY_POSITIVE": (1, 1), "IS_OP": (2, 1), "CONTAINS_OP": (2, 1),
            "POP_TOP": (1, 0), "PUSH_NULL": (0, 1), "TO_BOOL": (1, 1)}


def _code_map(code: types.CodeType) -> dict[int, dis.Instruction]:
    m = _instructions.get(code)
    if m is None:
        m = _instructions[code] = {i.offset: i for i in dis.get_instructions(code)}
    return m


class ReadRecorder:
    """Records the reads (and outside stores) of the user's frames while active; see the
    module docstring. ``is_user_file(filename)`` says which frames are followed."""

    def __init__(self, is_user_file: Callable[[str], bool], roots: list[Any],
                 on_side_effect: Callable[[str, SourceLoc], None] | None = None,
                 funcs: list[Any] = (), still_needed: Callable[[], bool] | None = None,
                 guarded_modules: list[Any] = ()):
        self._is_user_file = is_user_file
        self._guarded_modules = {id(m) for root in guarded_modules for m in _modules_under(root)}
        self._still_needed = still_needed
        self._on_side_effect = on_side_effect
        self._frames: dict[int, list[Any]] = {}
        self._reads: dict[tuple, tuple[str, Read, Any, SourceLoc | None]] = {}
        self._outside: dict[int, Any] = {}
        self._funcs: dict[types.CodeType, list[Any]] = {}
        self._cell_cache: dict[types.CodeType, list[Any]] = {}
        self._pending_store: dict[int, tuple] = {}
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self._previous: Any = None
        self._thread: int | None = None
        self.active = False
        self._in_gc = False  # (a collection is running: its frames are not the function's)
        self.paused = 0
        for r in roots:
            self._mark_outside(r)
        for f in funcs:
            self._add_func(f)
        # a compiled bound method keeps calling its own function, whatever its object's class
        # or instance says later: no guard on what ``obj.method`` gives (see _method_of)
        first = funcs[0] if funcs else None
        self._entry = (id(first.__self__), first.__func__.__code__) if isinstance(first, types.MethodType) else None

    # -- bookkeeping -------------------------------------------------------------------------
    def _mark_outside(self, v: Any) -> None:
        if not _const_like(v):
            self._outside[id(v)] = v
        self._add_func(v)

    def _add_func(self, v: Any) -> None:
        f = getattr(v, "__func__", v)
        if isinstance(f, types.FunctionType):
            lst = self._funcs.setdefault(f.__code__, [])
            if all(g is not f for g in lst):
                lst.append(f)

    def note(self, text: str) -> None:
        if text not in self._noted:
            self._noted.add(text)
            self.notes.append(text)

    def _record(self, read: Read, description: str, value: Any, loc: SourceLoc | None) -> None:
        value = stood_for(value)
        key = read.key()
        if key not in self._reads:
            self._reads[key] = (description, read, value, loc)
            self.function_state(value, description, loc)
        self._mark_outside(value)

    def function_state(self, value: Any, description: str, loc: SourceLoc | None = None) -> None:
        """Guard the state of a function, bound method or partial the program reads (and of
        the function a bound method or partial calls): see :class:`FunctionRead`."""
        while True:
            if isinstance(value, types.MethodType):
                value, description = value.__func__, f"{description}.__func__"
                continue
            if not function_like(value):
                return
            if isinstance(value, types.FunctionType) and not self._is_user_file(code_of(value).co_filename):
                return  # (tensorplay's, the standard library's, an installed package's: as their frames)
            key = (FunctionRead, id(value))
            if key in self._reads:
                return
            what = ("func, args and keywords" if isinstance(value, functools.partial)
                    else "__code__, __defaults__ and __kwdefaults__")
            self._reads[key] = (f"{description}: {what} unchanged", FunctionRead(value), value, loc)
            self._keep(value)
            if not isinstance(value, functools.partial):
                return
            value, description = value.func, f"{description}.func"

    # -- activation --------------------------------------------------------------------------
    def __enter__(self) -> ReadRecorder:
        self._previous = sys.gettrace()
        self._thread = threading.get_ident()
        self.active = True
        # code the garbage collector runs (gc.callbacks, finalizers and weakref callbacks of
        # collected objects) runs at whatever point a collection happens: not the function's
        gc.callbacks.insert(0, self._gc_started)
        gc.callbacks.append(self._gc_stopped)
        sys.settrace(self._trace_call)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.active:
            self.active = False
            sys.settrace(self._previous)
            for hook in (self._gc_started, self._gc_stopped):
                try:
                    gc.callbacks.remove(hook)
                except ValueError:
                    pass

    def _gc_started(self, phase: str, info: dict) -> None:
        if phase == "start":  # (first in gc.callbacks: before any other callback runs)
            self._in_gc = True

    def _gc_stopped(self, phase: str, info: dict) -> None:
        if phase == "stop":  # (last in gc.callbacks)
            self._in_gc = False

    def _trace_call(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not self.active or self.paused or self._in_gc:
            return None
        code = frame.f_code
        if not self._is_user_file(code.co_filename) or code.co_name in ("<genexpr>",) or is_hidden_code(code) \
                or "__create_fn__" in getattr(code, "co_qualname", ""):
            # (dataclasses' generated methods, whose file is "<string>" like code run by exec,
            # read only what their class fixed when it was made)
            return None
        frame.f_trace_opcodes = True
        self._frames[id(frame)] = []
        if code.co_argcount:
            self._method_of(frame, code)
        return self._trace_local

    def _method_of(self, frame: types.FrameType, code: types.CodeType) -> None:
        """A method called on an object (a module's forward that library code calls, a
        ``__call__``): which function the object's class gives for it is guarded, with that
        function's state, so a method rebound on the class or the instance recaptures."""
        owner = frame.f_locals.get(code.co_varnames[0], MISSING)
        if owner is MISSING or _const_like(owner) or isinstance(owner, _tensor_types()[0]) \
                or (id(owner), code) == self._entry:
            return
        try:
            found = static_attr(owner, code.co_name)
        except Opaque:
            return
        f = getattr(found, "__func__", found)
        if isinstance(f, types.FunctionType) and code_of(f) is code:
            if _is_module_instance(owner) and code.co_name not in owner.__dict__:
                owner = type(owner)  # (the module guard keeps its type and instance dict: one check per class)
            self._record(AttrRead(owner, code.co_name), f"{_label(owner)}.{code.co_name}", found,
                         self._loc(frame))
            self._keep(owner)

    def _trace_local(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if not self.active:
            return None
        if self.paused:
            return self._trace_local
        if self._still_needed is not None and not self._still_needed():
            self.stop()
            return None
        if event == "opcode":
            try:
                self._opcode(frame)
            except SideEffect:
                pass
        elif event == "return":
            self._settle_store(frame)
            self._frames.pop(id(frame), None)
        return self._trace_local

    # -- one instruction ---------------------------------------------------------------------
    def _loc(self, frame: types.FrameType) -> SourceLoc:
        return SourceLoc(frame.f_code.co_filename, frame.f_lineno)

    def _settle_store(self, frame: types.FrameType) -> None:
        pending = self._pending_store.pop(id(frame), None)
        if pending is None:
            return
        what, fetch, loc = pending
        try:
            value = fetch()
        except Exception:  # noqa: BLE001
            value = MISSING
        tensor_t = _tensor_types()[0]
        if isinstance(value, tensor_t):
            return  # tensors stored on outside objects are written back by the capture
        if self._on_side_effect is not None:
            self._on_side_effect(what, loc)

    def _opcode(self, frame: types.FrameType) -> None:
        if id(frame) in self._pending_store:
            self._settle_store(frame)
        code = frame.f_code
        ins = _code_map(code).get(frame.f_lasti)
        stack = self._frames.setdefault(id(frame), [])
        if ins is None:
            stack.clear()
            return
        op = ins.opname
        if op in _NEUTRAL:
            return
        if op in _LOAD_FAST:
            stack.append(frame.f_locals.get(ins.argval, _UNKNOWN))
        elif op in _LOAD_FAST2:
            a, b = ins.argval if isinstance(ins.argval, tuple) else (_UNKNOWN, _UNKNOWN)
            stack.extend(frame.f_locals.get(n, _UNKNOWN) for n in (a, b))
        elif op in ("LOAD_CONST", "LOAD_SMALL_INT"):
            stack.append(ins.argval)
        elif op == "LOAD_GLOBAL":
            if ins.arg is not None and ins.arg & 1 and sys.version_info < (3, 13):
                stack.append(_NULL)
            stack.append(self._global(frame, ins.argval))
            if ins.arg is not None and ins.arg & 1 and sys.version_info >= (3, 13):
                stack.append(_NULL)
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"):
            stack.append(self._deref(frame, ins.argval))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            receiver = stack.pop() if stack else _UNKNOWN
            value = self._attr(frame, receiver, ins.argval)
            stack.append(value)
        elif op == "BINARY_SUBSCR" or (op == "BINARY_OP" and ins.argrepr == "[]"):
            key = stack.pop() if stack else _UNKNOWN
            container = stack.pop() if stack else _UNKNOWN
            stack.append(self._item(frame, container, key))
        elif op in _STORES:
            self._store(frame, stack, op, ins.argval)
            stack.clear()
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            g = frame.f_globals
            name = ins.argval
            self._pending_store[id(frame)] = (f"global {name!r}", lambda g=g, name=name: g.get(name, MISSING),
                                              self._loc(frame))
            stack.clear()
        elif op in ("STORE_DEREF", "DELETE_DEREF") and ins.argval in code.co_freevars:
            self._pending_store[id(frame)] = (f"closure variable {ins.argval!r}", lambda: MISSING, self._loc(frame))
            stack.clear()
        elif op == "COPY" and ins.arg is not None and len(stack) >= ins.arg:
            stack.append(stack[-ins.arg])
        elif op == "SWAP" and ins.arg is not None and len(stack) >= ins.arg:
            stack[-1], stack[-ins.arg] = stack[-ins.arg], stack[-1]
        elif op in _EFFECTS and len(stack) >= _EFFECTS[op][0]:
            pops, pushes = _EFFECTS[op]
            del stack[len(stack) - pops:]
            stack.extend([_UNKNOWN] * pushes)
        else:
            stack.clear()

    # -- the reads ---------------------------------------------------------------------------
    def _global(self, frame: types.FrameType, name: str) -> Any:
        g = frame.f_globals
        loc = self._loc(frame)
        if name in g:
            value = g[name]
            self._record(GlobalRead(g, name), f"global {name!r} of {g.get('__name__', '?')}", value, loc)
            return value
        b = frame.f_builtins
        value = b.get(name, MISSING)
        if value is not MISSING:
            self._record(GlobalRead(g, name, b), f"builtin {name!r} (not shadowed by a global)", value, loc)
        return value

    def _deref(self, frame: types.FrameType, name: str) -> Any:
        code = frame.f_code
        value = frame.f_locals.get(name, _UNKNOWN)
        if name not in code.co_freevars:
            return value  # a cell of this call's own locals
        index = code.co_freevars.index(name)
        cells = []
        for f in self._functions_of(code):
            closure = f.__closure__ or ()
            if index < len(closure):
                try:
                    if closure[index].cell_contents is value:
                        cells.append(closure[index])
                except ValueError:
                    continue
        loc = self._loc(frame)
        if not cells:
            self.note(f"closure variable {name!r} of {code.co_name} at {loc}: its cell was not found; "
                      f"its value is used as read")
            return value
        for cell in cells:
            self._record(CellRead(cell), f"closure variable {name!r} of {code.co_name}", value, loc)
        self._keep_cells = getattr(self, "_keep_cells", []) + cells
        return value

    def _functions_of(self, code: types.CodeType) -> list[Any]:
        found = self._funcs.get(code)
        if found:
            return found
        cached = self._cell_cache.get(code)
        if cached is None:
            cached = self._cell_cache[code] = [r for r in gc.get_referrers(code)
                                                if isinstance(r, types.FunctionType) and r.__code__ is code]
        return cached

    def _attr(self, frame: types.FrameType, receiver: Any, name: str) -> Any:
        if receiver is _UNKNOWN or receiver is _NULL:
            return _UNKNOWN
        tensor_t, module_t = _tensor_types()[:2]
        if isinstance(receiver, tensor_t):
            return _UNKNOWN  # tensor metadata is guarded with the tensor
        loc = self._loc(frame)
        try:
            value = static_attr(receiver, name)
        except Opaque:
            if isinstance(receiver, (type, types.ModuleType)) or id(receiver) in self._outside:
                klass = receiver if isinstance(receiver, type) else type(receiver)
                prop = _class_lookup(klass, name)
                getter = getattr(prop, "fget", None)
                if isinstance(getter, types.FunctionType) and self._is_user_file(getter.__code__.co_filename):
                    self._add_func(getter)
                    return _UNKNOWN  # the getter's own reads are followed
                self.note(f"{type(receiver).__name__}.{name} at {loc}: read through a descriptor of "
                          f"library code; its result is not guarded")
            return _UNKNOWN
        if value is MISSING:
            return _UNKNOWN
        outside = id(receiver) in self._outside or isinstance(receiver, (type, types.ModuleType))
        if id(receiver) in self._guarded_modules and (
                name in receiver.__dict__ or isinstance(value, (tensor_t, module_t))):
            # instance state, parameters and children: the module guard sees a rebinding; the
            # content of a container or plain object held there is guarded here
            self._mark_outside(value)
            if name in receiver.__dict__ and not isinstance(value, (tensor_t, module_t)):
                # the module guard's fast path trusts Module.__setattr__/__delattr__; a change
                # made through ``m.__dict__`` bypasses them, so plain values are read again
                self._record(AttrRead(receiver, name), f"{_label(receiver)}.{name}", value, loc)
            self._content(value, f"{_label(receiver)}.{name}", loc)
            return value
        if outside or not isinstance(receiver, (tuple, *_CONST_TYPES, float)):
            self._record(AttrRead(receiver, name), f"{_label(receiver)}.{name}", value, loc)
            self._keep(receiver)
        if isinstance(receiver, dict | list | set) and name in _MUTATORS.get(type(receiver), ()) and outside:
            self._side_effect(f"{_label(receiver)}.{name}(...)", loc)
        return value

    def _content(self, value: Any, label: str, loc: SourceLoc) -> None:
        """A container or plain object held by a module: guard its content."""
        if isinstance(value, (dict, list, tuple, set)) or _is_plain_object(value):
            self._record(ContentRead(value), f"{label} (content)", value, loc)
            self._keep(value)

    def _item(self, frame: types.FrameType, container: Any, key: Any) -> Any:
        if container is _UNKNOWN or key is _UNKNOWN or not (
                id(container) in self._outside or isinstance(container, (dict, list))):
            return _UNKNOWN
        try:
            value = static_item(container, key)
        except Opaque:
            return _UNKNOWN
        if value is MISSING:
            return _UNKNOWN
        self._record(ItemRead(container, key), f"{_label(container)}[{key!r}]", value, self._loc(frame))
        self._keep(container)
        return value

    def _store(self, frame: types.FrameType, stack: list[Any], op: str, name: Any) -> None:
        loc = self._loc(frame)
        if op in ("STORE_ATTR", "DELETE_ATTR"):
            owner = stack[-1] if stack else _UNKNOWN
            if owner is _UNKNOWN or id(owner) not in self._outside:
                return
            what = f"{_label(owner)}.{name}"
            self._pending_store[id(frame)] = (what, lambda o=owner: static_attr(o, name), loc)
        else:
            if len(stack) < 2 or stack[-2] is _UNKNOWN or id(stack[-2]) not in self._outside:
                return
            owner, key = stack[-2], stack[-1]
            self._pending_store[id(frame)] = (f"{_label(owner)}[{key!r}]",
                                              lambda o=owner, k=key: static_item(o, k), loc)

    def _side_effect(self, what: str, loc: SourceLoc) -> None:
        if self._on_side_effect is not None:
            self._on_side_effect(what, loc)

    _kept: list[Any]

    def _keep(self, v: Any) -> None:
        try:
            self._kept.append(v)
        except AttributeError:
            self._kept = [v]

    # -- result ------------------------------------------------------------------------------
    def guard(self) -> ReadGuard:
        """The guard of everything read (signatures taken now, after the trace). A read from
        a container or object whose content another kept read already signs is left out."""
        checks, keep, truncated, large = sign_reads(self._reads, self.function_state)
        for kind in sorted(truncated):
            self.note(f"a {kind} read by the program is larger than {SIGNATURE_BUDGET} items or nested "
                      f"deeper: past that, identity and size are guarded, not content")
        for shape in large:
            self.note(f"a numpy array of shape {shape} read by the program is guarded by identity, "
                      f"shape and dtype, not by its values (more than {ARRAY_VALUE_BYTES} bytes)")
        keep += getattr(self, "_kept", []) + getattr(self, "_keep_cells", [])
        return ReadGuard(checks, keep, list(self.notes))


def _label(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    if isinstance(obj, type):
        return obj.__qualname__
    if isinstance(obj, dict):
        return "dict"
    if isinstance(obj, list):
        return "list"
    return f"<{type(obj).__name__}>"
