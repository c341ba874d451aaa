"""The on-disk artifact cache: compiled vmfb files keyed by what produced them.

The key is the sha256 of the tp MLIR (printed without locations), the backend name, the
iree-compile flags, the target machine, and the IREE compiler and tensorplay versions. An
entry is ``MAGIC | length | sha256(record + payload) | record length | record | payload``,
where the record (JSON) names the key and the IREE and tensorplay versions that wrote it;
it is written to a temporary file and moved into place with ``os.replace``, so readers see
a whole entry or none. An entry whose header does not match its payload is logged, deleted
and recompiled, never loaded; so is one whose record names another key or other versions
(a file copied or edited by hand). A per-key file lock makes a second process (or thread)
wait for the first compile and reuse it.

The cache never makes a compile fail: a folder that cannot be written (read-only, under a
regular file, a full disk) gives one warning per folder and process, and compiles go on
without storing their artifacts.

An entry is native code that the next compiled call runs, so the cache trusts only what its
user alone can write (docs/security.md). On POSIX the folders it creates get mode 0700 and an
existing folder is used only when this user owns it, its group and others cannot write it,
and no folder above it lets another user replace it (owned by this user or root, and not
writable by group or others unless sticky, as /tmp is); otherwise one warning per folder and
process names the folder and the fix, and compiles go on without the cache. An entry is read
only when it is a regular file (never through a symbolic link) that this user owns and only
this user can write; any other is deleted with a warning and compiled again.
``TENSORPLAY_CACHE_SHARED=1`` turns both checks off for a cache shared on purpose: it trusts
everyone who can write there (entries then get the folder's read and write bits).

``TENSORPLAY_CACHE_DIR`` chooses the folder (default ``$XDG_CACHE_HOME/tensorplay`` or
``~/.cache/tensorplay``); ``TENSORPLAY_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import platform
import re
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import tracedir
from .._logging import get_logger

try:
    import fcntl
except ImportError:  # not on Windows: the thread lock and atomic replace still hold
    fcntl = None  # type: ignore[assignment]

__all__ = ["cache_dir", "cache_enabled", "cache_key", "load_entry", "store_entry", "get_or_compile",
           "clear_cache", "cache_stats", "reset_cache_stats", "iree_compiler_version", "host_target",
           "note_used", "cache_shared", "MAGIC"]

MAGIC = b"TPVMFB2\n"
#: the entry format before the record of who wrote it: read as stale, never as corrupt
_OLD_MAGICS = (b"TPVMFB1\n",)
_HEADER = struct.Struct("<8sQ32sI")  # magic, payload length, sha256(record + payload), record length
_MAX_RECORD = 1 << 16
SUFFIX = ".vmfb.tpc"

_log = get_logger("perf")
_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "compiles": 0, "corrupt": 0, "stale": 0, "untrusted": 0, "writes": 0}
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()
#: keys of the entries this process loaded or wrote (what a cache bundle carries)
_used: dict[str, None] = {}
_used_lock = threading.Lock()
#: folders already warned about (unwritable, full, unreadable): one warning each per process
_warned: set[str] = set()
_warned_lock = threading.Lock()


def cache_dir() -> Path:
    """The cache folder (created on first write)."""
    env = os.environ.get("TENSORPLAY_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tensorplay"


def _flag(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in ("", "0", "off", "false", "no")


def cache_enabled() -> bool:
    return _flag("TENSORPLAY_CACHE", "1")


def cache_shared() -> bool:
    """Whether the user declared the cache folder shared (``TENSORPLAY_CACHE_SHARED=1``): its
    entries are then trusted whoever wrote them."""
    return _flag("TENSORPLAY_CACHE_SHARED", "0")


#: checks of ownership and modes apply where the OS has them
_POSIX = os.name == "posix" and hasattr(os, "geteuid")
_SHARED_HINT = ("to share a cache on purpose, set TENSORPLAY_CACHE_SHARED=1, which trusts everyone who can write "
                "there")


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _untrusted_folder(folder: Path) -> tuple[str, str] | None:
    """Why another user could place entries in ``folder`` (an existing directory), and the fix;
    None when only this user (or root) can."""
    me = os.geteuid()
    st = os.stat(folder)
    if st.st_uid != me:
        return (f"it is owned by {_owner(st.st_uid)}, not by you",
                "point TENSORPLAY_CACHE_DIR at a folder of your own")
    if st.st_mode & 0o022:
        return (f"its group or other users can write to it (mode {stat.S_IMODE(st.st_mode):o})",
                f"run chmod 700 {folder}")
    above = Path(os.path.realpath(folder)).parent
    for parent in (above, *above.parents):
        try:
            st = os.stat(parent)
        except OSError:
            continue
        if st.st_uid not in (me, 0):
            return (f"the folder above it, {parent}, is owned by {_owner(st.st_uid)}, who can replace it",
                    "point TENSORPLAY_CACHE_DIR at a folder whose parents only you or root own")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return (f"the folder above it, {parent}, can be written by its group or other users (mode "
                    f"{stat.S_IMODE(st.st_mode):o}, not sticky), who can replace it",
                    f"run chmod go-w {parent}, or point TENSORPLAY_CACHE_DIR elsewhere")
    return None


def _make_private(folder: Path) -> None:
    """Create ``folder`` and the missing folders above it with mode 0700 (0777 less the umask
    when the cache is shared)."""
    missing = []
    path = folder
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o777 if cache_shared() else 0o700)
        except FileExistsError:
            pass
    if not folder.is_dir():
        os.mkdir(folder)  # (a regular file there: FileExistsError, which store_entry reports)


def _usable(folder: Path, *, create: bool) -> bool:
    """Whether entries may be read from and written to ``folder``: created private when
    ``create`` (an existing one of this user is made private too); one that another user
    could write to is refused with one warning per folder and process. OSErrors of creating
    it propagate (the callers warn about unwritable folders)."""
    if create:
        _make_private(folder)
    if not _POSIX or cache_shared() or not folder.is_dir():
        return True
    why = _untrusted_folder(folder)
    if why is not None:
        _warn_once(folder, "tensorplay compile cache: not using %s: %s. Compiled programs are native code that "
                           "compiled calls run, so the cache is used only where no other user can write; compiling "
                           "goes on without the cache (this warning is given once per folder). To fix: %s; %s",
                   folder, why[0], why[1], _SHARED_HINT)
        return False
    st = os.stat(folder)
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(folder, 0o700)  # this user's own folder from before: made private
        except OSError:
            pass
    return True


def _refuse_entry(path: Path, why: str) -> None:
    _count("untrusted")
    _log.warning("tensorplay compile cache: entry %s in %s refused (%s; an entry is read only when it is a regular "
                 "file that you own and only you can write): deleted, compiling again", path.name, path.parent, why)
    _unlink(path)


def _read_trusted(path: Path) -> bytes | None:
    """The bytes of the entry file ``path``, or None when it is not one this user alone wrote
    (refused and deleted with a warning). Never follows a symbolic link."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if path.is_symlink():  # (ELOOP on Linux and macOS, EMLINK on FreeBSD)
            _refuse_entry(path, f"a symbolic link to {os.readlink(path)}")
            return None
        raise
    try:
        st = os.fstat(fd)
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = "not a regular file"
        elif _POSIX and not cache_shared():
            if st.st_uid != os.geteuid():
                why = f"owned by {_owner(st.st_uid)}"
            elif st.st_mode & 0o022:
                why = f"its group or other users can write to it (mode {stat.S_IMODE(st.st_mode):o})"
        if why is not None:
            _refuse_entry(path, why)
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def note_used(key: str) -> None:
    """Record that this process loaded or wrote the entry ``key`` (see :func:`save_cache_bundle`)."""
    with _used_lock:
        _used[key] = None


def _count(name: str) -> None:
    with _stats_lock:
        _stats[name] += 1


def cache_stats() -> dict[str, int]:
    """Counters of this process: ``hits``, ``misses``, ``compiles`` (IREE compiles run),
    ``corrupt`` (damaged entries rejected), ``stale`` (entries of another key, IREE or
    tensorplay version, or entry format, not used) and ``writes``."""
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
            version = metadata.version("tensorplay")
        except metadata.PackageNotFoundError:
            version = "unknown"
        _versions["tp"] = f"{version}+{_lowering_fingerprint()}"
    return _versions["tp"]


def _lowering_fingerprint() -> str:
    """A hash of the code that turns a tp module into what IREE compiles (the dialect, the
    passes and the lowering, the backends' flags): a checkout or install whose lowering
    differs never loads another's artifacts, whatever its version number says."""
    h = hashlib.sha256()
    for package in ("tensorplay.dialects", "tensorplay.passes", "tensorplay.compiler.backends"):
        spec = importlib.util.find_spec(package)  # (where it lies; nothing is imported)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


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


def _record(key: str, backend: str | None = None) -> dict[str, str]:
    """Who writes an entry: its key, the versions that produced it and, for a program or an
    autotune choice, the backend it is for."""
    record = {"key": key, "iree": iree_compiler_version(), "tensorplay": _tensorplay_version()}
    if backend:
        record["backend"] = backend
    return record


def _warn_once(folder: Path, message: str, *args: Any) -> None:
    """A warning about the cache folder, once per folder and process (not per compile)."""
    name = os.path.abspath(str(folder))
    with _warned_lock:
        if name in _warned:
            return
        _warned.add(name)
    _log.warning(message, *args)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _reject(path: Path, why: str) -> None:
    _count("corrupt")
    _log.warning("cache entry %s is corrupt (%s): deleted, compiling again", path.name, why)
    _unlink(path)


def _stale(path: Path, why: str, *, quiet: bool = False) -> None:
    _count("stale")
    (_log.info if quiet else _log.warning)("cache entry %s was not used (%s): deleted, compiling again",
                                           path.name, why)
    _unlink(path)


def load_entry(key: str, *, folder_checked: bool = False) -> bytes | None:
    """The cached payload of ``key``, or None when absent, corrupt or stale (those are
    deleted): the header must match the payload and the record must name ``key`` and the
    IREE compiler and tensorplay versions of this process. ``folder_checked``: the caller
    has just found the folder usable (:func:`get_or_compile`), so its owners and modes are
    not walked again."""
    path = _entry_path(key)
    try:
        if not path.parent.is_dir() or not (folder_checked or _usable(path.parent, create=False)):
            return None
        data = _read_trusted(path)
        if data is None:
            return None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        _warn_once(path.parent, "tensorplay compile cache: cannot read %s (%s); compiling without the cache "
                                "(this warning is given once per folder)", path.parent, exc.strerror or exc)
        return None
    if data[:8] in _OLD_MAGICS:
        _stale(path, "written in an older entry format", quiet=True)
        return None
    if len(data) < _HEADER.size:
        _reject(path, f"{len(data)} bytes, shorter than the header")
        return None
    magic, length, digest, record_length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        _reject(path, "bad magic")
        return None
    body = data[_HEADER.size:]
    if record_length > min(len(body), _MAX_RECORD) or length != len(body) - record_length:
        _reject(path, f"header says {length} bytes, file holds {max(0, len(body) - record_length)}")
        return None
    if hashlib.sha256(body).digest() != digest:
        _reject(path, "checksum mismatch")
        return None
    try:
        record = json.loads(body[:record_length].decode())
    except (UnicodeDecodeError, ValueError):
        _reject(path, "unreadable record")
        return None
    expected = _record(key)
    if not isinstance(record, dict):
        _reject(path, "unreadable record")
        return None
    for field, label in (("key", "another key"), ("iree", "another IREE compiler"),
                         ("tensorplay", "another tensorplay")):
        if record.get(field) != expected[field]:
            _stale(path, f"written for {label}: {str(record.get(field))[:80]!r}, this process has "
                         f"{expected[field][:80]!r}")
            return None
    return body[record_length:]


def _write_all(f: Any, data: bytes) -> None:
    """Write ``data`` to the open entry file ``f`` (a seam: disk-full handling is tested
    by making it fail)."""
    f.write(data)


