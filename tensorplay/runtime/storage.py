"""Where tensor data lives, and what moving it costs.

A tensor's storage is a host numpy array or a :class:`DeviceArray`: an IREE buffer on the
HAL device of one runtime driver (``vulkan``, ``cuda``, ``hip``). The CPU drivers
(``local-sync``, ``local-task``) share the host's memory, so their programs take host arrays
without a copy where IREE's alignment allows it (:data:`ALIGNMENT`) and return numpy views of
their result buffers; only the GPU drivers have device arrays.

Every copy between the host and a device is counted (:func:`stats`, :func:`reset_stats`):
bytes and buffers uploaded and downloaded, in total and per program, and the host arrays a
CPU program read in place (``imports``). ``TENSORPLAY_LOGS=perf`` shows them per call.

A host array written in place (an in-place op on a tensor that shares its memory with views,
``.data``, ``detach()`` or numpy: see ``tensorplay/_views.py``) gets a new version
(:func:`note_host_write`, :func:`host_version`); a device array is immutable.
:func:`resident_view` keeps one device copy of a host array for as long as the array lives
and its version does not change (module weights: uploaded once per device); an array
whose memory is shared with code outside tensorplay (``Tensor.numpy()``, ``np.asarray(t)``,
``tp.from_numpy``, DLPack) can change behind tensorplay's back, so it is never cached and is
uploaded on every call instead (:func:`mark_shared`).
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

import numpy as np

from .drivers import WIDE_STORAGE, device_name, is_host_driver  # noqa: F401  (the storage interface)
from .transfers import OUTSIDE, TransferStats, count, reset_stats, stats  # noqa: F401  (the storage interface)

__all__ = ["ALIGNMENT", "IN_PLACE_MIN_BYTES", "aligned_copy", "DeviceArray", "Donated", "sole_reference", "TransferStats", "stats", "reset_stats",
           "mark_shared", "is_shared", "note_host_write", "host_version", "is_host_driver", "device_name", "WIDE_STORAGE", "storage_dtype"]

#: the byte alignment IREE's CPU code assumes of its buffers; host arrays that have it are
#: passed to CPU programs in place, others are copied into an aligned buffer
ALIGNMENT = 64

#: host arrays up to this many bytes are copied into IREE buffers rather than read in place
#: (a copy of a few KiB costs less than the import's alignment check and bookkeeping)
IN_PLACE_MIN_BYTES = 16 * 1024


def aligned_copy(array: Any, dtype: Any = None) -> np.ndarray:
    """A new C-contiguous host array holding ``array`` (as ``dtype``), its data at an
    :data:`ALIGNMENT`-byte boundary when it is large enough to be read in place by CPU programs.

    numpy's large allocations start 16 bytes into a page, so a compiled CPU program would copy
    them on every call; storage tensorplay allocates itself (``tp.tensor``, copies, unpickled
    tensors) starts aligned instead, as PyTorch's CPU allocator does."""
    array = np.asarray(array)
    dtype = array.dtype if dtype is None else np.dtype(dtype)
    nbytes = array.size * dtype.itemsize
    if nbytes <= IN_PLACE_MIN_BYTES or dtype.hasobject:
        return np.array(array, dtype=dtype, order="C", copy=True)
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    out = raw[start:start + nbytes].view(dtype).reshape(array.shape)
    np.copyto(out, array, casting="unsafe")
    return out


_lock = threading.RLock()
_live: weakref.WeakSet = weakref.WeakSet()  # every DeviceArray, for release at exit


def driver_of_arrays(arrays: Any) -> str | None:
    """The runtime driver of the first device array among ``arrays``; None when all are host."""
    return next((a.driver for a in arrays if type(a) is DeviceArray), None)


def storage_dtype(driver: str, dtype: np.dtype) -> np.dtype:
    """The element type ``driver`` keeps a tensor of ``dtype`` in."""
    wide = WIDE_STORAGE.get(driver)
    name = wide.get(np.dtype(dtype).name) if wide else None  # numpy's names are tensorplay's
    return np.dtype(dtype) if name is None else np.dtype(name)


# -- host arrays shared with code outside tensorplay ---------------------------------------------

_shared: dict[int, weakref.ref] = {}


def mark_shared(array: np.ndarray) -> None:
    """``array``'s memory is reachable from outside tensorplay (it was handed out or wrapped):
    it may change without a new storage, so device copies of it are not cached."""
    key = id(array)
    with _lock:
        ref = _shared.get(key)
        if ref is not None and ref() is array:
            return
        try:
            _shared[key] = weakref.ref(array, lambda _r, key=key: _shared.pop(key, None))
        except TypeError:  # not weak-referenceable: nothing will cache it either
            pass


