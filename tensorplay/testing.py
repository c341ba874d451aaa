"""``tp.testing``: comparing tensors in tests.

:func:`assert_close` checks that two tensors (or numbers, or sequences and mappings of them)
have the same shape, dtype and device and values within a tolerance picked by dtype.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._tensor import Tensor
from .dialects.tp import dtypes as dt

__all__ = ["assert_close"]

#: (rtol, atol) used when neither is given, by dtype; exact for integers and bool.
_DEFAULT_TOLERANCES = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
}


def _tolerances(dtype: dt.DType) -> tuple[float, float]:
    return _DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def _fail(msg: Any, default: str, path: str) -> None:
    if msg is None:
        text = default
    elif callable(msg):
        text = msg(default)
    else:
        text = str(msg)
    if path:
        text = f"{text}\n\nThe failure occurred for item {path}"
    raise AssertionError(text)


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _compare_values(kind: str, a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool,
                    exact: bool, msg: Any, path: str) -> None:
    if exact:
        a64, e64 = a.astype(np.int64), e.astype(np.int64)
        close = a64 == e64
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close = (a64 == e64) | (np.isfinite(a64) & np.isfinite(e64) & (np.abs(a64 - e64) <= atol + rtol * np.abs(e64)))
        if equal_nan:
            close |= np.isnan(a64) & np.isnan(e64)
    if close.all():
        return
    total = close.size
    bad = int(total - np.count_nonzero(close))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(a64.astype(np.float64) - e64.astype(np.float64))
        rel = diff / np.abs(e64.astype(np.float64))
    diff = np.where(close, 0.0, np.where(np.isnan(diff), np.inf, diff))
    rel = np.where(close, 0.0, np.where(np.isnan(rel), np.inf, rel))
    shape = a.shape
    if total == 1 and not shape:
        lines = [f"{kind} are not close!", "",
                 f"Absolute difference: {float(diff.reshape(()))} (up to {atol} allowed)",
                 f"Relative difference: {float(rel.reshape(()))} (up to {rtol} allowed)"]
    else:
        ia, ir = int(np.argmax(diff)), int(np.argmax(rel))
        lines = [f"{kind} are not close!", "",
                 f"Mismatched elements: {bad} / {total} ({100.0 * bad / total:.1f}%)",
                 (f"Greatest absolute difference: {diff.reshape(-1)[ia]} at index {_index(ia, shape)} "
                  f"(up to {atol} allowed)"),
                 (f"Greatest relative difference: {rel.reshape(-1)[ir]} at index {_index(ir, shape)} "
                  f"(up to {rtol} allowed)")]
    _fail(msg, "\n".join(lines), path)


def _compare_tensors(actual: Tensor, expected: Tensor, rtol: float | None, atol: float | None, equal_nan: bool,
                     check_device: bool, check_dtype: bool, check_stride: bool, msg: Any, path: str) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        _fail(msg, f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.", path)
    if check_device and actual.device != expected.device:
        _fail(msg, f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.", path)
    if check_dtype and actual.dtype is not expected.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.", path)
    if check_stride and actual.stride() != expected.stride():
        _fail(msg, f"The values for attribute 'stride()' do not match: {actual.stride()} != {expected.stride()}.",
              path)
    dtype = actual.dtype if actual.dtype is expected.dtype else dt.promote_types(actual.dtype, expected.dtype)
    default_rtol, default_atol = _tolerances(dtype)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a = np.asarray(actual.detach().cpu())
    e = np.asarray(expected.detach().cpu())
    exact = not dtype.is_floating_point and rtol == 0 and atol == 0
    _compare_values("Tensor-likes", a, e, rtol, atol, equal_nan, exact, msg, path)


def _is_number(value: Any) -> builtins.bool:
    return isinstance(value, (builtins.bool, builtins.int, builtins.float, np.bool_, np.integer, np.floating))


def _compare(actual: Any, expected: Any, rtol: float | None, atol: float | None, equal_nan: bool,
             check_device: bool, check_dtype: bool, check_stride: bool, msg: Any, path: str) -> None:
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, path)
        return
    if _is_number(actual) and _is_number(expected):
        if check_dtype and type(actual) is not type(expected):
            _fail(msg, f"The values for attribute 'type' do not match: {type(actual).__name__} != "
                       f"{type(expected).__name__}.", path)
        floating = isinstance(actual, (builtins.float, np.floating)) or isinstance(expected, (builtins.float, np.floating))
        default_rtol, default_atol = _tolerances(dt.float64) if floating else (0.0, 0.0)
        r = default_rtol if rtol is None else rtol
        t = default_atol if atol is None else atol
        exact = not floating and r == 0 and t == 0
        if not exact and (math.isinf(float(actual)) or math.isinf(float(expected))) and actual == expected:
            return
        _compare_values("Scalars", np.asarray(actual), np.asarray(expected), r, t, equal_nan, exact, msg, path)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(msg, f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                       f"{sorted(map(str, expected))}.", path)
        for key in actual:
            _compare(actual[key], expected[key], rtol, atol, equal_nan, check_device, check_dtype, check_stride,
                     msg, f"{path}[{key!r}]")
        return
    if (isinstance(actual, Sequence) and isinstance(expected, Sequence)
            and not isinstance(actual, str) and not isinstance(expected, str)):
        if len(actual) != len(expected):
            _fail(msg, f"The length of the sequences do not match: {len(actual)} != {len(expected)}.", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, f"{path}[{i}]")
        return
    raise TypeError(f"assert_close(): cannot compare {type(actual).__name__} with {type(expected).__name__}: "
                    f"expected two tensors, two numbers, or sequences or mappings of them"
                    + (f" (at item {path})" if path else ""))


def assert_close(actual: Any, expected: Any, *, allow_subclasses: builtins.bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: builtins.bool = False, check_device: builtins.bool = True,
                 check_dtype: builtins.bool = True, check_layout: builtins.bool = True,
                 check_stride: builtins.bool = False, msg: Any = None) -> None:
    """Raise AssertionError unless ``actual`` and ``expected`` are close: equal shapes (and
    devices and dtypes, unless ``check_device``/``check_dtype`` is False) and, elementwise,
    ``|actual - expected| <= atol + rtol * |expected|`` (infinities must be equal; NaN only
    matches NaN with ``equal_nan``; strides are compared with ``check_stride``). Without ``rtol`` and ``atol`` the tolerances are the
    dtype's defaults (exact for integers and bool); give both or neither. Sequences and
    mappings are compared item by item. ``msg`` (a string, or a callable given the default
    message) replaces the message."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"assert_close(): both 'rtol' and 'atol' must be given, or neither; got "
                         f"{'rtol' if atol is None else 'atol'} only")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, "")
