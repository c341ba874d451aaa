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
from typing import Any, NamedTuple

import numpy as np

from ..._grad_mode import is_grad_enabled, is_inference_mode_enabled
from ...amp.autocast_mode import state_key as autocast_state
from ..._tensor import Tensor
from ...runtime.storage import DeviceArray
from ...dialects.tp import dtypes as dt
from . import pytree
from .code_hiding import code_of
from ... import _views

__all__ = ["CallKey", "TensorKey", "FloatKey", "ValueKey", "ObjectKey", "GlobalModes", "call_key", "mask_key",
           "size_changes", "describe_change", "module_guard", "free_objects", "is_module", "tensor_meta_guard",
           "ModuleGuard"]

_VALUE_TYPES = (bool, int, str, bytes, type(None), complex, range, slice, type(Ellipsis))

_new = tuple.__new__  # builds the keys below without their Python-level __new__ (keys are built per call)


class TensorKey(NamedTuple):
    """A tensor argument: its class and what a graph is specialized to."""

    type: type
    shape: tuple  # sizes; a dim captured symbolic is None in an entry's masked key
    dtype: np.dtype
    requires_grad: bool
    static_dims: Any  # the dims marked with mark_static
    device: str  # the runtime driver of a device tensor; "" on the host


class FloatKey(NamedTuple):
    """A float argument, by its bits (``0.0`` and ``-0.0`` differ, NaN equals NaN)."""

    hex: str


class ValueKey(NamedTuple):
    """A Python value guarded by type and value (numbers, strings, dtypes, enums, devices)."""

    type: type
    value: Any


class ObjectKey(NamedTuple):
    """Any other argument, guarded by identity."""

    type: type
    id: int


class GlobalModes(NamedTuple):
    """The global modes a graph is specialized to."""

    grad: bool
    inference: bool
    default_dtype: Any
    autocast: tuple | None  # (device type, dtype name) pairs where autocast is on


class CallKey(NamedTuple):
    """The hashable part of a call's guards. The leaf keys are plain tuples to C code (hash and
    ``==``), and leaf keys of different classes never compare equal: their lengths differ,
    except ValueKey and ObjectKey, whose ``type`` fields never hold the same class."""

    tree: pytree.TreeDef  # the structure of (args, kwargs)
    leaves: tuple  # one TensorKey, FloatKey, ValueKey or ObjectKey per flattened argument
    alias: tuple  # (i, j): tensor leaf i is the same object as the earlier leaf j
    modes: GlobalModes


def is_module(x: Any) -> bool:
    from ...nn.modules.module import Module

    return isinstance(x, Module)


def _leaf_key(leaf: Any) -> tuple:
    t = type(leaf)
    if isinstance(leaf, Tensor):
        data = _views.held(leaf)
        if data is None:
            return _new(TensorKey, (t, leaf._type.shape, leaf._type.dtype.np_dtype, leaf.requires_grad,
                                    leaf._static_dims, ""))
        return _new(TensorKey, (t, data.shape, data.dtype, leaf.requires_grad, leaf._static_dims, storage_kind(data)))
    if t is float:
        return _new(FloatKey, (leaf.hex(),))
    if t is slice:  # unhashable before Python 3.12
        return _new(ValueKey, (t, (_leaf_key(leaf.start), _leaf_key(leaf.stop), _leaf_key(leaf.step))))
    if t in _VALUE_TYPES:
        return _new(ValueKey, (t, leaf))
    if isinstance(leaf, (dt.DType, enum.Enum, np.dtype, frozenset)):
        return _new(ValueKey, (t, leaf))
    if isinstance(leaf, (np.integer, np.floating, np.bool_)):
        return _new(ValueKey, (t, leaf.item()))
    from ..._device import device

    if isinstance(leaf, device):
        return _new(ValueKey, (t, str(leaf)))
    return _new(ObjectKey, (t, id(leaf)))


def call_key(treedef: pytree.TreeDef, leaves: Sequence[Any]) -> CallKey:
    """The hashable part of the guards of a call with these flattened arguments."""
    keys = []
    alias: tuple = ()
    first: dict[int, int] = {}
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            data = _views.held(x)
            keys.append(_leaf_key(x) if data is None else
                        _new(TensorKey, (type(x), data.shape, data.dtype, x.requires_grad, x._static_dims,
                                         storage_kind(data))))
            j = first.setdefault(id(x), i)
            if j != i:
                alias += ((i, j),)
        else:
            keys.append(_leaf_key(x))
    modes = _new(GlobalModes, (is_grad_enabled(), is_inference_mode_enabled(), dt.get_default_dtype(),
                               autocast_state()))
    return _new(CallKey, (treedef, tuple(keys), alias, modes))