def is_shared(array: np.ndarray) -> bool:
    """Whether ``array`` or an array it views was marked by :func:`mark_shared`."""
    a: Any = array
    while isinstance(a, np.ndarray):
        ref = _shared.get(id(a))
        if ref is not None and ref() is a:
            return True
        a = a.base
    return False


_writes: dict[int, tuple[Any, int]] = {}  # id(memory owner) -> (weak ref, writes)


def _owner(array: np.ndarray) -> np.ndarray:
    a = array
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def note_host_write(array: np.ndarray) -> None:
    """``array``'s memory was written in place: device copies of it made before are stale."""
    owner = _owner(array)
    key = id(owner)
    with _lock:
        hit = _writes.get(key)
        if hit is not None and hit[0]() is owner:
            _writes[key] = (hit[0], hit[1] + 1)
            return
        try:
            ref = weakref.ref(owner, lambda _r, key=key: _writes.pop(key, None))
        except TypeError:
            return
        _writes[key] = (ref, 1)


def host_version(array: np.ndarray) -> int:
    """How many in-place writes ``array``'s memory had (0: never written in place)."""
    if not _writes:
        return 0
    owner = _owner(array)
    hit = _writes.get(id(owner))
    return hit[1] if hit is not None and hit[0]() is owner else 0


# -- device arrays ---------------------------------------------------------------------------------

def release_device_arrays() -> None:
    """Drop the buffers of every live device array (at interpreter exit, before the devices
    go: a buffer must not outlive its device). Reading one afterwards is an error."""
    for a in list(_live):
        a.view = None


class DeviceArray:
    """An IREE buffer view on a GPU driver's device holding one tensor: ``shape`` and
    ``dtype`` (the tensor's numpy dtype), ``storage`` (the element type of the buffer, wider
    than ``dtype`` where :data:`WIDE_STORAGE` says so). Immutable; :meth:`to_host` copies it
    to a numpy array once and keeps that copy."""

    __slots__ = ("view", "driver", "shape", "dtype", "storage", "_host", "__weakref__")

    def __init__(self, view: Any, driver: str, shape: tuple[int, ...], dtype: np.dtype, storage: np.dtype):
        self.view = view
        self.driver = driver
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.storage = np.dtype(storage)
        self._host: np.ndarray | None = None
        _live.add(self)

    @property
    def device(self) -> str:
        return device_name(self.driver)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.storage.itemsize

    def to_host(self) -> np.ndarray:
        """The values as a host numpy array (downloaded on the first call, then kept)."""
        host = self._host
        if host is None:
            host = self._download()
            host.flags.writeable = False  # the device copy is the tensor; this is a snapshot
            self._host = host
        return host

    def host_copy(self) -> np.ndarray:
        """A new, writeable host array of the values (a download unless one was kept)."""
        return self._host.copy() if self._host is not None else self._download()

    def _download(self) -> np.ndarray:
        from .hal import download

        return from_storage(download(self.view, self.driver, self.shape, self.storage), self.dtype)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.to_host()
        if dtype is not None and np.dtype(dtype) != host.dtype:
            return host.astype(dtype)
        return host.copy()

    def __repr__(self) -> str:
        return f"<DeviceArray {list(self.shape)} {self.dtype} on {self.device}>"


def to_storage(array: np.ndarray, storage: np.dtype) -> np.ndarray:
    """A host array converted to the element type a device keeps it in."""
    if array.dtype == storage:
        return array
    return array.astype(storage)


def from_storage(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A host array read from a device buffer of a wider element type, as ``dtype``."""
    if array.dtype == dtype:
        return array
    if dtype == np.bool_:
        return np.asarray(array != 0)
    return np.asarray(array.astype(dtype))


# -- arguments given up ----------------------------------------------------------------------------

class Donated:
    """An argument its caller gives up: a program that writes a result into that input's
    buffer (a compiled step's updated state) may use the argument's own buffer, whose old
    contents are then gone. The caller must hold the only reference (:func:`sole_reference`)."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array


def sole_reference(array: Any, held: int) -> bool:
    """Whether nothing but the caller's ``held`` references keeps ``array`` (a host array or a
    DeviceArray) or the memory it views alive: no other tensor shares it, no view of it was
    made, and it was not handed out (:func:`mark_shared`). Only then may its buffer take a new
    value in place without another holder seeing the change."""
    # (the references of this call: the parameter and getrefcount's argument)
    if sys.getrefcount(array) - 2 > held:
        return False
    if type(array) is DeviceArray:
        return array.view is not None
    if not isinstance(array, np.ndarray) or is_shared(array):
        return False
    base = array.base  # views of an array point at its root, which they keep alive
    while isinstance(base, np.ndarray):
        if sys.getrefcount(base) - 2 > 1:  # (the local and getrefcount's argument; the view below)
            return False
        base = base.base
    return True
