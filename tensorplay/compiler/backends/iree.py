"""The IREE backends: a captured graph is emitted as tp MLIR, lowered to linalg by the
``tp-to-linalg`` pipeline, compiled in-process by ``iree.compiler.api`` to a vmfb (through
the artifact cache) and loaded with :mod:`tensorplay.runtime`.

Compiling (graph -> vmfb bytes, cached on disk) and loading (vmfb -> Program on a device)
are separate steps, so export can compile for a device this machine does not have
(:func:`compile_to_vmfb` with ``backend="iree-cuda"``).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import importlib.util
import logging
import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...dialects.tp.graph import Graph
from .. import _logging
from . import cache
from .base import (
    ALL_DTYPE_NAMES,
    BackendCapabilities,
    BackendCompileError,
    BackendUnavailable,
    dtypes_used,
    first_use_of,
    iter_nodes,
)
from .modes import compile_flags, validate_options

__all__ = ["IreeBackend", "IreeTarget", "TARGETS", "compile_to_vmfb", "compile_mlir", "get_iree_backend", "capabilities",
           "graph_work", "lower_to_linalg", "tp_mlir", "choose_cpu_driver", "cuda_target_for",
           "usable_cpus", "LOWERING_PIPELINE", "LOCAL_TASK_MIN_WORK", "LOCAL_TASK_MIN_CPUS"]

#: the tp pipeline run before IREE (passes/registry.py PIPELINES): tp-optimize, then
#: convert-tp-to-linalg, canonicalize, cse
LOWERING_PIPELINE = "tp-to-linalg"
#: the same for IREE's Vulkan/SPIR-V baseline: no float64 arithmetic, no int64 division, and
#: outer-dim reductions kept out of their consumers' dispatches (see ConvertTpToLinalg)
LOWERING_PIPELINE_SPIRV = ("tp-optimize,convert-tp-to-linalg{float64=false int64-division=false "
                           "fuse-outer-reductions=false},canonicalize,cse")

#: local-task's worker pool costs 40-70 us per call more than local-sync (measured, see
#: docs/backends.md); it is chosen only for graphs of at least this much work (see
#: :func:`graph_work`; about 0.5 ms on one core) on machines with this many usable cores
LOCAL_TASK_MIN_WORK = 4_000_000
LOCAL_TASK_MIN_CPUS = 4

# CUDA targets IREE 3.13 has no GPU description for ("missing GPU target", iree-org/iree#22147):
# Hopper and data-center Blackwell get sm_80 PTX, which the driver JIT-compiles forward.
_CUDA_TARGETS_WITHOUT_DESCRIPTION = {"sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_101a",
                                     "sm_103", "sm_103a"}
CUDA_FALLBACK_TARGET = "sm_80"
ROCM_DEFAULT_TARGET = "gfx942"

_log = _logging.get_logger("perf")


@dataclass(frozen=True)
class IreeTarget:
    """How one IREE backend compiles and where it runs."""

    name: str
    target: str                 # --iree-hal-target-backends
    driver: str                 # runtime driver (iree-cpu picks local-sync or local-task per graph)
    device_kind: str
    dtypes: tuple[str, ...]
    description: str
    install_hint: str

    @property
    def has_float64(self) -> bool:
        """Whether the target computes in float64 (lowerings avoid float64 intermediates where not)."""
        return "float64" in self.dtypes


# IREE's default Vulkan target (32-bit storage and compute) miscompiles float16 and cannot
# express float64; measured on lavapipe, see docs/backends.md.
_VULKAN_DTYPES = tuple(d for d in ALL_DTYPE_NAMES if d not in ("float16", "float64"))

# VMVX has no f16 arithmetic: IREE 3.13 fails to legalize arith.extf from f16.
_VMVX_DTYPES = tuple(d for d in ALL_DTYPE_NAMES if d != "float16")

TARGETS: dict[str, IreeTarget] = {t.name: t for t in (
    IreeTarget("iree-cpu", "llvm-cpu", "local-sync or local-task", "cpu", ALL_DTYPE_NAMES,
               "IREE llvm-cpu code for this machine's CPU (target-cpu=host)",
               "pip install iree-base-compiler==3.13.* iree-base-runtime==3.13.*"),
    IreeTarget("iree-vulkan", "vulkan-spirv", "vulkan", "gpu", _VULKAN_DTYPES,
               "IREE SPIR-V code run by a Vulkan driver (lavapipe: Mesa's software device)",
               "install the Vulkan loader and a driver (Debian/Ubuntu: apt-get install mesa-vulkan-drivers, "
               "which brings libvulkan1 and the lavapipe software device; or your GPU vendor's driver)"),
    IreeTarget("iree-cuda", "cuda", "cuda", "gpu", ALL_DTYPE_NAMES,
               "IREE CUDA (PTX) code for the NVIDIA GPU's compute capability",
               "needs an NVIDIA GPU with its driver (libcuda.so); without one, "
               "tensorplay.compiler.backends.iree.compile_to_vmfb(graph, backend='iree-cuda') still "
               "builds the vmfb"),
    IreeTarget("iree-rocm", "rocm", "hip", "gpu", ALL_DTYPE_NAMES,
               "IREE ROCm (HSACO) code for an AMD GPU (experimental)",
               "needs an AMD GPU with ROCm (libamdhip64.so)"),
    IreeTarget("iree-vmvx", "vmvx", "local-sync", "cpu", _VMVX_DTYPES,
               "IREE's portable VMVX bytecode, interpreted on the CPU (slow; for debugging)",
               "pip install iree-base-compiler==3.13.* iree-base-runtime==3.13.*"),
)}


# --- target selection ------------------------------------------------------------------------

def _cuda_compute_capability() -> tuple[int, int] | None:
    """The first CUDA device's (major, minor), read from the driver library; None without one."""
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(lib)
            break
        except OSError:
            continue
    else:
        return None
    major, minor, device = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    if (cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device) != 0
            or cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device) != 0):
        return None
    return major.value, minor.value