def mask_key(key: CallKey, mask: tuple[tuple[int, int], ...]) -> CallKey | None:
    """``key`` with the sizes of the ``mask`` dims (leaf index, dim) left out; None when the
    call's tensors do not have those dims."""
    keys = list(key.leaves)
    for i, d in mask:
        if i >= len(keys):
            return None
        k = keys[i]
        if type(k) is not TensorKey or d >= len(k.shape):
            return None
        shape = list(k.shape)
        shape[d] = None
        keys[i] = k._replace(shape=tuple(shape))
    return key._replace(leaves=tuple(keys))


def size_changes(old: CallKey, new: CallKey) -> list[tuple[int, int]]:
    """The (leaf index, dim) whose sizes differ when two call keys differ only in tensor
    sizes (same structure, ranks, dtypes and values); [] otherwise."""
    if old.tree != new.tree or old.alias != new.alias or old.modes != new.modes \
            or len(old.leaves) != len(new.leaves):
        return []
    changed: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(zip(old.leaves, new.leaves)):
        if a == b:
            continue
        if type(a) is not TensorKey or type(b) is not TensorKey or len(a.shape) != len(b.shape) \
                or a._replace(shape=None) != b._replace(shape=None):
            return []
        changed += [(i, d) for d, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    return changed


_CHANGES = (("shape", "shape"), ("dtype", "dtype"), ("requires_grad", "requires_grad"),
            ("static dims", "static_dims"), ("device", "device"))


def describe_change(old: CallKey, old_paths: Sequence[str], new: CallKey, new_paths: Sequence[str]) -> str:
    """What differs between two call keys (with their leaf paths), in the user's words."""
    before = dict(zip(old_paths, old.leaves))
    changes = []
    for path, b in zip(new_paths, new.leaves):
        a = before.pop(path, None)
        if a is None:
            changes.append(f"{path}: now passed ({_show_leaf(b)})")
        elif a == b:
            continue
        elif type(a) is TensorKey and type(b) is TensorKey:
            for label, name in _CHANGES:
                x, y = getattr(a, name), getattr(b, name)
                if x != y:
                    changes.append(f"{path}: {label} {_show(x)} -> {_show(y)}")
            if a.type is not b.type:
                changes.append(f"{path}: type {a.type.__name__} -> {b.type.__name__}")
        elif type(a) is ObjectKey and type(b) is ObjectKey and a.type is b.type:
            changes.append(f"{path}: a different {a.type.__name__} object")
        else:
            changes.append(f"{path}: {_show_leaf(a)} -> {_show_leaf(b)}")
    changes += [f"{path}: no longer passed" for path in before]
    if not changes and old.tree != new.tree:
        changes.append("the structure of the arguments changed")
    if old.alias != new.alias:
        changes.append("tensor arguments alias each other differently")
    for label, a, b in zip(("grad mode", "inference mode", "default dtype", "autocast"), old.modes, new.modes):
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
    if type(k) is FloatKey:
        return repr(float.fromhex(k.hex))
    if type(k) is ValueKey:
        return repr(k.value)
    if type(k) is TensorKey:
        return f"tensor{_show(k.shape)}"
    return f"{k.type.__name__} object"


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
        self.tensors = [(t, t._tensor_type().shape, t._tensor_type().dtype.np_dtype, storage_kind(_views.held(t)))
                        for m in self.modules
                        for t in (*m._parameters.values(), *m._buffers.values()) if t is not None]
        self.version = module_mod.state_version

    def __call__(self) -> bool:
        version = self._version_source.state_version
        if version == self.version:
            return True
        # the walk is implied: a changed child shows in its parent's ``_modules``
        if _module_state(self.modules) != self.state:
            return False
        for t, shape, dtype, kind in self.tensors:
            d = _views.held(t)
            if d is None or d.shape != shape or d.dtype != dtype or storage_kind(d) != kind:
                return False
        self.version = version
        return True


def module_guard(module: Any, label: str) -> tuple[str, ModuleGuard]:
    guard = ModuleGuard(module, label)
    return (guard.description, guard)


def tensor_meta_guard(tensor: Any, label: str) -> tuple[str, Callable[[], bool]]:
    data = _views.held(tensor)
    shape, dtype, kind = data.shape, data.dtype, storage_kind(data)

    def check() -> bool:
        d = _views.held(tensor)
        return d is not None and d.shape == shape and d.dtype == dtype and storage_kind(d) == kind

    return (f"{label}: shape {_show(shape)}, dtype {_show(dtype)} and device unchanged", check)


def storage_kind(data: Any) -> str:
    """Where a storage lives, for guards: a device array's runtime driver, "" on the host."""
    return data.driver if type(data) is DeviceArray else ""


# -- free variables ----------------------------------------------------------------------------

def free_objects(fn: Any) -> list[tuple[str, Any, Callable[[], Any]]]:
    """Modules and tensors a function reaches through its closure or its module globals:
    ``(label, object, getter)``; ``getter()`` returns what the name is bound to now."""
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        return []
    found: list[tuple[str, Any, Callable[[], Any]]] = []
    code = code_of(func)
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
