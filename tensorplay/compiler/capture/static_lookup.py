"""What an attribute or item read gives, found without running code of another library.

The read tracer follows ``obj.name`` and ``container[key]`` statically: the instance dict, the


class attributes along the MRO, Module parameters/buffers/submodules, the builtin containers.
Where a getter or ``__getitem__`` of other code would decide, :class:`Opaque` says so.
"""

from __future__ import annotations

import types
from typing import Any

from .value_signatures import MISSING, _tensor_types

__all__ = ["Opaque", "static_attr", "static_item"]


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
