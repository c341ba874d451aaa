"""What a trace read from Python state, and the guards that keep it true.

A graph bakes in every Python value the traced code used: a float from a config object, a
list's length, which helper a global names. :class:`ReadRecorder` watches the user's frames
while a trace runs (``sys.settrace`` with opcode events; frames of tensorplay, the standard
library and installed packages are not followed) and records each *read from state that
outlives the call*:

* ``LOAD_GLOBAL`` (a module global, or a builtin the globals do not shadow),
* ``LOAD_DEREF`` of a free variable (the closure cell of the function that runs),
* ``LOAD_ATTR`` / ``LOAD_METHOD`` and ``BINARY_SUBSCR`` whose receiver the recorder can
  follow: it mirrors the top of the value stack for runs of loads (``self.cfg.z``,
  ``CFG["k"]``, ``self.layers[-1]``), resolving attributes statically (instance dict,
  class attributes along the MRO, Module parameters/buffers/submodules) without running
  getters,
* what a call reads from a function object itself (:class:`FunctionRead`): the code and
  defaults of the compiled function, of each function of the user's code that a read above
  finds (or that a value read holds), of a function passed as an argument, and the func,
  args and keywords of a ``functools.partial``; and, for a method that library code calls on
  an object (a module's ``forward``), which function the object's class gives for its name.

Each read becomes a guard ``signature(fetch()) == signature at capture``: constants compare
by type and value (``2 != 2.0``, NaN equals NaN), containers (dict, list, tuple, set) and
plain objects (instances of Python classes, dataclasses, ``SimpleNamespace``) by their content,
read to a bounded depth, so reads that builtins make (``sum(weights)``, ``len(opts)``,
``opts.get``) are covered too; anything else (functions, classes, Python modules, tensors,
nn.Modules) by identity. Stores into state that outlives the call (``state.n += 1``,
``CACHE[k] = v``, ``history.append(v)``, ``global X``) are side effects the compiled graph
cannot replay: the recorder reports them so that the capture breaks there (or fails under
``fullgraph``) and the function runs its Python on every call.

What cannot be guarded is said, never baked in silently: reads through a property or
descriptor of library code, receivers the recorder cannot follow on a class or Python
module, content past the depth bound (identity and size are still guarded), and large
numpy arrays (identity, shape and dtype guarded, not values). Each is logged on the
``guards`` channel and listed by ``explain()``.
"""

from __future__ import annotations

import dataclasses
import dis
import enum
import functools
import gc
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...dialects.tp import dtypes as dt
from ...dialects.tp.graph import SourceLoc

