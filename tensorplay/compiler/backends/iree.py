"""The IREE backends: a captured graph is emitted as tp MLIR, lowered to linalg by the
``tp-to-linalg`` pipeline with its target's lowering options, compiled in-process by
``iree.compiler.api`` to a vmfb (through the artifact cache) and loaded with
:mod:`tensorplay.runtime`.

:func:`build` is the one entry point: graphs in, and out a loaded program (``tp.compile``),
a graph's vmfb bytes, or an export's module compiled on first use (``tp.export``). Compiling
(graph -> vmfb bytes, cached on disk) and loading (vmfb -> Program on a device) are separate
steps, so export can compile for a device this machine does not have (``backend="iree-cuda"``).
What each backend is lives in its record (:mod:`.targets`); what this machine offers it, in
:mod:`.probe`; the donated-state rewrite is the ``donate-buffers`` pass (``passes/donation.py``).

One idea, kept in one module although it is long: the way from a graph to a program IREE
runs (emit, lower, compile with retries and autotuning, diagnose, bind the loaded program).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ...dialects.tp.graph import Graph
from .. import _logging, tracedir
from . import cache, probe
from .base import (BackendCapabilities, BackendCompileError, BackendUnavailable, dtypes_used, first_use_of,
                   graph_functions, iter_nodes)
from .modes import compile_flags, validate_options
# the probe's names stay importable from here (the code below calls them through the module)
from .probe import (LOCAL_TASK_MIN_CPUS, LOCAL_TASK_MIN_WORK, capabilities, choose_cpu_driver, cuda_target_for,
                    graph_work, usable_cpus)
from .runners import _DriverTrial, _EmptyGuarded, empty_sizes_check
from .targets import TARGETS, IreeTarget, vulkan_device_flags
from .widening import Widened, widen_io
from ...runtime.program import CPU_INPUT_ALIGNMENT

__all__ = ["build", "OUTPUTS", "Artifact", "IreeBackend", "IreeTarget", "TARGETS", "compile_to_vmfb", "compile_mlir", "compile_cached",
           "get_iree_backend", "bind", "capabilities", "graph_work", "lower_to_linalg", "lowering_pipeline", "tp_mlir",
           "choose_cpu_driver", "cuda_target_for", "contraction_work", "DATA_TILING_MIN_WORK", "usable_cpus", "LOWERING_PIPELINE", "LOCAL_TASK_MIN_WORK",
           "LOCAL_TASK_MIN_CPUS"]

#: the tp pipeline run before IREE (passes/registry.py PIPELINES): tp-optimize, then
#: convert-tp-to-linalg, canonicalize, cse; a target's lowering options are applied to it
LOWERING_PIPELINE = "tp-to-linalg"

_log = _logging.get_logger("perf")


# --- compile ---------------------------------------------------------------------------------

def tp_mlir(graph: Graph) -> Any:
    """The graph as a tp MLIR module (graphs it calls become private functions)."""
    from ...dialects.tp import mlir as tp_emit

    return tp_emit.emit([graph])


def lowering_pipeline(t: IreeTarget) -> str:
    """The tp pipeline lowering a graph for ``t``: :data:`LOWERING_PIPELINE` with the
    target's convert-tp-to-linalg options (``tp-to-linalg`` itself where it needs none)."""
    from ...passes.registry import pipeline_with_options

    return pipeline_with_options(LOWERING_PIPELINE, {"convert-tp-to-linalg": t.lowering_options})


def lower_to_linalg(module: Any, graph_name: str, backend: str) -> str:
    """Run the backend's lowering pipeline on ``module``; returns the lowered MLIR text (with
    locations, so IREE's diagnostics point at the user's code). For the CPU targets, the code
    assumes only CPU_INPUT_ALIGNMENT of its arguments (:data:`_HOST_RESOURCES`)."""
    from ...dialects.tp import mlir as tp_emit
    from ...passes import PipelineError, run_pipeline

    scope = tracedir.current()
    after_each = None
    if scope is not None:  # traced: the IR after each tp pass
        done = [0]

        def after_each(step: str, mod: Any) -> None:
            done[0] += 1
            tracedir.write(scope, f"03-passes/{done[0]:02d}-{step}.mlir",
                           tp_emit.print_module(mod, debuginfo=True))

    start = time.perf_counter()
    try:
        run_pipeline(module, lowering_pipeline(TARGETS[backend]), source_name=graph_name, after_each=after_each)
    except PipelineError as exc:
        raise BackendCompileError(
            f"{backend}: lowering graph {graph_name!r} to linalg failed.\n{exc}\n"
            f"  what to do: compile with backend='eager' to run the graph through the reference "
            f"implementations meanwhile, and report the reproducer above",
            backend=backend, graph=graph_name, reproducer=exc.reproducer) from None
    host_code = TARGETS[backend].target in HOST_CODE_TARGETS
    if host_code:
        _declare_alignment(module)
    plan = _donate(module, graph_name, backend)
    text = tp_emit.print_module(module, debuginfo=True)
    if host_code:
        text = _with_resource_alignment(text)
    if plan is not None:
        _log.info("%s: graph %r updates %d of %d inputs in place%s%s", backend, graph_name, len(plan.tied),
                  len(plan.tied) + len(plan.untied),
                  f" (after {plan.joined} other reads of old values)" if plan.joined else "",
                  "".join(f"; output {k} not: {why}" for k, why in sorted(plan.untied.items())))
        if scope is not None:
            tracedir.note(scope, donated={"tied": {str(k): i for k, i in plan.tied.items()},
                                          "untied": {str(k): why for k, why in plan.untied.items()},
                                          "joined": plan.joined})
    if scope is not None:
        tracedir.note(scope, lower_s=round(time.perf_counter() - start, 6), pipeline=lowering_pipeline(TARGETS[backend]))
        tracedir.write(scope, "04-linalg.mlir", text)
    return text


