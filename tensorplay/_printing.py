"""``repr`` of tensors in PyTorch's format: 4 decimals, ``1.`` for integral floats,
scientific notation for wide ranges, column alignment, wrapping at 80 columns and
summarizing tensors of more than 1000 elements."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .dialects.tp import dtypes as dt
from . import _views

__all__ = ["tensor_repr", "set_printoptions"]

_OPTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     sci_mode: bool | None = None) -> None:
    """Set how tensors print (same options as ``torch.set_printoptions``)."""
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTS[key] = value
    _OPTS["sci_mode"] = sci_mode


class _Formatter:
    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        prec = _OPTS["precision"]
        if values.size == 0:
            return
        if not self.floating:
            self.width = max(len(self._plain(v)) for v in values.reshape(-1))
            return
        finite = values[np.isfinite(values)]
        nonzero = np.abs(finite[finite != 0]).astype(np.float64)
        if nonzero.size:
            lo, hi = nonzero.min(), nonzero.max()
            if np.all(nonzero == np.ceil(nonzero)):
                self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
            else:
                self.int_mode = False
                self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if _OPTS["sci_mode"] is not None:
            self.sci_mode = _OPTS["sci_mode"]
        self.prec = prec
        self.width = max(len(self.format_raw(float(v))) for v in values.reshape(-1))

    @staticmethod
    def _plain(v: Any) -> str:
        if isinstance(v, (np.bool_, bool)):
            return "True" if v else "False"
        return str(v)

    def format_raw(self, v: Any) -> str:
        if not self.floating:
            return self._plain(v)
        v = float(v)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if self.sci_mode:
            return f"{v:.{self.prec}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{self.prec}f}"

    def format(self, v: Any) -> str:
        return self.format_raw(v).rjust(self.width)


def _summarized_values(a: np.ndarray, edge: int) -> np.ndarray:
    """The elements that a summarized print shows (edges of every dimension)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * edge:
        parts = [a[:edge], a[-edge:]]
    else:
        parts = [a]
    return np.concatenate([_summarized_values(p[i], edge) if p.ndim > 1 else p[i:i + 1]
                           for p in parts for i in range(p.shape[0])]) if a.shape[0] else a.reshape(-1)


def _vector(a: np.ndarray, fmt: _Formatter, indent: int, summarize: bool) -> str:
    edge = _OPTS["edgeitems"]
    element_length = fmt.width + 2
    per_line = max(1, int(math.floor((_OPTS["linewidth"] - indent) / element_length)))
    if summarize and a.shape[0] > 2 * edge:
        items = [fmt.format(v) for v in a[:edge]] + [" ..."] + [fmt.format(v) for v in a[-edge:]]
    else:
        items = [fmt.format(v) for v in a]
    lines = [items[i:i + per_line] for i in range(0, len(items), per_line)]
    body = (",\n" + " " * (indent + 1)).join(", ".join(line) for line in lines)
    return "[" + body + "]"


def _nested(a: np.ndarray, fmt: _Formatter, indent: int, summarize: bool) -> str:
    if a.ndim == 0:
        return fmt.format(a.reshape(()).item() if fmt.floating else a.reshape(())[()])
    if a.ndim == 1:
        return _vector(a, fmt, indent, summarize)
    edge = _OPTS["edgeitems"]
    if summarize and a.shape[0] > 2 * edge:
        rows = ([_nested(a[i], fmt, indent + 1, summarize) for i in range(edge)] + ["..."]
                + [_nested(a[i], fmt, indent + 1, summarize) for i in range(a.shape[0] - edge, a.shape[0])])
    else:
        rows = [_nested(a[i], fmt, indent + 1, summarize) for i in range(a.shape[0])]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def tensor_repr(t: Any, prefix: str = "tensor(") -> str:
    from ._tensor import Tensor

    assert isinstance(t, Tensor)
    if not _views.has_memory(t):
        return f"{prefix}<captured {t._tensor_type()}>)"
    a = t._concrete("print(tensor)")  # a device tensor's values are copied to the host
    dtype = dt.from_numpy_dtype(a.dtype)
    if dtype in (dt.float16, dt.bfloat16):
        a = a.astype(np.float32)
    suffixes = []
    summarize = a.size > _OPTS["threshold"]
    if a.size == 0:
        body = "[]"
        if a.shape != (0,):
            suffixes.append(f"size=({', '.join(map(str, a.shape))}{',' if a.ndim == 1 else ''})")
    else:
        shown = _summarized_values(a, _OPTS["edgeitems"]) if summarize else a
        fmt = _Formatter(np.asarray(shown))
        body = _nested(a, fmt, len(prefix), summarize)
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if dtype not in (dt.get_default_dtype(), dt.int64, dt.bool_):
        suffixes.append(f"dtype={dtype!r}")
    fn = getattr(t, "_grad_fn", None)
    if fn is not None:
        suffixes.append(f"grad_fn=<{fn.name()}>")
    elif getattr(t, "requires_grad", False):
        suffixes.append("requires_grad=True")
    text = prefix + body
    for s in suffixes:
        text += ", " + s
    return text + ")"
