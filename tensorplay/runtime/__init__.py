"""tensorplay.runtime: run compiled IREE VM flatbuffers with only ``iree.runtime`` and numpy.

>>> from tensorplay import runtime
>>> program = runtime.load("model.vmfb", device="cpu")      # doctest: +SKIP
>>> outputs = program.call("forward", x)                    # doctest: +SKIP
"""

from __future__ import annotations

from .program import DRIVER_ALIASES, DRIVERS, Function, Program, driver_devices, get_device, load, release_all

__all__ = ["DRIVERS", "DRIVER_ALIASES", "Program", "Function", "load", "get_device", "driver_devices",
           "release_all"]
