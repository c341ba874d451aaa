"""The on-disk artifact cache: compiled vmfb files keyed by what produced them.

The key is the sha256 of the tp MLIR (printed without locations), the backend name, the
iree-compile flags, the target machine, and the IREE compiler and tensorplay versions. An
entry is ``MAGIC | length | sha256(payload) | payload`` written to a temporary file and
moved into place with ``os.replace``, so readers see a whole entry or none; an entry whose
header does not match its payload is logged, deleted and recompiled, never loaded. A
per-key file lock makes a second process (or thread) wait for the first compile and reuse it.

``TENSORPLAY_CACHE_DIR`` chooses the folder (default ``$XDG_CACHE_HOME/tensorplay`` or
``~/.cache/tensorplay``); ``TENSORPLAY_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._logging import get_logger

try:
    import fcntl
except ImportError:  # not on Windows: the thread lock and atomic replace still hold
    fcntl = None  # type: ignore[assignment]

__all__ = ["cache_dir", "cache_enabled", "cache_key", "load_entry", "store_entry", "get_or_compile",
           "clear_cache", "cache_stats", "reset_cache_stats", "iree_compiler_version", "host_target",
           "MAGIC"]

MAGIC = b"TPVMFB1\n"
_HEADER = struct.Struct("<8sQ32s")
SUFFIX = ".vmfb.tpc"

_log = get_logger("perf")
_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "compiles": 0, "corrupt": 0, "writes": 0}
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def cache_dir() -> Path:
    """The cache folder (created on first write)."""
    env = os.environ.get("TENSORPLAY_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensorplay"


def cache_enabled() -> bool:
    return os.environ.get("TENSORPLAY_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def _count(name: str) -> None:
    with _stats_lock:
        _stats[name] += 1


def cache_stats() -> dict[str, int]:
    """Counters of this process: ``hits``, ``misses``, ``compiles`` (IREE compiles run),
    ``corrupt`` (entries rejected) and ``writes``."""
    with _stats_lock:
        return dict(_stats)


def reset_cache_stats() -> None:
    with _stats_lock:
        for k in _stats:
            _stats[k] = 0


_versions: dict[str, str] = {}


def iree_compiler_version() -> str:
    """The installed IREE compiler's version and revision, read without importing it."""
    if "iree" not in _versions:
        text = ""
        try:
            spec = importlib.util.find_spec("iree.compiler")
            for folder in (spec.submodule_search_locations or []) if spec else []:
                path = os.path.join(folder, "version.py")
                if os.path.exists(path):
                    with open(path) as f:
                        text = f.read()
                    break
        except (ImportError, ValueError):
            text = ""
        found = re.findall(r'^(VERSION|REVISIONS)\s*=\s*(.+)$', text, re.M)
        if found:
            _versions["iree"] = ";".join(f"{k}={v.strip()}" for k, v in found)
        else:
            from importlib import metadata

            try:
                _versions["iree"] = metadata.version("iree-base-compiler")
            except metadata.PackageNotFoundError:
                _versions["iree"] = "unknown"
    return _versions["iree"]


def _tensorplay_version() -> str:
    if "tp" not in _versions:
        from importlib import metadata

        try:
            _versions["tp"] = metadata.version("tensorplay")
        except metadata.PackageNotFoundError:
            _versions["tp"] = "unknown"
    return _versions["tp"]


def host_target() -> str:
    """The host CPU as code generated for ``target-cpu=host`` depends on it: machine,
    model name and a hash of the feature flags."""
    if "host" not in _versions:
        model, flags = "", ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    key = key.strip()
                    if key == "model name" and not model:
                        model = value.strip()
                    elif key in ("flags", "Features") and not flags:
                        flags = " ".join(sorted(value.split()))
                    if model and flags:
                        break
        except OSError:
            model = platform.processor()
        digest = hashlib.sha256(flags.encode()).hexdigest()[:16]
        _versions["host"] = f"{platform.machine()}|{model}|{digest}"
    return _versions["host"]