__all__ = ["ReadRecorder", "ReadGuard", "signature", "static_attr", "MISSING", "StandIn", "stood_for",
           "hide_code", "unhide_code", "is_hidden_code", "code_of"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


# -- what markers put in the user's way while a capture runs ----------------------------------

#: id(original) -> original, for every object a :class:`StandIn` was made for
_stood_in: dict[int, Any] = {}


class StandIn:
    """Base of objects that stand in for another one while a capture runs (a marker patches a
    module attribute with one, see tensorplay.compiler.markers._redirect). A read that finds
    a stand-in is recorded and guarded as a read of the object it stands for, so a guard
    taken during the capture still holds once the attribute is restored."""

    __slots__ = ("stands_for", "__weakref__")

    def __init__(self, stands_for: Any):
        self.stands_for = stands_for
        _stood_in[id(stands_for)] = stands_for


def stood_for(v: Any) -> Any:
    """The object a stand-in stands for; anything else unchanged."""
    return v.stands_for if isinstance(v, StandIn) else v


#: id(code) -> code of frames that are not the user's although their file is: the
#: trampolines markers put into marked functions (they keep the function's file and line so
#: that inspect and tracebacks still find its source)
_hidden_codes: dict[int, tuple[types.CodeType, types.CodeType]] = {}


def hide_code(code: types.CodeType, original: types.CodeType) -> None:
    """Frames of ``code`` (a trampoline standing for ``original``, the function's own code) are
    neither followed by the recorder nor reported as the user's position (``user_loc``)."""
    _hidden_codes[id(code)] = (code, original)


def unhide_code(code: types.CodeType) -> None:
    hit = _hidden_codes.get(id(code))
    if hit is not None and hit[0] is code:
        del _hidden_codes[id(code)]


def is_hidden_code(code: types.CodeType) -> bool:
    if not _hidden_codes:
        return False
    hit = _hidden_codes.get(id(code))
    return hit is not None and hit[0] is code


def code_of(func: types.FunctionType) -> types.CodeType:
    """The code a function runs: for a marked function, its own code behind the trampoline
    (the names and free variables it reads are there)."""
    code = func.__code__
    hit = _hidden_codes.get(id(code)) if _hidden_codes else None
    return hit[1] if hit is not None and hit[0] is code else code


class Ident(NamedTuple):
    """The part of a signature that stands for an object compared by identity."""

    id: int


_new = tuple.__new__  # an Ident without the Python-level __new__ (signatures are taken per check)

#: containers and plain objects are read this many nodes deep for their signature
SIGNATURE_BUDGET = 2000
#: numpy arrays up to this many bytes are guarded by value
ARRAY_VALUE_BYTES = 1 << 16

_CONST_TYPES = (bool, int, str, bytes, type(None), complex, type(Ellipsis), range)
# (a function's or partial's own state, its code, defaults and arguments, is guarded apart:
# see FunctionRead)
_IDENTITY_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type,
                   types.CodeType, staticmethod, classmethod, property, threading.Thread, functools.partial)
_MUTATORS = {
    list: {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
           "__delitem__", "__iadd__", "__imul__"},
    dict: {"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__", "__ior__"},
    set: {"add", "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
          "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"},
}


_STATEFUL: tuple[type, ...] = ()


def _tensor_types() -> tuple[type, ...]:
    global _STATEFUL
    if not _STATEFUL:
        _STATEFUL = _stateful_types()
    return _STATEFUL


def _stateful_types() -> tuple[type, ...]:
    from ..._tensor import Tensor
    from ...nn.modules.module import Module
    from ...optim.lr_scheduler import LRScheduler
    from ...optim.optimizer import Optimizer

    # (optimizers and schedules by identity too: their state changes every step, and what a
    # compiled step reads of it is an input or guarded by the optimizer itself)
    return Tensor, Module, Optimizer, LRScheduler


class _Signer:
    """Builds hashable signatures; remembers objects whose identity a signature holds (so
    their ids stay unique while the guard lives) and whether the budget ran out."""

    def __init__(self, budget: int = SIGNATURE_BUDGET):
        self.budget = budget
        self.keep: list[Any] = []
        self.truncated: list[str] = []
        self.visited: set[int] = set()
        self.large_arrays: list[tuple[int, ...]] = []

    def ident(self, v: Any) -> Ident:
        self.keep.append(v)
        return _new(Ident, (id(v),))

    def sign(self, v: Any, depth: int = 0) -> Any:
        if isinstance(v, StandIn):
            v = v.stands_for
        t = type(v)
        if t is float:
            return ("f", v.hex())
        if t in _CONST_TYPES:
            return (t, v)
        if t is slice:
            return (t, self.sign(v.start), self.sign(v.stop), self.sign(v.step))
        if isinstance(v, np.generic):
            return ("np", v.dtype.str, v.tobytes())
        if isinstance(v, (dt.DType, np.dtype, enum.Enum)):
            return (t, v)
        if isinstance(v, _IDENTITY_TYPES):
            return self.ident(v)
        if isinstance(v, _tensor_types()):
            return self.ident(v)
        if isinstance(v, np.ndarray):
            if v.nbytes <= ARRAY_VALUE_BYTES:
                return ("nd", v.shape, v.dtype.str, v.tobytes())
            self.large_arrays.append(v.shape)
            return ("nd-id", self.ident(v), v.shape, v.dtype.str)
        if isinstance(v, (tuple, list, dict, set, frozenset)) or _is_plain_object(v):
            self.budget -= 1
            if self.budget < 0 or depth > 32:
                self.truncated.append(type(v).__name__)
                return ("trunc", self.ident(v), _size(v))
            self.visited.add(id(v))
            if isinstance(v, (tuple, list)):
                return (self.ident(t), tuple(self.sign(x, depth + 1) for x in v))
            if isinstance(v, dict):
                return (self.ident(t), tuple((self.sign(k, depth + 1), self.sign(x, depth + 1))
                                             for k, x in v.items()))
            if isinstance(v, (set, frozenset)):
                items = [self.sign(x, depth + 1) for x in v]
                try:
                    return (self.ident(t), frozenset(items))
                except TypeError:
                    return (self.ident(t), tuple(sorted(map(repr, items))))
            state = _object_state(v)
            return (self.ident(t), tuple((k, self.sign(x, depth + 1)) for k, x in state))
        return self.ident(v)


def _size(v: Any) -> int:
    try:
        return len(v)
    except TypeError:
        return len(getattr(v, "__dict__", ()))


def _is_plain_object(v: Any) -> bool:
    """An instance of a Python class whose state is its ``__dict__`` (or slots): config
    objects, dataclasses, SimpleNamespace; not modules, tensors, functions or classes."""
    t = type(v)
    if t.__module__ == "builtins" and t is not types.SimpleNamespace:
        return False
    tensor_t, module_t = _tensor_types()[:2]
    if isinstance(v, (tensor_t, module_t, type, types.ModuleType)) or callable(getattr(t, "__get__", None)):
        return False
    return hasattr(v, "__dict__") or bool(getattr(t, "__slots__", ()))


def _in_state(v: Any, name: str) -> bool:
    """Whether ``v.name`` is part of what a signature of ``v`` holds (its own attributes, not
    those of its class): a read of it is covered by a guard on ``v``'s content."""
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict) and name in d:
        return True
    return any(name in k.__dict__.get("__slots__", ()) for k in type(v).__mro__
               if isinstance(k.__dict__.get("__slots__", ()), (tuple, list)))


def _object_state(v: Any) -> list[tuple[str, Any]]:
    items = list(getattr(v, "__dict__", {}).items())
    for klass in type(v).__mro__:
        for slot in klass.__dict__.get("__slots__", ()) if isinstance(klass.__dict__.get("__slots__", ()),
                                                                      (tuple, list)) else ():
            if slot not in ("__dict__", "__weakref__"):
                items.append((slot, getattr(v, slot, MISSING)))
    return items


def signature(v: Any) -> Any:
    """The signature a guard compares (see the module docstring)."""
    return _Signer().sign(v)


# -- static attribute lookup ------------------------------------------------------------------

class Opaque(Exception):
    """Reading this attribute would run code the recorder does not follow."""


def _class_lookup(klass: type, name: str) -> Any:
    for k in klass.__mro__:
        d = k.__dict__
        if name in d:
            return d[name]
    return MISSING


def static_attr(obj: Any, name: str) -> Any:
    """What ``obj.name`` reads, found without running getters: the instance dict, then the
    class (functions stay functions: their identity is what matters), then Module
    parameters/buffers/submodules. :class:`Opaque` where Python code of another library
    would decide; MISSING where nothing is found."""
    if isinstance(obj, types.ModuleType):
        return obj.__dict__.get(name, MISSING)
    if isinstance(obj, type):
        found = _class_lookup(obj, name)
        if found is MISSING:
            meta = _class_lookup(type(obj), name)
            if meta is not MISSING:
                return getattr(obj, name)  # type's own descriptors (__name__, __mro__): C, no side effects
        if isinstance(found, (staticmethod, classmethod)):
            return found.__func__
        return found
    klass = type(obj)
    cls_attr = _class_lookup(klass, name)
    if cls_attr is not MISSING and hasattr(type(cls_attr), "__set__"):
        if isinstance(cls_attr, property):
            raise Opaque(name)  # its getter runs as a frame of its own (followed if it is the user's)
        if type(cls_attr).__module__ == "builtins":  # slots, getset descriptors: C, no side effects
            return getattr(obj, name)
        raise Opaque(name)
    d = getattr(obj, "__dict__", None)
    if d is not None and name in d:
        return d[name]
    if cls_attr is not MISSING:
        if isinstance(cls_attr, (staticmethod, classmethod)):
            return cls_attr.__func__
        return cls_attr
    module_t = _tensor_types()[1]
    if isinstance(obj, module_t):
        for store in ("_parameters", "_buffers", "_modules"):
            items = obj.__dict__.get(store)
            if items is not None and name in items:
                return items[name]
        return MISSING
    if _class_lookup(klass, "__getattr__") is not MISSING:
        raise Opaque(name)
    return MISSING