def _donate(module: Any, graph_name: str, backend: str) -> Any:
    """Run the ``donate-buffers`` pass on function ``graph_name`` of lowered ``module`` when it
    donates inputs (``tp.donated``); the pass's plan, or None when there was nothing to do."""
    from ...dialects.tp.mlir import DONATED
    from ...passes import PipelineError, run_pipeline
    from ...passes.donation import DonateBuffers, find_function, take_report

    fn = find_function(module, graph_name)
    if fn is None or DONATED not in fn.attributes:
        return None
    try:
        run_pipeline(module, f"{DonateBuffers.name}{{function={graph_name}}}", source_name=graph_name)
    except PipelineError as exc:
        raise BackendCompileError(f"{backend}: tying the donated inputs of graph {graph_name!r} failed.\n{exc}",
                                  backend=backend, graph=graph_name, reproducer=exc.reproducer) from None
    return take_report(module, graph_name)


#: the IREE targets whose code reads host memory (the CPU drivers import host arrays in place):
#: their code assumes CPU_INPUT_ALIGNMENT of its arguments, not IREE's default 64, so that
#: numpy's own arrays (16 bytes into their allocation: tp.from_numpy of a user's array, and
#: weights numpy made) are read where they are. Deciding per graph from its first call's
#: inputs would make the program depend on where malloc put an array (a medium array is 64-byte
#: aligned one time in four), and so differ between runs and miss the artifact cache.
HOST_CODE_TARGETS = ("llvm-cpu", "vmvx")


def _declare_alignment(module: Any) -> None:
    """Record on each public function of lowered ``module`` the argument alignment its code
    is compiled for (:data:`~tensorplay.runtime.program.ALIGNMENT_KEY` in its reflection,
    which the runtime reads before importing a host array in place)."""
    from ...dialects import ir as mlir_ir
    from ...runtime.program import ALIGNMENT_KEY

    ir = mlir_ir.ir
    with module.context:
        entry = {ALIGNMENT_KEY: ir.StringAttr.get(str(CPU_INPUT_ALIGNMENT))}
        for op in module.body.operations:
            fn = op.operation
            if fn.name != "func.func" or "sym_visibility" in fn.attributes:
                continue
            fn.attributes["iree.reflection"] = ir.DictAttr.get(entry)


#: IREE's stream resource configuration of host code, as its defaults for the CPU (unbounded
#: sizes, 64-bit indices, unified memory) but with offsets and bindings aligned to only
#: CPU_INPUT_ALIGNMENT bytes: the kernels then load their arguments without assuming more (the
#: in-process compiler has no flag for it; a module attribute overrides the default)
_HOST_RESOURCES = (f"stream.resources = #stream.resource_config<{{max_allocation_size = {2**63 - 1}, "
                   f"min_buffer_offset_alignment = {CPU_INPUT_ALIGNMENT}, max_buffer_range = {2**63 - 1}, "
                   f"min_buffer_range_alignment = {CPU_INPUT_ALIGNMENT}, index_bits = 64, "
                   f"alias_mutable_bindings = false, memory_model = Unified}}>")


def _with_resource_alignment(text: str) -> str:
    """Lowered module ``text`` with :data:`_HOST_RESOURCES` among its module attributes."""
    head = re.search(r"^module(?: @[\w$.]+)?( attributes \{)?", text, re.MULTILINE)
    if head is not None:
        if head.group(1):
            return f"{text[:head.end()]}{_HOST_RESOURCES}, {text[head.end():]}"
        return f"{text[:head.end()]} attributes {{{_HOST_RESOURCES}}}{text[head.end():]}"
    # the generic form ("builtin.module"() ({ ... }) {attributes} : () -> ()): the module's
    # attributes follow its region, closed on the last unindented "})"
    tail = list(re.finditer(r"^\}\)( \{)?", text, re.MULTILINE))
    if not text.lstrip().startswith(('"builtin.module"', "#")) or not tail:
        raise AssertionError("lowered MLIR without a module op")  # print_module always writes one
    end = tail[-1]
    if end.group(1):
        return f"{text[:end.end()]}{_HOST_RESOURCES}, {text[end.end():]}"
    return f"{text[:end.end()]} {{{_HOST_RESOURCES}}}{text[end.end():]}"


