"""Value guards: the reads a trace made, checked again before its graph is reused.

Each read (:data:`Read`: a global, a closure cell, an attribute, an item, a container's
content, a function object's own state) is checked as ``signature(fetch()) == signature at
capture``; :func:`sign_reads` takes those signatures once the trace ends, and
:class:`ReadGuard` runs all the checks of one trace as one generated function.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dialects.tp import dtypes as dt
from .code_hiding import _stood_in, stood_for
from .static_lookup import _class_lookup, _unwrap, static_attr, static_item
from .value_signatures import (_CONST_TYPES, _IDENTITY_TYPES, MISSING, Ident, _const_like, _in_state,
                               _is_module_instance, _is_plain_object, _object_state, _Signer, _tensor_types,
                               signature)

__all__ = ["ReadGuard", "Read", "GlobalRead", "CellRead", "AttrRead", "ItemRead", "ContentRead", "FunctionRead",
           "function_like", "sign_reads"]


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


def sign_reads(reads: dict[tuple, tuple[str, Read, Any, Any]], on_function: Callable[[Any, str, Any], None]
               ) -> tuple[list[tuple[str, Read, tuple[Any, Any]]], list[Any], set[str], list[tuple[int, ...]]]:
    """The checks of a :class:`ReadGuard` for ``reads`` (key -> (description, read, value, where
    read)), their signatures taken now: also the objects the signatures hold by identity, the
    kinds of containers cut at the budget and the shapes of arrays too large to sign.
    ``on_function(fn, description, loc)`` is told of each function a signed value holds (it
    may add reads, which are signed in turn). A read from a container or object whose content
    another kept read already signs is left out."""
    signed = []
    truncated: set[str] = set()
    large: list[tuple[int, ...]] = []
    keep: list[Any] = []
    module_t = _tensor_types()[1]
    done = 0
    while done < len(reads):  # (functions found inside what is signed add reads)
        pending = list(reads.values())[done:]
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
                        on_function(x, f"{_show(x)} held by {description}", loc)
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
    return checks, keep, truncated, large


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
