"""Gradient modes. tensorplay runs inference only for now; the modes are tracked so
code written for PyTorch runs unchanged and autograd can honour them when it lands."""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
           "is_inference_mode_enabled"]

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "grad", True)


def is_inference_mode_enabled() -> bool:
    return getattr(_state, "inference", False)


class _Mode:
    """Base of the gradient-mode context managers; each also works as a decorator."""

    def _enter(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._saved = (is_grad_enabled(), is_inference_mode_enabled())
        self._enter()

    def __exit__(self, *exc: Any) -> None:
        _state.grad, _state.inference = self._saved

    def __call__(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(*self._args):
                return fn(*args, **kwargs)

        return wrapper

    _args: tuple = ()


class no_grad(_Mode):  # noqa: N801
    """Context manager (and decorator) that disables gradient tracking."""

    def _enter(self) -> None:
        _state.grad = False


class enable_grad(_Mode):  # noqa: N801
    """Context manager (and decorator) that enables gradient tracking."""

    def _enter(self) -> None:
        _state.grad = True


class set_grad_enabled(_Mode):  # noqa: N801
    """Set gradient tracking on or off; usable as a function or a context manager."""

    def __init__(self, mode: bool):
        self._args = (mode,)
        self._prev = is_grad_enabled()
        _state.grad = bool(mode)

    def __enter__(self) -> None:
        self._saved = (self._prev, is_inference_mode_enabled())
        _state.grad = bool(self._args[0])

    def _enter(self) -> None:
        _state.grad = bool(self._args[0])


class inference_mode(_Mode):  # noqa: N801
    """Context manager (and decorator) for inference: no gradients and no version tracking."""

    def __init__(self, mode: bool = True):
        self._args = (mode,)

    def _enter(self) -> None:
        if self._args[0]:
            _state.grad = False
            _state.inference = True
