"""The one table of op test cases, shared by every op test.

Each :class:`OpInfo` describes a frontend function by a lambda over the library module
(``lambda lib, x, y: lib.add(x, y)``), so the same case runs on tensorplay and, where
installed, on PyTorch; ``ref`` computes the expectation independently with numpy.
Family modules (``elementwise.py``, ``reduction.py``, ...) each define ``OPS``; this
module gathers them into :data:`ALL`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

import tensorplay as tp

__all__ = ["OpInfo", "Sample", "ErrorCase", "RecordedCall", "record_calls", "ALL", "ERRORS", "TOLERANCE", "tolerance", "make_arg",
           "FLOATS", "INTS", "ALL_DTYPES", "NUMERIC", "to_lib", "to_numpy"]

FLOATS = (tp.float32, tp.float64, tp.float16, tp.bfloat16)
INTS = (tp.int8, tp.int32, tp.int64)
NUMERIC = FLOATS + INTS
ALL_DTYPES = NUMERIC + (tp.bool,)

#: (rtol, atol) per dtype for comparing against numpy or PyTorch.
TOLERANCE = {
    tp.float64: (1e-7, 1e-7),
    tp.float32: (1.3e-5, 1e-5),
    tp.float16: (1e-3, 1e-3),
    tp.bfloat16: (1.6e-2, 1e-2),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    return TOLERANCE.get(dtype, (0.0, 0.0))


@dataclass
class Sample:
    """Arguments for one call: arrays become tensors of the library under test; other
    values (numbers, tuples, strings) pass through unchanged."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    desc: str = ""


@dataclass
class OpInfo:
    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any] | None
    samples: Callable[[np.random.Generator, Any], Sequence[Sample]]
    dtypes: tuple[Any, ...] = FLOATS
    #: extra (rtol, atol) per dtype where the op's numerics need more room
    tol: dict[Any, tuple[float, float]] = field(default_factory=dict)
    #: PyTorch does not implement this case for these dtypes (compared with numpy only)
    torch_skip_dtypes: tuple[Any, ...] = ()
    #: the result is random or otherwise not comparable by value
    compare_values: bool = True

    def tolerance(self, dtype: Any) -> tuple[float, float]:
        return self.tol.get(dtype, tolerance(dtype))


@dataclass
class ErrorCase:
    """A call that must fail with ``exc`` and a message matching ``match`` (regex)."""

    name: str
    fn: Callable[[Any], Any]
    exc: type[BaseException] | tuple[type[BaseException], ...]
    match: str


def make_arg(rng: np.random.Generator, shape: Sequence[int], dtype: Any, *, low: float | None = None,
             high: float | None = None) -> np.ndarray:
    """Random numpy data of a tensorplay dtype: floats in [low, high) (default [-3, 3)),
    ints in [low, high) (default [-9, 10)), bools half true."""
    shape = tuple(shape)
    if dtype is tp.bool:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.is_integer:
        lo = -9 if low is None else int(low)
        hi = 10 if high is None else int(high)
        if not dtype.is_signed:
            lo = max(lo, 0)
        return np.asarray(rng.integers(lo, hi, size=shape)).astype(dtype.np_dtype)
    lo = -3.0 if low is None else low
    hi = 3.0 if high is None else high
    return np.asarray(rng.uniform(lo, hi, size=shape)).astype(dtype.np_dtype)


def to_lib(lib: Any, value: Any) -> Any:
    """Numpy arrays as tensors of ``lib`` (tensorplay or torch); containers recursively."""
    if isinstance(value, np.ndarray):
        if lib is tp:
            return tp.tensor(value)
        if value.dtype == ml_dtypes.bfloat16:
            return lib.tensor(value.astype(np.float32)).to(lib.bfloat16)
        return lib.from_numpy(np.array(value, copy=True, order="C"))
    if isinstance(value, (list, tuple)) and any(isinstance(v, np.ndarray) for v in value):
        return type(value)(to_lib(lib, v) for v in value)
    return value


def to_numpy(value: Any) -> Any:
    """Results of either library as numpy (float32 for bfloat16), recursively."""
    if isinstance(value, tp.Tensor):
        a = value.detach().numpy()
        return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a
    if type(value).__module__.startswith("torch"):
        if hasattr(value, "detach"):
            v = value.detach()
            if str(v.dtype) == "torch.bfloat16":
                v = v.float()
            return v.detach().numpy()
    if isinstance(value, (list, tuple)):
        return type(value)(to_numpy(v) for v in value) if not hasattr(value, "_fields") else \
            tuple(to_numpy(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == ml_dtypes.bfloat16:
        return value.astype(np.float32)
    return value


def _gather() -> tuple[list[OpInfo], list[ErrorCase]]:
    import importlib
    import pkgutil

    ops: list[OpInfo] = []
    errors: list[ErrorCase] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        ops.extend(getattr(module, "OPS", ()))
        errors.extend(getattr(module, "ERRORS", ()))
    return ops, errors


ALL, ERRORS = _gather()
del math


@dataclass
class RecordedCall:
    """One application of a tp op made by the table: the op, its operands (numpy arrays,
    ``None`` for absent optional ones), normalized attributes and inferred result types."""

    op: Any
    operands: list[Any]
    attrs: dict[str, Any]
    result_types: tuple[Any, ...]

    @property
    def types(self) -> list[Any]:
        from tensorplay.dialects.tp.types import type_of_array

        return [None if a is None else type_of_array(a) for a in self.operands]


def record_calls(infos: Sequence[OpInfo] | None = None) -> list[RecordedCall]:
    """Every distinct tp op application the table's cases make (deduplicated by op, operand
    types and attributes; the first operands seen are kept)."""
    from tensorplay._dispatch import capture_handler

    calls: dict[tuple, RecordedCall] = {}

    def record(op, operands, attrs, result_types):
        arrays = [None if o is None else o._data for o in operands]
        types = tuple(None if a is None else (a.shape, str(a.dtype)) for a in arrays)
        key = (op.name, types, repr(sorted((k, repr(v)) for k, v in attrs.items())))
        if key not in calls:
            calls[key] = RecordedCall(op, [None if a is None else a.copy() for a in arrays],
                                      dict(attrs), tuple(result_types))
        return NotImplemented

    import warnings

    with capture_handler(record), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in (ALL if infos is None else infos):
            for dtype in info.dtypes:
                rng = np.random.default_rng(zlib.crc32(f"{info.name}-{dtype.name}".encode()))
                for sample in info.samples(rng, dtype):
                    try:
                        info.fn(tp, *to_lib(tp, sample.args), **sample.kwargs)
                    except Exception:  # noqa: BLE001 - error cases are tested elsewhere
                        pass
    return list(calls.values())
