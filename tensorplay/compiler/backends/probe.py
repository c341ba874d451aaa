"""What this machine offers the IREE backends: whether each can run here (probed once, on
first use), the GPU's own compile target, and the CPU driver a graph runs on."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...dialects.tp.graph import Graph
from .. import _logging
from .base import BackendCapabilities, iter_nodes
from .targets import TARGETS, VULKAN_BASELINE_INT64, VULKAN_BASELINE_NARROW, IreeTarget, target_of

__all__ = ["capabilities", "cuda_driver_device", "probed_target", "cuda_target_for", "graph_work", "usable_cpus", "choose_cpu_driver",
           "LOCAL_TASK_MIN_WORK", "LOCAL_TASK_MIN_CPUS"]

#: local-task's worker pool costs 40-70 us per call more than local-sync (measured, see
#: docs/backends.md); it is chosen for graphs of at least this much work (see
#: :func:`graph_work`; about 0.1-0.5 ms on one core) on machines with this many usable cores.
#: Two cores already pay: 1.3-1.7x on every benchmark graph of that size (docs/performance.md)
LOCAL_TASK_MIN_WORK = 1_000_000
LOCAL_TASK_MIN_CPUS = 2

# CUDA targets IREE 3.13 has no GPU description for ("missing GPU target", iree-org/iree#22147):
# Hopper and data-center Blackwell get the fallback's PTX, which the driver JIT-compiles forward.
_CUDA_TARGETS_WITHOUT_DESCRIPTION = {"sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_101a",
                                     "sm_103", "sm_103a"}

_log = _logging.get_logger("perf")


# --- the device's own target -----------------------------------------------------------------

def cuda_driver_device() -> tuple[Any, Any] | None:
    """(the CUDA driver library, its device 0 handle), initialized; None where the library or
    the device is missing."""
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(lib)
            break
        except OSError:
            continue
    else:
        return None
    device = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    return cuda, device


def _cuda_compute_capability() -> tuple[int, int] | None:
    """The first CUDA device's (major, minor), read from the driver library; None without one."""
    found = cuda_driver_device()
    if found is None:
        return None
    cuda, device = found
    major, minor = ctypes.c_int(), ctypes.c_int()
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    if (cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device) != 0
            or cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device) != 0):
        return None
    return major.value, minor.value


def cuda_target_for(capability: tuple[int, int] | None) -> str:
    """The ``--iree-cuda-target`` for a compute capability (the record's default, sm_80, when
    unknown and for the architectures IREE 3.13 cannot target yet)."""
    fallback = target_of("cuda").target_default
    assert fallback is not None
    if capability is None:
        return fallback
    name = f"sm_{capability[0]}{capability[1]}"
    return fallback if name in _CUDA_TARGETS_WITHOUT_DESCRIPTION else name


#: the Vulkan features :func:`_vulkan_features` reads, each true only where every device has it
VULKAN_FEATURES = ("shaderInt64", "shaderInt16", "shaderInt8", "storageBuffer16BitAccess", "storageBuffer8BitAccess")