def _unwrap(found: Any) -> Any:
    """A class attribute as :func:`static_attr` gives it for an instance."""
    return found.__func__ if isinstance(found, (staticmethod, classmethod)) else found


def static_item(container: Any, key: Any) -> Any:
    """``container[key]`` for the builtin containers (no ``__missing__``/``__getitem__`` of
    user code runs); Opaque for anything else."""
    if isinstance(container, dict) and type(container).__getitem__ is dict.__getitem__:
        return dict.get(container, key, MISSING)
    if isinstance(container, (list, tuple)) and isinstance(key, (int, slice)) and not isinstance(key, bool):
        try:
            return container[key]
        except IndexError:
            return MISSING
    raise Opaque(repr(key))


# -- guards -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class GlobalRead:
    """``name`` in a module's globals; ``builtins`` is where a global that is not there is
    found (None when the global was found)."""

    globals: dict
    name: str
    builtins: dict | None = None

    def key(self) -> tuple:
        return (GlobalRead, id(self.globals), self.name)

    def fetch(self) -> Any:
        if self.builtins is None:
            return self.globals.get(self.name, MISSING)
        return self.globals.get(self.name, self.builtins.get(self.name, MISSING))

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        ns[f"g{i}"], ns[f"n{i}"] = self.globals, self.name
        if self.builtins is None:
            return f"g{i}.get(n{i}, M)"
        ns[f"b{i}"] = self.builtins
        return f"g{i}.get(n{i}, b{i}.get(n{i}, M))"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class CellRead:
    """A closure cell's content."""

    cell: types.CellType

    def key(self) -> tuple:
        return (CellRead, id(self.cell))

    def fetch(self) -> Any:
        return self.cell.cell_contents

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        ns[f"c{i}"] = self.cell
        return f"c{i}.cell_contents"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class AttrRead:
    """``owner.name``, found as :func:`static_attr` finds it."""

    owner: Any
    name: str

    def key(self) -> tuple:
        return (AttrRead, id(self.owner), self.name)

    def fetch(self) -> Any:
        return static_attr(self.owner, self.name)

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        r, name = self.owner, self.name
        ns[f"r{i}"], ns[f"n{i}"] = r, name
        if isinstance(r, types.ModuleType) or (
                _is_module_instance(r) and _class_lookup(type(r), name) is MISSING and name in r.__dict__):
            ns[f"d{i}"] = r.__dict__
            return f"d{i}.get(n{i}, M)"
        if isinstance(r, type) or (_is_module_instance(r) and name not in r.__dict__):
            # an attribute of a class (a module's forward: the module guard keeps the module's
            # type and instance dict): the classes of the MRO up to the one defining it say
            # what the read gives
            mro = r.__mro__ if isinstance(r, type) else type(r).__mro__
            k = next((k for k, c in enumerate(mro) if name in c.__dict__), None)
            if k is not None and not hasattr(type(mro[k].__dict__[name]), "__set__"):
                for j, c in enumerate(mro[:k + 1]):
                    ns[f"m{i}_{j}"] = c.__dict__
                shadow = " or ".join(f"n{i} in m{i}_{j}" for j in range(k))
                found = f"m{i}_{k}.get(n{i}, M)"
                value = f"(M if {shadow} else {found})" if shadow else found
                return f"_unwrap({value})"
        return f"static_attr(r{i}, n{i})"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class ItemRead:
    """``owner[key]`` of a builtin container, as :func:`static_item` reads it."""

    owner: Any
    item: Any

    def key(self) -> tuple:
        return (ItemRead, id(self.owner), repr(self.item))

    def fetch(self) -> Any:
        return static_item(self.owner, self.item)

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        ns[f"r{i}"], ns[f"k{i}"] = self.owner, self.item
        if type(self.owner) is dict:
            return f"r{i}.get(k{i}, M)"
        return f"static_item(r{i}, k{i})"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class ContentRead:
    """The content of a container or plain object that a module holds (the object itself is
    the module guard's)."""

    value: Any

    def key(self) -> tuple:
        return (ContentRead, id(self.value))

    def fetch(self) -> Any:
        return self.value

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        ns[f"v{i}"] = self.value
        return f"v{i}"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class FunctionRead:
    """What a call reads from a function object besides its globals and closure cells: its
    ``__code__``, ``__defaults__`` and ``__kwdefaults__``; of a ``functools.partial``, its
    ``func``, ``args`` and ``keywords``. The object itself is guarded by the read that found
    it (a bound method's ``__self__`` and ``__func__`` cannot change: its function is read too)."""

    fn: Any

    def key(self) -> tuple:
        return (FunctionRead, id(self.fn))

    def fetch(self) -> Any:
        return self.fn

    def expr(self, i: int, ns: dict[str, Any]) -> str:
        ns[f"f{i}"] = self.fn
        return f"f{i}"


