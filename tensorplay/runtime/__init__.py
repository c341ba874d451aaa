"""tensorplay.runtime: run compiled IREE VM flatbuffers with only ``iree.runtime`` and numpy.

>>> from tensorplay import runtime
>>> program = runtime.load("model.vmfb", device="cpu")      # doctest: +SKIP
>>> outputs = program.call("forward", x)                    # doctest: +SKIP
>>> print(runtime.stats())   # bytes moved between host and devices   # doctest: +SKIP
"""

from __future__ import annotations

from .drivers import BACKEND_DRIVERS, DRIVER_ALIASES, DRIVERS
from .loader import EntryPoint, ExportedModule, load, load_parameters, save_parameters
from .hal import DriverUnavailable, driver_devices, get_device
from .program import Function, Program, release_all
from .signature import EntrySignature, TensorSpec
from .storage import DeviceArray, TransferStats, reset_stats, stats

__all__ = ["DRIVERS", "BACKEND_DRIVERS", "DRIVER_ALIASES", "Program", "Function", "load", "get_device",
           "driver_devices", "release_all", "DriverUnavailable", "ExportedModule", "EntryPoint", "EntrySignature",
           "TensorSpec", "save_parameters", "load_parameters", "stats", "reset_stats", "TransferStats", "DeviceArray"]
