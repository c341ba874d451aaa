"""The IREE runtime drivers tensorplay knows, in one table: their names and aliases, which of
them run on the host's memory, the device each stands for, the built-in backends whose code each
runs, and the element types a driver keeps wider than the tensor's.

The runtime (:mod:`.program`, :mod:`.storage`), the frontend's devices (``tensorplay._device``)
and the compiler's target records (``compiler/backends/targets.py``) read these facts here; a
new driver or backend is one entry in each table below. Plain Python: importing it loads nothing.
"""

from __future__ import annotations

__all__ = ["DRIVERS", "HOST_DRIVERS", "BACKEND_DRIVERS", "BACKEND_OF_DRIVER", "DRIVER_ALIASES", "DEVICE_DRIVERS",
           "WIDE_STORAGE", "is_host_driver", "device_name", "normalize_driver"]

#: the IREE runtime drivers a Program can load on
DRIVERS = ("local-sync", "local-task", "vulkan", "cuda", "hip")

#: the CPU runtime drivers: their buffers are host memory
HOST_DRIVERS = ("local-sync", "local-task")

#: the drivers that can run the code of each built-in IREE backend; the first is the one a
#: program exported for it loads on by default (the compiler's target records read this table)
BACKEND_DRIVERS = {"iree-cpu": ("local-task", "local-sync"), "iree-vulkan": ("vulkan",), "iree-cuda": ("cuda",),
                   "iree-rocm": ("hip",), "iree-vmvx": ("local-sync", "local-task")}

#: the IREE backend whose code runs on each GPU driver (the backend tensors there compile with)
BACKEND_OF_DRIVER = {drivers[0]: backend for backend, drivers in BACKEND_DRIVERS.items()
                     if drivers[0] not in HOST_DRIVERS}

#: friendlier names accepted wherever a driver is: each backend's name (and cpu, rocm) for its
#: default driver
DRIVER_ALIASES = {"cpu": BACKEND_DRIVERS["iree-cpu"][0], "rocm": BACKEND_DRIVERS["iree-rocm"][0],
                  **{backend: drivers[0] for backend, drivers in BACKEND_DRIVERS.items()}}

#: tensorplay's device types and the IREE runtime driver holding tensors on each (``rocm`` is
#: another name of ``hip``; ``cpu`` tensors are numpy arrays and ``meta`` tensors have no data)
DEVICE_DRIVERS = {"cpu": None, "cuda": "cuda", "vulkan": "vulkan", "hip": "hip", "rocm": "hip", "meta": None}

#: dtypes a driver keeps in a wider element type (dtype name -> dtype name): IREE's Vulkan code
#: keeps sub-32-bit tensors in 32-bit words and one crossing a function boundary loses its tail
#: when its byte size is not a multiple of 4, so on Vulkan they are stored as 32-bit values
#: (the compiler widens the inputs and outputs of Vulkan programs to match)
WIDE_STORAGE: dict[str, dict[str, str]] = {
    "vulkan": {"bool": "int32", "uint8": "int32", "int8": "int32", "int16": "int32", "bfloat16": "float32"},
}


def is_host_driver(driver: str) -> bool:
    return driver in HOST_DRIVERS


def device_name(driver: str) -> str:
    """The tensorplay device (``cpu``, ``vulkan:0``, ``cuda:0``, ``hip:0``) of a runtime driver:
    each GPU driver's device type is the driver's name."""
    return "cpu" if driver in HOST_DRIVERS else f"{driver}:0"


def normalize_driver(driver: str) -> str:
    name = DRIVER_ALIASES.get(driver, driver)
    if name not in DRIVERS:
        raise ValueError(f"unknown IREE runtime driver {driver!r}; drivers: {', '.join(DRIVERS)} "
                         f"(aliases: {', '.join(sorted(DRIVER_ALIASES))})")
    return name
