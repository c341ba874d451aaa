"""Automatic mixed precision: ``tp.autocast`` and the per-function cast policy.

Inside ``with tp.autocast("cpu", dtype=tp.bfloat16):`` the functions PyTorch lists as safe in
lower precision (matrix products, convolutions, ``linear``, attention) cast their floating
arguments to the autocast dtype, and the functions it lists as needing float32 (losses,
``prod``, ``cdist``, ...) cast theirs to float32; every other function runs in the dtypes it
is given. float64 arguments are never cast. The policy is PyTorch's per device type: ``cpu``
for host tensors and ``cuda`` (also used for ``hip`` and ``vulkan`` device tensors, whose
PyTorch counterparts follow the CUDA list).

The casts are ordinary ``tp.convert`` ops: they are differentiated like any other op and
captured into compiled graphs, and a compiled function is specialized to the autocast state
of its call (a guard, like grad mode).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from ..dialects.tp import dtypes as dt

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
           "custom_fwd", "custom_bwd", "policy", "state_key", "suspended"]

#: device types autocast accepts, and the autocast dtype each defaults to (PyTorch's)
DEVICE_TYPES = {"cpu": dt.bfloat16, "cuda": dt.float16, "hip": dt.float16, "vulkan": dt.float16}

#: the dtypes autocast can cast to
_LOW = (dt.float16, dt.bfloat16)


class _State(threading.local):
    #: device type -> autocast dtype, for the device types whose autocast is on
    on: dict[str, Any] | None = None
    #: the default dtype per device type (``set_autocast_dtype``)
    dtypes: dict[str, Any] | None = None
    #: > 0 inside a function that already applied the policy (and during backward)
    off: int = 0


_state = _State()


def _check_device_type(where: str, device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{where}: expected a device type string such as 'cpu' or 'cuda', "
                        f"got {type(device_type).__name__}")
    if device_type not in DEVICE_TYPES:
        raise ValueError(f"{where}: unsupported device type {device_type!r}; expected one of "
                         f"{', '.join(DEVICE_TYPES)}")
    return device_type


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype ``autocast(device_type)`` uses when none is given."""
    device_type = _check_device_type("get_autocast_dtype", device_type)
    chosen = (_state.dtypes or {}).get(device_type)
    return chosen if chosen is not None else DEVICE_TYPES[device_type]


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """Change the dtype ``autocast(device_type)`` uses when none is given."""
    device_type = _check_device_type("set_autocast_dtype", device_type)
    dtype = _check_dtype("set_autocast_dtype", device_type, dtype)
    _state.dtypes = {**(_state.dtypes or {}), device_type: dtype}


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (for any device type when None)."""
    on = _state.on or {}
    if device_type is None:
        return bool(on)
    return _check_device_type("is_autocast_enabled", device_type) in on


def _check_dtype(where: str, device_type: str, dtype: Any) -> Any:
    d = dt.as_dtype(dtype)
    if d not in _LOW:
        raise ValueError(f"{where}: autocast on {device_type!r} supports torch.bfloat16 and "
                         f"torch.float16, got {d}")
    return d


class autocast:  # noqa: N801 - PyTorch's spelling
    """``with tp.autocast(device_type, dtype=None, enabled=True, cache_enabled=None):`` runs
    the block with PyTorch's mixed-precision cast policy for ``device_type``; also a
    decorator. ``cache_enabled`` is accepted (casts are not cached: a cast of a weight is a
    new op each time, which a compiled graph merges)."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        self.device_type = _check_device_type("autocast", device_type)
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: expected 'enabled' to be a bool, got {type(enabled).__name__}")
        self.fast_dtype = (get_autocast_dtype(device_type) if dtype is None
                           else _check_dtype("autocast", device_type, dtype))
        self._enabled = enabled
        self._saved: list = []

    def __enter__(self) -> autocast:
        self._saved.append((_state.on, _state.off))
        on = dict(_state.on or {})
        if self._enabled:
            on[self.device_type] = self.fast_dtype
        else:
            on.pop(self.device_type, None)
        _state.on = on or None
        _state.off = 0
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.on, _state.off = self._saved.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return wrapper


