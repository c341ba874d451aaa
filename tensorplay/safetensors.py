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
    result to ``model.load_state_dict``."""
    st = _backend("load_file")
    path = os.fspath(filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"tensorplay.safetensors.load_file: no such file: {path!r}")
    try:
        arrays = st.numpy.load_file(path)
    except Exception as e:  # the package's own error types differ between its versions
        if isinstance(e, (TypeError, OSError)):
            raise
        raise ValueError(f"tensorplay.safetensors.load_file: {path!r} is not a valid safetensors "
                         f"file: {e}") from e
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
    try:
        views = st.deserialize(bytes(data))
    except Exception as e:
        raise ValueError(f"tensorplay.safetensors.load: not a valid safetensors file: {e}") from e
    known = _np_dtypes()
    arrays = {}
    for name, view in views:
        if view["dtype"] not in known:
            raise TypeError(f"tensorplay.safetensors.load: tensor {name!r} has dtype {view['dtype']}, "
                            f"which tensorplay has no dtype for; supported: {', '.join(known)}")
        arrays[name] = np.frombuffer(view["data"], dtype=known[view["dtype"]]).reshape(view["shape"])
    return _tensors(arrays, None, "load")