def cache_key(*, mlir: str, backend: str, flags: Sequence[str], target: str,
              extra: Mapping[str, Any] | None = None) -> str:
    """The sha256 naming an artifact (see the module doc for what goes in)."""
    fields = {"mlir": mlir, "backend": backend, "flags": list(flags), "target": target,
              "iree": iree_compiler_version(), "tensorplay": _tensorplay_version(),
              "extra": dict(extra or {})}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def _entry_path(key: str) -> Path:
    return cache_dir() / f"{key}{SUFFIX}"


def _reject(path: Path, why: str) -> None:
    _count("corrupt")
    _log.warning("cache entry %s is corrupt (%s): deleted, compiling again", path.name, why)
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def load_entry(key: str) -> bytes | None:
    """The cached payload of ``key``, or None when absent or corrupt (corrupt ones are deleted)."""
    path = _entry_path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        _log.warning("cache entry %s unreadable (%s): compiling again", path.name, exc)
        return None
    if len(data) < _HEADER.size:
        _reject(path, f"{len(data)} bytes, shorter than the header")
        return None
    magic, length, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != MAGIC:
        _reject(path, "bad magic")
        return None
    if length != len(payload):
        _reject(path, f"header says {length} bytes, file holds {len(payload)}")
        return None
    if hashlib.sha256(payload).digest() != digest:
        _reject(path, "checksum mismatch")
        return None
    return payload


def store_entry(key: str, payload: bytes) -> Path | None:
    """Write an entry atomically; returns its path (None when the folder is not writable)."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(_HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()))
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        path = _entry_path(key)
        os.replace(tmp, path)
    except OSError as exc:
        _log.warning("cannot write the compile cache in %s (%s); continuing without it", folder, exc)
        return None
    _count("writes")
    return path


class _KeyLock:
    """Held while one key is looked up and compiled: a thread lock plus, where available, an
    exclusive ``flock`` on ``<key>.lock`` so other processes wait instead of compiling too."""

    def __init__(self, key: str):
        with _key_locks_guard:
            self._thread_lock = _key_locks.setdefault(key, threading.Lock())
        self._path = cache_dir() / f"{key}.lock"
        self._fd: int | None = None

    def __enter__(self) -> _KeyLock:
        self._thread_lock.acquire()
        if fcntl is not None:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError:
                self._fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None
        self._thread_lock.release()


def get_or_compile(key: str, compile_fn: Callable[[], bytes], *, what: str) -> bytes:
    """The cached artifact of ``key``, or ``compile_fn()`` stored under it. ``what`` names
    the graph and backend in the perf log."""
    if not cache_enabled():
        return _timed_compile(compile_fn, what)
    with _KeyLock(key):
        start = time.perf_counter()
        payload = load_entry(key)
        if payload is not None:
            _count("hits")
            _log.info("cache hit: %s (%s, %d bytes, %.1f ms)", what, key[:12], len(payload),
                      (time.perf_counter() - start) * 1e3)
            return payload
        _count("misses")
        _log.info("cache miss: %s (%s)", what, key[:12])
        payload = _timed_compile(compile_fn, what)
        store_entry(key, payload)
        return payload


def _timed_compile(compile_fn: Callable[[], bytes], what: str) -> bytes:
    start = time.perf_counter()
    payload = compile_fn()
    _count("compiles")
    _log.info("IREE compile: %s took %.3f s (%d bytes)", what, time.perf_counter() - start, len(payload))
    return payload


def clear_cache() -> int:
    """Delete every cache entry (and lock and temporary file); returns how many entries."""
    folder = cache_dir()
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.iterdir():
        if path.name.endswith(SUFFIX):
            removed += 1
        elif not (path.name.endswith(".lock") or path.name.endswith(".tmp")):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    return removed
