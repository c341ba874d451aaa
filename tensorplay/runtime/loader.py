"""Load exported programs (``tp.export(...).save(path)``) and call their entry points.

Needs only ``iree.runtime`` and numpy. :func:`load` returns an :class:`ExportedModule`: a
:class:`~tensorplay.runtime.program.Program` whose entry points (``forward`` and the
methods marked ``@tp.compiler.export``) are attributes taking numpy arrays or tensors and
returning numpy arrays in the structure the Python method returned. Arguments are checked
against the signature stored in the vmfb before anything runs. Weights exported to an IREE
parameter archive (``.irpa``) are loaded from the archive named in the vmfb, next to it,
or from ``parameters=``.

>>> from tensorplay import runtime
>>> gpt = runtime.load("gpt.vmfb")                  # doctest: +SKIP
>>> logits, loss = gpt.forward(tokens)              # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import program as _program
from .drivers import BACKEND_DRIVERS, normalize_driver
from .program import Program, check_archive, check_sha256, iree_reason
from .signature import MODULE_KEY, SIGNATURE_KEY, EntrySignature, ModuleInfo, numpy_dtype

__all__ = ["load", "ExportedModule", "EntryPoint", "save_parameters", "load_parameters"]

_PARAMETER_FORMAT = "TENSORv0"


def _rt() -> Any:
    import iree.runtime as rt  # deferred: importing tensorplay must not load the runtime

    return rt


# -- parameter archives --------------------------------------------------------------------------

def save_parameters(path: str | os.PathLike, arrays: Mapping[str, Any]) -> None:
    """Write ``{key: array}`` as an IREE parameter archive (``.irpa``) readable by
    :func:`load_parameters`, ``iree-dump-parameters`` and ``iree-run-module --parameters``."""
    index = _rt().ParameterIndex()
    for key, value in arrays.items():
        _add_array(index, key, value)
    index.create_archive_file(os.fspath(path))


def _add_array(index: Any, key: str, value: Any) -> None:
    array = value.numpy(force=True) if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value
    array = np.ascontiguousarray(np.asarray(array))
    name = "bool" if array.dtype == np.bool_ else array.dtype.name
    meta = {"type": "Tensor", "dtype": name, "shape": list(array.shape),
            "dtype_desc": {"class_name": type(array.dtype).__name__, "is_complex": False,
                           "is_floating_point": array.dtype.kind == "f" or name == "bfloat16",
                           "is_signed": array.dtype.kind in "fi" or name == "bfloat16",
                           "itemsize": array.dtype.itemsize}}
    raw = array.reshape(-1).view(np.uint8) if array.ndim else array.reshape(1).view(np.uint8).copy()
    index.add_buffer(key, raw, metadata=f"{_PARAMETER_FORMAT}:{json.dumps(meta)}")


def load_parameters(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a parameter archive, by key (copies; the file is not kept open). A
    damaged archive, or a file of another format, is a ValueError naming the file."""
    where = os.fspath(path)
    if os.path.isfile(where):
        from .file_kinds import describe_kind, file_kind

        kind = file_kind(where)
        if kind not in (None, "irpa"):  # IREE would read a safetensors or GGUF file as raw bytes
            what, how = describe_kind(kind)
            raise ValueError(f"{where} is {what}, not an IREE parameter archive (.irpa); {how}")
    index = _rt().ParameterIndex()
    _load_index(index, path)
    return {key: _entry_array(key, entry, where).copy() for key, entry in index.items()}


_REWRITE = "write it again (ExportedProgram.save_parameters or tensorplay.runtime.save_parameters)"


