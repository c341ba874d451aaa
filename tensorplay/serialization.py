"""``tp.save`` and ``tp.load``: checkpoints (state_dicts of models and optimizers) in a format
that loading cannot run code from.

A file is a zip archive (docs/training.md#checkpoints) holding

- ``tensorplay.json``: ``{"format": "tensorplay-checkpoint", "version": 1, "root": <value>}``
  where a value is JSON (null, bool, int, float, string, list), or an object tagged by
  ``"$"``: ``{"$": "tensor", "id": i, "dtype": "float32", "shape": [...],
  "requires_grad": false}``, ``{"$": "dict", "items": [[key, value], ...]}`` (keys may be
  ints, as optimizer state is), ``{"$": "tuple", "items": [...]}``, and
  ``{"$": "float", "value": "nan" | "inf" | "-inf"}``;
- ``tensors/<i>.npy``: each tensor's values (numpy's .npy format, read with
  ``allow_pickle=False``; bfloat16 as its uint16 bits).

Anything else (arbitrary Python objects) is refused at save time with a TypeError.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

__all__ = ["save", "load"]

_FORMAT = "tensorplay-checkpoint"


def _encode(obj: Any, arrays: list[np.ndarray], where: str) -> Any:
    from ._tensor import Tensor
    from .dialects.tp import dtypes as dt

    if isinstance(obj, Tensor):
        data = obj.detach().cpu()._concrete("tp.save")
        dtype = obj.dtype
        arrays.append(np.array(data.view(np.uint16) if dtype is dt.bfloat16 else data, order="C"))  # (0-d stays 0-d)
        return {"$": "tensor", "id": len(arrays) - 1, "dtype": dtype.name, "shape": list(data.shape),
                "requires_grad": bool(obj.requires_grad)}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"tp.save: {where} has a key of type {type(k).__name__}; keys must be str or int")
            items.append([k, _encode(v, arrays, f"{where}[{k!r}]")])
        return {"$": "dict", "items": items}
    if isinstance(obj, tuple):
        return {"$": "tuple", "items": [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
    if hasattr(obj, "detach") and hasattr(obj, "cpu") and hasattr(obj, "numpy"):  # a PyTorch tensor
        from .ops.creation import tensor

        return _encode(tensor(obj.detach().cpu().float().numpy() if str(obj.dtype) == "torch.bfloat16"
                              else obj.detach().cpu().numpy()), arrays, where)
    raise TypeError(f"tp.save: {where} is a {type(obj).__name__}; checkpoints hold tensors, numbers, strings, "
                    f"None, and lists, tuples and dicts of them (save a state_dict(), not the object)")


def save(obj: Any, f: Any) -> None:
    """Write ``obj`` (a state_dict, or nested dicts/lists/tuples of tensors and plain values)
    to ``f``, a path or a binary file object. A path is written atomically."""
    arrays: list[np.ndarray] = []
    root = _encode(obj, arrays, "the object")
    meta = json.dumps({"format": _FORMAT, "version": 1, "root": root})
    if hasattr(f, "write"):
        _write(f, meta, arrays)
        return
    path = os.fspath(f)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tp-save-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, meta, arrays)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write(out: Any, meta: str, arrays: list[np.ndarray]) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("tensorplay.json", meta)
        for i, a in enumerate(arrays):
            buf = io.BytesIO()
            np.save(buf, a, allow_pickle=False)
            z.writestr(f"tensors/{i}.npy", buf.getvalue())


def _decode(obj: Any, z: zipfile.ZipFile, device: Any) -> Any:
    from ._tensor import Tensor
    from .dialects.tp import dtypes as dt

    if isinstance(obj, list):
        return [_decode(v, z, device) for v in obj]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get("$")
    if tag == "dict":
        return {k: _decode(v, z, device) for k, v in obj["items"]}
    if tag == "tuple":
        return tuple(_decode(v, z, device) for v in obj["items"])
    if tag == "float":
        return float(obj["value"])
    if tag == "tensor":
        with z.open(f"tensors/{int(obj['id'])}.npy") as fh:
            data = np.load(io.BytesIO(fh.read()), allow_pickle=False)
        dtype = dt.as_dtype(obj["dtype"])
        if dtype is dt.bfloat16:
            data = data.view(dt.bfloat16.np_dtype)
        if list(data.shape) != list(obj["shape"]) or (dtype is not dt.bfloat16 and data.dtype != dtype.np_dtype):
            raise ValueError(f"tp.load: tensor {obj['id']} holds {data.dtype}{list(data.shape)}, the index says "
                             f"{obj['dtype']}{obj['shape']}: the file was changed or truncated")
        t = Tensor._wrap(data)
        if device is not None:
            t = t.to(device)
        if obj.get("requires_grad"):
            t.requires_grad_(True)
        return t
    raise ValueError(f"tp.load: unknown entry {str(obj)[:80]}: not a checkpoint of this version")


def load(f: Any, map_location: Any = None, weights_only: bool = True, **kwargs: Any) -> Any:
    """Read what :func:`save` wrote (a path or binary file object). ``map_location`` (a
    device or its name) places the tensors; loading never runs code from the file, so
    ``weights_only=False`` changes nothing."""
    try:
        z = zipfile.ZipFile(f if hasattr(f, "read") else os.fspath(f))
    except zipfile.BadZipFile:
        if not hasattr(f, "read") and os.fspath(f).endswith(".safetensors"):
            raise ValueError(f"tp.load: {f!r} is a safetensors file, not a tensorplay checkpoint: read it "
                             f"with tensorplay.safetensors.load_file") from None
        raise ValueError(f"tp.load: {f!r} is not a tensorplay checkpoint (not a zip archive; PyTorch's pickled "
                         f"files are not read, for safety: load them with torch and pass the state_dict)") from None
    with z:
        try:
            meta = json.loads(z.read("tensorplay.json"))
        except KeyError:
            raise ValueError(f"tp.load: {f!r} is a zip archive without tensorplay.json: not a tensorplay "
                             f"checkpoint") from None
        if meta.get("format") != _FORMAT or meta.get("version") != 1:
            raise ValueError(f"tp.load: {f!r} has format {meta.get('format')!r} version {meta.get('version')!r}; "
                             f"this tensorplay reads {_FORMAT!r} version 1")
        device = map_location if map_location not in (None, "cpu") else None
        return _decode(meta["root"], z, device)