def _vulkan_features() -> dict[str, bool] | None:
    """Which of :data:`VULKAN_FEATURES` every Vulkan physical device reports, read from the
    Vulkan loader (``vkGetPhysicalDeviceFeatures2`` with the Vulkan 1.1 and 1.2 feature
    structures; devices older than Vulkan 1.2 report neither 8-bit feature); None without a
    loader or a device."""
    try:
        vk = ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return None

    class ApplicationInfo(ctypes.Structure):  # VkApplicationInfo
        _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("pApplicationName", ctypes.c_char_p),
                    ("applicationVersion", ctypes.c_uint32), ("pEngineName", ctypes.c_char_p),
                    ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]

    class InstanceCreateInfo(ctypes.Structure):  # VkInstanceCreateInfo
        _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                    ("pApplicationInfo", ctypes.POINTER(ApplicationInfo)), ("enabledLayerCount", ctypes.c_uint32),
                    ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                    ("ppEnabledExtensionNames", ctypes.c_void_p)]

    def features_struct(count: int) -> type:  # sType, pNext and `count` VkBool32 members
        class Features(ctypes.Structure):
            _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32 * count)]
        return Features

    class Properties(ctypes.Structure):  # the head of VkPhysicalDeviceProperties
        _fields_ = [("apiVersion", ctypes.c_uint32), ("rest", ctypes.c_uint8 * 1020)]

    try:
        vk.vkCreateInstance.argtypes = [ctypes.POINTER(InstanceCreateInfo), ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_void_p)]
        vk.vkEnumeratePhysicalDevices.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
        vk.vkGetPhysicalDeviceProperties.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        vk.vkGetPhysicalDeviceFeatures2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        vk.vkDestroyInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    except AttributeError:  # a Vulkan 1.0 loader: IREE's baseline, which emulates what it lacks
        return None
    api_1_2 = (1 << 22) | (2 << 12)  # VK_MAKE_API_VERSION(0, 1, 2, 0)
    # VK_STRUCTURE_TYPE_APPLICATION_INFO = 0, _INSTANCE_CREATE_INFO = 1
    app = ApplicationInfo(sType=0, apiVersion=api_1_2)
    instance = ctypes.c_void_p()
    if vk.vkCreateInstance(ctypes.byref(InstanceCreateInfo(sType=1, pApplicationInfo=ctypes.pointer(app))), None,
                           ctypes.byref(instance)) != 0:
        return None
    try:
        count = ctypes.c_uint32()
        if vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None) != 0 or not count.value:
            return None
        devices = (ctypes.c_void_p * count.value)()
        if vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices) not in (0, 5):  # VK_INCOMPLETE
            return None
        found = dict.fromkeys(VULKAN_FEATURES, True)
        for device in devices[:count.value]:
            properties = Properties()
            vk.vkGetPhysicalDeviceProperties(device, ctypes.byref(properties))
            modern = properties.apiVersion >= api_1_2
            # VkPhysicalDeviceVulkan11Features (sType 49): storageBuffer16BitAccess first;
            # VkPhysicalDeviceVulkan12Features (sType 51): storageBuffer8BitAccess 3rd, shaderInt8 9th
            v11, v12 = features_struct(12)(sType=49), features_struct(47)(sType=51)
            v11.pNext = ctypes.addressof(v12) if modern else None
            # VkPhysicalDeviceFeatures2 (sType 1000059000): VkPhysicalDeviceFeatures' 55 members
            both = features_struct(55)(sType=1000059000, pNext=ctypes.addressof(v11))
            vk.vkGetPhysicalDeviceFeatures2(device, ctypes.byref(both))
            has = {"shaderInt64": both.flags[40], "shaderInt16": both.flags[41],
                   "storageBuffer16BitAccess": v11.flags[0],
                   "storageBuffer8BitAccess": modern and v12.flags[2], "shaderInt8": modern and v12.flags[8]}
            for name in VULKAN_FEATURES:
                found[name] = found[name] and bool(has[name])
        return found
    finally:
        vk.vkDestroyInstance(instance, None)


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


# --- the CPU driver --------------------------------------------------------------------------

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
    return BackendCapabilities(name=t.name, target=t.target, runtime_driver=" or ".join(t.driver_choices),
                               device_kind=t.device_kind, dtypes=t.dtypes, dynamic_shapes=True, training=True,
                               export_formats=("vmfb",), description=t.description, install_hint=t.install_hint)


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

    driver = t.driver
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
    reader = _DEVICE_READERS.get(t.target)
    if reader is not None:
        extra.update(reader(t, devices))
    return replace(caps, install_hint=None, extra=extra)


def _cuda_device(t: IreeTarget, devices: list[dict]) -> dict[str, Any]:
    cc = _cuda_compute_capability()
    extra: dict[str, Any] = {"compute_capability": cc, t.target_option: cuda_target_for(cc)}
    if cc is not None and extra[t.target_option] != f"sm_{cc[0]}{cc[1]}":
        _log.info("%s: IREE 3.13 cannot target sm_%d%d; compiling %s PTX for the driver "
                  "to JIT forward", t.name, *cc, extra[t.target_option])
    return extra


def _rocm_device(t: IreeTarget, devices: list[dict]) -> dict[str, Any]:
    return {t.target_option: _rocm_device_target() or t.target_default}


def _vulkan_device(t: IreeTarget, devices: list[dict]) -> dict[str, Any]:
    extra: dict[str, Any] = {"software_device": any("llvmpipe" in str(d.get("name", "")) for d in devices)}
    features = _vulkan_features() or {}
    extra["vulkan_features"] = features
    extra["shader_int64"] = features.get("shaderInt64")
    # native 8-, 16- and 64-bit integers and 8- and 16-bit storage where every device has
    # them (IREE picks one of them); 64-bit integers alone; else IREE's baseline, which
    # emulates int64 and narrow storage on 32-bit words
    if features and all(features.values()):
        extra[t.target_option] = VULKAN_BASELINE_NARROW
    elif features.get("shaderInt64"):
        extra[t.target_option] = VULKAN_BASELINE_INT64
    else:
        extra[t.target_option] = None
    return extra


#: what the probe reads of a device, by the HAL target whose code runs there (the CUDA
#: compute capability, the AMD GPU's gfx name, the Vulkan device's features): each gives the
#: capabilities' extra entries, the device's own target under the record's target_option
_DEVICE_READERS = {"cuda": _cuda_device, "rocm": _rocm_device, "vulkan-spirv": _vulkan_device}


def probed_target(t: IreeTarget) -> str | None:
    """The device target the probe read for ``t`` (None for targets that read none, and
    without a device)."""
    if not t.target_from_device or t.target_option is None:
        return None
    return capabilities(t.name).extra.get(t.target_option)
