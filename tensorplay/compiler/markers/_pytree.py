"""Structured arguments of markers: walk tuples, lists, dicts and dataclasses down to tensors and
constants, with a readable path (``args[1]['scale']``) for each leaf."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..._tensor import Tensor
from ...dialects.tp.dtypes import DType

__all__ = ["Leaf", "CONSTANT_TYPES", "leaves", "is_constant", "check_pytree", "signature_key"]

#: Leaf values treated as constants: captured by value and guarded.
CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, DType, enum.Enum,
                  type(Ellipsis), range)


class Leaf(NamedTuple):
    path: str
    value: Any
    container: Any  # the mutable list/dict/dataclass holding the leaf, or None
    key: Any


def is_constant(value: Any) -> bool:
    if isinstance(value, slice):
        return all(is_constant(v) for v in (value.start, value.stop, value.step))
    return isinstance(value, CONSTANT_TYPES)


def _is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _children(value: Any) -> Iterator[tuple[str, Any, Any, Any]] | None:
    """(path suffix, child, mutable container or None, key) for a container; None for leaves."""
    if isinstance(value, tuple):
        fields = getattr(value, "_fields", None)
        if fields is not None:  # a namedtuple: name the fields
            return ((f".{f}", v, None, f) for f, v in zip(fields, value))
        return ((f"[{i}]", v, None, i) for i, v in enumerate(value))
    if isinstance(value, list):
        return ((f"[{i}]", v, value, i) for i, v in enumerate(value))
    if isinstance(value, dict):
        return ((f"[{k!r}]", v, value, k) for k, v in value.items())
    if _is_dataclass_instance(value):
        frozen = type(value).__dataclass_params__.frozen
        return ((f".{f.name}", getattr(value, f.name), None if frozen else value, f.name)
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
    for suffix, child, cont, k in children:
        yield from _leaves(child, path + suffix, cont, k, ancestors)
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