def function_like(v: Any) -> bool:
    """Whether ``v`` has state a :class:`FunctionRead` guards."""
    return isinstance(v, (types.FunctionType, functools.partial))


def _function_state(fn: Any) -> tuple:
    """The state a FunctionRead compares, as it is now."""
    if isinstance(fn, functools.partial):
        return (fn.func, fn.args, fn.keywords)
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__)


def _frozen(v: Any) -> bool:
    """Whether a tuple's signature cannot change while it is the same object: it holds only
    constants, and objects compared by identity (a function's own state has its own check)."""
    if type(v) is not tuple:
        return False
    for x in v:
        if type(x) is tuple:
            if not _frozen(x):
                return False
        elif not (_const_like(x) or isinstance(x, _IDENTITY_TYPES) or isinstance(x, _tensor_types())):
            return False
    return True


def _function_cond(i: int, fn: Any, ns: dict[str, Any]) -> str:
    """The check of a :class:`FunctionRead`: identity where an attribute holds an immutable
    value (code, func, a tuple of constants), the signature where it holds mutable content
    (a keywords dict, a list among the defaults)."""
    ns[f"f{i}"] = fn
    first, args, keywords = _function_state(fn)
    names = ("func", "args", "keywords") if isinstance(fn, functools.partial) else \
        ("__code__", "__defaults__", "__kwdefaults__")
    ns[f"c{i}"] = first
    parts = [f"f{i}.{names[0]} is c{i}"]
    for j, (name, value) in enumerate(((names[1], args), (names[2], keywords))):
        if value is None:
            parts.append(f"f{i}.{name} is None")
            continue
        signer = _Signer()  # (keeps what the signature holds by identity alive with the check)
        ns[f"d{i}_{j}"], ns[f"s{i}_{j}"], ns[f"k{i}_{j}"] = value, signer.sign(value), signer.keep
        if _frozen(value):  # (an equal tuple put in its place passes by its signature)
            parts.append(f"((x{i} := f{i}.{name}) is d{i}_{j} or sign(x{i}) == s{i}_{j})")
        elif _flat(value):  # keyword defaults of constants: C-level dict equality, value types, zeros
            ns[f"e{i}_{j}"], ns[f"t{i}_{j}"] = dict(value), tuple(map(type, value.values()))
            cond = (f"(type(x{i} := f{i}.{name}) is dict and x{i} == e{i}_{j} and "
                    f"tuple(map(type, x{i}.values())) == t{i}_{j}")
            for z, key in enumerate(_signed_zeros(value)):
                ns[f"z{i}_{j}_{z}"], ns[f"h{i}_{j}_{z}"] = key, value[key].hex()
                cond += f" and x{i}[z{i}_{j}_{z}].hex() == h{i}_{j}_{z}"
            parts.append(cond + ")")
        else:
            parts.append(f"sign(f{i}.{name}) == s{i}_{j}")
    return " and ".join(parts)