class suspended:  # noqa: N801
    """Autocast off for the block (backward passes; the inside of a function that already
    applied the policy)."""

    def __enter__(self) -> None:
        _state.off += 1

    def __exit__(self, *exc: Any) -> None:
        _state.off -= 1


def state_key() -> tuple | None:
    """A hashable summary of the autocast state, for compiled code's guards."""
    on = _state.on
    if not on or _state.off:
        return None
    return tuple(sorted((k, v.name) for k, v in on.items()))


# --- the policy ---------------------------------------------------------------------------

def _device_type_of(args: tuple, kwargs: dict) -> str | None:
    from .._tensor import Tensor

    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            return a.device.type
    return None


def _cast(value: Any, target: Any) -> Any:
    from .._tensor import Tensor

    if isinstance(value, Tensor):
        d = value.dtype
        if d.is_floating_point and d != dt.float64 and d != target:
            return value.to(target)
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(_cast(v, target) for v in value)
    return value


#: function name -> "lower" or "fp32", per policy list (device type "cpu" or "cuda")
_LISTS: dict[str, dict[str, str]] = {"cpu": {}, "cuda": {}}


def policy(kind: str, *, cpu: bool = True, cuda: bool = True) -> Callable[[Callable], Callable]:
    """Decorate a frontend function with its autocast policy: ``"lower"`` (runs in the
    autocast dtype) or ``"fp32"`` (runs in float32), on the CPU list, the CUDA list or both."""
    if kind not in ("lower", "fp32"):
        raise ValueError(f"policy: kind must be 'lower' or 'fp32', got {kind!r}")

    def deco(fn: Callable) -> Callable:
        kinds = {"cpu": kind if cpu else None, "cuda": kind if cuda else None}
        for lst, k in kinds.items():
            if k is not None:
                _LISTS[lst][fn.__name__] = k

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            on = _state.on
            if not on or _state.off:
                return fn(*args, **kwargs)
            device_type = _device_type_of(args, kwargs)
            fast = on.get(device_type) if device_type is not None else None
            k = kinds["cpu" if device_type == "cpu" else "cuda"] if fast is not None else None
            if k is None:
                return fn(*args, **kwargs)
            target = fast if k == "lower" else dt.float32
            args = tuple(_cast(a, target) for a in args)
            kwargs = {n: _cast(v, target) for n, v in kwargs.items()}
            _state.off += 1
            try:
                return fn(*args, **kwargs)
            finally:
                _state.off -= 1

        return wrapper

    return deco


def policy_lists() -> dict[str, dict[str, str]]:
    """The functions with a cast policy, per list (for the docs and tests)."""
    return {k: dict(v) for k, v in _LISTS.items()}


# --- custom autograd functions --------------------------------------------------------------

def custom_fwd(fwd: Callable | None = None, *, device_type: str = "cuda",
               cast_inputs: Any = None) -> Callable:
    """Decorator for an ``autograd.Function``'s ``forward``: with ``cast_inputs``, floating
    arguments are cast to it and autocast is off inside, when autocast is on for
    ``device_type``."""
    _check_device_type("custom_fwd", device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if cast_inputs is None or not is_autocast_enabled(device_type) or _state.off:
            return fwd(*args, **kwargs)
        target = dt.as_dtype(cast_inputs)
        args = tuple(_cast(a, target) for a in args)
        kwargs = {n: _cast(v, target) for n, v in kwargs.items()}
        with suspended():
            return fwd(*args, **kwargs)

    return wrapper


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cuda") -> Callable:
    """Decorator for an ``autograd.Function``'s ``backward`` (backward runs with autocast
    off in tensorplay, so this only checks its argument)."""
    _check_device_type("custom_bwd", device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd
