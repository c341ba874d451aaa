"""Pytrees: the containers that compiled calls and marker boundaries look through.

Containers are tuples, lists, dicts, namedtuples and dataclass instances; everything else
(tensors, numbers, strings, modules, arbitrary objects) is a leaf. Two walks share one path
syntax and one list of constant types:

* :func:`flatten` / :func:`unflatten`, for the arguments and results of compiled calls, open
  only what they can rebuild as it was: exactly ``tuple``, ``list`` and ``dict``,
  namedtuples, and dataclasses through their ``__init__`` fields (a subclass of ``list`` or
  ``dict`` is a leaf). The structure (a :data:`TreeDef`: nested :class:`TreeNode` tuples,
  cheap to hash) is part of a guard key.
* :func:`leaves`, for the arguments of markers (``nonstrict_trace``, ``substitute_in_graph``),
  only reads: it opens subclasses of tuple, list and dict and every dataclass field, rejects
  a container that contains itself, and says which mutable container holds each leaf.

A leaf's path is its root followed by one step per container: ``[i]`` for a position in a
tuple, list or namedtuple, ``[key!r]`` for a dict key, ``.name`` for a dataclass field
(``args[1]['scale'].bias``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..._tensor import Tensor
from ...dialects.tp.dtypes import DType

__all__ = ["TreeDef", "TreeNode", "LEAF", "CONSTANT_TYPES", "Leaf", "flatten", "flatten_call", "unflatten", "leaf_paths",
           "leaves", "is_constant", "check_pytree", "signature_key"]

#: Leaf values treated as constants: captured by value and guarded.
CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, DType, enum.Enum,
                  type(Ellipsis), range)

#: exact types :func:`flatten` knows at once to be leaves
_LEAF_TYPES = frozenset(CONSTANT_TYPES)


def is_constant(value: Any) -> bool:
    if isinstance(value, slice):
        return all(is_constant(v) for v in (value.start, value.stop, value.step))
    return isinstance(value, CONSTANT_TYPES)


def _is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _step(kind: str, key: Any) -> str:
    """The path step to child ``key`` of a container of ``kind``."""
    if kind == "dict":
        return f"[{key!r}]"
    if kind == "dataclass":
        return f".{key}"
    return f"[{key}]"


# -- flatten / unflatten -----------------------------------------------------------------------

class TreeNode(NamedTuple):
    """One container of a flattened pytree."""

    kind: str  # tuple, list, dict, namedtuple or dataclass
    type: Any  # the namedtuple or dataclass class; None for tuple, list and dict
    keys: tuple  # dict keys or dataclass field names; () otherwise
    children: tuple  # a TreeDef per element


#: ``LEAF`` or a :class:`TreeNode`
TreeDef = Any
LEAF = "*"

_node = tuple.__new__  # a TreeNode without the Python-level __new__: flatten runs on every call
_NO_KWARGS = TreeNode("dict", None, (), ())


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """Leaves in depth-first order and the structure that :func:`unflatten` rebuilds."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


_ARGS_TREES: dict[int, TreeDef] = {}


def flatten_call(args: tuple, kwargs: dict) -> tuple[list[Any], TreeDef]:
    """``flatten((args, kwargs))``, without the walk for the usual call: tensors passed by
    position (every compiled call flattens its arguments)."""
    if not kwargs:
        for a in args:
            if type(a) is not Tensor:
                break
        else:
            tree = _ARGS_TREES.get(len(args))
            if tree is None:
                tree = _ARGS_TREES[len(args)] = flatten((args, {}))[1]
            return list(args), tree
    return flatten((args, kwargs))


def _flatten(tree: Any, leaves: list[Any]) -> TreeDef:
    # loops rather than comprehensions: this runs on every compiled call
    t = type(tree)
    if t in _LEAF_TYPES or isinstance(tree, Tensor):
        leaves.append(tree)
        return LEAF
    children: list[TreeDef] = []
    if t is tuple or t is list:
        for v in tree:
            children.append(_flatten(v, leaves))
        return _node(TreeNode, (t.__name__, None, (), tuple(children)))
    if t is dict:
        if not tree:
            return _NO_KWARGS
        keys = tuple(tree)
        for k in keys:
            children.append(_flatten(tree[k], leaves))
        return _node(TreeNode, ("dict", None, keys, tuple(children)))
    if isinstance(tree, tuple) and hasattr(t, "_fields"):
        for v in tree:
            children.append(_flatten(v, leaves))
        return _node(TreeNode, ("namedtuple", t, (), tuple(children)))
    if _is_dataclass_instance(tree):
        names = tuple(f.name for f in dataclasses.fields(tree) if f.init)
        for n in names:
            children.append(_flatten(getattr(tree, n), leaves))
        return _node(TreeNode, ("dataclass", t, names, tuple(children)))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """The pytree of structure ``treedef`` holding ``leaves`` (new containers each time)."""
    return _unflatten(treedef, iter(leaves))


