"""NumPy protocols for Tensor: ufuncs and array functions that have a tp op stay in
tensorplay (``np.tanh(t)`` is a Tensor, and is captured like ``tp.tanh(t)``); anything
else falls back to numpy on the tensors' data and returns numpy's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["array_ufunc", "array_function", "UFUNCS", "FUNCTIONS", "Reduction", "adapter"]

#: numpy ufunc name -> tensorplay function name (filled by the ``ufunc=`` of the ``@public``
#: declarations in tensorplay/ops)
UFUNCS: dict[str, str] = {}

#: numpy function name -> adapter returning a Tensor (or NotImplemented to fall back), filled by
#: the ``array_function=`` of the ``@public`` declarations
FUNCTIONS: dict[str, Any] = {}


@dataclass(frozen=True)
class Reduction:
    """The ``array_function`` adapter kind of numpy reductions (``axis``, ``dtype``, ``out``,
    ``keepdims``; ``ddof`` as ``correction`` where ``ddof``)."""

    ddof: bool = False


def adapter(name: str, adapt: Any) -> Any:
    """The ``FUNCTIONS`` entry calling ``tp.<name>``: ``adapt`` is None (numpy's arguments as
    they are), a :class:`Reduction`, or ``adapt(*args, **kwargs) -> (args, kwargs)``."""
    if isinstance(adapt, Reduction):
        return _reduce(name, ddof=adapt.ddof)
    return _fn(name, adapt)


def _reduce(name: str, *, ddof: bool = False):
    """Adapter from numpy's reduction signature (axis, keepdims, ddof) to tensorplay's."""

    def call(a, axis=None, dtype=None, out=None, keepdims=False, ddof_value=0, **kwargs):
        import tensorplay as tp

        if out is not None or kwargs.get("where", True) is not True:
            return NotImplemented
        fn = getattr(tp, name)
        extra = {}
        if dtype is not None:
            if name not in ("sum", "prod", "mean"):
                return NotImplemented
            extra["dtype"] = dtype
        if ddof:
            extra["correction"] = kwargs.get("ddof", 0)
        if axis is None:
            if name in ("argmax", "argmin"):
                return fn(a, keepdim=keepdims)
            return fn(a, dim=None, keepdim=keepdims, **extra) if keepdims else fn(a, **extra)
        return fn(a, dim=axis, keepdim=keepdims, **extra)

    return call


def _fn(name: str, adapt=None):
    def call(*args, **kwargs):
        import tensorplay as tp

        fn = getattr(tp, name)
        if adapt is not None:
            args, kwargs = adapt(*args, **kwargs)
        return fn(*args, **kwargs)

    return call


def _to_numpy(value: Any, why: str = "Tensor.numpy()") -> Any:
    from ._tensor import Tensor

    if isinstance(value, Tensor):
        return value._concrete(why)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_numpy(v, why) for v in value)
    if isinstance(value, dict):
        return {k: _to_numpy(v, why) for k, v in value.items()}
    return value


def _wrap(value: Any) -> Any:
    from ._tensor import Tensor
    from .dialects.tp.dtypes import _BY_NP

    if isinstance(value, np.ndarray) and value.dtype in _BY_NP:
        return Tensor._wrap(value)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    return value


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    name = UFUNCS.get(ufunc.__name__)
    if method == "__call__" and name is not None and not kwargs:
        import tensorplay as tp

        from ._tensor import Tensor

        args = [tp.as_tensor(a) if isinstance(a, np.ndarray) else a for a in inputs]
        if any(isinstance(a, Tensor) for a in args):
            return getattr(tp, name)(*args)
    # Everything else (out=, reduce/accumulate, ufuncs without a tp op) runs in numpy.
    why = f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method}() (no tp op)"
    result = getattr(ufunc, method)(*_to_numpy(inputs, why), **_to_numpy(kwargs, why))
    return _wrap(result) if kwargs.get("out") is None else result


def array_function(func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    adapter = FUNCTIONS.get(func.__name__)
    if adapter is not None:
        try:
            result = adapter(*args, **kwargs)
        except TypeError:
            result = NotImplemented
        if result is not NotImplemented:
            return result
    why = f"{getattr(func, '__module__', None) or 'numpy'}.{func.__name__}() (no tp op)"
    return func(*_to_numpy(args, why), **_to_numpy(kwargs, why))

