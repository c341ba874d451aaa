"""What kind of weight or program file a path holds, from its first bytes (and a zip's member
names): so a loader handed the wrong file says what it is and how to read it, instead of a
parser's error. Reads nothing more and runs nothing; needs only the standard library."""

from __future__ import annotations

import os
import zipfile
from typing import Any

__all__ = ["file_kind", "describe_kind", "head_bytes"]

_UNPICKLE = ("tensorplay never unpickles files (that could run code from them): load it with "
             "torch.load(path, weights_only=True) and pass the state_dict to load_state_dict, or convert it "
             "once with safetensors.torch.save_file and read that with tensorplay.safetensors.load_file")

#: what each kind of weight file is called, and how tensorplay reads it (or why it does not)
_KINDS = {
    "checkpoint": ("a tensorplay checkpoint (tp.save)", "read it with tp.load"),
    "torch": ("a PyTorch checkpoint (torch.save)", _UNPICKLE),
    "pickle": ("a Python pickle (such as PyTorch's legacy torch.save format)", _UNPICKLE),
    "safetensors": ("a safetensors file", "read it with tensorplay.safetensors.load_file"),
    "irpa": ("an IREE parameter archive (.irpa)", "read it with tensorplay.runtime.load_parameters"),
    "gguf": ("a GGUF file", "tensorplay reads no GGUF files; convert it to safetensors"),
    "vmfb": ("an IREE module (.vmfb)", "load it with tensorplay.runtime.load"),
    "npz": ("a numpy .npz archive", "read it with numpy.load (which refuses pickled arrays) and pass the "
                                    "arrays to tp.tensor"),
    "npy": ("a numpy .npy array", "read it with numpy.load (which refuses pickled arrays) and pass the "
                                  "array to tp.tensor"),
}


def head_bytes(f: Any, n: int = 64) -> bytes:
    """The first ``n`` bytes of a path or seekable binary file object (its position kept)."""
    if hasattr(f, "read"):
        pos = f.tell()
        try:
            return f.read(n)
        finally:
            f.seek(pos)
    with open(f, "rb") as fh:
        return fh.read(n)


def file_kind(f: Any) -> str | None:
    """Which of the weight formats in ``_KINDS`` the file ``f`` (a path or a seekable binary
    file object) holds, judged from its first bytes and, for a zip archive, its member names;
    None when it is none of them. Reads no more than that, and runs nothing."""
    head = head_bytes(f)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        pos = f.tell() if hasattr(f, "tell") else 0
        try:
            with zipfile.ZipFile(f if hasattr(f, "read") else os.fspath(f)) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None
        finally:
            if hasattr(f, "seek"):
                f.seek(pos)
        if "tensorplay.json" in names:
            return "checkpoint"
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return "torch"
        if "module.fb" in names:
            return "vmfb"
        if names and all(n.endswith(".npy") and "/" not in n for n in names):
            return "npz"
        return None
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if head[:4] == b"IRPA":
        return "irpa"
    if head[:4] == b"GGUF":
        return "gguf"
    if head[:6] == b"\x93NUMPY":
        return "npy"
    if len(head) > 8 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < (1 << 32):
        return "safetensors"
    return None


def describe_kind(kind: str) -> tuple[str, str]:
    """(what the file is, how to read it) for a ``file_kind`` answer."""
    return _KINDS[kind]