def store_entry(key: str, payload: bytes, *, backend: str | None = None,
                folder_checked: bool = False) -> Path | None:
    """Write an entry atomically; returns its path, or None when the folder cannot be written
    (read-only, not a folder, full: warned once per folder; the temporary file is removed).
    ``folder_checked`` as for :func:`load_entry`."""
    folder = cache_dir()
    tmp: str | None = None
    record = json.dumps(_record(key, backend), sort_keys=True).encode()
    try:
        if not folder_checked and not _usable(folder, create=True):
            return None
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=folder)  # (mode 0600)
        _share(fd, folder)
        with os.fdopen(fd, "wb") as f:
            digest = hashlib.sha256(record)
            digest.update(payload)
            _write_all(f, _HEADER.pack(MAGIC, len(payload), digest.digest(), len(record)) + record)
            _write_all(f, payload)
            f.flush()
            os.fsync(f.fileno())
        path = _entry_path(key)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            _warn_once(folder, "tensorplay compile cache: no space left to write in %s (%s); compiled programs "
                               "are not cached until there is (compiling goes on without the cache; this "
                               "warning is given once per folder). Free space, point TENSORPLAY_CACHE_DIR at "
                               "another folder, or set TENSORPLAY_CACHE=0", folder, exc.strerror or exc)
        else:
            _warn_once(folder, "tensorplay compile cache: cannot write to %s (%s); compiled programs are not "
                               "cached (compiling goes on without the cache; this warning is given once per "
                               "folder). Point TENSORPLAY_CACHE_DIR at a writable folder, or set "
                               "TENSORPLAY_CACHE=0", folder, exc.strerror or exc)
        return None
    finally:
        if tmp is not None:
            _unlink(Path(tmp))
    _count("writes")
    return path


def _share(fd: int, folder: Path) -> None:
    """In a shared cache, give the new entry ``fd`` the read and write bits of ``folder``
    (a group folder's entries are the group's)."""
    if _POSIX and cache_shared():
        os.fchmod(fd, stat.S_IMODE(os.stat(folder).st_mode) & 0o666)


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
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                                   0o666 if cache_shared() else 0o600)
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


def get_or_compile(key: str, compile_fn: Callable[[], bytes], *, what: str, backend: str | None = None) -> bytes:
    """The cached artifact of ``key``, or ``compile_fn()`` stored under it. ``what`` names
    the graph and backend in the perf log; ``backend`` is recorded in the entry (a cache
    bundle lists the backends of its entries)."""
    if not cache_enabled():
        return _timed_compile(compile_fn, what)
    checked = _usable_for_compiles()
    if checked is False:
        return _timed_compile(compile_fn, what)
    with _KeyLock(key):
        start = time.perf_counter()
        payload = load_entry(key, folder_checked=checked is True)
        if payload is not None:
            _count("hits")
            _log.info("cache hit: %s (%s, %d bytes, %.1f ms)", what, key[:12], len(payload),
                      (time.perf_counter() - start) * 1e3)
            tracedir.note(tracedir.current(), "artifact_cache", {"what": what, "key": key[:16], "hit": True,
                                                                 "load_ms": round((time.perf_counter() - start) * 1e3, 3)})
            note_used(key)
            return payload
        _count("misses")
        _log.info("cache miss: %s (%s)", what, key[:12])
        payload = _timed_compile(compile_fn, what)
        if store_entry(key, payload, backend=backend, folder_checked=checked is True) is not None:
            note_used(key)
        tracedir.note(tracedir.current(), "artifact_cache", {"what": what, "key": key[:16], "hit": False})
        return payload


def _usable_for_compiles() -> bool | None:
    """Whether the cache folder may be used (created private if missing): True or False once
    checked; None when it cannot be created, which :func:`store_entry` checks again and warns
    about."""
    try:
        return _usable(cache_dir(), create=True)
    except OSError:
        return None


def _timed_compile(compile_fn: Callable[[], bytes], what: str) -> bytes:
    start = time.perf_counter()
    payload = compile_fn()
    _count("compiles")
    seconds = time.perf_counter() - start
    _log.info("IREE compile: %s took %.3f s (%d bytes)", what, seconds, len(payload))
    tracedir.note(tracedir.current(), "iree_compiles", {"what": what, "seconds": round(seconds, 6)})
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

