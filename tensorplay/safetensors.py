"""``tensorplay.safetensors``: dicts of tensors (a model's ``state_dict()``) in the
safetensors format, with the names and signatures of ``safetensors.torch``:
:func:`save_file`, :func:`load_file`, :func:`save` and :func:`load`.

The files are the ones PyTorch's ``safetensors.torch`` writes and reads (and the Hugging Face
Hub hosts): a JSON header naming each tensor's dtype, shape and byte range, then the raw
little-endian data. Loading runs no code from the file. Reading and writing go through the
``safetensors`` package's numpy API, an optional dependency:
``pip install 'tensorplay[weights]'``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["save_file", "load_file", "save", "load"]

_EXTRA = "pip install 'tensorplay[weights]' (or: pip install safetensors)"


def _backend(fn: str) -> Any:
    """The ``safetensors`` package, or an ImportError saying how to install it."""
    try:
        import safetensors
        import safetensors.numpy  # noqa: F401
    except ImportError as e:
        raise ImportError(f"tensorplay.safetensors.{fn} needs the safetensors package, which is "
                          f"not installed: {_EXTRA}") from e
    return safetensors


def _arrays(tensors: Any, fn: str) -> dict[str, np.ndarray]:
    """Host arrays (C order, dtype kept, bfloat16 as ml_dtypes.bfloat16) of a str -> tensor dict."""
    from ._tensor import Tensor

    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensorplay.safetensors.{fn}: expected a dict of name -> tensor (such as a "
                        f"state_dict()), got {type(tensors).__name__}")
    out: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensorplay.safetensors.{fn}: keys must be str, got {name!r} of type "
                            f"{type(name).__name__}")
        if isinstance(value, Tensor):
            data = value.detach().cpu()._concrete(f"tensorplay.safetensors.{fn}")
        elif isinstance(value, np.ndarray):
            data = value
        else:
            raise TypeError(f"tensorplay.safetensors.{fn}: {name!r} is a {type(value).__name__}; the "
                            f"values must be tensors")
        out[name] = np.asarray(data, order="C")
    return out


def _check_metadata(metadata: Any, fn: str) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError(f"tensorplay.safetensors.{fn}: metadata must be a dict of str to str, got "
                        f"{metadata!r}")


def _tensors(arrays: Mapping[str, np.ndarray], device: Any, fn: str) -> dict[str, Any]:
    from .ops.creation import tensor

    out = {}
    for name, array in arrays.items():
        try:
            t = tensor(array)  # a copy: the file's buffer is not kept
        except TypeError as e:
            raise TypeError(f"tensorplay.safetensors.{fn}: tensor {name!r} has dtype {array.dtype}, "
                            f"which tensorplay has no dtype for ({e})") from None
        if device is not None and str(device) != "cpu":
            t = t.to(device)
        out[name] = t
    return out


# -- reading: the header is checked here first, so that a damaged file gets a message that says
#    what is wrong with it (the package's errors name no file and no fix)

#: bits per element of every dtype the safetensors format defines
_FORMAT_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
                "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16,
                "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
_MAX_HEADER = 100_000_000  # the format's limit on the JSON header's size

_REWRITE = "The file is truncated or damaged: download or save it again"


class _Invalid(Exception):
    """What is wrong with a file, and (optionally) how to fix it, for the caller's ValueError."""

    def __init__(self, problem: str, fix: str = _REWRITE):
        super().__init__(f"{problem}. {fix}" if fix else f"{problem}.")


