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
import hashlib
import io
import logging
import os
import re
import threading
import weakref
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from .drivers import BACKEND_DRIVERS, BACKEND_OF_DRIVER, DRIVER_ALIASES, DRIVERS, normalize_driver
from .hal import (_BYTE, DriverUnavailable, _lock, _queue_copy, _rt, _vm_instance, download,
                  driver_devices, get_device, iree_reason, release_devices)
from .profile_state import state as _prof_state
from .storage import (ALIGNMENT, IN_PLACE_MIN_BYTES, DeviceArray, Donated, TransferStats, count, device_name, from_storage,
                      is_host_driver, is_shared, host_version, release_device_arrays, stats, storage_dtype, to_storage)

__all__ = ["DRIVERS", "BACKEND_DRIVERS", "DRIVER_ALIASES", "Program", "Function", "load", "load_vm_module",
           "get_device", "driver_devices", "download", "to_device", "device_copy", "resident_view", "release_all", "DriverUnavailable",
           "check_archive", "iree_reason", "BACKEND_OF_DRIVER"]

#: the compiler's perf channel (TENSORPLAY_LOGS=perf): each call's transfers, per new pattern
_perf = logging.getLogger("tensorplay.compiler.perf")
_programs: weakref.WeakSet[Program] = weakref.WeakSet()
_mapped: weakref.WeakSet = weakref.WeakSet()  # live views of CPU result buffers (see release_all)


