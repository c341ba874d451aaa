"""Flattening of call arguments and results into leaves and a structure description.

Containers are tuples, lists, dicts, namedtuples and dataclass instances; everything else
(tensors, numbers, strings, modules, arbitrary objects) is a leaf. The structure (a
``TreeDef``: plain nested tuples, cheap to hash) can be part of a guard key.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..._tensor import Tensor

__all__ = ["TreeDef", "LEAF", "flatten", "unflatten", "leaf_paths", "num_leaves"]

#: ``LEAF`` or ``(kind, type, keys, children)`` with kind one of tuple, list, dict,
#: namedtuple, dataclass
TreeDef = Any
LEAF = "*"

_SCALARS = frozenset((int, float, bool, str, bytes, type(None), complex))


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """Leaves in depth-first order and the structure that :func:`unflatten` rebuilds."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list[Any]) -> TreeDef:
    t = type(tree)
    if t in _SCALARS or isinstance(tree, Tensor):
        leaves.append(tree)
        return LEAF
    if t is tuple or t is list:
        return (t.__name__, None, (), tuple([_flatten(v, leaves) for v in tree]))
    if t is dict:
        keys = tuple(tree)
        return ("dict", None, keys, tuple([_flatten(tree[k], leaves) for k in keys]))
    if isinstance(tree, tuple) and hasattr(t, "_fields"):
        return ("namedtuple", t, (), tuple([_flatten(v, leaves) for v in tree]))
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        names = tuple(f.name for f in dataclasses.fields(tree) if f.init)
        return ("dataclass", t, names, tuple([_flatten(getattr(tree, n), leaves) for n in names]))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """The pytree of structure ``treedef`` holding ``leaves`` (new containers each time)."""
    return _unflatten(treedef, iter(leaves))


def _unflatten(td: TreeDef, it: Any) -> Any:
    if td is LEAF:
        return next(it)
    kind, t, keys, children = td
    values = [_unflatten(c, it) for c in children]
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict":
        return dict(zip(keys, values))
    if kind == "namedtuple":
        return t(*values)
    return t(**dict(zip(keys, values)))


def num_leaves(td: TreeDef) -> int:
    return 1 if td is LEAF else sum(num_leaves(c) for c in td[3])


def leaf_paths(treedef: TreeDef, prefix: str = "") -> list[str]:
    """A readable path per leaf (``[0][1]``, ``[1]['x'].weight``) for messages."""
    out: list[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(td: TreeDef, prefix: str, out: list[str]) -> None:
    if td is LEAF:
        out.append(prefix)
        return
    kind, _, keys, children = td
    if kind == "dict":
        for k, c in zip(keys, children):
            _paths(c, f"{prefix}[{k!r}]", out)
    elif kind == "dataclass":
        for k, c in zip(keys, children):
            _paths(c, f"{prefix}.{k}", out)
    else:
        for i, c in enumerate(children):
            _paths(c, f"{prefix}[{i}]", out)