def _unflatten(td: TreeDef, it: Any) -> Any:
    if td is LEAF:
        return next(it)
    values = [_unflatten(c, it) for c in td.children]
    kind = td.kind
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict":
        return dict(zip(td.keys, values))
    if kind == "namedtuple":
        return td.type(*values)
    return td.type(**dict(zip(td.keys, values)))


def leaf_paths(treedef: TreeDef, prefix: str = "") -> list[str]:
    """The path of each leaf (``[0][1]``, ``[1]['x'].weight``) for messages."""
    out: list[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(td: TreeDef, prefix: str, out: list[str]) -> None:
    if td is LEAF:
        out.append(prefix)
        return
    keys = td.keys or range(len(td.children))
    for k, c in zip(keys, td.children):
        _paths(c, prefix + _step(td.kind, k), out)


# -- leaves of marker arguments ----------------------------------------------------------------

class Leaf(NamedTuple):
    path: str
    value: Any
    container: Any  # the mutable list/dict/dataclass holding the leaf, or None
    key: Any


def _children(value: Any) -> Iterator[tuple[str, Any, Any, Any]] | None:
    """(path step, child, mutable container or None, key) for a container; None for leaves."""
    if isinstance(value, tuple):
        return ((_step("tuple", i), v, None, i) for i, v in enumerate(value))
    if isinstance(value, list):
        return ((_step("list", i), v, value, i) for i, v in enumerate(value))
    if isinstance(value, dict):
        return ((_step("dict", k), v, value, k) for k, v in value.items())
    if _is_dataclass_instance(value):
        frozen = type(value).__dataclass_params__.frozen
        return ((_step("dataclass", f.name), getattr(value, f.name), None if frozen else value, f.name)
                for f in dataclasses.fields(value))
    return None


def leaves(value: Any, path: str) -> Iterator[Leaf]:
    """Every non-container value reachable from ``value`` (containers are not leaves)."""
    yield from _leaves(value, path, None, None, set())


def _leaves(value: Any, path: str, container: Any, key: Any, ancestors: set[int]) -> Iterator[Leaf]:
    children = _children(value)
    if children is None:
        yield Leaf(path, value, container, key)
        return
    if id(value) in ancestors:
        raise TypeError(f"{path} contains itself")
    ancestors.add(id(value))
    for step, child, cont, k in children:
        yield from _leaves(child, path + step, cont, k, ancestors)
    ancestors.discard(id(value))


def check_pytree(what: str, value: Any, path: str) -> list[Leaf]:
    """The leaves of ``value``; TypeError naming the path of any leaf that is neither a tensor
    nor a constant."""
    out = list(leaves(value, path))
    for leaf in out:
        if not (isinstance(leaf.value, Tensor) or is_constant(leaf.value)):
            raise TypeError(
                f"{what}: {leaf.path} is a {type(leaf.value).__name__}; only tuples, lists, "
                f"dicts and dataclasses of tensors and constants (None, bool, int, float, complex, "
                f"str, bytes, enum, dtype, slice) can cross this boundary. Pass the tensors and "
                f"constants it holds instead, or make it a dataclass.")
    return out


def _module_key(module: Any) -> tuple:
    """What a traced module call depends on besides its tensor values: class, mode, parameter and
    buffer metadata, plain attributes of every submodule."""
    parts: list[Any] = []
    for name, sub in module.named_modules():
        plain = []
        for k, v in sorted(sub.__dict__.items()):
            if k.startswith("_") or not is_constant(v):
                continue
            plain.append((k, v))
        parts.append((name, type(sub), tuple(plain)))
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        parts.append((name, tuple(t.shape), t.dtype, t.requires_grad))
    return ("module", tuple(parts))


def signature_key(value: Any) -> Any:
    """A hashable description of ``value`` that equal-structured calls share: tensors by
    shape/dtype, constants by value, modules by structure; raises TypeError when a part has
    none (an arbitrary object)."""
    from ...nn.modules.module import Module

    if isinstance(value, Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.requires_grad)
    if isinstance(value, Module):
        return _module_key(value)
    if is_constant(value):
        return (type(value), value)
    if isinstance(value, tuple):
        return (type(value), tuple(signature_key(v) for v in value))
    if isinstance(value, list):
        return (list, tuple(signature_key(v) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((signature_key(k), signature_key(v)) for k, v in value.items()))
    if _is_dataclass_instance(value):
        return (type(value), tuple((f.name, signature_key(getattr(value, f.name)))
                                   for f in dataclasses.fields(value)))
    raise TypeError(f"a {type(value).__qualname__} has no structural key")
