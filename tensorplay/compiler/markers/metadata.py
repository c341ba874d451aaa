"""Markers that only record facts for later stages: export entry points, method overloads and
static tensor dimensions."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from ..._tensor import Tensor
from ._session import defined_at, describe

__all__ = ["export", "exported_methods", "overload_method", "overloads_of", "mark_static",
           "static_dims"]


# -- export ----------------------------------------------------------------------------------

def export(fn: Callable[..., Any] | None = None) -> Any:
    """Mark a module method as an entry point visible to graph capture.

    Used as ``@export`` or ``@export()`` on a method; returns it unchanged apart from the mark,
    which :func:`exported_methods` and the export pipeline read.
    """
    if fn is None:
        return export
    target = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
    if not callable(target):
        raise TypeError(f"export() expects a method, got {type(fn).__qualname__}")
    if getattr(target, "_tp_unused", False):
        raise TypeError(f"export(): {describe(target)} is marked with unused; a method cannot be "
                        f"both an export entry point and unused")
    target._tp_export = True
    return fn


def exported_methods(module_or_cls: Any) -> list[str]:
    """Names of the methods marked with :func:`export` on a module (or its class), base classes
    first, in definition order."""
    cls = module_or_cls if isinstance(module_or_cls, type) else type(module_or_cls)
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if getattr(target, "_tp_export", False) and name not in names:
                names.append(name)
    # a subclass overriding an exported method without the mark is no longer an entry point
    return [n for n in names if getattr(_lookup(cls, n), "_tp_export", False)]


def _lookup(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    return None


# -- overload_method -------------------------------------------------------------------------

_overloads: dict[tuple[str, str, str], list[Callable[..., Any]]] = {}


def overload_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a method declaration as an overload during inspection.

    Declarations are recorded per class and method name (:func:`overloads_of`) for export,
    which emits one entry point per overload; the implementation is the undecorated
    definition that follows them.
    """
    if not callable(fn) or not hasattr(fn, "__qualname__"):
        raise TypeError(f"overload_method() expects a function, got {type(fn).__qualname__}")
    owner, _, name = fn.__qualname__.rpartition(".")
    if not owner or owner.endswith("<locals>"):
        raise TypeError(f"overload_method(): {describe(fn)} ({defined_at(fn)}) is not defined in "
                        f"a class body; use typing.overload for functions")
    declarations = _overloads.setdefault((fn.__module__, owner, name), [])
    code = getattr(fn, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code is not None else None
    # re-running a class body (a reloaded module) replaces the declarations it made
    declarations[:] = [d for d in declarations if _where(d) != where or where is None]
    declarations.append(fn)
    fn._tp_overload = True
    return fn


def _where(fn: Any) -> tuple[str, int] | None:
    code = getattr(fn, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None


def overloads_of(cls: Any, name: str) -> list[Callable[..., Any]]:
    """The overload declarations of method ``name`` of ``cls`` (or of a module's class), in
    declaration order; the nearest class in the MRO that declares some wins."""
    cls = cls if isinstance(cls, type) else type(cls)
    for klass in cls.__mro__:
        found = _overloads.get((klass.__module__, klass.__qualname__, name))
        if found:
            return list(found)
    return []


# -- mark_static -----------------------------------------------------------------------------

def mark_static(tensor: Any, dim: int | None = None) -> Any:
    """Mark a tensor (or one dimension of it) as fixed for shape policies.

    A marked dimension is treated as a compile-time constant rather than a symbolic size.
    The marks are recorded on the tensor (``static_dims(t)``) and honoured by captures that
    make sizes symbolic; the tensor is returned.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"mark_static() expects a tensorplay Tensor, got {type(tensor).__qualname__}")
    ndim = tensor.ndim
    if dim is None:
        dims = frozenset(range(ndim))
    else:
        if isinstance(dim, bool):
            raise TypeError("mark_static(): dim must be an int or None, got a bool")
        try:
            index = operator.index(dim)
        except TypeError:
            raise TypeError(f"mark_static(): dim must be an int or None, got "
                            f"{type(dim).__qualname__}") from None
        if not -ndim <= index < ndim:
            raise IndexError(f"mark_static(): dim {dim} is out of range for a tensor with {ndim} "
                             f"dimension(s) (expected {-ndim} <= dim < {ndim})" if ndim else
                             f"mark_static(): dim {dim} given for a 0-d tensor, which has no "
                             f"dimensions; call mark_static(t) without dim")
        dims = frozenset({index % ndim})
    tensor._static_dims = (tensor._static_dims or frozenset()) | dims
    return tensor


def static_dims(tensor: Any) -> frozenset[int]:
    """The dimensions of ``tensor`` marked with :func:`mark_static` (empty if none)."""
    return getattr(tensor, "_static_dims", None) or frozenset()
