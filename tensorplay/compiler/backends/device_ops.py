"""Eager ops on device tensors: each op applied to tensors on a GPU device runs there as a
program of that one op, lowered by the same ``convert-tp-to-linalg`` code as compiled graphs
and compiled once per op, attributes, operand types and device (kept in memory; the vmfb also
goes to the artifact cache on disk). Results stay on the device.

Host 0-d tensors (Python scalars) may mix with device tensors and are uploaded with the
call, as PyTorch allows; any other host tensor next to a device tensor, or tensors on two
devices, is PyTorch's error naming both devices.

An op runs on the host instead (operands downloaded, results uploaded, counted by
``runtime.stats()`` and logged once per op under ``TENSORPLAY_LOGS=perf``) when its result
sizes depend on the values (none of the tp ops today), when the device's backend does not
take one of its dtypes (float16 and float64 on Vulkan), or when IREE fails to compile it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...runtime.drivers import BACKEND_OF_DRIVER
from .._logging import get_logger
from ... import _dispatch, _views

__all__ = ["run_on_device", "fallbacks"]

_log = get_logger("perf")

_lock = threading.RLock()
#: (op, attributes, operand types, driver) -> bound runtime Function, or a reason to run on the host
_programs: dict[tuple, Any] = {}
_fallbacks: dict[str, str] = {}  # op name -> why it ran on the host (logged once)


def fallbacks() -> dict[str, str]:
    """The ops that ran on the host while their operands were on a device, and why."""
    with _lock:
        return dict(_fallbacks)


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", value.hex())  # -0.0 and NaN are keys of their own
    if isinstance(value, slice):
        return ("slice", _freeze(value.start), _freeze(value.stop), _freeze(value.step))
    hash(value)
    return (type(value).__name__, value)


def _device_of(op: Any, operands: Sequence[Any]) -> str:
    """The runtime driver all device operands are on; PyTorch's error for mixed devices."""
    from ...runtime.storage import device_name

    drivers = {_views.held(o).driver for o in operands if o is not None and _views.is_device(o)}
    host = [i for i, o in enumerate(operands) if o is not None and not _views.is_device(o)
            and _views.has_memory(o) and _views.held(o).ndim != 0]
    if len(drivers) > 1 or host:
        found = sorted(device_name(d) for d in drivers) + (["cpu"] if host else [])
        where = f" (operand {host[0]} is a cpu tensor of shape {list(operands[host[0]].shape)})" if host else ""
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{found[0]} and {found[1]}! ({op.name}{where}; move tensors with .to(device))")
    return next(iter(drivers))


def run_on_device(op: Any, operands: Sequence[Any], attrs: dict, result_types: Sequence[Any]) -> tuple:
    """The results of ``op`` as tensors on the device of its device operands."""
    from ..._tensor import Tensor

    driver = _device_of(op, operands)
    types = tuple(None if o is None else o._tensor_type() for o in operands)
    try:
        key = (op.name, _freeze(attrs), types, driver)
    except TypeError:
        key = None
    program = _programs.get(key) if key is not None else None
    if program is None:
        program = _build(op, types, attrs, result_types, driver)
        if key is not None:
            with _lock:
                _programs[key] = program
    if isinstance(program, str):
        return _on_host(op, operands, attrs, result_types, driver, program)
    outs = program(*[_views.held(o) for o in operands if o is not None])
    return tuple(Tensor._wrap(a) for a in outs)


def _build(op: Any, types: tuple, attrs: dict, result_types: Sequence[Any], driver: str) -> Any:
    """The bound program of one op, or why it must run on the host."""
    from ...dialects.tp.graph import Graph
    from ...runtime import Program
    from .iree import bind, get_iree_backend

    if not all(t.has_static_shape for t in result_types):
        return "its result sizes depend on the values"
    backend = get_iree_backend(BACKEND_OF_DRIVER[driver])
    graph = Graph(f"eager_{op.name.replace('.', '_')}")
    inputs = [None if t is None else graph.add_input(t) for t in types]
    graph.set_outputs(list(graph.add(op.name, inputs, attrs)))
    try:
        prepared = backend.prepare(graph)
    except TypeError as exc:  # a dtype the target cannot run
        return str(exc).split(" (")[0]
    try:
        vmfb = backend._compile(prepared.graph, {})
    except Exception as exc:  # noqa: BLE001 - any compile failure runs the op on the host, logged
        return f"IREE could not compile it for {backend.name}: {str(exc).splitlines()[0][:300]}"
    return bind(Program(vmfb, driver, name=graph.name), prepared, results="device")


def _on_host(op: Any, operands: Sequence[Any], attrs: dict, result_types: Sequence[Any], driver: str,
             why: str) -> tuple:
    from ..._tensor import Tensor
    from ...runtime.program import to_device

    with _lock:
        first = op.name not in _fallbacks
        _fallbacks.setdefault(op.name, why)
    if first:
        _log.info("%s on %s tensors runs on the host: %s (operands are downloaded and results uploaded)",
                  op.name, driver, why)
    arrays = [None if o is None else (_views.held(o).to_host() if _views.is_device(o) else _views.held(o))
              for o in operands]
    outs = op.evaluate(arrays, attrs, result_types)
    return tuple(Tensor._wrap(to_device(np.asarray(a), driver)) for a in outs)


_dispatch.set_device_runner(run_on_device)  # ops on device tensors run here from now on