def cuda_target_for(capability: tuple[int, int] | None) -> str:
    """The ``--iree-cuda-target`` for a compute capability (sm_80 when unknown, and for the
    architectures IREE 3.13 cannot target yet)."""
    if capability is None:
        return CUDA_FALLBACK_TARGET
    name = f"sm_{capability[0]}{capability[1]}"
    return CUDA_FALLBACK_TARGET if name in _CUDA_TARGETS_WITHOUT_DESCRIPTION else name


def _rocm_device_target() -> str | None:
    """The first AMD GPU's gfx name from the KFD topology (``gfx_target_version`` 90402 ->
    gfx942), or None."""
    for path in sorted(glob.glob("/sys/class/kfd/kfd/topology/nodes/*/properties")):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "gfx_target_version" and int(value) > 0:
                        v = int(value)
                        return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"
        except (OSError, ValueError):
            continue
    return None


def graph_work(graph: Graph) -> int:
    """Scalar operations a graph performs, roughly: result elements, times the reduced size
    for matmul and conv. Unknown (dynamic) sizes count as 64."""
    def numel(shape: Sequence[Any]) -> int:
        n = 1
        for d in shape:
            n *= int(d) if isinstance(d, (int, np.integer)) else 64
        return n

    work = 0
    for node in iter_nodes(graph):
        out = sum(numel(r.type.shape) for r in node.results)
        if node.op == "tp.matmul" and node.inputs and node.inputs[0] is not None and node.inputs[0].type.rank:
            shape = node.inputs[0].type.shape
            out *= numel(shape[-1:])
        elif node.op == "tp.conv2d" and len(node.inputs) > 1 and node.inputs[1] is not None:
            out *= numel(node.inputs[1].type.shape[1:])
        work += out
    return work


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_cpu_driver(graph: Graph, requested: str = "auto") -> str:
    """local-sync (dispatches on the calling thread, no hand-off) unless the graph is large
    and the machine has enough cores for local-task's worker pool to pay off."""
    if requested != "auto":
        return requested
    if usable_cpus() >= LOCAL_TASK_MIN_CPUS and graph_work(graph) >= LOCAL_TASK_MIN_WORK:
        return "local-task"
    return "local-sync"