#: what a value guard reads: :meth:`fetch` gives its value now, :meth:`expr` the same read as
#: Python over names it binds in a namespace, :meth:`key` tells reads of one place apart
Read = GlobalRead | CellRead | AttrRead | ItemRead | ContentRead | FunctionRead


def _flat(v: Any) -> bool:
    """A dict or plain object (no slots) whose keys are strings and whose values are flat
    constants that ``==`` compares exactly (no float zero or NaN, no containers)."""
    if type(v) is dict:
        state = v
    elif _is_plain_object(v) and not getattr(type(v), "__slots__", ()) and type(v).__eq__ is object.__eq__ \
            or dataclasses.is_dataclass(v) and not isinstance(v, type) and not getattr(type(v), "__slots__", ()):
        state = getattr(v, "__dict__", None)
        if state is None:
            return False
    else:
        return False
    for k, x in state.items():
        t = type(x)
        if type(k) is not str or t not in (bool, int, str, bytes, type(None), float):
            return False
        if t is float and x != x:
            return False
    return True


def _signed_zeros(state: dict) -> list[str]:
    """Keys whose value is a float zero: ``0.0 == -0.0``, so these compare by bits too."""
    return [k for k, x in state.items() if type(x) is float and x == 0.0]


def _is_module_instance(v: Any) -> bool:
    return isinstance(v, _tensor_types()[1])


def _const_key(v: Any) -> Any:
    return v.hex() if type(v) is float else (type(v), v)


class ReadGuard:
    """The reads of one trace: ``guard()`` is True while every read would give the value
    (or content) it gave at capture. The checks run as one generated function: identity
    for objects, type-and-value for constants, the signature for containers and plain
    objects."""

    def __init__(self, checks: list[tuple[str, Read, tuple[Any, Any]]], keep: list[Any], notes: list[str]):
        self.checks = checks
        self.keep = keep
        self.notes = notes
        self.failed: str | None = None
        self._check = self._compile()

    def _compile(self) -> Callable[[], int]:
        ns: dict[str, Any] = {"M": MISSING, "static_attr": static_attr, "static_item": static_item, "_unwrap": _unwrap,
                              "ck": _const_key, "sign": signature, "sf": stood_for}
        body = []
        for i, (_, read, (now, expected)) in enumerate(self.checks):
            fetch = read.expr(i, ns)
            if type(read) is FunctionRead:
                cond = _function_cond(i, now, ns)
            elif type(now) is float or (type(now) in _CONST_TYPES and type(now) is not range) or isinstance(
                    now, (dt.DType, np.dtype, enum.Enum)):
                ns[f"e{i}"] = _const_key(now)
                cond = f"ck({fetch}) == e{i}"
            elif type(expected) is Ident:
                ns[f"e{i}"] = now
                # (a module attribute a marker patches while capturing reads as its original)
                cond = f"sf({fetch}) is e{i}" if id(now) in _stood_in else f"({fetch}) is e{i}"
            elif _flat(now):
                # all values flat constants: C-level dict equality plus the value types says the
                # same as the signature (zeros and NaN, whose == is not exact, are not flat)
                state = now if type(now) is dict else now.__dict__
                ns[f"e{i}"], ns[f"s{i}"], ns[f"t{i}"] = expected, dict(state), tuple(map(type, state.values()))
                ns[f"T{i}"] = type(now)
                get_state = "" if type(now) is dict else ".__dict__"
                cond = (f"(type(x{i} := {fetch}) is T{i} and x{i}{get_state} == s{i} and "
                        f"tuple(map(type, x{i}{get_state}.values())) == t{i}")
                for j, k in enumerate(_signed_zeros(state)):
                    ns[f"z{i}_{j}"], ns[f"h{i}_{j}"] = k, state[k].hex()
                    cond += f" and x{i}{get_state}[z{i}_{j}].hex() == h{i}_{j}"
                cond += ")"
            else:
                ns[f"e{i}"] = expected
                cond = f"sign({fetch}) == e{i}"
            body.append(f"        i = {i}\n        if not ({cond}): return i")
        src = ("def check():\n    i = -1\n    try:\n" + ("\n".join(body) or "        pass")
               + "\n    except Exception:\n        return i if i >= 0 else 0\n    return -1\n")
        exec(compile(src, "<tensorplay value guards>", "exec"), ns)  # noqa: S102 - built from our own parts
        return ns["check"]

    def __call__(self) -> bool:
        failed = self._check()
        if failed < 0:
            return True
        self.failed = self.checks[failed][0]
        return False

    def descriptions(self) -> list[str]:
        return [d for d, _, _ in self.checks]

    def __len__(self) -> int:
        return len(self.checks)


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


