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
import zlib
from typing import Any

import numpy as np

from .runtime.file_kinds import describe_kind, file_kind, head_bytes

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


# -- loading --------------------------------------------------------------------------------------

class _Damaged(Exception):
    """A problem found while reading a checkpoint, turned into the ValueError of ``load``."""


def _tensor_member(z: zipfile.ZipFile, obj: dict, where: str) -> np.ndarray:
    """The array of a tensor entry, checked against the index before its data is read; a
    pickled (object) array is refused from its header, so nothing in it is unpickled."""
    from .dialects.tp import dtypes as dt

    tid, dtype_name, shape = obj.get("id"), obj.get("dtype"), obj.get("shape")
    if type(tid) is not int or tid < 0:
        raise _Damaged(f"the tensor at {where} has id {tid!r}; ids are non-negative ints")
    if not isinstance(dtype_name, str) or dtype_name not in {d.name for d in dt.ALL_DTYPES}:
        names = ", ".join(d.name for d in dt.ALL_DTYPES)
        raise _Damaged(f"the tensor at {where} has dtype {dtype_name!r}, which is no tensorplay dtype ({names})")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise _Damaged(f"the tensor at {where} has shape {shape!r}; a shape is a list of non-negative ints")
    if not isinstance(obj.get("requires_grad", False), bool):
        raise _Damaged(f"the tensor at {where} has requires_grad {obj.get('requires_grad')!r}, not true or false")
    dtype = dt.as_dtype(dtype_name)
    stored = np.dtype(np.uint16) if dtype is dt.bfloat16 else np.dtype(dtype.np_dtype)
    member = f"tensors/{tid}.npy"
    try:
        info = z.getinfo(member)
    except KeyError:
        raise _Damaged(f"the tensor at {where} is tensor {tid}, but the archive has no {member}: the file was "
                       f"written incompletely or edited") from None
    nbytes = int(np.prod(shape, dtype=object)) * stored.itemsize
    if info.file_size > nbytes + 65536:  # a .npy header is at most 64 KiB
        raise _Damaged(f"{member} (the tensor at {where}) is {info.file_size} bytes, far more than its "
                       f"{dtype_name}{shape} needs ({nbytes} bytes): the file was edited")
    with z.open(info) as fh:
        raw = fh.read()
    if not raw.startswith(b"\x93NUMPY"):
        raise _Damaged(f"{member} (the tensor at {where}) is not a .npy array (it does not start with the "
                       f".npy magic bytes)")
    buf = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(buf)
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)(buf)  # a literal dict: nothing is run
    except Exception:  # numpy's parse of a damaged header fails in many ways (tokenize, ast, EOF)
        raise _Damaged(f"{member} (the tensor at {where}) has a .npy header that is truncated or not the "
                       f"format's dict of descr, fortran_order and shape") from None
    shape_read, fortran, dtype_read = header
    if dtype_read.hasobject:
        raise _Damaged(f"{member} (the tensor at {where}) holds pickled Python objects (dtype {dtype_read}), "
                       f"which tp.load never unpickles (that could run code from the file); tp.save never "
                       f"writes them, so the file is not one it wrote")
    if list(shape_read) != shape or dtype_read != stored:
        raise _Damaged(f"tensor {tid} holds {dtype_read}{list(shape_read)}, the index says {dtype_name}{shape}: "
                       f"the file was changed")
    if len(raw) - buf.tell() != nbytes:
        raise _Damaged(f"{member} (the tensor at {where}) has {len(raw) - buf.tell()} bytes of data, its "
                       f"{dtype_name}{shape} needs {nbytes}: the file is truncated or was changed")
    data = np.frombuffer(raw, dtype=stored, count=int(np.prod(shape, dtype=np.int64)), offset=buf.tell())
    data = data.reshape(shape, order="F" if fortran else "C").copy()  # writable, and not the zip's buffer
    return data.view(dt.bfloat16.np_dtype) if dtype is dt.bfloat16 else data