class Function:
    """One exported function of a loaded Program, bound for fast repeated calls.

    Arguments are numpy arrays or :class:`~tensorplay.runtime.storage.DeviceArray` s on the
    program's device (passed by reference). ``results="host"`` returns numpy arrays;
    ``"device"`` keeps results on a GPU driver's device as DeviceArrays; ``"auto"`` does so
    when an argument was one. CPU drivers always return numpy views of their result buffers
    (no copy). ``storage`` gives the element type each input crosses the boundary as (wider
    than the array's dtype on Vulkan, see ``storage.WIDE_STORAGE``), ``result_dtypes`` the
    dtype each result is read as; ``resident`` the input positions whose host arrays are kept
    on the device between calls (module weights); ``private`` the inputs the program may write
    into (passed as fresh copies: a caller's array or device tensor is never changed)."""

    #: it takes DeviceArrays of its program's device as they are (the compiler wraps other
    #: runners to copy device arrays to the host)
    takes_device_arrays = True

    __slots__ = ("program", "name", "result_dtypes", "storage", "_resident", "private", "results", "label",
                 "device_results", "kept_results", "donated", "alignment", "_vm_function", "_n_results", "_logged", "_special",
                 "__weakref__")

    def __init__(self, program: Program, name: str, result_dtypes: Sequence[Any] | None = None, *,
                 storage: Sequence[Any] | None = None, resident: Sequence[int] = (), private: Sequence[int] = (),
                 results: str = "host"):
        if results not in ("host", "device", "auto"):
            raise ValueError(f"results must be 'host', 'device' or 'auto', not {results!r}")
        self.program = program
        self.name = name
        self._vm_function = program._lookup(name)
        program._bound.add(self)
        self.result_dtypes = None if result_dtypes is None else [np.dtype(d) for d in result_dtypes]
        self._n_results = len(self.result_dtypes) if self.result_dtypes is not None else None
        self.storage = None if storage is None else [None if d is None else np.dtype(d) for d in storage]
        #: input position -> output position: the program writes that output into the input's
        #: buffer (its reflection says which: the compiler ties a step's updated state to the
        #: inputs holding it). Such an input is passed as a copy unless the caller gives it up
        #: (:class:`~tensorplay.runtime.storage.Donated`): then its own buffer is written.
        self.donated: dict[int, int] = {i: k for k, i in _donated_pairs(self._vm_function).items()}
        #: the byte alignment this function's code assumes of a host array it reads in place
        self.alignment = int(self._vm_function.reflection.get(ALIGNMENT_KEY, ALIGNMENT))
        self.private = frozenset(private) | frozenset(self.donated)
        self.resident = frozenset(resident)
        self.results = results
        #: result positions that stay on a GPU driver's device whatever ``results`` says (values
        #: only a later program reads, such as what a training forward saves for its backward)
        self.device_results: frozenset[int] = frozenset()
        #: result positions that become the new storage of tensors the next call reads again
        #: (state a compiled step updates): a CPU program keeps their buffers for that call
        self.kept_results: frozenset[int] = frozenset()
        self.label = program.name or name
        self._logged: set = set()  # transfer patterns already logged (TENSORPLAY_LOGS=perf)

    @property
    def resident(self) -> frozenset[int]:
        return self._resident

    @resident.setter
    def resident(self, positions: Any) -> None:
        self._resident = frozenset(positions)
        # the inputs a call cannot take the plain path for (private, resident or widened)
        self._special = self.private | self._resident | frozenset(
            i for i, d in enumerate(self.storage or ()) if d is not None)

    def __call__(self, *arrays: Any) -> list[Any]:
        return self.program._invoke(self, arrays)

    def storage_of(self, index: int) -> np.dtype | None:
        """The element type input ``index`` crosses the boundary as (None: its own)."""
        return self.storage[index] if self.storage is not None and index < len(self.storage) else None

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
        self._upload_memory = int(rt.MemoryType.DEVICE_LOCAL)
        self._upload_usage = int(rt.BufferUsage.DEFAULT)
        self._import_memory = int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE)
        self._host_memory = is_host_driver(driver)
        self._functions: dict[str, Any] = {}
        self._bound: weakref.WeakSet = weakref.WeakSet()  # its Functions (close drops their IREE handles)
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

    def function(self, name: str, result_dtypes: Sequence[Any] | None = None, **how: Any) -> Function:
        """``name`` bound for calling; ``result_dtypes`` (numpy dtypes) fixes how results are
        read back, e.g. ``uint8`` for what IREE returns as signless ``i8``; ``how``: the
        ``storage``, ``resident`` and ``results`` of :class:`Function`."""
        return Function(self, name, result_dtypes, **how)

    def call(self, name: str, *arrays: Any, result_dtypes: Sequence[Any] | None = None,
             results: str = "host") -> list[Any]:
        return self.function(name, result_dtypes, results=results)(*arrays)

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
        for fn in list(self._bound):  # no IREE object may outlive the runtime (see release_all)
            fn._vm_function = None
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

    def _invoke(self, fn: Function, arrays: Sequence[Any]) -> list[Any]:
        if _prof_state.active:  # tensorplay.profiler records: upload, invoke, download
            return _prof_state.hooks.program_call(self, fn, arrays)
        if _perf.isEnabledFor(logging.INFO):
            return _logged_call(self, fn, arrays)
        return self._call(fn, arrays)

    def _call(self, fn: Function, arrays: Sequence[Any]) -> list[Any]:
        # the path of every compiled call: per-argument facts are read from the Function's
        # tables, small host arrays and results are copied (cheaper than mapping them)
        if self._closed:
            self._check_open()
        args = self._VariantList(len(arrays))
        in_place: list[np.ndarray] = []  # host arrays a CPU program reads where they are
        on_device = False
        special = fn._special
        for i, a in enumerate(arrays):
            if type(a) is np.ndarray and i not in special and a.nbytes <= _COPY_BELOW and a.flags.c_contiguous:
                args.push_ref(_copy_up(self._device, a, _element_type(a.dtype, self, i), fn.label))
                continue
            if type(a) is Donated:  # given up by the caller: its buffer takes the new value
                a = a.array
                if i in fn.donated and (type(a) is not DeviceArray or (a.driver == self.driver and
                                                                       a.view is not None)):
                    on_device = on_device or type(a) is DeviceArray
                    args.push_ref(self._donated_view(a, fn, i))
                    continue
            if isinstance(a, DeviceArray):
                if a.driver != self.driver:
                    backend = BACKEND_OF_DRIVER.get(a.driver)
                    raise ValueError(f"{self!r}: argument {i} is on {a.device} but the program runs on "
                                     f"{device_name(self.driver)} ({self.driver}); move it with "
                                     f".to('{device_name(self.driver)}') or compile for its device"
                                     f"{f' (backend={backend!r})' if backend else ''}")
                if a.view is None:
                    raise RuntimeError(f"{self!r}: argument {i} is a {a.device} tensor whose buffer was "
                                       f"released by tensorplay.runtime.release_all()")
                on_device = True
                args.push_ref(self._device_copy(a.view) if i in fn.private else a.view)
                continue
            a = np.asarray(a, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
            storage = fn.storage_of(i)
            if i in fn.private:  # the program may write into it: a copy of its own
                view = self.upload(a, storage, fn.label, None, i, copy=True)
            elif i in fn.resident:
                if not is_shared(a):
                    view = resident_view(self, a, storage, fn.label, i, fn.alignment)
                else:
                    _note_shared(fn, i)
                    view = self.upload(a, storage, fn.label, in_place, i, alignment=fn.alignment)
            else:
                view = self.upload(a, storage, fn.label, in_place, i, alignment=fn.alignment)
            args.push_ref(view)
        n = fn._n_results
        results = self._VariantList(n if n is not None else 4)
        try:
            with self._invoke_lock:  # IREE VM contexts are thread-compatible, not thread-safe
                if _prof_state.active:
                    _prof_state.hooks.invoke(self._context.invoke, fn._vm_function, args, results)
                else:
                    self._context.invoke(fn._vm_function, args, results)
        except (ValueError, RuntimeError) as exc:  # IREE checks count, shapes and dtypes against the ABI
            vm_function = fn._vm_function
            declared = vm_function.reflection.get("iree.abi.declaration", "(no signature recorded)")
            given = ", ".join(f"{a.dtype}{list(a.shape)}" if isinstance(a, DeviceArray) else
                              f"{np.asarray(a).dtype}{list(np.shape(a))}"
                              for a in (b.array if type(b) is Donated else b for b in arrays)) or "no arguments"
            kind = ValueError if isinstance(exc, ValueError) or "INVALID_ARGUMENT" in str(exc) else RuntimeError
            raise kind(f"{self!r}: calling {vm_function.name} with {given} failed: {iree_reason(exc)}\n"
                       f"  the function is: {declared}") from None
        for i in fn.donated:  # a device array given up now holds a new value: it is spent
            a = arrays[i] if i < len(arrays) else None
            if type(a) is Donated and isinstance(a.array, DeviceArray) and a.array.driver == self.driver:
                a.array.view = None
        keep = fn.results == "device" or (fn.results == "auto" and on_device)
        dtypes = fn.result_dtypes
        BufferView = self._BufferView
        stay = fn.device_results
        kept = fn.kept_results
        return [self._result(results.get_as_object(i, BufferView), None if dtypes is None else dtypes[i],
                             keep or i in stay, in_place, fn.label, i in kept) for i in range(len(results))]

    def _donated_view(self, array: Any, fn: Function, index: int) -> Any:
        """The buffer of input ``index``, given up by the caller (:class:`Donated`), for the
        program to write its new value into: a device array's own; for a host array, the program
        result it came from (kept by :func:`_remember`, and forgotten now: it is about to
        change), else a copy."""
        if type(array) is DeviceArray:
            return array.view  # (spent once the call succeeds: see _call)
        storage = fn.storage_of(index)
        if storage is None and self._host_memory:
            key = ("host", id(array), "")
            with _lock:
                hit = _resident.get(key)
                if hit is not None and hit[0]() is array:
                    del _resident[key]
                    return hit[1]
        return self.upload(np.asarray(array, order="C"), storage, fn.label, None, index, copy=True)

    def upload(self, array: np.ndarray, storage: np.dtype | None = None, label: str | None = None,
               in_place: list | None = None, index: int | None = None, copy: bool = False,
               alignment: int = ALIGNMENT) -> Any:
        """A buffer view of host ``array`` on this program's device: the array itself where
        a CPU driver can read it in place (``alignment``-byte aligned, as ``storage``, unless
        ``copy``), else a counted copy."""
        array = np.asarray(array, order="C")
        if storage is not None and array.dtype != storage:
            array = to_storage(array, storage)
        element_type = _element_type(array.dtype, self, index)
        if not copy and self.reads_in_place(array, alignment):
            buffer = self._allocator.import_host_allocation(array, self._import_memory, self._upload_usage)
            count("import", array.nbytes, label)
            if in_place is not None:
                in_place.append(array)
            return self._BufferView(buffer, array.shape, int(element_type))
        return _copy_up(self._device, array, element_type, label)

    def reads_in_place(self, array: np.ndarray, alignment: int = ALIGNMENT) -> bool:
        """Whether a CPU driver reads host ``array`` where it is, rather than from a copy: the
        code assumes its buffers are ``alignment``-byte aligned (a function's
        :attr:`Function.alignment`; :data:`ALIGNMENT` for code compiled without saying)."""
        return (self._host_memory and array.nbytes > 0 and array.ctypes.data % alignment == 0
                and array.flags.c_contiguous)

    def _device_copy(self, view: Any) -> Any:
        """A new buffer on this device holding ``view``'s bytes (a device-side copy)."""
        rt = _rt()
        nbytes = view.byte_length
        buffer = self._allocator.allocate_buffer(memory_type=self._upload_memory, allowed_usage=self._upload_usage,
                                                 allocation_size=max(nbytes, 1))
        if nbytes:
            _queue_copy(rt, self._device, view.get_buffer(), buffer)
        return self._BufferView(buffer, list(view.shape), int(view.element_type))

    def _result(self, view: Any, dtype: np.dtype | None, keep: bool, in_place: list, label: str,
                kept: bool = False) -> Any:
        raw = _RAW_DTYPES.get(view.element_type)
        if raw is None:
            raw = _raw_dtype(view.element_type)
        if dtype is None:
            dtype = raw
        if not self._host_memory:
            shape = tuple(view.shape)
            if keep:
                return DeviceArray(view, self.driver, shape, dtype, raw)
            return from_storage(download(view, self.driver, shape, raw, label), dtype)
        nbytes = view.byte_length
        if nbytes <= _COPY_BELOW:  # a copy of its own: nothing keeps the buffer, nothing aliases
            if nbytes == 0:
                return np.zeros(tuple(view.shape), dtype)
            host = np.frombuffer(view.get_buffer().map(), raw, nbytes // raw.itemsize).reshape(view.shape)
            host = host.copy()
        else:
            host = _MappedArray.of(view, tuple(view.shape), raw, self.driver)
            for a in in_place:  # a result IREE passed through from an input: a copy, as eager gives
                if np.shares_memory(host, a):
                    host = host.copy()
                    kept = False  # (the buffer is the caller's memory, which may change)
                    break
        if raw == dtype:
            if kept:  # state the next call reads again: it passes this buffer, without a copy
                _remember(host, view)
            return host
        if raw.itemsize == dtype.itemsize and raw.kind in "biu" and dtype.kind in "biu":
            return host.view(dtype)  # IREE's signless integers, read as the declared dtype
        return from_storage(host, dtype)


#: host arrays and CPU results up to this size are copied rather than imported or mapped: a
#: copy of a few KiB costs less than the import's alignment check or the mapping's bookkeeping
_COPY_BELOW = IN_PLACE_MIN_BYTES

_ELEMENT_TYPES: dict[np.dtype, Any] = {}
_UPLOAD: tuple[int, int] | None = None  # the memory type and usage of uploads (IREE's, read once)
_RAW_DTYPES: dict[Any, np.dtype] = {}


def _element_type(dtype: np.dtype, program: Program | None, index: int | None = None) -> Any:
    """IREE's element type of numpy ``dtype`` (cached); a TypeError for dtypes IREE lacks."""
    et = _ELEMENT_TYPES.get(dtype)
    if et is None:
        et = _rt().dtypes.map_dtype_to_hal_element_type(dtype)
        if et is not None:
            _ELEMENT_TYPES[dtype] = et = int(et)
        else:
            what = "an argument" if index is None else f"argument {index}"
            raise TypeError(f"{program or 'tensorplay.runtime'!r}: {what} has dtype {dtype}, which IREE cannot take; "
                            f"pass bool, integer, float16/bfloat16/float32/float64 arrays")
    return et


def _raw_dtype(element_type: Any) -> np.dtype:
    """The numpy dtype IREE's ``element_type`` reads as (cached; IREE's BOOL_8 as numpy bool)."""
    rt = _rt()
    raw = np.dtype(np.bool_) if element_type == rt.HalElementType.BOOL_8 else \
        np.dtype(rt.HalElementType.map_to_dtype(element_type))
    _RAW_DTYPES[element_type] = raw
    return raw


#: the reflection entry of a function that writes outputs into inputs' buffers: ``"k:i,..."``
#: (output ``k`` into input ``i``), set by the compiler (the donate-buffers pass, passes/donation.py)
DONATED_KEY = "tensorplay.donated"

#: the reflection entry of a function whose CPU code assumes only this byte alignment of its
#: arguments' buffers (the compiler sets IREE's stream resource alignment with a module
#: attribute, backends/iree.py): host arrays aligned that far are read in place; without it,
#: :data:`ALIGNMENT` is assumed
ALIGNMENT_KEY = "tensorplay.input_alignment"

#: the argument alignment of CPU code compiled for numpy's own allocations (``np.empty``,
#: ``tp.from_numpy`` of a user's array), which start 16 bytes into a page: code that assumes 16
#: reads them where they are instead of from a copy made on every call
CPU_INPUT_ALIGNMENT = 16


def _donated_pairs(vm_function: Any) -> dict[int, int]:
    """The (output -> input) pairs a compiled function writes in place, from its reflection."""
    pairs: dict[int, int] = {}
    for item in vm_function.reflection.get(DONATED_KEY, "").split(","):
        if item.strip():
            k, i = item.split(":")
            pairs[int(k)] = int(i)
    return pairs


def _note_shared(fn: Function, index: int) -> None:
    if ("shared", index) not in fn._logged and _perf.isEnabledFor(logging.INFO):
        fn._logged.add(("shared", index))
        _perf.info("@%s: input %d (a module weight or captured tensor) shares its memory with a numpy "
                   "array handed out by Tensor.numpy(), np.asarray(tensor), tp.from_numpy or DLPack, so "
                   "it is copied to the device on every call (a write through that array would not be "
                   "seen otherwise); move the model to the device (model.to(...)) to keep it there",
                   fn.name, index)


def _logged_call(program: Program, fn: Function, arrays: Sequence[Any]) -> list[Any]:
    """A call that logs what it moved between host and device, once per pattern."""
    before = stats().by_program.get(fn.label, TransferStats())
    out = program._call(fn, arrays)
    after = stats().by_program.get(fn.label, TransferStats())
    moved = after - before
    pattern = (moved.uploads, moved.upload_bytes, moved.downloads, moved.download_bytes, moved.imports)
    if pattern not in fn._logged and len(fn._logged) < 16:
        fn._logged.add(pattern)
        _perf.info("call of @%s on %s: %s", fn.name, program.driver, moved.summary())
    return out


class _MappedArray:
    """The numpy array interface of a mapped CPU result buffer, as bytes: arrays viewing it
    keep the mapping and the buffer alive."""

    __slots__ = ("__array_interface__", "_mapping", "_view", "driver", "__weakref__")

    def __init__(self, view: Any, mapping: Any, pointer: int, nbytes: int, driver: str):
        self._view = view  # the buffer view, and the mapping of its buffer the memory belongs to
        self._mapping = mapping
        self.driver = driver
        _mapped.add(self)
        self.__array_interface__ = {"data": (pointer, False), "shape": (nbytes,), "typestr": "|u1",
                                    "version": 3}

    @classmethod
    def of(cls, view: Any, shape: tuple, dtype: np.dtype, driver: str) -> np.ndarray:
        nbytes = view.byte_length
        mapping = view.get_buffer().map()
        flat = mapping.asarray([nbytes], _BYTE)
        raw = np.asarray(cls(view, mapping, flat.ctypes.data, nbytes, driver))
        return raw.view(dtype).reshape(shape)  # (numpy cannot name ml_dtypes' bfloat16 in an interface)


def _copy_up(device: Any, array: np.ndarray, element_type: Any, label: str | None) -> Any:
    """A new device-local buffer view on ``device`` holding host ``array`` (counted upload)."""
    global _UPLOAD
    if _UPLOAD is None:
        rt = _rt()
        _UPLOAD = int(rt.MemoryType.DEVICE_LOCAL), int(rt.BufferUsage.DEFAULT)
    view = device.allocator.allocate_buffer_copy(memory_type=_UPLOAD[0], allowed_usage=_UPLOAD[1], device=device,
                                                 buffer=array, element_type=element_type)
    count("upload", array.nbytes, label)
    return view


# -- device copies of host arrays kept between calls ------------------------------------------------

_resident: dict[tuple[str, int, str], tuple[weakref.ref, Any, int]] = {}


def resident_view(program: Program, array: np.ndarray, storage: np.dtype | None, label: str | None,
                  index: int | None = None, alignment: int = ALIGNMENT) -> Any:
    """The device copy of host ``array`` on ``program``'s device, made on first use and kept
    while the array lives and is not written in place (see storage.py). The
    CPU drivers share one copy: both keep buffers in host memory, and a program on either
    reads the other's (a program timed on both drivers uploads its weights once)."""
    memory = "host" if program._host_memory else program.driver
    key = (memory, id(array), "" if storage is None else storage.str)
    hit = _resident.get(key)
    if hit is not None and hit[0]() is array and hit[2] == host_version(array):
        return hit[1]
    if storage is None and program.reads_in_place(array, alignment):
        return program.upload(array, storage, label, None, index, alignment=alignment)  # read in place: nothing to keep
    view = program.upload(array, storage, label, None, index)
    _keep(key, array, view)
    return view


def _remember(array: np.ndarray, view: Any) -> None:
    """Keep CPU result ``view`` as the device copy of ``array``, the host array made of it, for
    as long as ``array`` lives: a later call that passes ``array`` back as a resident input
    (a training step's parameters and optimizer state) passes this buffer as it is, instead of
    copying a small array up or importing a large one again."""
    _keep(("host", id(array), ""), array, view)


def _keep(key: tuple[str, int, str], array: np.ndarray, view: Any) -> None:
    """``view`` under ``key`` in the resident table until ``array`` dies."""
    try:
        ref = weakref.ref(array, lambda _r, key=key: _resident.pop(key, None))
    except TypeError:
        return
    with _lock:
        _resident[key] = (ref, view, host_version(array))


def device_copy(a: DeviceArray) -> DeviceArray:
    """A new buffer on ``a``'s device holding its bytes (a device-side copy): a tensor of its
    own where a program returned one of its arguments' buffers."""
    rt = _rt()
    device = get_device(a.driver)
    view = a.view
    nbytes = view.byte_length
    buffer = device.allocator.allocate_buffer(memory_type=int(rt.MemoryType.DEVICE_LOCAL),
                                              allowed_usage=int(rt.BufferUsage.DEFAULT),
                                              allocation_size=max(nbytes, 1))
    if nbytes:
        _queue_copy(rt, device, view.get_buffer(), buffer)
    return DeviceArray(rt.HalBufferView(buffer, list(view.shape), int(view.element_type)), a.driver, a.shape,
                       a.dtype, a.storage)


def to_device(array: np.ndarray, driver: str) -> DeviceArray:
    """Host ``array`` copied to the device of GPU driver ``driver`` (``Tensor.to``)."""
    name = normalize_driver(driver)
    array = np.asarray(array, order="C")
    storage = storage_dtype(name, array.dtype)
    wide = to_storage(array, storage)
    view = _copy_up(get_device(name), wide, _element_type(wide.dtype, None), None)
    return DeviceArray(view, name, array.shape, array.dtype, storage)


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


def check_sha256(data: bytes, pinned: str | None, label: str) -> None:
    """Refuse ``data`` unless its sha256 is ``pinned`` (64 hexadecimal digits, optionally
    prefixed ``sha256:``; None pins nothing): a file fetched from elsewhere is native code to
    run only if it is the one its author published. ``label`` names the caller and file."""
    if pinned is None:
        return
    expected = str(pinned).strip().lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", expected):
        raise ValueError(f"{label}: sha256={pinned!r} is not a sha256 digest (64 hexadecimal digits, as `sha256sum` "
                         "prints them)")
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ValueError(f"{label} has sha256 {actual}, not the pinned {expected}: it is not the file you pinned "
                         "(damaged, replaced, or another build), and nothing of it was loaded. Fetch it again, or "
                         "pin the digest of the file you mean to trust")


def release_all() -> None:
    """Close every Program and drop the cached devices and VM instance, so no runtime object
    outlives the interpreter (nanobind reports those as "leaked" at exit). A CPU device whose
    result buffers are still viewed by live numpy arrays stays: its buffers must not outlive it."""
    with _lock:
        release_device_arrays()
        _resident.clear()
        for program in list(_programs):
            program.close()
        gc.collect()
        release_devices({h.driver for h in list(_mapped)})
    gc.collect()


def _at_exit() -> None:
    """Interpreter exit: the buffers of CPU results still viewed by numpy arrays are released
    now, while IREE's module is alive. Python may free those arrays after IREE's module is
    gone (say, from the globals of a class defined in ``__main__``), and a buffer released then
    crashes the interpreter; at this point no more Python code reads them (atexit handlers
    registered after tensorplay ran first)."""
    for holder in list(_mapped):
        holder._view = holder._mapping = None
    _mapped.clear()
    release_all()


atexit.register(_at_exit)

