"""Signatures of Python values: what a value guard compares.

Constants compare by type and value (``2 != 2.0``, NaN equals NaN); containers (dict, list,
tuple, set) and plain objects (instances of Python classes, dataclasses, ``SimpleNamespace``)
by their content, read to a bounded depth; anything else (functions, classes, Python modules,
tensors, nn.Modules, and the types registered with
:func:`tensorplay._capture_hooks.guard_by_identity`: optimizers, schedules) by identity.
"""

from __future__ import annotations

import enum
import functools
import threading
import types
from typing import Any, NamedTuple

import numpy as np

from ... import _capture_hooks
from ...dialects.tp import dtypes as dt
from .code_hiding import StandIn

__all__ = ["MISSING", "Ident", "signature", "SIGNATURE_BUDGET", "ARRAY_VALUE_BYTES"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


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


#: Tensor, Module, then the types registered with ``_capture_hooks.guard_by_identity``
#: (optimizers and schedules: their state changes every step, and what a compiled step reads of
#: it is an input or guarded by the object itself); rebuilt when a type is registered
_STATEFUL: tuple[type, ...] = ()
_REGISTERED: tuple[type, ...] | None = None


def _tensor_types() -> tuple[type, ...]:
    global _STATEFUL, _REGISTERED
    registered = _capture_hooks.identity_guarded_types
    if registered is not _REGISTERED:
        from ..._tensor import Tensor
        from ...nn.modules.module import Module

        _STATEFUL = (Tensor, Module, *registered)
        _REGISTERED = registered
    return _STATEFUL


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


def _const_like(v: Any) -> bool:
    return type(v) in (float, *_CONST_TYPES) or isinstance(v, (np.generic, dt.DType, np.dtype, enum.Enum))


def _is_module_instance(v: Any) -> bool:
    return isinstance(v, _tensor_types()[1])