def _load_index(index: Any, path: str | os.PathLike, label: str | None = None) -> None:
    """``index.load(path)``; an archive IREE cannot parse (truncated, not an archive) is a
    ValueError saying which file and why, a missing one a FileNotFoundError."""
    where = os.fspath(path)
    prefix = f"{label}: " if label else ""
    if not os.path.exists(where):
        raise FileNotFoundError(f"{prefix}no parameter archive at {where}")
    if os.path.isdir(where):
        raise IsADirectoryError(f"{prefix}{where} is a folder; pass the parameter archive (.irpa) file in it")
    try:
        index.load(where)
    except (RuntimeError, ValueError, IndexError, OSError) as exc:
        size = os.path.getsize(where)
        from .file_kinds import describe_kind, file_kind

        kind = file_kind(where) if size else None
        if kind not in (None, "irpa", "safetensors", "gguf"):  # the last two: formats IREE reads
            raise ValueError(f"{prefix}{where} ({size} bytes) is not an IREE parameter archive (.irpa): it is "
                             f"{describe_kind(kind)[0]}. Write the parameters with "
                             f"ExportedProgram.save_parameters or tensorplay.runtime.save_parameters") from None
        reason = "the file is empty" if size == 0 else f"IREE says: {iree_reason(exc)}"
        raise ValueError(f"{prefix}{where} ({size} bytes) is not a readable IREE parameter "
                         f"archive (.irpa): {reason}. It is truncated, damaged or not an archive; "
                         f"{_REWRITE}") from None


class _BadMetadata(Exception):
    """An archive entry whose tensor metadata cannot be read (what is wrong with it)."""


def _metadata_spec(entry: Any) -> tuple[str, tuple[int, ...]] | None:
    """(dtype name, shape) in an entry's tensor metadata; None for an entry without any (an
    archive written by other tools: raw bytes); _BadMetadata when it is there but unreadable."""
    fmt, _, body = bytes(entry.metadata).decode(errors="replace").partition(":")
    if fmt not in (_PARAMETER_FORMAT, "PYTORCH") or not body:
        return None
    try:
        d = json.loads(body)
    except (ValueError, RecursionError):
        raise _BadMetadata(f"its {fmt} metadata is not valid JSON ({body[:60]!r})") from None
    if not isinstance(d, dict):
        raise _BadMetadata(f"its {fmt} metadata is {body[:60]!r}, not a JSON object")
    name, shape = d.get("dtype"), d.get("shape")
    try:
        dtype = numpy_dtype(name) if isinstance(name, str) else None
    except (TypeError, ValueError, ImportError):
        dtype = None
    if dtype is None or (dtype.kind not in "biufc" and name != "bfloat16"):
        raise _BadMetadata(f"its metadata names dtype {repr(name)[:40]}, which is no tensor dtype")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise _BadMetadata(f"its metadata gives shape {str(shape)[:60]}, not a list of non-negative ints")
    return name, tuple(shape)


def _archive_spec(entry: Any) -> tuple[str, tuple[int, ...]] | None:
    """(dtype name, shape) recorded in an archive entry's tensor metadata, when it has some
    this runtime reads."""
    try:
        return _metadata_spec(entry)
    except _BadMetadata:
        return None