_compile_lock = threading.Lock()


@contextlib.contextmanager
def _stderr_to(sink: list[str]) -> Iterator[None]:
    """Send file descriptor 2 to a temporary file while IREE runs (its diagnostics are
    printed there by the C++ side) and append what was written to ``sink``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf-8", errors="replace"))


def _compiler_api() -> Any:
    """``iree.compiler.api``, imported without the root logging handler its import installs
    (it calls ``logging.debug`` at import, which runs ``basicConfig`` and would print every
    tensorplay log line a second time)."""
    before = list(logging.root.handlers)
    import iree.compiler.api as api

    for handler in logging.root.handlers[:]:
        if handler not in before:
            logging.root.removeHandler(handler)
    return api


def _compile_in_process(text: str, flags: Sequence[str]) -> tuple[bytes | None, str]:
    """(vmfb bytes or None on failure, IREE's diagnostics) for linalg MLIR text, compiled
    by iree.compiler.api in this process (no subprocess per compile)."""
    api = _compiler_api()
    Output, Session, Source = api.Output, api.Session, api.Source

    printed: list[str] = []
    with _compile_lock, _stderr_to(printed):
        session = Session()
        invocation = None
        try:
            session.set_flags(*flags)
            invocation = session.invocation()
            source = Source.wrap_buffer(session, text.encode())
            if not (invocation.parse_source(source) and invocation.execute()):
                vmfb = None
            else:
                output = Output.open_membuffer()
                try:
                    invocation.output_vm_bytecode(output)
                    vmfb = bytes(output.map_memory())
                finally:
                    output.close()
        finally:
            if invocation is not None:
                invocation.close()
            session.close()
    diagnostics = "".join(printed)
    if vmfb is not None and diagnostics.strip():
        sys.stderr.write(diagnostics)  # warnings of a successful compile stay visible
    return vmfb, diagnostics


def compile_mlir(text: str, flags: Sequence[str], *, backend: str, name: str, what: str = "graph") -> bytes:
    """The vmfb of linalg-level MLIR ``text`` compiled in process with ``flags``; a failure is a
    BackendCompileError with IREE's diagnostics, the input kept in a file and the command."""
    try:
        vmfb, diagnostics = _compile_in_process(text, flags)
    except ValueError as exc:  # Session.set_flags: an unknown flag or a bad value
        raise BackendCompileError(
            f"{backend}: iree-compile rejected the flags of {what} {name!r}: "
            f"{' '.join(str(exc).split())}\n  flags: {' '.join(flags)}\n"
            f"  what to do: fix options['extra_flags'] (iree-compile --help lists the flags)",
            backend=backend, graph=name) from None
    if vmfb is None:
        raise _diagnose(text, flags, backend, name, diagnostics)
    return vmfb


def compile_cached(key_mlir: str, lowered: Callable[[], str], flags: Sequence[str], *, backend: str, name: str,
                   what: str = "graph") -> bytes:
    """The vmfb of the linalg MLIR ``lowered()`` returns, compiled with ``flags`` for
    ``backend`` through the artifact cache: looked up under a key of ``key_mlir``, the backend
    (prefixed with ``what`` for anything but a graph: ``export:iree-cpu``), the flags and the
    target (for llvm-cpu, this machine's CPU); on a miss compiled and stored. ``lowered`` runs
    only on a miss. ``tp.compile`` (a graph) and ``tp.export`` (an assembled module) both
    compile through here."""
    key = cache.cache_key(mlir=key_mlir, backend=backend if what == "graph" else f"{what}:{backend}", flags=flags,
                          target=_cache_target(TARGETS[backend], flags))

    def build() -> bytes:
        return compile_mlir(lowered(), flags, backend=backend, name=name, what=what)

    return cache.get_or_compile(key, build, what=f"{what} {name!r} for {backend}", backend=backend)


def _cache_target(t: IreeTarget, flags: Sequence[str] = ()) -> str:
    """What a cache key names as the target: for llvm-cpu code for ``host`` this machine's
    CPU; code for a named CPU (``target_cpu``, in ``flags``) is the same on every machine."""
    if t.target != "llvm-cpu":
        return t.target
    named = [f.split("=", 1)[1] for f in flags if f.startswith(f"{t.target_flag}=")]
    return t.target if named and named[-1] != "host" else cache.host_target()


class _Emitted:
    """A graph's tp MLIR (the cache key) and its linalg lowering, made on first need and once,
    however many pipelines compile it."""

    def __init__(self, graph: Graph, backend: str):
        from ...dialects.tp import mlir as tp_emit

        self._module = tp_mlir(graph)
        self._name, self._backend = graph.name, backend
        self.key = tp_emit.print_module(self._module)
        if TARGETS[backend].target in HOST_CODE_TARGETS:  # (apart from programs compiled for 64)
            self.key += f"\n// arguments aligned to {CPU_INPUT_ALIGNMENT} bytes\n"
        self._text: str | None = None
        scope = tracedir.current()
        if scope is not None:
            tracedir.write(scope, "02-tp.mlir", tp_emit.print_module(self._module, debuginfo=True))

    def linalg_text(self) -> str:
        if self._text is None:
            self._text = lower_to_linalg(self._module, self._name, self._backend)
        return self._text

    def lowered(self) -> bool:
        return self._text is not None


def _diagnose(text: str, flags: Sequence[str], backend: str, graph_name: str,
              diagnostics: str = "") -> BackendCompileError:
    """The error for a failed IREE compile: IREE's diagnostics (from the in-process run, or
    from re-running the iree-compile tool when it printed none), the input kept in a file,
    and the command that reproduces the failure."""
    fd, path = tempfile.mkstemp(prefix=f"tensorplay-{graph_name}-{backend}-", suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    command = " ".join(["iree-compile", shlex.quote(path), *map(shlex.quote, flags), "-o", "/dev/null"])
    detail = _diagnostics_text(diagnostics) if diagnostics.strip() else ""
    if not detail:
        try:
            from iree.compiler.tools import CompilerToolError, compile_file

            compile_file(path, extra_args=list(flags))
            detail = "  IREE reported no diagnostics"
        except CompilerToolError as exc:
            detail = _diagnostics_text(str(exc))
        except Exception as exc:  # the tool itself missing: still report what we know
            detail = f"  (diagnostics unavailable: {exc})"
    message = (f"{backend}: IREE could not compile graph {graph_name!r}:\n{detail}\n"
               f"  the linalg input is in {path}\n"
               f"  reproduce with: {command}\n"
               f"  what to do: try another backend (backend='iree-cpu' or 'eager'), another mode, or "
               f"report the reproducer")
    return BackendCompileError(message, backend=backend, graph=graph_name, reproducer=command)


def _diagnostics_text(text: str, limit: int = 20) -> str:
    lines = text.splitlines()
    if "Diagnostics:" in lines:
        lines = lines[lines.index("Diagnostics:") + 1:]
    keep, skip_next = [], False
    for line in lines:
        if skip_next or not line.strip():
            skip_next = False
            continue
        if line.startswith("Invoked with") or "IREE_SAVE_TEMPS" in line:
            skip_next = line.startswith("Invoked with")
            continue
        keep.append(line)
    more = f"\n  ... ({len(keep) - limit} more lines)" if len(keep) > limit else ""
    return "\n".join("  " + line for line in keep[:limit]) + more


class IreeBackend:
    """A built-in IREE backend: ``backend(graph, example_inputs, options=None)`` compiles and
    loads the graph and returns ``run(*arrays) -> list[np.ndarray]``."""

    def __init__(self, name: str):
        self.name = name
        self.spec = TARGETS[name]
        self.__name__ = name.replace("-", "_")
        self.__doc__ = self.spec.description

    def __repr__(self) -> str:
        return f"<IREE backend {self.name}>"

    @property
    def capabilities(self) -> BackendCapabilities:
        return probe.capabilities(self.name)

    # compile ------------------------------------------------------------------------------
    def flags(self, options: Mapping[str, Any] | None = None) -> list[str]:
        """The iree-compile flags for ``options`` over the target's default options."""
        t = self.spec
        options = {**t.default_options, **(options or {})}
        # float64 stays float64 where the target has it; where it has none (Vulkan: float64
        # tensors are refused by check_dtypes, and the lowering avoids float64 intermediates)
        # IREE demotes any float64 left
        demote = "false" if t.has_float64 else "true"
        flags = [f"--iree-hal-target-backends={t.target}", f"--iree-input-demote-f64-to-f32={demote}"]
        if t.target_option is not None:
            # the device: as the options say, else the probed device's own, else the default
            device = options.get(t.target_option) or probe.probed_target(t) or t.target_default
            if t.target == "vulkan-spirv":
                flags[:1] = vulkan_device_flags(device)
            elif device is not None:
                flags.append(f"{t.target_flag}={device}")
        return flags + compile_flags(options, t.target)

    def check_dtypes(self, graph: Graph) -> None:
        """TypeError, before any compile, for a dtype this target cannot run."""
        bad = sorted(dtypes_used(graph) - set(self.spec.dtypes))
        if bad:
            where = "; ".join(f"{d} first at {first_use_of(graph, d)}" for d in bad)
            raise TypeError(f"{self.name} cannot compile graph {graph.name!r}: {', '.join(bad)} is not "
                            f"supported by the {self.spec.target} target ({where}). Cast to a supported "
                            f"dtype ({', '.join(self.spec.dtypes)}) or use backend='iree-cpu'")

    def prepare(self, graph: Graph) -> Widened:
        """Check dtypes, then adapt the graph to the target (Vulkan: 32-bit inputs/outputs)."""
        self.check_dtypes(graph)
        return widen_io(graph, self.spec.io_widening)

    def compile_to_vmfb(self, graph: Graph, options: Mapping[str, Any] | None = None) -> bytes:
        """The vmfb of ``graph`` for this target, from the artifact cache when present.
        Needs no device: CUDA and ROCm vmfbs build on any machine."""
        return build(graph, self.name, options, output="vmfb")

    def _compile(self, graph: Graph, options: Mapping[str, Any], emitted: _Emitted | None = None) -> bytes:
        emitted = emitted or _Emitted(graph, self.name)
        vmfb, flags = compile_with_retries(emitted.key, emitted.linalg_text, self, options, name=graph.name,
                                           lowered=emitted.lowered)
        scope = tracedir.current()
        if scope is not None:
            if not emitted.lowered():  # an artifact cache hit: lower anyway, for the pass dumps
                emitted.linalg_text()
            names = tracedir.dispatch_names(vmfb, graph.name)
            tracedir.write(scope, "05-iree-flags.txt", "\n".join(flags) + "\n")
            tracedir.write(scope, "06-dispatches.txt", f"# {len(names)} kernels of @{graph.name} (IREE's dispatches; "
                           f"identical dispatches share one kernel)\n"
                           + "".join(f"{n}\n" for n in names))
            tracedir.note(scope, dispatches=len(names), vmfb_bytes=len(vmfb), iree_flags=flags)
        return vmfb

    def pipeline_options(self, options: Mapping[str, Any], mlir: str) -> dict[str, Any]:
        """``options`` over the target's default options, for the module ``mlir``."""
        defaults = dict(self.spec.default_options)
        if defaults.get("data_tiling") and re.search(r"tensor<[^>]*\?", mlir):
            # sizes known only at run time: IREE 3.13 sizes a data-tiled dispatch's stack for the
            # largest tile and refuses it (139 KB against its 32 KB limit on a dynamic GPT)
            defaults.update(data_tiling=False, ukernels="none")
        elif defaults.get("data_tiling") and contraction_work(mlir) < DATA_TILING_MIN_WORK:
            # data tiling pays for its packing only on large matmuls (benchmarks/pipelines.py: without
            # it the 2-layer GPT ran 0.50x, the MLP 0.90x, the CNN 0.93x the time; matmul 512 1.29x)
            defaults.update(data_tiling=False, ukernels="none")
        return {**defaults, **options}

    # load and run -------------------------------------------------------------------------
    def driver_for(self, graph: Graph, options: Mapping[str, Any] | None = None) -> str:
        if self.spec.driver_by_work:
            return probe.choose_cpu_driver(graph, (options or {}).get("runtime_driver", "auto"))
        return self.spec.driver

    def _check_available(self) -> None:
        caps = probe.capabilities(self.name)
        if not caps.available:
            raise BackendUnavailable(self.name, caps.reason, caps.install_hint)

    def load(self, vmfb: bytes, graph: Graph, options: Mapping[str, Any] | None = None) -> Callable[..., list]:
        """``run(*arrays)`` for a vmfb this backend compiled from ``graph``, loaded on its device."""
        return self._load(vmfb, self.prepare(graph), options)

    def _load(self, vmfb: bytes, prepared: Widened, options: Mapping[str, Any] | None) -> Callable[..., list]:
        from ...runtime import Program

        self._check_available()
        graph = prepared.graph
        driver = self.driver_for(graph, options)
        if self.spec.driver_by_work:
            _log.info("%s: graph %r runs on %s (estimated work %.1e, %d usable cpus)", self.name, graph.name,
                      driver, probe.graph_work(graph), probe.usable_cpus())
        start = time.perf_counter()
        runner = bind(Program(vmfb, driver, name=graph.name), prepared)
        if driver == "local-task" and (options or {}).get("runtime_driver", "auto") == "auto":
            # the worker pool pays for its hand-offs only on large dispatches: which driver runs
            # this program faster is measured on its first calls
            other = bind(Program(vmfb, "local-sync", name=graph.name), prepared)
            runner = _DriverTrial(runner, other, self.name, graph.name, tracedir.current())
        tracedir.note(tracedir.current(), driver=driver, load_s=round(time.perf_counter() - start, 6))
        return runner

    def __call__(self, graph: Graph, example_inputs: Sequence[Any] = (), options: Mapping[str, Any] | None = None,
                 ) -> Callable[..., list]:
        return build(graph, self.name, options, example_inputs=example_inputs)

    def _program(self, graph: Graph, example_inputs: Sequence[Any], options: Mapping[str, Any] | None
                 ) -> Callable[..., list]:
        """:func:`build`'s ``program``: compiled (autotuned when asked), loaded and bound."""
        self._check_available()
        options = validate_options(options or {})
        prepared = self.prepare(graph)
        emitted = None
        if options.get("autotune"):
            options, emitted = self._autotuned(prepared, example_inputs, options)
        vmfb = self._compile(prepared.graph, options, emitted)
        runner = self._load(vmfb, prepared, options)
        if self.spec.empty_dispatch_fails:
            from ...dialects.tp.mlir import data_dependent_symbols

            empty = empty_sizes_check(graph)
            data_sizes = bool(data_dependent_symbols(graph))
            if empty is not None or data_sizes:
                return _EmptyGuarded(runner, graph, empty, self.name, retry=data_sizes)
        return runner

    def _export(self, graphs: Sequence[Graph], options: Mapping[str, Any], link: Callable[[Any, list[Widened]], str],
                name: str) -> Artifact:
        """:func:`build`'s ``export``: the graphs checked, adapted, emitted together and lowered,
        the lowered module made into the compile input by ``link``."""
        from ...dialects import ir as mlir_ir
        from ...dialects.tp import mlir as tp_emit

        prepared = [self.prepare(g) for g in graphs]  # dtype checks; Vulkan's 32-bit boundary
        with mlir_ir.context():
            module = tp_emit.emit([p.graph for p in prepared])
            lower_to_linalg(module, name, self.name)
            text = link(module, prepared)
        return Artifact(self, text, options, name)

    # autotune -----------------------------------------------------------------------------
    def autotune_candidates(self, options: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The pipelines ``autotune`` tries: ``options`` (less ``autotune``) with each
        candidate's optimization level, data tiling, microkernels, fusion and CPU driver."""
        base = {k: v for k, v in options.items() if k not in ("autotune", "trace_dir", *_TUNED)}
        t = self.spec
        levels = [{"opt_level": "O0", **PLAIN}, {"opt_level": "O2", **PLAIN}, {"opt_level": "O3", **PLAIN}]
        if t.data_tiling:
            levels += [{"opt_level": "O2", **PLAIN, "data_tiling": True, "ukernels": "all"},
                       {"opt_level": "O3", "data_tiling": True, "ukernels": "all", "aggressive_fusion": True}]
        drivers = [{"runtime_driver": d} for d in t.driver_choices] if t.driver_by_work else [{}]
        return [{**base, **level, **driver} for level in levels for driver in drivers]

    def _autotuned(self, prepared: Widened, example_inputs: Sequence[Any], options: Mapping[str, Any]
                   ) -> tuple[dict[str, Any], _Emitted]:
        """The candidate pipeline fastest on ``example_inputs`` (kept in the disk cache under
        the graph, so a later process compiles only that one)."""
        import json

        candidates = self.autotune_candidates(options)
        emitted = _Emitted(prepared.graph, self.name)  # emitted and lowered once for all candidates
        key = cache.cache_key(mlir=emitted.key, backend=f"autotune:{self.name}",
                              flags=[json.dumps(c, sort_keys=True) for c in candidates], target=_cache_target(self.spec))
        arrays = [getattr(x, "_data", x) for x in example_inputs]

        def tune() -> bytes:
            timings = []
            for candidate in candidates:
                try:
                    run = self._load(self._compile(prepared.graph, candidate, emitted), prepared, candidate)
                    timings.append((_time_calls(run, arrays), candidate))
                except Exception as exc:  # noqa: BLE001 - a candidate that fails is not chosen
                    _log.info("%s: autotune of %r: %s failed: %s", self.name, prepared.graph.name, candidate,
                              str(exc).splitlines()[0])
            if not timings:
                raise BackendCompileError(f"{self.name}: no autotune candidate compiled graph "
                                          f"{prepared.graph.name!r}", backend=self.name, graph=prepared.graph.name)
            timings.sort(key=lambda tc: tc[0])
            _log.info("%s: autotune of %r: %s", self.name, prepared.graph.name,
                      "; ".join(f"{c} {1e3 * s:.3f} ms" for s, c in timings))
            return json.dumps(timings[0][1], sort_keys=True).encode()

        choice = json.loads(cache.get_or_compile(key, tune, what=f"autotune of {prepared.graph.name!r}",
                                                 backend=self.name))
        _log.info("%s: graph %r compiles with %s (autotune)", self.name, prepared.graph.name, choice)
        return validate_options(choice), emitted


#: multiply-adds of a graph's largest matmul or convolution below which the CPU pipeline
#: leaves data tiling off (measured: docs/performance.md#the-default-pipeline)
DATA_TILING_MIN_WORK = 100_000_000

_CONTRACTION = re.compile(r'"tp\.(matmul|conv2d)"\(.*?\)(?: \{.*?\})? : \(tensor<([^>]*)>, tensor<([^>]*)>.*?\) '
                          r'-> tensor<([^>]*)>')


def contraction_work(mlir: str) -> int:
    """The multiply-adds of the largest ``tp.matmul`` / ``tp.conv2d`` in tp MLIR text (0 when
    there is none; sizes known only at run time count as 0)."""
    def dims(t: str) -> list[int] | None:
        parts = t.split("x")[:-1]
        return None if any(not p.isdigit() for p in parts) else [int(p) for p in parts]

    best = 0
    for op, lhs, rhs, res in _CONTRACTION.findall(mlir):
        a, b, r = dims(lhs), dims(rhs), dims(res)
        if a is None or b is None or r is None or not a:
            continue
        out = 1
        for d in r:
            out *= d
        inner = a[-1] if op == "matmul" else (b[1] * b[2] * b[3] if len(b) == 4 else 0)
        best = max(best, out * inner)
    return best


def compile_with_retries(key_mlir: str, linalg_text: Callable[[], str], backend: IreeBackend,
                         options: Mapping[str, Any], *, name: str, what: str = "graph",
                         lowered: Callable[[], bool] = lambda: True) -> tuple[bytes, list[str]]:
    """The vmfb of ``linalg_text()`` for ``backend`` with ``options`` over its defaults, through
    the artifact cache, and the flags that compiled it: when IREE refuses the pipeline, each of
    :func:`plainer_pipelines` in turn, logged (a warning when the options dropped were given).
    ``lowered()`` False after a failure means the failure came before IREE: not retried."""
    tries = plainer_pipelines(backend.pipeline_options(options, key_mlir))
    for i, attempt in enumerate(tries):
        flags = backend.flags(attempt)
        try:
            return compile_cached(key_mlir, linalg_text, flags, backend=backend.name, name=name, what=what), flags
        except BackendCompileError as exc:
            if i + 1 == len(tries) or not lowered() or "rejected the flags" in str(exc):
                raise
            reason = next((line.strip() for line in str(exc).splitlines() if "error:" in line),
                          str(exc).splitlines()[0])
            dropped = {k: v for k, v in attempt.items() if tries[i + 1].get(k) != v}
            tracedir.note(tracedir.current(), "retries", {"flags": flags, "error": reason[:500]})
            log = _log.warning if any(k in options for k in dropped) else _log.info  # (asked for)
            log("%s: %s %r did not compile with %s (IREE: %s); compiling it with %s instead", backend.name, what,
                name, dropped, reason[:300], {k: tries[i + 1].get(k) for k in dropped})
    raise AssertionError("unreachable")


def plainer_pipelines(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``options``, then ever plainer variants to try when IREE cannot compile a graph with
    them: data tiling, microkernels and aggressive fusion off, then also at O0. A graph that
    compiles with a plainer pipeline is never refused because a faster one failed."""
    tries = [dict(options)]
    plain = {**options, **PLAIN}
    for candidate in (plain, {**plain, "opt_level": "O0"}):
        if candidate not in tries:
            tries.append(candidate)
    return tries


#: the speed options off (set explicitly: an option left out takes the target's default)
PLAIN = {"data_tiling": False, "ukernels": "none", "aggressive_fusion": False}


#: what autotune chooses (the other options are kept as given)
_TUNED = ("opt_level", "data_tiling", "ukernels", "aggressive_fusion", "runtime_driver")


def _time_calls(run: Callable[..., list], arrays: Sequence[Any], budget_s: float = 0.25, most: int = 20) -> float:
    """The median time of calls of ``run`` on ``arrays`` after a warm-up call: as many as fit in
    ``budget_s`` (at least three, at most ``most``)."""
    import time

    run(*arrays)
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget_s and len(times) < most):
        start = time.perf_counter()
        run(*arrays)
        times.append(time.perf_counter() - start)
        spent += times[-1]
    times.sort()
    return times[len(times) // 2]


#: ops lowered to write into their operand 0 (``iree_linalg_ext.scatter``, ``tensor.insert_slice``)
DESTINATION_OPS = frozenset({"tp.index_put", "tp.slice_update"})
#: ops whose result IREE may keep in its operand 0's buffer (views, identity casts, the above)
_SAME_BUFFER = frozenset({"tp.reshape", "tp.permute", "tp.broadcast_to", "tp.slice", "tp.cast"}) | DESTINATION_OPS


def written_inputs(graph: Graph) -> frozenset[int]:
    """The inputs of ``graph`` whose buffer IREE may write: those reaching operand 0 of a
    destination op through views. IREE 3.13 lets such an op write into the buffer of a
    function argument (iree-org/iree#16168: an input overwritten by a tied op), so the runtime
    passes these inputs as private copies, never a caller's array or a device tensor itself."""
    position = {id(v): i for i, v in enumerate(graph.inputs)}
    written: set[int] = set()

    def back(v: Any) -> None:
        while v is not None:
            if id(v) in position:
                written.add(position[id(v)])
                return
            node = v.node
            if node is None or node.op not in _SAME_BUFFER or not node.inputs:
                return
            v = node.inputs[0]

    for g in graph_functions(graph):
        for node in g.nodes:
            if node.op in DESTINATION_OPS and g is graph:
                back(node.inputs[0])
            elif node.callee is not None and any(n.op in DESTINATION_OPS for n in iter_nodes(node.callee)):
                for v in node.inputs:  # a called graph writes: each argument passed on may be written
                    back(v)
    return frozenset(written)


def bind(program: Any, prepared: Widened, name: str | None = None, results: str = "auto") -> Any:
    """Function ``name`` (the graph's) of a loaded program as a runner of ``prepared``'s
    original graph: results keep the graph's dtypes (a widened one is how the device stores
    the original) and stay on a GPU device when an argument was there (runtime.Function);
    inputs IREE may write are passed as copies (:func:`written_inputs`)."""
    graph = prepared.graph
    casts = prepared.output_casts or (None,) * len(graph.outputs)
    return program.function(name or graph.name, [c if c is not None else v.type.dtype.np_dtype
                                                 for v, c in zip(graph.outputs, casts)],
                            storage=prepared.input_casts or None, results=results,
                            private=written_inputs(graph))


# --- the entry point -------------------------------------------------------------------------

#: what :func:`build` makes: a loaded program to call (``tp.compile``), a graph's vmfb bytes
#: (no device needed), or an export's module (:class:`Artifact`: compile input, flags, vmfb)
OUTPUTS = ("program", "vmfb", "export")


def build(graphs: Graph | Sequence[Graph], backend: str, options: Mapping[str, Any] | None = None, *,
          output: str = "program", example_inputs: Sequence[Any] = (),
          link: Callable[[Any, list[Widened]], str] | None = None, name: str | None = None) -> Any:
    """Graphs in, code for built-in IREE ``backend`` out: the one path ``tp.compile`` and
    ``tp.export`` both take (dtype checks and I/O widening, tp MLIR, the target's lowering
    pipeline and ``donate-buffers``, the flags of ``options`` over the target's defaults, IREE
    through the artifact cache, retried with plainer pipelines).

    ``output="program"``: ``graphs`` is one graph, compiled (autotuned on ``example_inputs``
    when the options ask) and loaded on the backend's device: ``run(*arrays) -> arrays``.
    ``output="vmfb"``: one graph's vmfb bytes, not loaded (no device needed).
    ``output="export"``: the graphs emitted into one module and lowered together (the module's
    name ``name``); ``link(lowered_module, prepared)`` returns the module text IREE compiles
    (an export's globals and entry points added); an :class:`Artifact` that compiles it on
    first use of ``vmfb``."""
    if output not in OUTPUTS:
        raise ValueError(f"build: output {output!r} is not one of {', '.join(OUTPUTS)}")
    if backend not in TARGETS:
        raise ValueError(f"build: {backend!r} is not an IREE backend; choose one of {', '.join(TARGETS)}")
    be = get_iree_backend(backend)
    if output == "export":
        if link is None or name is None:
            raise TypeError("build(output='export') needs link= and name=")
        return be._export(list(graphs), dict(options or {}), link, name)
    if not isinstance(graphs, Graph):
        raise TypeError(f"build(output={output!r}) takes one graph, got {type(graphs).__name__}")
    if output == "vmfb":
        return be._compile(be.prepare(graphs).graph, validate_options(options or {}))
    return be._program(graphs, example_inputs, options)


class Artifact:
    """An export's module for one backend: the compile input ``text``, the iree-compile
    ``flags`` of the pipeline asked for (after :attr:`vmfb`, of the one that compiled it) and
    the vmfb, compiled on first use through the artifact cache (a pipeline IREE refuses is
    retried plainer, as for ``tp.compile``)."""

    def __init__(self, backend: IreeBackend, text: str, options: Mapping[str, Any], name: str):
        self.backend, self.text, self.options, self.name = backend, text, options, name
        self.flags = backend.flags(backend.pipeline_options(options, text))
        self._vmfb: bytes | None = None

    @property
    def vmfb(self) -> bytes:
        if self._vmfb is None:
            text = self.text
            self._vmfb, self.flags = compile_with_retries(text, lambda: text, self.backend, self.options,
                                                          name=self.name, what="export")
        return self._vmfb


_backends: dict[str, IreeBackend] = {}


def count_dispatches(graph: Graph, backend: str = "iree-cpu", options: Mapping[str, Any] | None = None) -> int:
    """How many dispatches (kernels) IREE forms for ``graph`` with ``options``: the
    ``flow.dispatch`` ops of the flow-level IR (the iree-compile tool stops there with
    ``--compile-to=flow``; the in-process API has no such option). For benchmarks and reports."""
    from iree.compiler import compile_str

    b = get_iree_backend(backend)
    prepared = b.prepare(graph)
    text = lower_to_linalg(tp_mlir(prepared.graph), graph.name, backend)
    flow = compile_str(text, extra_args=[*b.flags(validate_options(options or {})), "--compile-to=flow"])
    return len(re.findall(r"flow\.dispatch @", flow.decode()))


def get_iree_backend(name: str) -> IreeBackend:
    """The backend object of built-in IREE backend ``name``."""
    if name not in _backends:
        _backends[name] = IreeBackend(name)
    return _backends[name]


def compile_to_vmfb(graph: Graph, options: Mapping[str, Any] | None = None, *, backend: str = "iree-cpu") -> bytes:
    """Compile ``graph`` to vmfb bytes for a built-in IREE backend, without loading it (no
    device needed: this is how a CUDA vmfb is built on a machine without a GPU)."""
    if backend not in TARGETS:
        raise ValueError(f"compile_to_vmfb: {backend!r} is not an IREE backend; choose one of "
                         f"{', '.join(TARGETS)}")
    return build(graph, backend, options, output="vmfb")


# the built-in backend objects, by the name without "iree-" (what the registry loads): cpu,
# vulkan, cuda, rocm, vmvx
for _name in TARGETS:
    globals()[_name.removeprefix("iree-")] = get_iree_backend(_name)
