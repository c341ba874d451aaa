"""Load IREE VM flatbuffers (``.vmfb``) on a device and call their functions with numpy
arrays. Needs only ``iree.runtime`` and numpy: a deployed program never imports the compiler.

A :class:`Program` is one vmfb loaded in its own VM context on one HAL device; devices and
the VM instance are created once per process and driver. Results come back as numpy arrays
of the declared dtypes (IREE's signless ``i8`` read back as ``uint8`` where the caller says so;
Vulkan buffers that the host cannot map are read through a staging buffer).
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import re
import threading
import weakref
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DRIVERS", "BACKEND_DRIVERS", "DRIVER_ALIASES", "Program", "Function", "load", "load_vm_module",
           "get_device", "driver_devices", "release_all", "DriverUnavailable", "check_archive", "iree_reason"]

#: the IREE runtime drivers a Program can load on
DRIVERS = ("local-sync", "local-task", "vulkan", "cuda", "hip")
#: the drivers that can run the code of each built-in IREE backend; the first is the one a
#: program exported for it loads on by default (the compiler's target records read this table)
BACKEND_DRIVERS = {"iree-cpu": ("local-task", "local-sync"), "iree-vulkan": ("vulkan",), "iree-cuda": ("cuda",),
                   "iree-rocm": ("hip",), "iree-vmvx": ("local-sync", "local-task")}
#: friendlier names accepted wherever a driver is: each backend's name (and cpu, rocm) for its
#: default driver
DRIVER_ALIASES = {"cpu": BACKEND_DRIVERS["iree-cpu"][0], "rocm": BACKEND_DRIVERS["iree-rocm"][0],
                  **{backend: drivers[0] for backend, drivers in BACKEND_DRIVERS.items()}}

_BYTE = np.dtype(np.uint8)
_lock = threading.RLock()
_instance: Any = None
_devices: dict[str, Any] = {}
_programs: weakref.WeakSet[Program] = weakref.WeakSet()


def _rt():
    import iree.runtime as rt  # deferred: importing tensorplay must not load the runtime

    return rt


def normalize_driver(driver: str) -> str:
    name = DRIVER_ALIASES.get(driver, driver)
    if name not in DRIVERS:
        raise ValueError(f"unknown IREE runtime driver {driver!r}; drivers: {', '.join(DRIVERS)} "
                         f"(aliases: {', '.join(sorted(DRIVER_ALIASES))})")
    return name


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


def get_device(driver: str) -> Any:
    """The process-wide HAL device of ``driver`` (created on first use);
    :class:`DriverUnavailable` when the driver cannot load or has no usable device."""
    name = normalize_driver(driver)
    with _lock:
        device = _devices.get(name)
        if device is None:
            try:
                device = _rt().get_driver(name).create_default_device()
            except (RuntimeError, ValueError, OSError) as exc:
                raise DriverUnavailable(name, _one_line(exc), "has no usable device") from None
            _devices[name] = device
        return device


class Function:
    """One exported function of a loaded Program, bound for fast repeated calls."""

    __slots__ = ("program", "name", "result_dtypes", "_vm_function", "_n_results")

    def __init__(self, program: Program, name: str, result_dtypes: Sequence[Any] | None = None):
        self.program = program
        self.name = name
        self._vm_function = program._lookup(name)
        self.result_dtypes = None if result_dtypes is None else [np.dtype(d) for d in result_dtypes]
        self._n_results = len(self.result_dtypes) if self.result_dtypes is not None else None

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        return self.program._invoke(self._vm_function, arrays, self.result_dtypes, self._n_results)

    def __repr__(self) -> str:
        return f"<Function {self.name} of {self.program!r}>"


_ZIP_MAGIC = b"PK\x03\x04"
_WHAT_TO_DO = ("pass a .vmfb written by tp.export(...).save() or iree-compile; if it is one, it was truncated "
               "or changed after it was written: copy or save it again")


def _describe(vmfb: bytes | bytearray | memoryview, name: str | None) -> str:
    return f"{len(vmfb)} bytes{', ' + name if name else ''}"


def check_archive(vmfb: bytes | bytearray | memoryview, name: str | None = None) -> None:
    """Check the integrity of a vmfb before IREE reads it: IREE writes vmfbs as zip
    archives (``module.fb`` and the executables as members, each with a CRC-32), so a
    truncated file (no zip directory at its end) or one whose bytes changed (a CRC that does
    not match) is a ValueError saying so. Files without zip framing are left to IREE's own
    flatbuffer verification."""
    if bytes(vmfb[:4]) != _ZIP_MAGIC:
        return
    try:
        with zipfile.ZipFile(io.BytesIO(vmfb)) as archive:
            members = archive.namelist()
            if not members or members[0] != "module.fb":
                raise ValueError(f"not a loadable IREE VM flatbuffer ({_describe(vmfb, name)}): it is a zip "
                                 f"archive holding {', '.join(members[:4]) or 'nothing'}"
                                 f"{' ...' if len(members) > 4 else ''}, not an IREE module (module.fb); "
                                 f"{_WHAT_TO_DO}")
            damaged = archive.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise ValueError(f"not a loadable IREE VM flatbuffer ({_describe(vmfb, name)}): the file is truncated or "
                         f"damaged (its zip directory is missing or broken: {exc}); {_WHAT_TO_DO}") from None
    if damaged is not None:
        raise ValueError(f"not a loadable IREE VM flatbuffer ({_describe(vmfb, name)}): the file is damaged (the "
                         f"checksum of its part {damaged!r} does not match its bytes, which changed after it "
                         f"was written); {_WHAT_TO_DO}")


def load_vm_module(vmfb: bytes | bytearray | memoryview, name: str | None = None) -> Any:
    """An IREE VM module from flatbuffer bytes (copied: it must not depend on the caller
    keeping ``vmfb`` alive); bytes that are no vmfb are a ValueError."""
    rt = _rt()
    try:
        return rt.VmModule.copy_buffer(_vm_instance(), bytes(vmfb))
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"not a loadable IREE VM flatbuffer ({_describe(vmfb, name)}): IREE says: "
                         f"{iree_reason(exc)}; {_WHAT_TO_DO}") from None


class Program:
    """A vmfb loaded on one device. ``program.call(name, *arrays)`` or
    ``program.function(name)(*arrays)`` run a function and return numpy arrays."""

    def __init__(self, vmfb: bytes | bytearray | memoryview, driver: str = "local-sync", *,
                 name: str | None = None, modules: Sequence[Any] = ()):
        rt = _rt()
        instance = _vm_instance()
        self._init_program(rt, instance, load_vm_module(vmfb, name), normalize_driver(driver), name,
                           list(modules))

    def _init_program(self, rt: Any, instance: Any, vm_module: Any, driver: str, name: str | None,
                      extra_modules: list) -> None:
        """Set up the VM context: the HAL module, then ``extra_modules`` (e.g. a parameter
        provider), then the program, which imports from the modules before it."""
        self.driver = driver
        self.name = name
        self._device = get_device(driver)
        self._module = vm_module
        self._module_name = vm_module.name
        try:
            self._context = rt.VmContext(instance, modules=[rt.create_hal_module(instance, self._device),
                                                            *extra_modules, vm_module])
        except (RuntimeError, ValueError) as exc:
            raise RuntimeError(f"{name or vm_module.name}: initializing the program on {driver} failed: IREE "
                               f"says: {iree_reason(exc)} (a program that passed its integrity checks failed "
                               f"to start: check its weights and that the device works)") from None
        self._invoke_lock = threading.Lock()  # a VM context must be used by one thread at a time
        self._allocator = self._device.allocator
        self._closed = False
        self._BufferView = rt.HalBufferView
        self._VariantList = rt.VmVariantList
        self._to_element_type = rt.dtypes.map_dtype_to_hal_element_type
        self._upload_memory = int(rt.MemoryType.DEVICE_LOCAL)
        self._upload_usage = int(rt.BufferUsage.DEFAULT)
        self._functions: dict[str, Any] = {}
        _programs.add(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.driver
        return f"<Program {self.name or self.module_name} on {state}>"

    @property
    def module_name(self) -> str:
        return self._module_name

    @property
    def function_names(self) -> list[str]:
        """Exported functions (without IREE's internal ``__init``)."""
        return [n for n in self._module.function_names if not n.startswith("__")]

    def declaration(self, name: str) -> str | None:
        """IREE's ABI declaration of a function (its tensor signature), when recorded."""
        return self._lookup(name).reflection.get("iree.abi.declaration")

    def function(self, name: str, result_dtypes: Sequence[Any] | None = None) -> Function:
        """``name`` bound for calling; ``result_dtypes`` (numpy dtypes) fixes how results are
        read back, e.g. ``uint8`` for what IREE returns as signless ``i8``."""
        return Function(self, name, result_dtypes)

    def call(self, name: str, *arrays: Any, result_dtypes: Sequence[Any] | None = None) -> list[np.ndarray]:
        return self.function(name, result_dtypes)(*arrays)

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        """Call the module's only exported function."""
        names = self.function_names
        if len(names) != 1:
            raise TypeError(f"{self!r} exports {len(names)} functions ({', '.join(names)}); "
                            f"use program.call(name, *arrays)")
        return self.call(names[0], *arrays)

    def close(self) -> None:
        """Release the VM context, module and buffers now (also done at interpreter exit)."""
        self._closed = True
        self._functions.clear()
        self._context = None
        self._module = None
        self._device = None
        self._allocator = None

    # -- internals -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} was closed; load the vmfb again")

    def _lookup(self, name: str) -> Any:
        self._check_open()
        fn = self._functions.get(name)
        if fn is None:
            fn = self._module.lookup_function(name)
            if fn is None:
                raise KeyError(f"{self!r} has no function {name!r}; it exports "
                               f"{', '.join(self.function_names) or 'nothing'}")
            self._functions[name] = fn
        return fn

    def _invoke(self, vm_function: Any, arrays: Sequence[Any], result_dtypes: list[np.dtype] | None,
                n_results: int | None) -> list[np.ndarray]:
        self._check_open()
        args = self._VariantList(len(arrays))
        allocator, device = self._allocator, self._device
        for i, a in enumerate(arrays):
            a = np.asarray(a, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
            element_type = self._to_element_type(a.dtype)
            if element_type is None:
                raise TypeError(f"{self!r}: argument {i} has dtype {a.dtype}, which IREE cannot take; "
                                f"pass bool, integer, float16/bfloat16/float32/float64 arrays")
            view = allocator.allocate_buffer_copy(memory_type=self._upload_memory,
                                                  allowed_usage=self._upload_usage, device=device,
                                                  buffer=a, element_type=element_type)
            args.push_ref(view)
        results = self._VariantList(n_results if n_results is not None else 4)
        try:
            with self._invoke_lock:  # IREE VM contexts are thread-compatible, not thread-safe
                self._context.invoke(vm_function, args, results)
        except (ValueError, RuntimeError) as exc:  # IREE checks count, shapes and dtypes against the ABI
            declared = vm_function.reflection.get("iree.abi.declaration", "(no signature recorded)")
            given = ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in arrays) or "no arguments"
            kind = ValueError if isinstance(exc, ValueError) or "INVALID_ARGUMENT" in str(exc) else RuntimeError
            raise kind(f"{self!r}: calling {vm_function.name} with {given} failed: {iree_reason(exc)}\n"
                       f"  the function is: {declared}") from None
        out = []
        for i in range(len(results)):
            view = results.get_as_object(i, self._BufferView)
            dtype = result_dtypes[i] if result_dtypes is not None else None
            out.append(self._read(view, dtype))
        return out

    def _read(self, view: Any, dtype: np.dtype | None) -> np.ndarray:
        rt = _rt()
        shape = tuple(view.shape)
        raw = rt.HalElementType.map_to_dtype(view.element_type)
        if dtype is None:
            dtype = np.dtype(np.bool_) if view.element_type == rt.HalElementType.BOOL_8 else np.dtype(raw)
        nbytes = view.byte_length
        if nbytes == 0:
            return np.zeros(shape, dtype)
        buffer = view.get_buffer()
        if self._is_mappable(rt, buffer):
            host = buffer.map().asarray([nbytes], _BYTE).copy()
        else:
            host = self._staged_copy(rt, buffer, nbytes)
        if dtype == np.bool_:
            return (host != 0).reshape(shape)
        return host.view(dtype).reshape(shape)

    @staticmethod
    def _is_mappable(rt: Any, buffer: Any) -> bool:
        visible = int(rt.MemoryType.HOST_VISIBLE)
        scoped = int(rt.BufferUsage.MAPPING_SCOPED)
        return (buffer.memory_type() & visible) == visible and (buffer.allowed_usage() & scoped) == scoped

    def _staged_copy(self, rt: Any, source: Any, nbytes: int) -> np.ndarray:
        # Device-local buffers (Vulkan, CUDA) cannot be mapped; importing host memory fails on
        # lavapipe (minImportedHostPointerAlignment 4096), so copy into a host-visible staging
        # buffer on the device queue and map that.
        device = self._device
        staging = self._allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=nbytes)
        semaphore = device.create_semaphore(0)
        device.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(semaphore, 0),
                          signal_semaphores=rt.HalFence.create_at(semaphore, 1))
        rt.HalFence.create_at(semaphore, 1).wait()
        return staging.map().asarray([nbytes], _BYTE).copy()


def load(source: str | os.PathLike | bytes | bytearray | memoryview, device: str = "local-task", *,
         name: str | None = None) -> Program:
    """Load a vmfb (a path or its bytes) on ``device`` (a driver name or alias: ``cpu``,
    ``local-sync``, ``local-task``, ``vulkan``, ``cuda``, ``hip``/``rocm``)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        with open(source, "rb") as f:
            data = f.read()
        name = name or os.path.splitext(os.path.basename(os.fspath(source)))[0]
    check_archive(data, name)
    return Program(data, device, name=name)


def release_all() -> None:
    """Close every Program and drop the cached devices and VM instance, so no runtime object
    outlives the interpreter (nanobind reports those as "leaked" at exit)."""
    global _instance
    with _lock:
        for program in list(_programs):
            program.close()
        _devices.clear()
        _instance = None
    gc.collect()


atexit.register(release_all)

