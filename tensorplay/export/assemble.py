"""Building the IREE input module of an export and compiling it.

The entry graphs are emitted together as tp MLIR and lowered to linalg by the same
pipeline ``compile`` uses; each lowered graph becomes a private ``<entry>_impl`` function.
Weights become ``util.global`` ops, once for the whole module: initialized from dense
constants (embedded) or from ``#stream.parameter.named<"scope"::"key">`` (read from a
parameter archive when the module initializes). Each entry point is a public function
that loads the globals it needs and calls its implementation; its reflection map carries
the signature the runtime checks calls against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compiler.backends.targets import TARGETS
from ..compiler.backends.widening import Widened
from ..dialects.tp.mlir import append_to_module
from ..runtime.signature import MODULE_KEY, SIGNATURE_KEY, EntrySignature, ModuleInfo, TensorSpec
from ._capture import TracedEntry, Weight

__all__ = ["Assembled", "assemble", "compile_module", "export_defaults", "unique_weights", "EXPORT_BACKENDS",
           "STATE_ENTRY"]

#: the entry point of a module with training steps that returns every global they update
STATE_ENTRY = "state_dict"

#: ``lowered_mlir`` shows weights up to this many elements; larger ones print as MLIR's elided form
ELIDE_ABOVE = 16

#: backends export compiles for (the built-in IREE ones)
EXPORT_BACKENDS = tuple(TARGETS)


def export_defaults(backend: str) -> dict[str, Any]:
    """Target options export uses unless given: code that runs on any machine of the kind,
    rather than on this machine's exact CPU or GPU (compile()'s choice); the backend's
    record says which (x86-64-v2 CPUs, sm_80, gfx942; Vulkan's portable SPIR-V baseline and
    VMVX bytecode need none)."""
    return TARGETS[backend].export_options()


def target_description(backend: str, options: Mapping[str, Any]) -> str:
    t = TARGETS[backend]
    detail = options.get(t.target_option) if t.target_option is not None else None
    return f"{t.target} {detail}" if detail else t.target


@dataclass
class Assembled:
    """The module for one backend: what IREE compiles, its flags, and what the vmfb records."""

    backend: str
    flags: list[str]   # of the pipeline asked for; after compile_module, of the one that compiled
    text: str          # the compile input (with source locations)
    readable: str      # the same module without locations, weights of over 16 elements elided
    signatures: dict[str, EntrySignature]
    info: ModuleInfo
    archive: dict[str, np.ndarray]  # parameter archive content (external weights), by key
    options: dict[str, Any] = field(default_factory=dict)  # the compile options asked for
    artifact: Any = None  # the backend's build of it (compiles the vmfb on first use)


def assemble(name: str, entries: Sequence[TracedEntry], backend: str, options: Mapping[str, Any], *,
             external: bool, scope: str, archive_name: str | None) -> Assembled:
    """The module of ``entries`` for ``backend``: the entry graphs go through the backend's one
    entry point (:func:`~tensorplay.compiler.backends.iree.build`, ``output="export"``), which
    checks, adapts, emits and lowers them and calls back here to add the weights' globals and
    the public entry functions; it compiles the result when the vmfb is first asked for."""
    from ..compiler.backends.iree import build

    made: dict[str, Any] = {}

    def link(module: Any, prepared: list[Widened]) -> str:
        made["readable"], made["signatures"], made["info"], made["archive"], text = _link(
            name, entries, prepared, _lowered(module, entries), backend, options,
            external=external, scope=scope, archive_name=archive_name)
        return text

    artifact = build([e.graph for e in entries], backend, options, output="export", link=link, name=name)
    return Assembled(backend, artifact.flags, artifact.text, made["readable"], made["signatures"], made["info"],
                     made["archive"], dict(options), artifact)


def _link(name: str, entries: Sequence[TracedEntry], prepared: Sequence[Widened],
          lowered: tuple[str, str, dict[str, tuple[list[str], list[str]]]], backend: str, options: Mapping[str, Any],
          *, external: bool, scope: str, archive_name: str | None
          ) -> tuple[str, dict[str, EntrySignature], ModuleInfo, dict[str, np.ndarray], str]:
    """The weights as globals and one public function per entry point added to the lowered
    module (``lowered``: its text with and without locations, each function's types): the
    readable module, the signatures, the module info, the parameter archive and the compile
    input."""
    from ..dialects import ir as mlir_ir

    text, readable, types = lowered

    def string(s: str) -> str:
        """``s`` as an MLIR string literal (quoted, escaped)."""
        return str(mlir_ir.ir.StringAttr.get(s))

    global_types, wire = _global_types(entries, prepared, types)
    archive: dict[str, np.ndarray] = {}
    parameter_specs: list[TensorSpec] = []
    lines: list[str] = []
    shown: list[str] = []
    for w in unique_weights(entries):
        t, symbol = global_types[id(w)], string(w.symbol)
        if external and not w.constant:
            archive[w.key] = wire[id(w)]
            parameter_specs.append(TensorSpec(w.key, tuple(w.array.shape), _dtype_name(w.array.dtype),
                                              _dtype_name(wire[id(w)].dtype)))
            init = f"#stream.parameter.named<{string(scope)}::{string(w.key)}>"
        else:
            init = _dense(wire[id(w)])
        kind = "private mutable" if w.mutable else "private"
        lines.append(f"  util.global {kind} @{symbol} = {init} : {t}")
        if init.startswith("dense") and w.array.size > ELIDE_ABOVE:
            init = "dense_resource<__elided__>"
        shown.append(f"  util.global {kind} @{symbol} = {init} : {t}")
    target = target_description(backend, options)
    mutable = [w for w in unique_weights(entries) if w.mutable]
    entry_names = tuple(e.name for e in entries) + ((STATE_ENTRY,) if mutable else ())
    if archive:
        info = ModuleInfo(name, backend, target, entry_names, scope, archive_name, tuple(parameter_specs))
    else:
        info = ModuleInfo(name, backend, target, entry_names)
    signatures: dict[str, EntrySignature] = {}
    for e, p in zip(entries, prepared):
        signature = signatures[e.name] = _signature(e, p)
        reflection = (f"{{{MODULE_KEY} = {string(info.to_json())}, "
                      f"{SIGNATURE_KEY} = {string(signature.to_json())}}}")
        function = _entry_function(e, types[e.impl_name], global_types, reflection, string)
        lines += function
        shown += function
    if mutable:  # what a training step changed, read back: state_dict()
        signature = signatures[STATE_ENTRY] = _state_signature(mutable, global_types)
        reflection = (f"{{{MODULE_KEY} = {string(info.to_json())}, "
                      f"{SIGNATURE_KEY} = {string(signature.to_json())}}}")
        function = _state_function(mutable, global_types, reflection, string)
        lines += function
        shown += function
    return (append_to_module(readable, "\n".join(shown)), signatures, info, archive,
            append_to_module(text, "\n".join(lines)))


def unique_weights(entries: Sequence[TracedEntry]) -> list[Weight]:
    """The weights of all entry points, each once, in order of first use."""
    seen: set[int] = set()
    out: list[Weight] = []
    for e in entries:
        for w in e.weights:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
    return out


def _lowered(module: Any, entries: Sequence[TracedEntry]) -> tuple[str, str, dict[str, tuple[list[str], list[str]]]]:
    """The lowered module of the entry graphs with their implementations made private: its
    text with and without locations, and each function's (argument, result) types."""
    from ..dialects import ir as mlir_ir
    from ..dialects.tp import mlir

    ir = mlir_ir.ir
    impls = {e.impl_name for e in entries}
    types: dict[str, tuple[list[str], list[str]]] = {}
    for op in module.body.operations:
        fn = op.operation
        if fn.name != "func.func":
            continue
        sym = ir.StringAttr(fn.attributes["sym_name"]).value
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        types[sym] = ([str(t) for t in ftype.inputs], [str(t) for t in ftype.results])
        if sym in impls:
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    return mlir.print_module(module, debuginfo=True), mlir.print_module(module), types


def _global_types(entries: Sequence[TracedEntry], prepared: Sequence[Widened],
                  types: dict[str, tuple[list[str], list[str]]]) -> tuple[dict[int, str], dict[int, np.ndarray]]:
    """Each weight's MLIR type (as the lowered functions take it) and its array in that form
    (converted where the target widens small types)."""
    global_types: dict[int, str] = {}
    wire: dict[int, np.ndarray] = {}
    for e, p in zip(entries, prepared):
        arg_types = types[e.impl_name][0]
        for j, w in enumerate(e.weights):
            t = arg_types[e.n_args + j]
            if global_types.setdefault(id(w), t) != t:
                raise TypeError(f"export: weight {w.key!r} is used as {global_types[id(w)]} and as {t}")
            cast = p.input_casts[e.n_args + j] if p.input_casts else None
            wire[id(w)] = w.array if cast is None else w.array.astype(cast)
    return global_types, wire


def _dtype_name(d: np.dtype) -> str:
    return "bool" if d == np.bool_ else d.name


def _signature(e: TracedEntry, p: Widened) -> EntrySignature:
    inputs = []
    for i, spec in enumerate(e.inputs):
        cast = p.input_casts[i] if p.input_casts else None
        abi = None if cast is None else _dtype_name(np.dtype(cast))
        inputs.append(TensorSpec(spec.name, spec.shape, spec.dtype, abi))
    outputs = []
    for k, (orig, wide) in enumerate(list(zip(e.graph.outputs, p.graph.outputs))[:e.n_results]):
        dtype, abi = orig.type.dtype.name, wide.type.dtype.name
        outputs.append(TensorSpec(f"output{k}", e.out_shapes[k], dtype, abi if abi != dtype else None))
    return EntrySignature(e.name, tuple(inputs), tuple(outputs), e.tree, e.method, e.overload, e.dims)


def _dense(array: np.ndarray) -> str:
    """A dense elements literal: raw little-endian bytes as hex (exact and compact), with
    bool and empty tensors written as nested lists."""
    if array.dtype == np.bool_ or array.size == 0:
        return f"dense<{json.dumps(array.tolist())}>"
    data = np.ascontiguousarray(array)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    return f'dense<"0x{data.tobytes().hex().upper()}">'


def _entry_function(e: TracedEntry, impl_types: tuple[list[str], list[str]], global_types: dict[int, str],
                    reflection: str, string: Any) -> list[str]:
    arg_types, result_types = impl_types
    params = ", ".join(f"%arg{i}: {arg_types[i]}" for i in range(e.n_args))
    results = ", ".join(result_types)
    body = []
    operands = [f"%arg{i}" for i in range(e.n_args)]
    for j, w in enumerate(e.weights):
        body.append(f"    %w{j} = util.global.load @{string(w.symbol)} : {global_types[id(w)]}")
        operands.append(f"%w{j}")
    call = f"func.call @{e.impl_name}({', '.join(operands)}) : ({', '.join(arg_types)}) -> ({results})"
    n = len(result_types)
    ret = e.n_results
    returned = ", ".join(result_types[:ret])
    if n == 0:
        body += [f"    {call}", "    func.return"]
    else:
        names = ["%r"] if n == 1 else [f"%r#{k}" for k in range(n)]
        body.append(f"    {'%r' if n == 1 else f'%r:{n}'} = {call}")
        for w, k in e.stores:  # a training step's updates: into the globals, in place
            body.append(f"    util.global.store {names[k]}, @{string(w.symbol)} : {global_types[id(w)]}")
        body.append(f"    func.return {', '.join(names[:ret])} : {returned}" if ret else "    func.return")
    return [f"  func.func @{string(e.name)}({params}) -> ({returned}) attributes {{iree.reflection = {reflection}}} {{",
            *body, "  }"]


def _state_signature(mutable: Sequence[Weight], global_types: dict[int, str]) -> EntrySignature:
    outputs = tuple(TensorSpec(f"output{k}", tuple(w.array.shape), _dtype_name(w.array.dtype))
                    for k, w in enumerate(mutable))
    tree = {"t": "dict", "k": [w.key for w in mutable], "c": [{"t": "out", "i": k} for k in range(len(mutable))]}
    return EntrySignature(STATE_ENTRY, (), outputs, tree, STATE_ENTRY, None, None)


def _state_function(mutable: Sequence[Weight], global_types: dict[int, str], reflection: str,
                    string: Any) -> list[str]:
    types = [global_types[id(w)] for w in mutable]
    body = [f"    %w{j} = util.global.load @{string(w.symbol)} : {t}" for j, (w, t) in enumerate(zip(mutable, types))]
    body.append(f"    func.return {', '.join(f'%w{j}' for j in range(len(mutable)))} : {', '.join(types)}")
    return [f"  func.func @{STATE_ENTRY}() -> ({', '.join(types)}) attributes {{iree.reflection = {reflection}}} {{",
            *body, "  }"]


def compile_module(assembled: Assembled, name: str) -> bytes:
    """The vmfb of an assembled module (through the artifact cache; a pipeline IREE refuses is
    retried plainer, as tp.compile does, and ``assembled.flags`` then records the one used)."""
    vmfb = assembled.artifact.vmfb
    assembled.flags = assembled.artifact.flags
    return vmfb
