"""Cache bundles: every artifact-cache entry a process used, in one file that warms the cache
of another machine or an empty folder (``tp.compiler.save_cache_bundle`` /
``load_cache_bundle``).

A bundle is ``BUNDLE_MAGIC | index length | index (JSON) | entries``. The index records the
machine that wrote it (host CPU, IREE compiler and tensorplay versions, the latter with a hash
of the lowering code), the backends its programs were compiled for, and each entry's key,
size, sha256 and backend. A bundle holds native code: load only bundles you trust, and pin the
digest that :func:`save_cache_bundle` returns when one travels (docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

from ...runtime.program import check_sha256
from . import cache as _cache

__all__ = ["save_cache_bundle", "load_cache_bundle", "BUNDLE_MAGIC"]

BUNDLE_MAGIC = b"TPBUNDL1"
_HEADER = struct.Struct("<8sQ")  # magic, length of the JSON index that follows


def _machine() -> dict[str, str]:
    return {"host": _cache.host_target(), "iree": _cache.iree_compiler_version(),
            "tensorplay": _cache._tensorplay_version()}


def _entry_backend(data: bytes) -> str | None:
    """The backend recorded in a cache entry (None for automatic-dynamic decisions, and for
    entries written before records named one)."""
    try:
        _, _, _, record_length = _cache._HEADER.unpack_from(data)
        start = _cache._HEADER.size
        backend = json.loads(data[start:start + record_length].decode()).get("backend")
    except (struct.error, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return backend if isinstance(backend, str) else None


def _write_atomically(target: Path, chunks: list[bytes], folder_of_entries: bool = False) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:16]}-", suffix=".tmp", dir=target.parent)
    try:
        if folder_of_entries:
            _cache._share(fd, target.parent)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, target)
    except BaseException:
        _cache._unlink(Path(tmp))
        raise


def save_cache_bundle(path: str | os.PathLike) -> dict[str, Any]:
    """Write every cache entry this process loaded or wrote (compiled programs, autotune
    choices, automatic dynamic decisions) into the one file ``path``, atomically, for
    :func:`load_cache_bundle` on another machine or in an empty cache folder. Returns
    ``{"path", "entries", "bytes", "machine", "backends", "sha256"}``: ``sha256`` is the
    file's digest, to pin where the bundle is loaded (``load_cache_bundle(path, sha256=...)``)."""
    target = Path(os.fspath(path))
    with _cache._used_lock:
        keys = list(_cache._used)
    index, blobs = [], []
    for key in keys:
        try:
            data = _cache._entry_path(key).read_bytes()
        except OSError:
            continue  # deleted since (clear_cache, or stale): nothing to carry
        index.append({"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                      "backend": _entry_backend(data)})
        blobs.append(data)
    backends = sorted({e["backend"] for e in index if e["backend"]})
    head = json.dumps({"machine": _machine(), "backends": backends, "entries": index}, sort_keys=True).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    chunks = [_HEADER.pack(BUNDLE_MAGIC, len(head)) + head, *blobs]
    _write_atomically(target, chunks)
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    size = target.stat().st_size
    _cache._log.info("cache bundle %s: %d entries, %d bytes, sha256 %s", target, len(index), size, digest)
    return {"path": str(target), "entries": len(index), "bytes": size, "machine": _machine(),
            "backends": backends, "sha256": digest}


def load_cache_bundle(path: str | os.PathLike, *, sha256: str | None = None) -> dict[str, Any]:
    """Install the entries of a bundle written by :func:`save_cache_bundle` into this
    process's cache folder (each written atomically; entries already there are kept).

    The entries are native code that compiled calls will run: load only bundles you trust, and
    give ``sha256`` (the digest ``save_cache_bundle`` returned) for one fetched from elsewhere;
    a file with another digest is refused.

    A bundle built by another IREE compiler or tensorplay (version or lowering code), or for a
    backend this tensorplay does not have, is refused with a ``ValueError`` naming what
    differs; none of its entries could be used. One from another CPU installs everything, but
    programs compiled for the host CPU (``iree-cpu``) are keyed by that CPU and compile again
    here; one for a backend that cannot run here (no CUDA device) installs with a warning.
    Returns ``{"entries", "installed", "present", "differences"}`` where ``differences``
    names what differs from this machine. A file that is not a whole bundle is a
    ``ValueError``; a cache folder that other users could write to is a ``PermissionError``."""
    source = Path(os.fspath(path))
    data = source.read_bytes()
    check_sha256(data, sha256, f"load_cache_bundle: {source}")
    if len(data) < _HEADER.size or data[:8] != BUNDLE_MAGIC:
        raise ValueError(f"load_cache_bundle: {source} is not a tensorplay cache bundle (no {BUNDLE_MAGIC!r} "
                         "header); write one with tp.compiler.save_cache_bundle(path)")
    _, head_len = _HEADER.unpack_from(data)
    try:
        head = json.loads(data[_HEADER.size:_HEADER.size + head_len].decode())
        entries, machine = head["entries"], head["machine"]
        backends = [str(b) for b in head.get("backends", [])]
        total = sum(int(e["size"]) for e in entries)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise ValueError(f"load_cache_bundle: {source} has an unreadable index: the file is damaged; "
                         "write the bundle again") from None
    offset = _HEADER.size + head_len
    if offset + total != len(data):
        raise ValueError(f"load_cache_bundle: {source} holds {len(data) - offset} bytes of entries, its index "
                         f"says {total}: the file is truncated or damaged")
    here = _machine()
    differences = [f"{field}: bundle {machine.get(field)!r}, here {here[field]!r}"
                   for field in ("host", "iree", "tensorplay") if machine.get(field) != here[field]]
    if machine.get("iree") != here["iree"] or machine.get("tensorplay") != here["tensorplay"]:
        raise ValueError(f"load_cache_bundle: {source} was built by another IREE compiler or tensorplay "
                         f"({'; '.join(d for d in differences if not d.startswith('host'))}): none of its "
                         f"{len(entries)} entries could be used here; nothing installed. Build the bundle again "
                         "with this installation (tp.compiler.save_cache_bundle), or install the versions it names")
    _check_backends(source, backends, differences)
    if any(d.startswith("host") for d in differences):
        _cache._log.warning("cache bundle %s comes from another CPU (%s): programs compiled for its host CPU will "
                            "compile again here", source, "; ".join(differences))
    info = {"entries": len(entries), "installed": 0, "present": 0, "differences": differences}
    blobs = []
    for e in entries:  # every entry is checked before any is installed
        blob = data[offset:offset + e["size"]]
        offset += e["size"]
        key = str(e["key"])
        if not re.fullmatch(r"[0-9a-f]{64}", key) or hashlib.sha256(blob).hexdigest() != e["sha256"]:
            raise ValueError(f"load_cache_bundle: entry {key[:16]} of {source} does not match its checksum: "
                             "the file is damaged; write the bundle again")
        blobs.append((key, blob))
    folder = _cache.cache_dir()
    if not _cache._usable(folder, create=True):
        raise PermissionError(f"load_cache_bundle: the cache folder {folder} is not used because other users could "
                              "write to it (the warning above says why and how to fix it); nothing installed")
    for key, blob in blobs:
        dest = _cache._entry_path(key)
        if dest.exists() or dest.is_symlink():
            info["present"] += 1
            continue
        _write_atomically(dest, [blob], folder_of_entries=True)
        info["installed"] += 1
    _cache._log.info("cache bundle %s: %d entries installed, %d already present", source, info["installed"],
                     info["present"])
    return info


def _check_backends(source: Path, backends: list[str], differences: list[str]) -> None:
    """A bundle for a backend this tensorplay does not know is refused; one for a backend
    that is known but cannot run here is noted in ``differences``."""
    from . import list_backends

    known = set(list_backends(None, include_unavailable=True))
    unknown = [b for b in backends if b not in known]
    if unknown:
        raise ValueError(f"load_cache_bundle: {source} was built for backend(s) {', '.join(unknown)}, which this "
                         f"tensorplay does not have (it has {', '.join(sorted(known))}); nothing installed. Install "
                         "the package that registers them, or build the bundle on this installation")
    runnable = set(list_backends(None))
    idle = [b for b in backends if b not in runnable]
    if idle:
        differences.append(f"backends: {', '.join(idle)} cannot run here")
        _cache._log.warning("cache bundle %s holds programs for %s, which cannot run on this machine: they are "
                            "installed but used only where that backend runs", source, ", ".join(idle))
