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

__all__ = ["Binding", "ArgInput", "AttachedInput", "ArrayInput", "RandomInput"]


class Binding:
    """One graph input: its capture-time value and how later calls fetch it."""

    first: np.ndarray

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class ArgInput(Binding):
    """Tensor argument number ``index`` of the flattened call arguments."""

    def __init__(self, index: int, first: np.ndarray, path: str = ""):
        self.index = index
        self.first = first
        self.path = path

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        return leaves[self.index]._data

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
        return self.tensor._data

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
    """A random draw, redone with the eager generator on every call, in capture order."""

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, first: np.ndarray):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.first = first

    def fetch(self, leaves: Sequence[Any]) -> np.ndarray:
        return self.fn(*self.args, **self.kwargs)._data

    def describe(self) -> str:
        return f"random draw {getattr(self.fn, '__name__', 'random')}()"