# --- availability ----------------------------------------------------------------------------

_probe_lock = threading.Lock()
_probed: dict[str, BackendCapabilities] = {}


def capabilities(name: str) -> BackendCapabilities:
    """The capabilities of built-in backend ``name``, with availability probed once."""
    with _probe_lock:
        caps = _probed.get(name)
        if caps is None:
            caps = _probe(TARGETS[name])
            _probed[name] = caps
        return caps


def _static_capabilities(t: IreeTarget) -> BackendCapabilities:
    return BackendCapabilities(name=t.name, target=t.target, runtime_driver=t.driver, device_kind=t.device_kind,
                               dtypes=t.dtypes, dynamic_shapes=True, training=False, export_formats=("vmfb",),
                               description=t.description, install_hint=t.install_hint)


def _probe(t: IreeTarget) -> BackendCapabilities:
    caps = _static_capabilities(t)
    for module, package in (("iree.compiler", "iree-base-compiler"), ("iree.runtime", "iree-base-runtime")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return replace(caps, available=False, reason=f"the Python package {package} is not installed",
                           install_hint=f"pip install {package}==3.13.*")
    from ...runtime import program

    driver = "local-sync" if t.name == "iree-cpu" else t.driver
    try:
        devices = program.driver_devices(driver)
    except program.DriverUnavailable as exc:
        return replace(caps, available=False, reason=str(exc))
    except Exception as exc:  # a probe reports, it never raises: any other failure is a reason too
        return replace(caps, available=False,
                       reason=f"IREE runtime driver {driver!r} failed to probe: {type(exc).__name__}: {exc}")
    if not devices:
        return replace(caps, available=False, reason=f"IREE runtime driver {driver!r} finds no device")
    extra: dict[str, Any] = {"devices": [d.get("name") for d in devices]}
    if t.name == "iree-cuda":
        cc = _cuda_compute_capability()
        extra["compute_capability"] = cc
        extra["cuda_target"] = cuda_target_for(cc)
        if cc is not None and extra["cuda_target"] != f"sm_{cc[0]}{cc[1]}":
            _log.info("iree-cuda: IREE 3.13 cannot target sm_%d%d; compiling sm_80 PTX for the driver "
                      "to JIT forward", *cc)
    elif t.name == "iree-rocm":
        extra["rocm_target"] = _rocm_device_target() or ROCM_DEFAULT_TARGET
    elif t.name == "iree-vulkan":
        extra["software_device"] = any("llvmpipe" in str(d.get("name", "")) for d in devices)
    return replace(caps, install_hint=None, extra=extra)


# --- compile ---------------------------------------------------------------------------------

def tp_mlir(graph: Graph) -> Any:
    """The graph as a tp MLIR module (graphs it calls become private functions)."""
    from ...dialects.tp import mlir as M

    return M.emit([graph])


def lower_to_linalg(module: Any, graph_name: str, backend: str) -> str:
    """Run the tp-to-linalg pipeline on ``module``; returns the lowered MLIR text (with
    locations, so IREE's diagnostics point at the user's code)."""
    from ...dialects.tp import mlir as M
    from ...passes import PipelineError, run_pipeline

    try:
        pipeline = LOWERING_PIPELINE_SPIRV if TARGETS[backend].target == "vulkan-spirv" else LOWERING_PIPELINE
        run_pipeline(module, pipeline, source_name=graph_name)
    except PipelineError as exc:
        raise BackendCompileError(
            f"{backend}: lowering graph {graph_name!r} to linalg failed.\n{exc}\n"
            f"  what to do: compile with backend='eager' to run the graph through the reference "
            f"implementations meanwhile, and report the reproducer above",
            backend=backend, graph=graph_name, reproducer=exc.reproducer) from None
    return M.print_module(module, debuginfo=True)


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


# On IREE's default Vulkan target sub-32-bit tensors live in 32-bit words; one crossing the
# function boundary loses its tail when its byte size is not a multiple of 4 (the partial last
# word is out of the buffer's range; seen on lavapipe). Such inputs and outputs therefore travel
# as 32-bit values, converted inside the compiled function and on the host.
_WIDENED = {"bool": "int32", "uint8": "int32", "int8": "int32", "int16": "int32", "bfloat16": "float32"}


@dataclass(frozen=True)
class _Prepared:
    """The graph IREE compiles, and the host conversions of its inputs and outputs."""

    graph: Graph
    input_casts: tuple[np.dtype | None, ...] = ()
    output_casts: tuple[np.dtype | None, ...] = ()


def _widen_io(graph: Graph) -> _Prepared:
    from ...dialects.tp import dtypes as dt

    def wide(v: Any) -> Any:
        name = _WIDENED.get(v.type.dtype.name)
        return None if name is None else dt.as_dtype(name)

    if not any(wide(v) for v in (*graph.inputs, *graph.outputs)):
        return _Prepared(graph)
    w = Graph(graph.name)
    env: dict[int, Any] = {}
    input_casts = []
    for v in graph.inputs:
        to = wide(v)
        if to is None:
            env[id(v)] = w.add_input(v.type, v.name)
        else:
            env[id(v)] = w.add1("tp.cast", [w.add_input(v.type.with_dtype(to), v.name)], {"dtype": v.type.dtype})
        input_casts.append(None if to is None else to.np_dtype)
    for node in graph.nodes:
        inputs = [None if v is None else env[id(v)] for v in node.inputs]
        if getattr(node, "callee", None) is not None:
            results = w.add_call(node.callee, inputs, node.loc)
        else:
            results = w.add(node.op, inputs, node.attrs, node.loc)
        for old, new in zip(node.results, results):
            new.type = old.type
            env[id(old)] = new
    outputs, output_casts = [], []
    for v in graph.outputs:
        to = wide(v)
        outputs.append(env[id(v)] if to is None else w.add1("tp.cast", [env[id(v)]], {"dtype": to}))
        output_casts.append(None if to is None else v.type.dtype.np_dtype)
    w.set_outputs(outputs)
    return _Prepared(w, tuple(input_casts), tuple(output_casts))


def _with_casts(fn: Callable[..., list], prepared: _Prepared) -> Callable[..., list]:
    if not prepared.input_casts and not prepared.output_casts:
        return fn
    input_casts, output_casts = prepared.input_casts, prepared.output_casts

    def run(*arrays: Any) -> list[np.ndarray]:
        arrays = tuple(a if c is None else np.asarray(a).astype(c) for a, c in zip(arrays, input_casts))
        results = fn(*arrays)
        return [r if c is None else (r != 0 if c == np.bool_ else r.astype(c))
                for r, c in zip(results, output_casts)]

    run.program = getattr(fn, "program", None)  # type: ignore[attr-defined]
    return run


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
        return capabilities(self.name)

    # compile ------------------------------------------------------------------------------
    def flags(self, options: Mapping[str, Any] | None = None) -> list[str]:
        """The iree-compile flags for ``options``."""
        options = dict(options or {})
        t = self.spec
        # float64 stays float64 where the target has it; where it has none (Vulkan: float64
        # tensors are refused by check_dtypes, and the lowering avoids float64 intermediates)
        # IREE demotes any float64 left
        demote = "false" if t.has_float64 else "true"
        flags = [f"--iree-hal-target-backends={t.target}", f"--iree-input-demote-f64-to-f32={demote}"]
        if t.target == "llvm-cpu":
            flags.append(f"--iree-llvmcpu-target-cpu={options.get('target_cpu', 'host')}")
        elif t.target == "cuda":
            target = options.get("cuda_target")
            if target is None:
                probed = capabilities(self.name).extra.get("cuda_target")
                target = probed or CUDA_FALLBACK_TARGET
            flags.append(f"--iree-cuda-target={target}")
        elif t.target == "rocm":
            target = options.get("rocm_target") or capabilities(self.name).extra.get("rocm_target")
            flags.append(f"--iree-rocm-target={target or ROCM_DEFAULT_TARGET}")
        elif t.target == "vulkan-spirv" and "vulkan_target" in options:
            flags.append(f"--iree-vulkan-target={options['vulkan_target']}")
        return flags + compile_flags(options, t.target)

    def check_dtypes(self, graph: Graph) -> None:
        """TypeError, before any compile, for a dtype this target cannot run."""
        bad = sorted(dtypes_used(graph) - set(self.spec.dtypes))
        if bad:
            where = "; ".join(f"{d} first at {first_use_of(graph, d)}" for d in bad)
            raise TypeError(f"{self.name} cannot compile graph {graph.name!r}: {', '.join(bad)} is not "
                            f"supported by the {self.spec.target} target ({where}). Cast to a supported "
                            f"dtype ({', '.join(self.spec.dtypes)}) or use backend='iree-cpu'")

    def prepare(self, graph: Graph) -> _Prepared:
        """Check dtypes, then adapt the graph to the target (Vulkan: 32-bit inputs/outputs)."""
        self.check_dtypes(graph)
        return _widen_io(graph) if self.spec.target == "vulkan-spirv" else _Prepared(graph)

    def compile_to_vmfb(self, graph: Graph, options: Mapping[str, Any] | None = None) -> bytes:
        """The vmfb of ``graph`` for this target, from the artifact cache when present.
        Needs no device: CUDA and ROCm vmfbs build on any machine."""
        return self._compile(self.prepare(graph).graph, validate_options(options or {}))

    def _compile(self, graph: Graph, options: Mapping[str, Any]) -> bytes:
        from ...dialects.tp import mlir as M

        flags = self.flags(options)
        module = tp_mlir(graph)
        key = cache.cache_key(mlir=M.print_module(module), backend=self.name, flags=flags,
                              target=cache.host_target() if self.spec.target == "llvm-cpu" else self.spec.target)

        def build() -> bytes:
            return compile_mlir(lower_to_linalg(module, graph.name, self.name), flags,
                                backend=self.name, name=graph.name)

        return cache.get_or_compile(key, build, what=f"graph {graph.name!r} for {self.name}")

    # load and run -------------------------------------------------------------------------
    def driver_for(self, graph: Graph, options: Mapping[str, Any] | None = None) -> str:
        if self.spec.name == "iree-cpu":
            return choose_cpu_driver(graph, (options or {}).get("runtime_driver", "auto"))
        return self.spec.driver

    def _check_available(self) -> None:
        caps = capabilities(self.name)
        if not caps.available:
            raise BackendUnavailable(self.name, caps.reason, caps.install_hint)

    def load(self, vmfb: bytes, graph: Graph, options: Mapping[str, Any] | None = None) -> Callable[..., list]:
        """``run(*arrays)`` for a vmfb this backend compiled from ``graph``, loaded on its device."""
        return self._load(vmfb, self.prepare(graph), options)

    def _load(self, vmfb: bytes, prepared: _Prepared, options: Mapping[str, Any] | None) -> Callable[..., list]:
        from ...runtime import Program

        self._check_available()
        graph = prepared.graph
        driver = self.driver_for(graph, options)
        if self.spec.name == "iree-cpu":
            _log.info("%s: graph %r runs on %s (estimated work %.1e, %d usable cpus)", self.name, graph.name,
                      driver, graph_work(graph), usable_cpus())
        program = Program(vmfb, driver, name=graph.name)
        fn = program.function(graph.name, [v.type.dtype.np_dtype for v in graph.outputs])
        return _with_casts(fn, prepared)

    def __call__(self, graph: Graph, example_inputs: Sequence[Any] = (), options: Mapping[str, Any] | None = None,
                 ) -> Callable[..., list]:
        self._check_available()
        options = validate_options(options or {})
        prepared = self.prepare(graph)
        vmfb = self._compile(prepared.graph, options)
        return self._load(vmfb, prepared, options)


_backends: dict[str, IreeBackend] = {}


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
    return get_iree_backend(backend).compile_to_vmfb(graph, options)


cpu = get_iree_backend("iree-cpu")
vulkan = get_iree_backend("iree-vulkan")
cuda = get_iree_backend("iree-cuda")
rocm = get_iree_backend("iree-rocm")
vmvx = get_iree_backend("iree-vmvx")