def _const_like(v: Any) -> bool:
    return type(v) in (float, *_CONST_TYPES) or isinstance(v, (np.generic, dt.DType, np.dtype, enum.Enum))


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
        signed = []
        truncated: set[str] = set()
        large: list[tuple[int, ...]] = []
        keep: list[Any] = []
        module_t = _tensor_types()[1]
        done = 0
        while done < len(self._reads):  # (functions found inside what is signed add reads)
            pending = list(self._reads.values())[done:]
            done += len(pending)
            for description, read, value, loc in pending:
                if isinstance(read, ContentRead) and isinstance(value, module_t):
                    continue
                try:
                    now = stood_for(read.fetch())
                except Exception:  # noqa: BLE001
                    now = MISSING
                signer = _Signer()
                expected = signer.sign(now)
                truncated.update(signer.truncated)
                large += signer.large_arrays
                keep += signer.keep
                if type(read) is not FunctionRead:
                    for x in signer.keep:
                        if x is not now and (function_like(x) or isinstance(x, types.MethodType)):
                            self.function_state(x, f"{_show(x)} held by {description}", loc)
                holder = id(read.owner) if isinstance(read, ItemRead) or (
                    isinstance(read, AttrRead) and _in_state(read.owner, read.name)) else None
                signer.visited.discard(holder)
                text = description if type(read) is FunctionRead else f"{description} == {_show(now)}"
                signed.append((holder, signer.visited, text + (f" (read at {loc})" if loc else ""), read,
                               (now, expected)))
        covered_anywhere = set().union(*(v for _, v, _, _, _ in signed)) if signed else set()
        covered_by_roots: set[int] = set()
        for holder, visited, *_ in signed:
            if holder is None or holder not in covered_anywhere:
                covered_by_roots |= visited
        checks = [(d, f, e) for holder, _, d, f, e in signed if holder is None or holder not in covered_by_roots]
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


def _show(v: Any, depth: int = 0) -> str:
    """A short text for a guarded value, built without calling ``repr`` on anything but
    constants (a tensor being captured must not be asked for its values)."""
    text = _show_inner(v, depth)
    return text if len(text) <= 80 else text[:77] + "..."


def _show_inner(v: Any, depth: int) -> str:
    if _const_like(v):
        return repr(v)
    if isinstance(v, (types.FunctionType, type)):
        return f"<{v.__qualname__}>"
    if isinstance(v, types.ModuleType):
        return f"<module {v.__name__}>"
    if v is MISSING:
        return "<missing>"
    if depth > 2:
        return "..."
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_show_inner(x, depth + 1) for x in list(v)[:8]) + (", ..." if len(v) > 8 else "")
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, dict):
        items = list(v.items())
        inner = ", ".join(f"{_show_inner(k, depth + 1)}: {_show_inner(x, depth + 1)}" for k, x in items[:8])
        return "{" + inner + (", ..." if len(items) > 8 else "") + "}"
    if _is_plain_object(v):
        fields = _object_state(v)
        inner = ", ".join(f"{k}={_show_inner(x, depth + 1)}" for k, x in fields[:8])
        return f"{type(v).__name__}({inner}{', ...' if len(fields) > 8 else ''})"
    return f"<{type(v).__name__}>"
