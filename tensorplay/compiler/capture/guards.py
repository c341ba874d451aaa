"""Guards: what a call must share with the capture for its compiled graph to be reused.

The fast part is a hashable *key* of the call: the argument structure, per tensor its
type, shape, dtype and requires_grad, per Python value its type and value, per other
object its identity, the aliasing between tensor arguments, and the global modes (grad
mode, inference mode, default dtype). The rest are checks evaluated per entry: module
state (identity, type, training flag, hooks, plain attributes, parameter and buffer
identity and metadata), tensors read from closures and globals, and value guards added
by markers.
"""

from __future__ import annotations

import enum
from itertools import chain
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._grad_mode import is_grad_enabled, is_inference_mode_enabled
from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from . import pytree

__all__ = ["call_key", "describe_change", "module_fingerprint", "module_guard", "free_objects",
           "global_state", "is_module", "tensor_meta_guard", "ModuleGuard"]

_VALUE_TYPES = (bool, int, str, bytes, type(None), complex, range, slice, type(Ellipsis))


def is_module(x: Any) -> bool:
    from ...nn.modules.module import Module

    return isinstance(x, Module)


def global_state() -> tuple:
    return (is_grad_enabled(), is_inference_mode_enabled(), dt.get_default_dtype())


def _leaf_key(leaf: Any) -> tuple:
    t = type(leaf)
    if isinstance(leaf, Tensor):
        data = leaf._data
        if data is None:
            return ("tensor", t, leaf._type.shape, leaf._type.dtype.np_dtype, leaf.requires_grad,
                    leaf._static_dims)
        return ("tensor", t, data.shape, data.dtype, leaf.requires_grad, leaf._static_dims)
    if t is float:
        return ("float", leaf.hex())
    if t is slice:  # unhashable before Python 3.12
        return ("value", t, (_leaf_key(leaf.start), _leaf_key(leaf.stop), _leaf_key(leaf.step)))
    if t in _VALUE_TYPES:
        return ("value", t, leaf)
    if isinstance(leaf, (dt.DType, enum.Enum, np.dtype)):
        return ("value", t, leaf)
    if isinstance(leaf, (np.integer, np.floating, np.bool_)):
        return ("value", t, leaf.item())
    if isinstance(leaf, frozenset):
        try:
            return ("value", t, leaf)
        except TypeError:
            pass
    from ..._device import device

    if isinstance(leaf, device):
        return ("value", t, str(leaf))
    return ("object", t, id(leaf))


def call_key(treedef: pytree.TreeDef, leaves: Sequence[Any]) -> tuple:
    """The hashable part of the guards of a call with these flattened arguments."""
    keys = tuple(_leaf_key(x) for x in leaves)
    alias: tuple = ()
    first: dict[int, int] = {}
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            j = first.setdefault(id(x), i)
            if j != i:
                alias += ((i, j),)
    return (treedef, keys, alias, global_state())


def describe_change(old: tuple, old_paths: Sequence[str], new: tuple, new_paths: Sequence[str]) -> str:
    """What differs between two call keys (with their leaf paths), in the user's words."""
    o_tree, o_keys, o_alias, o_state = old
    n_tree, n_keys, n_alias, n_state = new
    before = dict(zip(old_paths, o_keys))
    changes = []
    for path, b in zip(new_paths, n_keys):
        a = before.pop(path, None)
        if a is None:
            changes.append(f"{path}: now passed ({_show_leaf(b)})")
        elif a == b:
            continue
        elif a[0] == "tensor" and b[0] == "tensor":
            for label, i in (("shape", 2), ("dtype", 3), ("requires_grad", 4), ("static dims", 5)):
                if a[i] != b[i]:
                    changes.append(f"{path}: {label} {_show(a[i])} -> {_show(b[i])}")
            if a[1] is not b[1]:
                changes.append(f"{path}: type {a[1].__name__} -> {b[1].__name__}")
        elif a[0] == "object" and b[0] == "object" and a[1] is b[1]:
            changes.append(f"{path}: a different {a[1].__name__} object")
        else:
            changes.append(f"{path}: {_show_leaf(a)} -> {_show_leaf(b)}")
    changes += [f"{path}: no longer passed" for path in before]
    if not changes and o_tree != n_tree:
        changes.append("the structure of the arguments changed")
    if o_alias != n_alias:
        changes.append("tensor arguments alias each other differently")
    for label, a, b in zip(("grad mode", "inference mode", "default dtype"), o_state, n_state):
        if a != b:
            changes.append(f"{label} {_show(a)} -> {_show(b)}")
    return "; ".join(changes) or "guards changed"


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(str(d) for d in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, np.dtype):
        return str(dt.from_numpy_dtype(v).name)
    if isinstance(v, dt.DType):
        return v.name
    return repr(v)


