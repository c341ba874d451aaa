"""The exported program: captured entry points plus their weights, compiled per backend."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime.signature import EntrySignature, numpy_dtype
from ._capture import TracedEntry
from .assemble import EXPORT_BACKENDS, Assembled, assemble, compile_module, export_defaults, unique_weights

__all__ = ["ExportedProgram"]


class ExportedProgram:
    """What :func:`tensorplay.export` returns: every entry point captured once, compiled
    for one backend on demand.

    ``tp_mlir`` and ``lowered_mlir`` show the program before and after lowering;
    ``vmfb`` is the compiled module, ``save(path)`` writes it (and, with external weights,
    its ``.irpa`` archive); ``compile(backend)`` / ``to(backend)`` retarget it without
    capturing again; ``load(device)`` runs it in this process through tensorplay.runtime.
    """

    def __init__(self, name: str, entries: Sequence[TracedEntry], backend: str, options: Mapping[str, Any],
                 *, external_weights: bool, parameter_scope: str):
        from ..compiler.backends.iree import get_iree_backend

        self.name = name
        self.backend = backend
        #: the compile options in effect: export's portable target defaults, then the caller's
        self.options = {**export_defaults(backend), **options}
        self._user_options = dict(options)
        self.external_weights = external_weights
        self.parameter_scope = parameter_scope
        self._entries = list(entries)
        self._assembled: Assembled | None = None
        self._vmfb: bytes | None = None
        be = get_iree_backend(backend)
        for e in self._entries:
            be.check_dtypes(e.graph)  # a dtype the target cannot run fails now, not at save()

    # -- what was captured --------------------------------------------------------------------
    @property
    def entry_points(self) -> list[str]:
        """VM function names: ``forward``, exported methods, ``method$i`` per overload."""
        return [e.name for e in self._entries]

    @property
    def signatures(self) -> dict[str, EntrySignature]:
        """Each entry point's arguments and results, as stored in the vmfb."""
        return dict(self._assemble().signatures)

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """The weights shared by the entry points, by key (state names such as
        ``fc1.weight``), as captured."""
        return {w.key: w.array for w in unique_weights(self._entries) if not w.constant}

    @property
    def graphs(self) -> list[Any]:
        """The captured tp graphs, one per entry point (weights as trailing inputs)."""
        return [e.graph for e in self._entries]

    @property
    def tp_mlir(self) -> str:
        """The entry points as tp dialect MLIR: one ``<entry>_impl`` function each, taking the
        call's tensors and then the weights it reads."""
        from ..dialects.tp import mlir

        return mlir.print_module(mlir.emit(self.graphs))

    @property
    def lowered_mlir(self) -> str:
        """The module IREE compiles (linalg, weights as ``util.global``, one public function
        per entry point), without source locations and with large weights elided; see
        :meth:`save_mlir` for the complete text."""
        return self._assemble().readable

    def save_mlir(self, path: str | os.PathLike) -> Path:
        """Write the complete compile input (weights and source locations included):
        ``iree-compile <path> <compile_flags...>`` rebuilds the vmfb."""
        path = Path(path)
        path.write_text(self._assemble().text)
        return path

    @property
    def compile_flags(self) -> list[str]:
        """The iree-compile flags of this backend and options."""
        return list(self._assemble().flags)

    # -- compiling ---------------------------------------------------------------------------
    def _assemble(self) -> Assembled:
        if self._assembled is None:
            self._assembled = assemble(self.name, self._entries, self.backend, self.options,
                                       external=self.external_weights, scope=self.parameter_scope,
                                       archive_name=f"{self.name}.irpa")
        return self._assembled

    @property
    def vmfb(self) -> bytes:
        """The compiled IREE VM flatbuffer (compiled on first use, then kept)."""
        if self._vmfb is None:
            self._vmfb = compile_module(self._assemble(), self.name)
        return self._vmfb

    def compile(self, backend: str | None = None, *, options: Mapping[str, Any] | None = None,
                external_weights: bool | None = None) -> ExportedProgram:
        """This program compiled for ``backend`` (default: the current one), from the
        captured graphs (nothing runs the Python again). Returns a new ExportedProgram."""
        from ..compiler.backends.modes import validate_options

        backend = self.backend if backend is None else _check_backend(backend)
        if options is None:
            options = self._user_options if backend == self.backend else {}
        program = ExportedProgram(self.name, self._entries, backend, validate_options(options),
                                  external_weights=self.external_weights if external_weights is None
                                  else bool(external_weights), parameter_scope=self.parameter_scope)
        program.vmfb  # noqa: B018 - compile now so that errors surface here
        return program

    def to(self, backend: str) -> ExportedProgram:
        """Shorthand for ``compile(backend)``."""
        return self.compile(backend)

    # -- writing and running -----------------------------------------------------------------
    def save(self, path: str | os.PathLike, *, parameters_path: str | os.PathLike | None = None) -> Path:
        """Write the vmfb to ``path``; with external weights also the parameter archive
        (default: ``path`` with the suffix ``.irpa``, where ``runtime.load`` looks for it).
        Returns the vmfb's path."""
        path = Path(path)
        data = self.vmfb
        path.write_bytes(data)
        if self.external_weights and self._assemble().archive:
            self.save_parameters(parameters_path or path.with_suffix(".irpa"))
        return path

    def save_parameters(self, path: str | os.PathLike, weights: Mapping[str, Any] | None = None) -> Path:
        """Write a parameter archive for this program: the captured weights, or ``weights``
        (e.g. a newer ``model.state_dict()``; every key the program reads must be there,
        with the captured shape). The vmfb does not change: load it with the new archive."""
        from ..runtime.loader import save_parameters

        assembled = self._assemble()
        if not self.external_weights:
            raise ValueError(f"{self.name} embeds its weights; export with external_weights=True to "
                             f"write them to a parameter archive")
        arrays = dict(assembled.archive)
        if weights is not None:
            specs = {s.name: s for s in assembled.info.parameters}
            for key, spec in specs.items():
                if key not in weights:
                    raise KeyError(f"save_parameters: weights has no {key!r} (expected {spec})")
                value = weights[key]
                array = np.asarray(value.numpy(force=True) if hasattr(value, "numpy") else value)
                if tuple(array.shape) != spec.shape:
                    raise ValueError(f"save_parameters: {key!r} has shape {list(array.shape)}, the program "
                                     f"was exported with {list(spec.shape)}")
                arrays[key] = array.astype(numpy_dtype(spec.wire_dtype))
        path = Path(path)
        save_parameters(path, arrays)
        return path

    def load(self, device: str | None = None) -> Any:
        """The compiled program loaded in this process (a tensorplay.runtime ExportedModule)."""
        from ..runtime.loader import ExportedModule

        parameters = self._assemble().archive if self.external_weights and self._assemble().archive else None
        return ExportedModule(self.vmfb, device, name=self.name, parameters=parameters)

    def __repr__(self) -> str:
        weights = "external" if self.external_weights else "embedded"
        return (f"<ExportedProgram {self.name} for {self.backend}: {', '.join(self.entry_points)}; "
                f"{len(self.weights)} weights ({weights})>")


def _check_backend(backend: Any) -> str:
    if backend not in EXPORT_BACKENDS:
        raise ValueError(f"export compiles for the IREE backends {', '.join(EXPORT_BACKENDS)} (a vmfb "
                         f"runs on their devices); got backend={backend!r}")
    return backend
