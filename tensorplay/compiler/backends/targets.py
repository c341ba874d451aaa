"""One record per built-in IREE backend: what it compiles for, where its code runs, which
dtypes it takes, how the graph is lowered and adapted for it, and what export chooses.

Flags (:meth:`IreeBackend.flags <tensorplay.compiler.backends.iree.IreeBackend.flags>`,
:func:`~tensorplay.compiler.backends.modes.compile_flags`), the lowering pipeline, the
availability probe, the registry's built-ins and export's defaults all read these records.
A record extends the runtime's table of driver facts (:mod:`tensorplay.runtime.drivers`: the
drivers that run each backend's code, the element types a driver stores wider), which a deployed
program reads without the compiler; a record refers to its entries by the backend's name.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...runtime.drivers import BACKEND_DRIVERS, WIDE_STORAGE
from .base import ALL_DTYPE_NAMES

__all__ = ["IreeTarget", "TARGETS", "target_of", "VULKAN_BASELINE", "VULKAN_BASELINE_INT64", "VULKAN_BASELINE_NARROW",
           "vulkan_device_flags"]


@dataclass(frozen=True)
class IreeTarget:
    """How one IREE backend compiles and where it runs."""

    name: str                   # the backend's name
    target: str                 # --iree-hal-target-backends
    device_kind: str            # "cpu" or "gpu"
    dtypes: tuple[str, ...]
    description: str
    install_hint: str
    #: registry tags ("debug", "experimental": hidden by list_backends() by default)
    tags: tuple[str, ...] = ()
    #: the runtime driver compile() loads on and the availability probe queries; unset: the
    #: first of :attr:`drivers`
    driver: str = ""
    #: compile() picks the driver per graph: :attr:`driver`, or for graphs with enough work on
    #: machines with enough cores the worker pool (probe.choose_cpu_driver; options["runtime_driver"])
    driver_by_work: bool = False
    #: the compile option naming the device code is generated for, and its iree-compile flag
    target_option: str | None = None
    target_flag: str | None = None
    #: that device when neither the options nor the probed device name one (None: no flag)
    target_default: str | None = None
    #: what the option takes and what it chooses (its documentation; ``{}`` stands for the
    #: default), for the compile options table (modes.OPTIONS)
    target_expects: str = ""
    target_doc: str = ""
    #: the probe reads the device's own target (capabilities extra[target_option])
    target_from_device: bool = False
    #: export's portable device by platform.machine() ("*": any other); unset: target_default
    portable_targets: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: the compile options a compile uses unless given (measured fastest: docs/performance.md)
    default_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: --iree-opt-data-tiling applies; the flag the ukernels option maps to
    data_tiling: bool = False
    ukernels_flag: str | None = None
    #: convert-tp-to-linalg options (all true by default) the target needs false, besides
    #: float64, which follows from the dtypes
    lowering_lacks: tuple[str, ...] = ()
    #: the runtime driver cannot run a kernel over zero elements: calls that make an empty
    #: tensor run on the host instead (iree.py's _EmptyGuarded)
    empty_dispatch_fails: bool = False
    #: dtypes that cross the compiled function's boundary as a wider one (widening.widen_io)
    io_widening: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.driver:
            object.__setattr__(self, "driver", self.drivers[0])

    @property
    def drivers(self) -> tuple[str, ...]:
        """The runtime drivers that run this target's code (the first: runtime.load's default)."""
        return BACKEND_DRIVERS[self.name]

    @property
    def driver_choices(self) -> tuple[str, ...]:
        """:attr:`driver` first, then the other drivers compile() may pick."""
        return tuple(dict.fromkeys((self.driver, *self.drivers))) if self.driver_by_work else (self.driver,)

    @property
    def has_float64(self) -> bool:
        """Whether the target computes in float64 (lowerings avoid float64 intermediates where not)."""
        return "float64" in self.dtypes

    @property
    def lowering_options(self) -> dict[str, bool]:
        """The convert-tp-to-linalg options this target lowers with (only those set false)."""
        lacks = (() if self.has_float64 else ("float64",)) + self.lowering_lacks
        if self.device_kind == "gpu" and self.has_float64:
            # GPU code adds the threads' partial sums as a tree, whose rounding error grows with
            # the log of the count: large float32 sums accumulate in float64 on the CPU only
            lacks += ("wide-float-sums",)
        if self.device_kind == "gpu":
            lacks += ("conv-by-columns",)  # measured on IREE's CPU code only
        return {name: False for name in lacks}

    def export_options(self, machine: str | None = None) -> dict[str, Any]:
        """The target option export uses unless given: code for any device of the kind rather
        than for this machine's exact CPU or GPU (compile()'s choice)."""
        if self.target_option is None:
            return {}
        machine = (platform.machine() if machine is None else machine).lower()
        value = self.portable_targets.get(machine, self.portable_targets.get("*", self.target_default))
        return {} if value is None else {self.target_option: value}


# IREE's default Vulkan target (32-bit storage and compute) miscompiles float16 and cannot
# express float64; measured on lavapipe, see docs/backends.md.
_VULKAN_DTYPES = tuple(d for d in ALL_DTYPE_NAMES if d not in ("float16", "float64"))

#: the ``vulkan_target`` naming IREE's portable SPIR-V baseline (its default Vulkan target,
#: the VP_ANDROID_baseline_2022 profile) with 64-bit integer arithmetic added (SPIR-V's Int64
#: capability, which a device reporting Vulkan's ``shaderInt64`` feature runs; lavapipe does).
#: Without it IREE emulates int64 on 32-bit words, and that emulation fails to compile a
#: vectorized dispatch of 64-bit integers ("failed to legalize operation 'vector.broadcast'",
#: e.g. nanoGPT's cross_entropy at 4x32 tokens); measured in docs/backends.md
VULKAN_BASELINE_INT64 = "baseline-int64"
#: the ``vulkan_target`` naming IREE's portable baseline as it is (int64 emulated): export's
#: default, whose vmfb must run on devices without ``shaderInt64`` too
VULKAN_BASELINE = "baseline"
#: :data:`VULKAN_BASELINE_INT64` with 8- and 16-bit integers and 8- and 16-bit storage buffers
#: added (Vulkan's ``shaderInt8``, ``shaderInt16``, ``storageBuffer8BitAccess`` and
#: ``storageBuffer16BitAccess``; lavapipe has them). The baseline's 32-bit storage keeps an
#: int8, int16, bool or bfloat16 tensor passed between dispatches packed in 32-bit words, and
#: IREE 3.13's vectorized code writes it one element per word, past the end of its buffer: at
#: 1,024 elements half of a bfloat16 tensor and most of an int8 one came back as zeros (an
#: int8 cast then summed, ``all`` over a mask, a bfloat16 matmul). With 8- and 16-bit storage
#: such tensors are stored as they are (docs/backends.md)
VULKAN_BASELINE_NARROW = "baseline-int8-int16-int64"

# IREE's own description of its Vulkan baseline (what IREE 3.13 prints for the default target)
# with capabilities and bitwidths added; IREE has no flag adding a capability to a named target
# (--iree-vulkan-target-features replaces the SPIR-V features but not the bitwidths that decide
# between emulation and native code), so the whole device target is given
def _vulkan_baseline_device(features: str, compute: str, storage: str) -> str:
    """IREE's description of its Vulkan baseline with the SPIR-V ``features`` and the
    ``compute`` and ``storage`` bitwidths given, as a ``--iree-hal-target-device`` value."""
    return ('#hal.device.target<"vulkan", [#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", '
            '{iree_codegen.target_info = #iree_gpu.target<arch = "vp_android_baseline_2022", '
            f'features = "{features}", wgp = <compute = {compute}, storage = {storage}, '
            'subgroup = none, subgroup_size_choices = [64], max_workgroup_sizes = [128, 128, 64], '
            'max_thread_count_per_workgroup = 128, max_workgroup_memory_bytes = 16384, '
            'max_workgroup_counts = [65535, 65535, 65535]>>}>]> : !hal.device')


#: the whole device target of each ``vulkan_target`` tensorplay describes itself
_VULKAN_DEVICES = {
    VULKAN_BASELINE_INT64: _vulkan_baseline_device("spirv:v1.3,cap:Shader", "fp32|int32|int64", "b32"),
    VULKAN_BASELINE_NARROW: _vulkan_baseline_device(
        "spirv:v1.3,cap:Shader,cap:Int64,cap:Int16,cap:Int8,cap:StorageBuffer16BitAccess,cap:StorageBuffer8BitAccess",
        "fp32|int64|int32|int16|int8", "b32|b16|b8"),
}


def vulkan_device_flags(vulkan_target: str | None) -> list[str]:
    """The iree-compile flags choosing the Vulkan code: IREE's baseline (no target), a target
    IREE names, or :data:`VULKAN_BASELINE_INT64` / :data:`VULKAN_BASELINE_NARROW` (the whole
    device target, in place of ``--iree-hal-target-backends``, which would override it);
    :data:`VULKAN_BASELINE` and None add no target."""
    device = _VULKAN_DEVICES.get(vulkan_target)
    if device is not None:
        return [f"--iree-hal-target-device={device}"]
    flags = ["--iree-hal-target-backends=vulkan-spirv"]
    if vulkan_target in (None, VULKAN_BASELINE):
        return flags
    return [*flags, f"--iree-vulkan-target={vulkan_target}"]


# VMVX has no f16 arithmetic: IREE 3.13 fails to legalize arith.extf from f16.
_VMVX_DTYPES = tuple(d for d in ALL_DTYPE_NAMES if d != "float16")

_PIP_HINT = "pip install iree-base-compiler==3.13.* iree-base-runtime==3.13.*"

TARGETS: dict[str, IreeTarget] = {t.name: t for t in (
    IreeTarget("iree-cpu", "llvm-cpu", "cpu", ALL_DTYPE_NAMES,
               "IREE llvm-cpu code for this machine's CPU (target-cpu=host)", _PIP_HINT,
               driver="local-sync", driver_by_work=True,
               target_option="target_cpu", target_flag="--iree-llvmcpu-target-cpu", target_default="host",
               target_expects="an LLVM CPU name such as 'host' or 'znver4'",
               target_doc="the CPU llvm-cpu code is generated for (default: {})",
               # x86-64-v2 (SSE4.2, POPCNT) runs on every x86-64 CPU of the last 15 years; the plain
               # x86-64 baseline lacks SSE4.1's rounding, so trunc/floor/round would need libm calls
               # IREE's llvm-cpu cannot link. Other architectures get LLVM's generic CPU.
               portable_targets={"x86_64": "x86-64-v2", "amd64": "x86-64-v2", "*": "generic"},
               data_tiling=True, ukernels_flag="--iree-llvmcpu-enable-ukernels",
               # O2 with data tiling and the mmt4d microkernels runs matmuls 2-5x faster than
               # IREE's default O0; O2's aggressive fusion puts layer_norm, gelu and softmax in one
               # dispatch that runs 1.5-3x slower than the four it replaces, so it stays off
               default_options={"opt_level": "O2", "data_tiling": True, "ukernels": "all",
                                "aggressive_fusion": False}),
    IreeTarget("iree-vulkan", "vulkan-spirv", "gpu", _VULKAN_DTYPES,
               "IREE SPIR-V code run by a Vulkan driver (lavapipe: Mesa's software device)",
               "install the Vulkan loader and a driver (Debian/Ubuntu: apt-get install mesa-vulkan-drivers, "
               "which brings libvulkan1 and the lavapipe software device; or your GPU vendor's driver)",
               # no default: IREE's portable SPIR-V baseline; with 8-, 16- and 64-bit integers and
               # storage where the probed device has them (VULKAN_BASELINE_NARROW), with int64
               # arithmetic where it has that only (VULKAN_BASELINE_INT64)
               target_option="vulkan_target", target_flag="--iree-vulkan-target",
               target_expects="an IREE Vulkan target such as 'rdna3'",
               target_doc="the SPIR-V environment (default: IREE's portable baseline)",
               target_from_device=True, portable_targets={"*": VULKAN_BASELINE},
               # IREE 3.13's SPIR-V backend emulates i64 add, mul and shifts but not division, and
               # computes an outer-dim reduction fused with its consumers and a strided depthwise
               # convolution wrongly (docs/backends.md)
               lowering_lacks=("int64-division", "fuse-outer-reductions", "depthwise-conv"),
               # sub-32-bit tensors live in 32-bit words; one crossing the function boundary loses
               # its tail when its byte size is not a multiple of 4 (the partial last word is out of
               # the buffer's range; seen on lavapipe), so they travel as 32-bit values
               io_widening=WIDE_STORAGE["vulkan"],
               # IREE 3.13's Vulkan HAL refuses a dispatch binding of an empty buffer range ("Vulkan
               # dispatch binding N resolved to an empty buffer range"): a tensor of size 0 at run
               # time, an input or a size the data decided (nothing selected by a mask)
               empty_dispatch_fails=True),
    IreeTarget("iree-cuda", "cuda", "gpu", ALL_DTYPE_NAMES,
               "IREE CUDA (PTX) code for the NVIDIA GPU's compute capability",
               "needs an NVIDIA GPU with its driver (libcuda.so); without one, "
               "tensorplay.compiler.backends.iree.compile_to_vmfb(graph, backend='iree-cuda') still "
               "builds the vmfb",
               # sm_80 PTX also runs where IREE has no GPU description (the driver JIT-compiles it
               # forward), so it is the fallback and export's portable choice
               target_option="cuda_target", target_flag="--iree-cuda-target", target_default="sm_80",
               target_expects="an sm_XY name",
               target_doc="the CUDA architecture (default: the device's, {} PTX for sm_90/sm_100)",
               target_from_device=True,
               # IREE 3.13's CUDA codegen fails to distribute a dynamic-size reduction over the
               # innermost dim with a 64-bit accumulator fused with its producer
               lowering_lacks=("fuse-wide-inner-reductions",),
               # IREE 3.13's CUDA HAL passes an empty grid to cuLaunchKernel (its HIP HAL skips
               # such launches since iree-org/iree#18835)
               empty_dispatch_fails=True),
    IreeTarget("iree-rocm", "rocm", "gpu", ALL_DTYPE_NAMES,
               "IREE ROCm (HSACO) code for an AMD GPU (experimental)",
               "needs an AMD GPU with ROCm (libamdhip64.so)", tags=("experimental",),
               target_option="rocm_target", target_flag="--iree-rocm-target", target_default="gfx942",
               target_expects="a gfx name such as 'gfx942'", target_doc="the AMD GPU architecture (default: {})",
               target_from_device=True, data_tiling=True, ukernels_flag="--iree-rocm-enable-ukernels"),
    IreeTarget("iree-vmvx", "vmvx", "cpu", _VMVX_DTYPES,
               "IREE's portable VMVX bytecode, interpreted on the CPU (slow; for debugging)", _PIP_HINT,
               tags=("debug",)),
)}


def target_of(hal_target: str) -> IreeTarget:
    """The record of the backend compiling for ``--iree-hal-target-backends=hal_target``."""
    for t in TARGETS.values():
        if t.target == hal_target:
            return t
    raise ValueError(f"no IREE backend compiles for {hal_target!r}; targets: "
                     f"{', '.join(t.target for t in TARGETS.values())}")
