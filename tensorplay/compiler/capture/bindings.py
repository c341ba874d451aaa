"""Where each input of a captured graph gets its value on a call.

A captured graph's inputs are the call's tensor arguments, tensors the function reached
(module parameters and buffers, closure and global tensors), arrays fixed at capture time
and fresh random draws. Each input has one binding; ``first`` is its value at capture time.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import pytree
from ... import _views

__all__ = ["Binding", "ArgInput", "AttachedInput", "ReadInput", "ArrayInput", "RandomInput"]


class Binding:
    """One graph input: its capture-time value and how later calls fetch it."""

    first: np.ndarray

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        raise NotImplementedError

    def source(self, leaves: Sequence[Any]) -> Any:
        """The tensor this input reads (None for fixed arrays and random draws)."""
        return None

    def describe(self) -> str:
        return type(self).__name__


class ArgInput(Binding):
    """Tensor argument number ``index`` of the flattened call arguments."""

    def __init__(self, index: int, first: np.ndarray, path: str = ""):
        self.index = index
        self.first = first
        self.path = path

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        return _views.held(leaves[self.index])

    def source(self, leaves: Sequence[Any]) -> Any:
        return leaves[self.index]

    def describe(self) -> str:
        return f"argument {self.path or self.index}"


class AttachedInput(Binding):
    """A tensor the function reached (parameter, buffer, closure or global), read on each
    call, so in-place updates of it are seen without recompiling."""

    def __init__(self, tensor: Any, first: np.ndarray, what: str = "tensor"):
        self._weak: weakref.ref | None = weakref.ref(tensor)
        self.tensor: Any = None
        self.first = first
        self.what = what

    def resolve(self) -> Any:
        """After capture: hold the tensor strongly; None when it did not outlive the capture."""
        if self._weak is not None:
            self.tensor = self._weak()
            self._weak = None
        return self.tensor

    def target(self) -> Any:
        return self.tensor if self._weak is None else self._weak()

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        return _views.held(self.tensor)

    def source(self, leaves: Sequence[Any]) -> Any:
        return self.tensor

    def describe(self) -> str:
        return self.what


class ReadInput(Binding):
    """A value library code reads afresh on every call through ``getter``: a tensor that
    an attribute holds (``p.grad``, whose object changes every step) or a Python number
    that a schedule changes (an optimizer's learning rate), as an array of ``dtype``."""

    def __init__(self, getter: Callable[[], Any], first: np.ndarray, what: str):
        self.getter = getter
        self.first = first
        self.dtype = first.dtype
        self.what = what

    def fetch(self, leaves: Sequence[Any]) -> Any:
        value = self.getter()
        data = getattr(value, "_data", None)
        if data is not None:
            return data
        return np.asarray(value, dtype=self.dtype)

    def describe(self) -> str:
        return self.what


class ArrayInput(Binding):
    """An array fixed at capture time (a tensor made during the capture and not kept)."""

    def __init__(self, array: np.ndarray):
        self.first = array

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        return self.first

    def describe(self) -> str:
        return "captured array"


class RandomInput(Binding):
    """A random draw, redone with the eager generator on every call, in capture order.

    ``sizes`` (``(treedef, [(leaf position, size expression)])``) marks a draw whose size
    arguments are symbolic: each call recomputes them from the call's argument shapes."""

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, first: np.ndarray,
                 sizes: tuple | None = None):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.first = first
        self.sizes = sizes
        self._size_fn: Callable[[Sequence[Any]], tuple] | None = None

    def bind_sizes(self, simplify: Callable[[Any], Any], bindings: Sequence[tuple[str, int, int]],
                   symbols: dict) -> None:
        """Compile the size arguments into Python reading the call's argument shapes
        (``bindings``/``symbols``: a ShapeGuard's, where each symbol is read)."""
        from ...dialects.tp import symbolic as sym

        treedef, entries = self.sizes
        at = {name: (i, d) for name, i, d in bindings}
        names = {s: f"held(leaves[{at[v][0]}]).shape[{at[v][1]}]" for s, v in symbols.items() if v in at}
        exprs = [sym.size_to_python(simplify(e), names) for _, e in entries]
        scope: dict[str, Any] = {"min": min, "max": max, "abs": abs, "held": _views.held}
        self._size_fn = eval(f"lambda leaves: ({', '.join(exprs)},)", scope)  # noqa: S307 - built here
        base = pytree.flatten((self.args, self.kwargs))[0]
        positions = [p for p, _ in entries]

        def args_for(leaves: Sequence[Any]) -> tuple[tuple, dict]:
            values = list(base)
            for p, v in zip(positions, self._size_fn(leaves)):
                values[p] = v
            return pytree.unflatten(treedef, values)

        self._args_for = args_for

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        if self._size_fn is not None:
            args, kwargs = self._args_for(leaves)
            return _views.held(self.fn(*args, **kwargs))
        return _views.held(self.fn(*self.args, **self.kwargs))

    def describe(self) -> str:
        return f"random draw {getattr(self.fn, '__name__', 'random')}()"