def _show_leaf(k: tuple) -> str:
    if k[0] == "float":
        return repr(float.fromhex(k[1]))
    if k[0] == "value":
        return repr(k[2])
    if k[0] == "tensor":
        return f"tensor{_show(k[2])}"
    return f"{k[1].__name__} object"


# -- modules -----------------------------------------------------------------------------------

def _walk(root: Any) -> list[Any]:
    out, stack, seen = [], [root], set()
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append(m)
        stack.extend(c for c in m.__dict__["_modules"].values() if c is not None)
    return out


def _module_state(modules: list[Any]) -> tuple:
    # Identity of every attribute value, key, parameter, buffer, child and hook: plain
    # values (numbers, strings, tuples) are immutable, so a changed attribute is a new
    # object, and the mutable containers are compared by their contents.
    parts: list[Any] = []
    for m in modules:
        d = m.__dict__
        p, b, c = d["_parameters"], d["_buffers"], d["_modules"]
        parts += (d, d.values(), p, p.values(), b, b.values(), c, c.values(),
                  d.get("_forward_pre_hooks", ()), d.get("_forward_hooks", ()))
    return tuple(map(id, chain.from_iterable(parts)))


def module_fingerprint(root: Any) -> tuple:
    """Identity, type, mode, hooks, attributes and parameter/buffer identity and metadata of
    ``root`` and every submodule (parameter values are not part of it)."""
    modules = _walk(root)
    tensors = [t for m in modules for t in (*m._parameters.values(), *m._buffers.values()) if t is not None]
    return (tuple(map(id, modules)), _module_state(modules),
            tuple((t._tensor_type().shape, t._tensor_type().dtype) for t in tensors))


class ModuleGuard:
    """The state of a module tree a captured graph relies on. Checked in full only when
    some module changed since the last check (``Module`` keeps a global state version)."""

    def __init__(self, module: Any, label: str):
        self.module = module
        self.description = (f"{label} ({type(module).__name__}): submodules, training mode, hooks, "
                            f"attributes, parameter and buffer identity, shapes and dtypes unchanged")
        self.refresh()

    def refresh(self) -> None:
        """Take the current state as the expected one (after the capture ran forward)."""
        from ...nn.modules import module as module_mod

        self._version_source = module_mod
        self.modules = _walk(self.module)
        self.state = _module_state(self.modules)
        self.tensors = [(t, t._tensor_type().shape, t._tensor_type().dtype.np_dtype) for m in self.modules
                        for t in (*m._parameters.values(), *m._buffers.values()) if t is not None]
        self.version = module_mod.state_version

    def __call__(self) -> bool:
        version = self._version_source.state_version
        if version == self.version:
            return True
        # the walk is implied: a changed child shows in its parent's ``_modules``
        if _module_state(self.modules) != self.state:
            return False
        for t, shape, dtype in self.tensors:
            d = t._data
            if d is None or d.shape != shape or d.dtype != dtype:
                return False
        self.version = version
        return True


def module_guard(module: Any, label: str) -> tuple[str, ModuleGuard]:
    guard = ModuleGuard(module, label)
    return (guard.description, guard)


def tensor_meta_guard(tensor: Any, label: str) -> tuple[str, Callable[[], bool]]:
    data = tensor._data
    shape, dtype = data.shape, data.dtype

    def check() -> bool:
        d = tensor._data
        return d is not None and d.shape == shape and d.dtype == dtype

    return (f"{label}: shape {_show(shape)} and dtype {_show(dtype)} unchanged", check)


# -- free variables ----------------------------------------------------------------------------

def free_objects(fn: Any) -> list[tuple[str, Any, Callable[[], Any]]]:
    """Modules and tensors a function reaches through its closure or its module globals:
    ``(label, object, getter)``; ``getter()`` returns what the name is bound to now."""
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        return []
    found: list[tuple[str, Any, Callable[[], Any]]] = []
    code = func.__code__
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, Tensor) or is_module(value):
            found.append((f"closure variable {name!r}", value, lambda cell=cell: cell.cell_contents))
    g = func.__globals__
    for name in code.co_names:
        value = g.get(name)
        if isinstance(value, Tensor) or is_module(value):
            found.append((f"global {name!r}", value, lambda name=name: g.get(name)))
    return found