def _decode(obj: Any, z: zipfile.ZipFile, device: Any, where: str = "root") -> Any:
    from ._tensor import Tensor

    if isinstance(obj, list):
        return [_decode(v, z, device, f"{where}[{i}]") for i, v in enumerate(obj)]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get("$")
    if tag in ("dict", "tuple"):
        items = obj.get("items")
        if not isinstance(items, list):
            raise _Damaged(f"the {tag} at {where} has items {str(items)[:60]}, not a list")
    if tag == "dict":
        out = {}
        for item in items:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool)):
                raise _Damaged(f"the dict at {where} has an item {str(item)[:60]}; items are [key, value] "
                               f"pairs with str or int keys")
            out[item[0]] = _decode(item[1], z, device, f"{where}[{item[0]!r}]")
        return out
    if tag == "tuple":
        return tuple(_decode(v, z, device, f"{where}[{i}]") for i, v in enumerate(items))
    if tag == "float":
        if obj.get("value") not in ("nan", "inf", "-inf"):
            raise _Damaged(f"the float at {where} has value {str(obj.get('value'))[:40]!r}; only 'nan', 'inf' "
                           f"and '-inf' are stored this way")
        return float(obj["value"])
    if tag == "tensor":
        t = Tensor._wrap(_tensor_member(z, obj, where))
        if device is not None:
            t = t.to(device)
        if obj.get("requires_grad"):
            t.requires_grad_(True)
        return t
    raise _Damaged(f"unknown entry {str(obj)[:80]} at {where}: not a checkpoint of this version")


def _refuse(label: str, problem: str, fix: str = "save it again with tp.save") -> ValueError:
    return ValueError(f"tp.load: {label} {problem}; {fix}")


def load(f: Any, map_location: Any = None, weights_only: bool = True, **kwargs: Any) -> Any:
    """Read what :func:`save` wrote (a path or binary file object). ``map_location`` (a
    device or its name) places the tensors; loading never runs code from the file, so
    ``weights_only=False`` changes nothing.

    A file that is not a checkpoint tp.save wrote, or one that is damaged, is a ValueError
    naming the file and what is wrong with it (FileNotFoundError for a missing path)."""
    if hasattr(f, "read"):
        label = repr(getattr(f, "name", None) or "the file object")
        source = f
    else:
        source = os.fspath(f)
        label = repr(source)
        if not os.path.exists(source):
            raise FileNotFoundError(f"tp.load: no such file: {label}")
        if os.path.isdir(source):
            raise IsADirectoryError(f"tp.load: {label} is a folder; pass the checkpoint file tp.save wrote")
    head = head_bytes(source)
    if not head:
        raise _refuse(label, "is empty (0 bytes): it was not written completely")
    kind = file_kind(source)
    if kind is not None and kind != "checkpoint":
        what, how = describe_kind(kind)
        raise _refuse(label, f"is {what}, not a tensorplay checkpoint", how)
    try:
        z = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError):
        if head[:4] == b"PK\x03\x04":
            raise _refuse(label, "is a zip archive that is truncated or damaged (its directory at the end is "
                                 "missing or unreadable)") from None
        raise _refuse(label, "is not a tensorplay checkpoint (not a zip archive)",
                      "tp.load reads only files tp.save wrote") from None
    with z:
        try:
            if "tensorplay.json" not in z.namelist():
                raise _refuse(label, "is a zip archive without tensorplay.json: not a tensorplay checkpoint",
                              "tp.load reads only files tp.save wrote")
            try:
                meta = json.loads(z.read("tensorplay.json"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                problem = (f"{e.msg} at character {e.pos}" if isinstance(e, json.JSONDecodeError)
                           else "nested too deeply" if isinstance(e, RecursionError) else "not UTF-8 text")
                raise _refuse(label, f"has a tensorplay.json that is not valid JSON ({problem}): the file was "
                                     f"edited or damaged") from None
            if not isinstance(meta, dict) or "root" not in meta:
                raise _refuse(label, f"has a tensorplay.json that is not a checkpoint index (an object with "
                                     f"format, version and root); it holds {str(meta)[:60]}")
            if meta.get("format") != _FORMAT or meta.get("version") != 1:
                raise _refuse(label, f"has format {meta.get('format')!r} version {meta.get('version')!r}; this "
                                     f"tensorplay reads {_FORMAT!r} version 1", "save it with this tensorplay")
            device = map_location if map_location not in (None, "cpu") else None
            try:
                return _decode(meta["root"], z, device)
            except _Damaged as e:
                raise _refuse(label, f"is damaged: {e}") from None
            except RecursionError:
                raise _refuse(label, "nests its values too deeply to be a checkpoint tp.save wrote") from None
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:  # a member's CRC or data
            detail = str(e) if isinstance(e, (zipfile.BadZipFile, NotImplementedError)) else type(e).__name__
            raise _refuse(label, f"is a damaged zip archive ({detail})") from None
