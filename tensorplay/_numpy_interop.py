"""NumPy protocols for Tensor: ufuncs and array functions that have a tp op stay in
tensorplay (``np.tanh(t)`` is a Tensor, and is captured like ``tp.tanh(t)``); anything
else falls back to numpy on the tensors' data and returns numpy's result."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["array_ufunc", "array_function", "UFUNCS", "FUNCTIONS"]

#: numpy ufunc name -> tensorplay function name
UFUNCS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
    "floor_divide": "floor_divide", "remainder": "remainder", "fmod": "fmod", "power": "pow",
    "negative": "neg", "absolute": "abs", "exp": "exp", "exp2": "exp2", "expm1": "expm1",
    "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt",
    "square": "square", "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin",
    "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "round",
    "sign": "sign", "maximum": "maximum", "minimum": "minimum", "equal": "eq",
    "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "logical_not": "logical_not", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "invert": "bitwise_not", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "matmul": "matmul",
}


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


#: numpy function name -> adapter returning a Tensor (or NotImplemented to fall back)
FUNCTIONS = {
    "sum": _reduce("sum"), "mean": _reduce("mean"), "prod": _reduce("prod"),
    "max": _reduce("amax"), "amax": _reduce("amax"), "min": _reduce("amin"), "amin": _reduce("amin"),
    "argmax": _reduce("argmax"), "argmin": _reduce("argmin"), "all": _reduce("all"),
    "any": _reduce("any"), "var": _reduce("var", ddof=True), "std": _reduce("std", ddof=True),
    "concatenate": _fn("cat", lambda arrays, axis=0: ((list(arrays),), {"dim": axis})),
    "stack": _fn("stack", lambda arrays, axis=0: ((list(arrays),), {"dim": axis})),
    "reshape": _fn("reshape", lambda a, shape=None, newshape=None, **k: (
        (a, tuple(np.atleast_1d(shape if shape is not None else newshape).tolist())), {})),
    "transpose": _fn("permute", lambda a, axes=None: (
        (a, tuple(axes) if axes is not None else tuple(reversed(range(a.ndim)))), {})),
    "swapaxes": _fn("transpose", lambda a, axis1, axis2: ((a, axis1, axis2), {})),
    "squeeze": _fn("squeeze", lambda a, axis=None: ((a,) if axis is None else (a, axis), {})),
    "expand_dims": _fn("unsqueeze", lambda a, axis: ((a, axis), {})),
    "where": _fn("where", lambda c, x=None, y=None: ((c,) if x is None else (c, x, y), {})),
    "clip": _fn("clamp", lambda a, a_min=None, a_max=None, **k: ((a, a_min, a_max), {})),
    "matmul": _fn("matmul"),
    "dot": _fn("matmul", lambda a, b, out=None: ((a, b), {})),
    "einsum": _fn("einsum", lambda eq, *ops, **k: ((eq, *ops), {})),
    "tril": _fn("tril", lambda m, k=0: ((m, k), {})),
    "triu": _fn("triu", lambda m, k=0: ((m, k), {})),
    "broadcast_to": _fn("broadcast_to", lambda a, shape, **k: ((a, tuple(np.atleast_1d(shape).tolist())), {})),
    "flip": _fn("flip", lambda m, axis=None: ((m, tuple(range(m.ndim)) if axis is None else axis), {})),
    "cumsum": _fn("cumsum", lambda a, axis=None, dtype=None, out=None: (
        (a.reshape(-1) if axis is None else a, 0 if axis is None else axis), {})),
    "round": _fn("round", lambda a, decimals=0, out=None: ((a,), {"decimals": decimals})),
    "abs": _fn("abs"),
    "exp": _fn("exp"),
    "tanh": _fn("tanh"),
}


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
        import tensorplay as tp

        if hasattr(tp, _adapter_target(func.__name__)):
            try:
                result = adapter(*args, **kwargs)
            except TypeError:
                result = NotImplemented
            if result is not NotImplemented:
                return result
    why = f"{getattr(func, '__module__', None) or 'numpy'}.{func.__name__}() (no tp op)"
    return func(*_to_numpy(args, why), **_to_numpy(kwargs, why))


def _adapter_target(name: str) -> str:
    return {"max": "amax", "min": "amin", "concatenate": "cat", "transpose": "permute",
            "swapaxes": "transpose", "expand_dims": "unsqueeze", "clip": "clamp",
            "dot": "matmul"}.get(name, name)
