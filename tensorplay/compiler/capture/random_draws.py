"""Random draws in a capture: drawn by the eager generator, and redrawn on every call of a
traced graph as an input."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from ... import _views
from ..._tensor import Tensor
from ...dialects.tp import symbolic as sym
from ...dialects.tp.types import TensorType, type_of_array
from . import pytree
from .active import without_capture
from .bindings import RandomInput
from .records import TRACE, _Ref


class RandomDraws:
    """The capture's ``random_call`` hook.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

    def random_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A random op: drawn by the eager generator; under trace, a graph input redrawn on
        every call in the same order."""
        leaves, tree = pytree.flatten((args, kwargs))
        if any(isinstance(a, Tensor) and not _views.has_memory(a) for a in leaves):
            return self.run_eagerly(fn, args, kwargs, f"{_fn_name(fn)}() with a captured tensor argument")
        symbolic = self._symbolic_draw(fn, args, kwargs, leaves)
        given = (args, kwargs)
        if symbolic is None and any(isinstance(a, sym.SymInt) for a in leaves):
            # a draw whose shape is not a plain size argument, or one in a segment: its sizes
            # become constants
            args, kwargs = pytree.unflatten(tree, [int(a) if isinstance(a, sym.SymInt) else a for a in leaves])
        elif symbolic is not None:
            args, kwargs = pytree.unflatten(tree, [self.shape_env.hint(a.node) if isinstance(a, sym.SymInt)
                                                   else a for a in leaves])
        with without_capture():
            out = fn(*args, **kwargs)
        if self.mode != TRACE or self._regions:
            if self._regions:
                ttype = type_of_array(_views.held(out))
                if symbolic is not None and len(symbolic) == len(ttype.shape):
                    # every call site draws with the sizes as symbols (the region's input is symbolic)
                    return self._regions[-1].random_input(fn, *given, out, TensorType(symbolic, ttype.dtype))
                return self._regions[-1].random_input(fn, args, kwargs, out)
            return out
        ttype = type_of_array(_views.held(out))
        sizes = None
        if symbolic is not None and len(symbolic) == len(ttype.shape):
            ttype = TensorType(symbolic, ttype.dtype)
            sizes = (tree, [(i, a.node) for i, a in enumerate(leaves) if isinstance(a, sym.SymInt)])
        binding = RandomInput(fn, args, kwargs, _views.held(out), sizes)
        value = self._add_input(ttype, binding)
        result = Tensor._from_type(value.type, _Ref(self, self.graph, value))
        result.requires_grad = out.requires_grad
        self._live.append(weakref.ref(result))
        return result

    def _symbolic_draw(self, fn: Callable[..., Any], args: tuple, kwargs: dict, leaves: list) -> tuple | None:
        """The shape of a traced draw whose size arguments hold symbolic sizes (entries are
        ints and sympy expressions), or None when the draw is static or cannot stay symbolic."""
        if self.mode != TRACE or not any(isinstance(a, sym.SymInt) for a in leaves):
            return None
        size_of = getattr(fn, "random_size", None)
        try:
            size = size_of(args, kwargs) if size_of is not None else None
        except (IndexError, KeyError, TypeError):
            size = None
        if size is None or not any(isinstance(d, sym.SymInt) for d in size):
            return None
        if any(sym.data_dependent(d) for d in size):  # (no example value to draw with)
            return None
        if not all(isinstance(d, (int, sym.SymInt)) and not isinstance(d, bool) for d in size):
            return None
        return tuple(d.node if isinstance(d, sym.SymInt) else int(d) for d in size)


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