def _header_entries(header: bytes, size: int) -> dict[str, dict]:
    """The tensor entries of a safetensors header (JSON ``header`` of a file of ``size``
    bytes), each checked: a known dtype, a shape of non-negative ints, data offsets that
    fit the dtype and shape, and tensors that tile the data section exactly."""
    n = len(header)
    try:
        index = json.loads(header.decode("utf-8"))
    except UnicodeDecodeError:
        raise _Invalid(f"its {n}-byte header is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise _Invalid(f"its {n}-byte header is not valid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise _Invalid(f"its {n}-byte header nests JSON too deeply") from None
    if not isinstance(index, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(index))
        raise _Invalid(f"its header is a JSON {kind or 'null'}, not an object naming each tensor")
    meta = index.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise _Invalid(f"its __metadata__ is {str(meta)[:80]}, not an object of strings")
    data_size = size - 8 - n
    spans = []
    for name, entry in index.items():
        what = f"tensor {name!r}"
        if not isinstance(entry, dict):
            raise _Invalid(f"{what} is described by {str(entry)[:80]}, not an object with dtype, shape and "
                           f"data_offsets")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in _FORMAT_BITS:
            raise _Invalid(f"{what} has dtype {str(dtype)[:40]!r}, which is no safetensors dtype (one of "
                           f"{', '.join(_FORMAT_BITS)})")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise _Invalid(f"{what} has shape {str(shape)[:80]}; a shape is a list of non-negative ints")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise _Invalid(f"{what} has data_offsets {str(offsets)[:80]}; they are [begin, end] byte offsets "
                           f"into the data, with 0 <= begin <= end")
        begin, end = offsets
        if end > data_size:
            raise _Invalid(f"the data_offsets [{begin}, {end}] of {what} run past the end of its data section "
                           f"({data_size} bytes)")
        count = 1
        for d in shape:
            count *= d
        nbytes = (count * _FORMAT_BITS[dtype] + 7) // 8
        if end - begin != nbytes:
            raise _Invalid(f"{what} is {dtype}{shape} ({nbytes} bytes), but its data_offsets [{begin}, {end}] "
                           f"hold {end - begin} bytes")
        spans.append((begin, end, name))
    at, previous = 0, None
    for begin, end, name in sorted(spans):
        if begin < at:
            raise _Invalid(f"tensors {previous!r} and {name!r} overlap (both hold bytes {begin} to {at} of the "
                           f"data)", "The file was not written by a safetensors writer; save it again")
        if begin > at:
            raise _Invalid(f"bytes {at} to {begin} of the data belong to no tensor",
                           "The file was not written by a safetensors writer; save it again")
        at, previous = end, name
    if at != data_size:
        raise _Invalid(f"{data_size - at} bytes follow the last tensor's data (the format allows none)",
                       "The file was damaged or appended to: download or save it again")
    return index


def _check_file(head: bytes, size: int, read_header: Any, kind: str | None) -> dict[str, dict]:
    """Check a safetensors file of ``size`` bytes that starts with ``head`` (at least its
    first 8 bytes, or all of it) and that ``runtime.file_kinds.file_kind`` judged to be ``kind``;
    ``read_header(n)`` gives the n header bytes after the length field."""
    if size == 0:
        raise _Invalid("the file is empty (0 bytes)", "It was not written completely: download or save it again")
    if kind is not None and kind != "safetensors":
        from .runtime.file_kinds import describe_kind

        what, how = describe_kind(kind)
        raise _Invalid(f"it is {what}; {how}", "")
    if size < 8:
        raise _Invalid(f"it has {size} bytes, fewer than the 8 of the header length field at its start")
    n = int.from_bytes(head[:8], "little")
    if n > size - 8:
        raise _Invalid(f"its header length field says {n} bytes, but only {size - 8} bytes follow it",
                       "The file is truncated, or not a safetensors file: download or save it again")
    if n > _MAX_HEADER:
        raise _Invalid(f"its header of {n} bytes is larger than the format allows ({_MAX_HEADER} bytes)")
    return _header_entries(read_header(n), size)


def _check_dtypes(entries: Mapping[str, dict], fn: str) -> None:
    """A TypeError for the first tensor whose dtype tensorplay lacks (the file itself is valid)."""
    known = _np_dtypes()
    for name, entry in entries.items():
        if entry["dtype"] not in known:
            raise TypeError(f"tensorplay.safetensors.{fn}: tensor {name!r} has dtype {entry['dtype']}, which "
                            f"tensorplay has no dtype for; supported: {', '.join(known)}")


def save_file(tensors: Mapping[str, Any], filename: str | os.PathLike,
              metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (name -> tensor, e.g. ``model.state_dict()``) to ``filename`` in the
    safetensors format, with optional string ``metadata`` in its header."""
    st = _backend("save_file")
    _check_metadata(metadata, "save_file")
    st.numpy.save_file(_arrays(tensors, "save_file"), os.fspath(filename),
                       metadata=None if metadata is None else dict(metadata))


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding ``tensors``."""
    st = _backend("save")
    _check_metadata(metadata, "save")
    return st.numpy.save(_arrays(tensors, "save"), metadata=None if metadata is None else dict(metadata))


def load_file(filename: str | os.PathLike, device: Any = "cpu") -> dict[str, Any]:
    """The tensors of the safetensors file ``filename``, by name, on ``device``; pass the
    result to ``model.load_state_dict``. A damaged file, or one in another format, is a
    ValueError saying which file and what is wrong with it."""
    st = _backend("load_file")
    path = os.fspath(filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"tensorplay.safetensors.load_file: no such file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"tensorplay.safetensors.load_file: {path!r} is a folder; pass one of its "
                                f".safetensors files (a model split in shards has one file per shard)")
    from .runtime.file_kinds import file_kind

    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        def read_header(n: int) -> bytes:
            fh.seek(8)
            return fh.read(n)

        try:
            entries = _check_file(fh.read(8), size, read_header, file_kind(path))
        except _Invalid as e:
            raise ValueError(f"tensorplay.safetensors.load_file: {path!r} ({size} bytes) is not a valid "
                             f"safetensors file: {e}") from None
    _check_dtypes(entries, "load_file")
    try:
        arrays = st.numpy.load_file(path)
    except (TypeError, OSError):
        raise
    except Exception as e:  # what the checks above missed; the package's error types differ between versions
        raise ValueError(f"tensorplay.safetensors.load_file: {path!r} is not a valid safetensors file "
                         f"(the safetensors package says: {e}). {_REWRITE}") from None
    return _tensors(arrays, device, "load_file")


# safetensors dtype names -> numpy dtypes; bfloat16 through ml_dtypes (tensorplay's bfloat16)
def _np_dtypes() -> dict[str, Any]:
    import ml_dtypes

    return {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
            "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
            "BOOL": np.bool_}


def load(data: bytes) -> dict[str, Any]:
    """The tensors of a safetensors file's bytes, by name (on the CPU)."""
    st = _backend("load")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"tensorplay.safetensors.load: expected bytes, got {type(data).__name__} "
                        f"(use load_file for a path)")
    from .runtime.file_kinds import file_kind

    data = bytes(data)
    try:
        entries = _check_file(data[:8], len(data), lambda n: data[8:8 + n], file_kind(io.BytesIO(data)))
    except _Invalid as e:
        raise ValueError(f"tensorplay.safetensors.load: the {len(data)} bytes are not a valid safetensors "
                         f"file: {e}") from None
    _check_dtypes(entries, "load")
    try:
        views = st.deserialize(data)
    except Exception as e:  # what the checks above missed
        raise ValueError(f"tensorplay.safetensors.load: not a valid safetensors file (the safetensors package "
                         f"says: {e}). {_REWRITE}") from None
    known = _np_dtypes()
    arrays = {}
    for name, view in views:
        arrays[name] = np.frombuffer(view["data"], dtype=known[view["dtype"]]).reshape(view["shape"])
    return _tensors(arrays, None, "load")
