"""The process's IREE HAL: the runtime module (imported on first use), one VM instance, one
device per driver (made on first use, kept until :func:`release_devices`), and reading a device
buffer back to the host. Programs (:mod:`.program`) and device arrays (:mod:`.storage`) both
stand on it."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from .drivers import normalize_driver
from .transfers import count

__all__ = ["get_device", "driver_devices", "download", "DriverUnavailable", "iree_reason", "release_devices"]

_BYTE = np.dtype(np.uint8)
#: (the runtime's lock: the devices and instance here, the programs' shared state in .program)
_lock = threading.RLock()
_instance: Any = None
_devices: dict[str, Any] = {}


def _rt():
    import iree.runtime as rt  # deferred: importing tensorplay must not load the runtime

    return rt


def _vm_instance() -> Any:
    global _instance
    with _lock:
        if _instance is None:
            _instance = _rt().VmInstance()
        return _instance


class DriverUnavailable(RuntimeError):
    """An IREE runtime driver that cannot load here (no loader or driver library) or has no
    usable device. ``driver`` names it; ``detail`` is IREE's reason in one line."""

    def __init__(self, driver: str, detail: str, what: str = "cannot load"):
        super().__init__(f"IREE runtime driver {driver!r} {what}: {detail}")
        self.driver = driver
        self.detail = detail


#: IREE status text: ``c/runtime/src/iree/vm/x.c:12: INVALID_ARGUMENT; `` (source location and code)
_IREE_LOCATION = re.compile(r"(?:\S+/)?\S+\.(?:c|cc|cpp|h):\d+:\s*(?:[A-Z_]+;\s*)?")
#: what IREE appends after the reason: the native call stack of the failure
_IREE_STACK = re.compile(r";\s*(?:while (?:invoking|calling|verifying)\b|\[\s*\d+\]).*$")


def iree_reason(exc: BaseException) -> str:
    """IREE's message of ``exc`` in one line, without its C source location, status code,
    leading "Error ...:" context and trailing call stack:
    ``Error invoking function: c/runtime/src/iree/vm/invocation.c:103: INVALID_ARGUMENT; input
    list and function mismatch; expected 2 arguments but passed 1`` -> ``input list and
    function mismatch; expected 2 arguments but passed 1``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    located = _IREE_LOCATION.search(text)
    if located is not None:
        text = text[located.end():]
    text = _IREE_LOCATION.sub("", text)
    text = _IREE_STACK.sub("", text)
    return text.strip(" ;:") or type(exc).__name__


def _one_line(exc: BaseException) -> str:
    """The first line of IREE's message, as :func:`iree_reason` gives it: ``Error creating
    driver: x.c:12: NOT_FOUND; Vulkan loader library not found; ...`` -> ``Vulkan loader
    library not found; ...``."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return iree_reason(RuntimeError(first))


def driver_devices(driver: str) -> list[dict]:
    """The devices a driver sees (empty when none); :class:`DriverUnavailable` when the
    driver itself cannot load (no libcuda, no Vulkan loader: IREE raises RuntimeError or
    ValueError for these, and both are reported the same way)."""
    name = normalize_driver(driver)
    try:
        return list(_rt().get_driver(name).query_available_devices())
    except (RuntimeError, ValueError, OSError) as exc:
        raise DriverUnavailable(name, _one_line(exc)) from None


#: what makes IREE's runtime give a new device an MPI channel provider for in-program collectives
#: (it then loads libmpi.so and calls MPI_Init itself)
_MPI_MARKERS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPIEXEC_HOSTNAME")


@contextlib.contextmanager
def _without_mpi_environment() -> Iterator[None]:
    """Hide a process's MPI launch variables while IREE makes a device: tensorplay's programs have
    no collectives, and tensorplay.distributed runs MPI through mpi4py, so a second MPI
    initialization by IREE would only fail (docs/distributed.md)."""
    saved = {k: os.environ.pop(k) for k in _MPI_MARKERS if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def get_device(driver: str) -> Any:
    """The process-wide HAL device of ``driver`` (created on first use);
    :class:`DriverUnavailable` when the driver cannot load or has no usable device."""
    name = normalize_driver(driver)
    with _lock:
        device = _devices.get(name)
        if device is None:
            threads = os.environ.get("TENSORPLAY_CPU_THREADS", "")
            if name == "local-task" and threads:
                if not threads.isdigit() or int(threads) < 1:
                    raise ValueError(f"TENSORPLAY_CPU_THREADS={threads!r}: expected a positive number of threads")
                # the worker threads of IREE's CPU task executor (default: one per core)
                _rt().flags.parse_flags(f"--task_topology_max_group_count={int(threads)}")
            try:
                with _without_mpi_environment():
                    device = _rt().get_driver(name).create_default_device()
            except (RuntimeError, ValueError, OSError) as exc:
                raise DriverUnavailable(name, _one_line(exc), "has no usable device") from None
            _devices[name] = device
        return device


def download(view: Any, driver: str, shape: tuple, raw: np.dtype, label: str | None = None) -> np.ndarray:
    """The contents of a device buffer view as a new host array of element type ``raw``
    (counted as a download)."""
    rt = _rt()
    nbytes = view.byte_length
    if nbytes == 0:
        return np.zeros(shape, raw)
    buffer = view.get_buffer()
    if _is_mappable(rt, buffer):
        host = buffer.map().asarray([nbytes], _BYTE).copy()
    else:
        host = _staged_copy(rt, get_device(driver), buffer, nbytes)
    count("download", nbytes, label)
    if raw == np.bool_:
        return (host != 0).reshape(shape)
    return host.view(raw).reshape(shape)


def _is_mappable(rt: Any, buffer: Any) -> bool:
    visible = int(rt.MemoryType.HOST_VISIBLE)
    scoped = int(rt.BufferUsage.MAPPING_SCOPED)
    return (buffer.memory_type() & visible) == visible and (buffer.allowed_usage() & scoped) == scoped


def _staged_copy(rt: Any, device: Any, source: Any, nbytes: int) -> np.ndarray:
    # Device-local buffers (Vulkan, CUDA) cannot be mapped; importing host memory fails on
    # lavapipe (minImportedHostPointerAlignment 4096), so copy into a host-visible staging
    # buffer on the device queue and map that.
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=nbytes)
    _queue_copy(rt, device, source, staging)
    return staging.map().asarray([nbytes], _BYTE).copy()


def _queue_copy(rt: Any, device: Any, source: Any, target: Any) -> None:
    """Copy buffer ``source`` into ``target`` on ``device``'s queue and wait for it."""
    semaphore = device.create_semaphore(0)
    device.queue_copy(source, target, wait_semaphores=rt.HalFence.create_at(semaphore, 0),
                      signal_semaphores=rt.HalFence.create_at(semaphore, 1))
    rt.HalFence.create_at(semaphore, 1).wait()


def release_devices(busy: set[str]) -> None:
    """Drop the cached devices but those of the drivers in ``busy`` (their buffers are still
    viewed); with none busy also the VM instance and IREE's cached HAL drivers."""
    global _instance
    with _lock:
        for name in [n for n in _devices if n not in busy]:
            del _devices[name]
        if not busy:
            _instance = None
            libs = sys.modules.get("iree._runtime_libs._runtime")  # (not loaded: nothing to clear)
            clear = getattr(libs, "clear_hal_driver_cache", None)  # IREE's cached HalDrivers
            if clear is not None:
                clear()