def _entry_array(key: str, entry: Any, where: Any) -> np.ndarray:
    if entry.is_splat:
        raw = np.frombuffer(bytes(entry.splat_pattern), np.uint8)
        raw = np.tile(raw, entry.length // max(1, raw.size))
    else:
        raw = np.asarray(entry.file_view).view(np.uint8)
    try:
        spec = _metadata_spec(entry)
        if spec is None:
            return raw  # an archive written by other tools without tensor metadata: raw bytes
        dtype = numpy_dtype(spec[0])
        nbytes = int(np.prod(spec[1], dtype=np.int64)) * dtype.itemsize
        if nbytes != raw.size:
            raise _BadMetadata(f"its metadata says {spec[0]}[{', '.join(map(str, spec[1]))}] ({nbytes} bytes), "
                               f"but it holds {raw.size} bytes")
    except _BadMetadata as e:
        raise ValueError(f"{os.fspath(where)}: parameter {key!r} cannot be read: {e}. The archive is damaged or "
                         f"was written by another tool; {_REWRITE}") from None
    return raw.view(dtype).reshape(spec[1])


# -- loading -------------------------------------------------------------------------------------

class EntryPoint:
    """One exported function, called with tensors or arrays (positionally or by argument
    name); returns numpy arrays nested like the Python method's result."""

    __slots__ = ("module", "name", "signature", "_function")

    def __init__(self, module: ExportedModule, signature: EntrySignature):
        self.module = module
        self.name = signature.name
        self.signature = signature
        self._function = module.function(signature.name, signature.result_dtypes())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        arrays = self.signature.check_inputs(self._positional(args, kwargs))
        results = self._function(*arrays)
        return self.signature.restore(results)

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        names = [s.name for s in self.signature.inputs]
        values = list(args) + [None] * (len(names) - len(args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{self.signature} got an unexpected keyword argument {key!r}")
            i = names.index(key)
            if i < len(args):
                raise TypeError(f"{self.signature} got multiple values for argument {key!r}")
            values[i] = value
        missing = [n for n, v in zip(names, values) if v is None]
        if missing:
            raise TypeError(f"{self.signature} is missing argument(s) {', '.join(map(repr, missing))}")
        return tuple(values)

    def __repr__(self) -> str:
        return f"<EntryPoint {self.signature}>"


class _Overloads:
    """The entry points of one overloaded method: a call runs the first whose signature
    accepts the arguments."""

    def __init__(self, method: str, entries: list[EntryPoint]):
        self.method = method
        self.entries = entries

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for entry in self.entries:
            try:
                entry.signature.check_inputs(entry._positional(args, kwargs))
            except (TypeError, ValueError):
                continue
            return entry(*args, **kwargs)
        listed = "\n  ".join(str(e.signature) for e in self.entries)
        raise TypeError(f"no overload of {self.method} accepts these arguments; the overloads are:\n  {listed}")

    def __repr__(self) -> str:
        return f"<overloaded entry point {self.method}: {', '.join(e.name for e in self.entries)}>"


class ExportedModule(Program):
    """An exported vmfb loaded on a device. ``module.forward(x)``, ``module(x)`` (forward),
    ``module.encode(x)`` or ``module["encode$0"](x)`` call entry points; ``signatures``
    lists them. Files without tensorplay signatures load too and are called like a Program."""

    def __init__(self, data: bytes, device: str | None = None, *, name: str | None = None,
                 parameters: Any = None, source_path: str | None = None):
        rt = _rt()
        requested = normalize_driver(device) if device is not None else None
        instance = _program._vm_instance()
        check_archive(data, name)
        vm_module = _program.load_vm_module(data, name)
        self.signatures: dict[str, EntrySignature] = {}
        self.info: ModuleInfo | None = None
        for fn_name in vm_module.function_names:
            reflection = vm_module.lookup_function(fn_name).reflection
            if SIGNATURE_KEY in reflection:
                where = f"{name or vm_module.name}: the {SIGNATURE_KEY} of function {fn_name!r}"
                signature = _read_metadata(EntrySignature.from_json, reflection[SIGNATURE_KEY], where)
                _check_declaration(signature, reflection.get("iree.abi.declaration"), where)
                self.signatures[fn_name] = signature
            if self.info is None and MODULE_KEY in reflection:
                where = f"{name or vm_module.name}: the {MODULE_KEY} record of function {fn_name!r}"
                self.info = _read_metadata(ModuleInfo.from_json, reflection[MODULE_KEY], where)
        label = name or (self.info.name if self.info else None) or vm_module.name
        driver = self._choose_driver(requested, label)
        self._parameter_index = None
        extra = []
        if self.info is not None and self.info.parameter_scope is not None:
            self._parameter_index = self._open_parameters(parameters, source_path, label)
            provider = self._parameter_index.create_provider(scope=self.info.parameter_scope)
            extra.append(rt.create_io_parameters_module(instance, provider))
        elif parameters is not None:
            raise ValueError(f"{label}: parameters=... was given, but this program embeds its weights "
                             f"(export it with external_weights=True to load them from an archive)")
        self._init_program(rt, instance, vm_module, driver, label, extra)
        self._entries: dict[str, EntryPoint] = {}

    # -- construction ---------------------------------------------------------------------------
    def _choose_driver(self, requested: str | None, label: str) -> str:
        backend = self.info.backend if self.info is not None else None
        allowed = BACKEND_DRIVERS.get(backend or "")
        if requested is None:
            return allowed[0] if allowed else "local-task"
        if allowed and requested not in allowed:
            raise ValueError(f"{label} was exported for {backend} ({self.info.target} code), which the "
                             f"{requested!r} driver cannot run; load it with device="
                             f"{' or '.join(map(repr, allowed))}, or export again with the backend of "
                             f"that device")
        return requested

    def _open_parameters(self, parameters: Any, source_path: str | None, label: str) -> Any:
        rt = _rt()
        info = self.info
        index = rt.ParameterIndex()
        if isinstance(parameters, Mapping):
            for key, value in parameters.items():
                _add_array(index, key, value)
            where = "the parameters mapping"
        else:
            if parameters is None:
                parameters = _find_archive(source_path, info.parameter_archive)
                if parameters is None:
                    near = f" next to {source_path}" if source_path else ""
                    raise FileNotFoundError(
                        f"{label} keeps its weights in a parameter archive (saved as "
                        f"{info.parameter_archive!r}), and none was found{near}; pass "
                        f"parameters='path/to/archive.irpa'")
            _load_index(index, parameters, label)
            where = os.fspath(parameters)
        entries = dict(index.items())
        for spec in info.parameters:
            entry = entries.get(spec.name)
            if entry is None:
                raise ValueError(f"{label}: the parameter archive {where} has no entry {spec.name!r} "
                                 f"(expected {spec}); it has {len(entries)} entries. Write the archive "
                                 f"for this program with ExportedProgram.save_parameters")
            size = int(np.prod(spec.shape, dtype=np.int64)) * numpy_dtype(spec.wire_dtype).itemsize
            if entry.length != size:
                raise ValueError(f"{label}: parameter {spec.name!r} in {where} has {entry.length} bytes, "
                                 f"but the program expects {spec} ({size} bytes); the archive belongs to "
                                 f"another program or was damaged")
            recorded = _archive_spec(entry)
            if recorded is not None and (numpy_dtype(recorded[0]) != numpy_dtype(spec.wire_dtype)
                                         or recorded[1] != tuple(spec.shape)):
                got = f"{recorded[0]}[{', '.join(map(str, recorded[1]))}]"
                raise ValueError(f"{label}: parameter {spec.name!r} in {where} is {got}, but the program "
                                 f"expects {spec.wire_dtype}[{', '.join(map(str, spec.shape))}]; write "
                                 f"the archive with arrays of that dtype and shape")
        return index

    # -- entry points ---------------------------------------------------------------------------
    @property
    def entry_points(self) -> list[str]:
        """The exported entry functions (``forward``, ``encode``, ``encode$0`` ...)."""
        return list(self.signatures)

    def entry(self, name: str) -> EntryPoint:
        """Entry point ``name`` (checked calls, results in the method's structure)."""
        hit = self._entries.get(name)
        if hit is None:
            signature = self.signatures.get(name)
            if signature is None:
                raise KeyError(f"{self.name} has no entry point {name!r}; {self._entry_points_text()}")
            hit = self._entries[name] = EntryPoint(self, signature)
        return hit

    def __getitem__(self, name: str) -> EntryPoint:
        return self.entry(name)

    def __getattr__(self, name: str) -> Any:
        # only entry point names get here; a Program attribute failing (closed) stays an AttributeError
        if name.startswith("_") or "signatures" not in self.__dict__ or hasattr(type(self), name):
            raise AttributeError(name)
        if name in self.signatures:
            return self.entry(name)
        overloads = [e for e, s in self.signatures.items() if s.method == name and s.overload is not None]
        if overloads:
            return _Overloads(name, [self.entry(e) for e in overloads])
        raise AttributeError(f"{self.name} has no entry point {name!r}; {self._entry_points_text()}")

    def _entry_points_text(self) -> str:
        if self.signatures:
            return f"entry points: {', '.join(self.signatures)}"
        return (f"it has no tensorplay signatures (it was not written by tp.export), so it has no entry "
                f"points: call its functions with module.call(name, *arrays) (functions: "
                f"{', '.join(self.function_names) or 'none'})")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call ``forward`` (or, for files without signatures, the only function)."""
        if "forward" in self.signatures:
            return self.entry("forward")(*args, **kwargs)
        if kwargs:
            raise TypeError(f"{self!r} has no tensorplay signatures; pass arrays positionally")
        return super().__call__(*args)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in self.signatures if n.isidentifier()})

    def __repr__(self) -> str:
        if self._closed:
            return f"<ExportedModule {self.name} (closed)>"
        entries = ", ".join(self.signatures) if self.signatures else ", ".join(self.function_names)
        return f"<ExportedModule {self.name} on {self.driver}: {entries}>"

    def close(self) -> None:
        self._entries = {}
        super().close()
        self._parameter_index = None


def _read_metadata(parse: Any, text: str, where: str) -> Any:
    """``parse(text)`` for metadata stored in a vmfb; a record that is not what export
    writes is a ValueError naming it (the runtime never runs or evaluates what it refuses)."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{where} is refused: {exc}") from None


_DECLARED_TENSOR = re.compile(r"%input\d+: tensor<([^>]*)>")


def _check_declaration(signature: EntrySignature, declaration: str | None, where: str) -> None:
    """The signature must describe the compiled function IREE declares: as many tensor
    arguments, of the same ranks and static sizes (a signature edited to let other shapes
    through is refused at load)."""
    if not declaration or "->" not in declaration:
        return
    params = declaration.split("->", 1)[0]
    declared = _DECLARED_TENSOR.findall(params)
    if len(declared) != params.count("%input"):
        return  # arguments that are not tensors: nothing this check understands
    problem = None
    if len(declared) != len(signature.inputs):
        problem = f"it lists {len(signature.inputs)} argument(s), the compiled function takes {len(declared)}"
    else:
        for spec, text in zip(signature.inputs, declared):
            dims = text.split("x")[:-1]
            if len(dims) != len(spec.shape) or any(
                    d != "?" and (not isinstance(w, int) or str(w) != d) for w, d in zip(spec.shape, dims)):
                problem = (f"argument {spec.name!r} is {spec} in the signature but tensor<{text}> in the "
                           f"compiled function")
                break
    if problem is not None:
        raise ValueError(f"{where} is refused: it does not match the compiled function ({problem}); the "
                         f"file was edited or damaged after export: export the program again\n"
                         f"  the function is: {declaration}")


def _find_archive(source_path: str | None, recorded: str | None) -> str | None:
    """The archive of a vmfb loaded from a file: ``<stem>.irpa`` next to it, else the file
    name recorded at export, next to it."""
    if source_path is None:
        return None
    folder = os.path.dirname(source_path)
    for candidate in (os.path.splitext(source_path)[0] + ".irpa",
                      os.path.join(folder, recorded) if recorded else None):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def load(source: str | os.PathLike | bytes | bytearray | memoryview, device: str | None = None, *,
         parameters: str | os.PathLike | Mapping[str, Any] | None = None,
         name: str | None = None, sha256: str | None = None) -> ExportedModule:
    """Load a vmfb (a path or its bytes) on ``device``.

    A vmfb is native code that runs in this process: load only files you trust. ``sha256``
    pins the file's digest (as ``sha256sum`` prints it): a vmfb with another digest is refused
    before anything of it is read by IREE.

    ``device`` is a runtime driver or alias (``local-task``/``cpu``, ``local-sync``,
    ``vulkan``, ``cuda``, ``hip``/``rocm``); by default the one matching the backend the
    program was exported for (``local-task`` for files without that record). ``parameters``
    gives the weights of a program exported with ``external_weights=True``: an ``.irpa``
    path, or ``{key: array}``; by default ``<name>.irpa`` next to the vmfb (as ``save``
    writes it), else the archive file name recorded at export, next to it.
    """
    if device is not None:
        normalize_driver(device)  # an unknown driver is reported before the file is read
    source_path = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = os.fspath(source)
        with open(path, "rb") as f:
            data = f.read()
        name = name or os.path.splitext(os.path.basename(path))[0]
        source_path = os.path.abspath(path)
    check_sha256(data, sha256, f"runtime.load: {source_path or name or 'the vmfb bytes'}")
    return ExportedModule(data, device, name=name, parameters=parameters, source_path=source_path)

