"""The single entry through which every frontend function applies a tp op.

``apply("tp.add", a, b)`` verifies operands and attributes against the registry and
then either runs the op's reference implementation (eager mode on host tensors), runs it
on the device of its device tensors through the device runner (a one-op program: the hook is
declared here and set by ``compiler/backends/device_ops``, see :func:`set_device_runner`),
or, while a capture handler is installed and an operand belongs to it, lets the handler
record a graph node.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import _views
from .dialects.tp import dtypes as _dtypes, registry
from .dialects.tp.registry import Op
from .dialects.tp.types import TensorType, type_of_array
from ._grad_mode import is_grad_enabled
from .autograd.engine import record
from .profiler._state import state as _prof_state
from .runtime.storage import DeviceArray

__all__ = ["apply", "capture_handler", "current_handler", "OpInterceptor", "DeviceRunner", "set_device_runner"]

#: what ``capture_handler`` installs: ``handler(op, operands, attrs, result_types)`` returns the
#: results, or NotImplemented to let the op run eagerly (a capture implements it as a
#: ``_capture_handler.CaptureHandler``, whose other hooks eager code asks for)
OpInterceptor = Callable[[Op, tuple[Any, ...], dict[str, Any], tuple[TensorType, ...]], Any]

class _Handler(threading.local):
    #: the capture of this thread, if any: another thread's eager ops never enter it
    current: OpInterceptor | None = None


_handler = _Handler()
_ops: dict[str, Op] = {}

#: (op name, default float dtype, each operand's (dtype, shape) or None, attribute items) ->
#: result types: an op's verification and type inference depend on nothing else, and eager
#: code applies the same op to the same types over and over (each step, each layer of a stack)
_verified: dict[tuple, tuple[TensorType, ...]] = {}
_VERIFIED_MAX = 1 << 16


#: ``run(op, operands, attrs, result_types)`` -> the results as tensors on the GPU device of the
#: device operands. Running an op there means compiling it into a one-op program, which is the
#: compiler's work: the module named by ``DEVICE_RUNNER_MODULE`` sets the runner when it is
#: imported, and the first op that meets a device tensor imports it.
DeviceRunner = Callable[[Op, tuple[Any, ...], dict[str, Any], tuple[TensorType, ...]], tuple]
DEVICE_RUNNER_MODULE = "tensorplay.compiler.backends.device_ops"
_device_runner: DeviceRunner | None = None


def set_device_runner(run: DeviceRunner) -> None:
    """Make ``run`` the way ops on device tensors run (see :data:`DeviceRunner`)."""
    global _device_runner
    _device_runner = run


def _device_runner_or_load() -> DeviceRunner:
    if _device_runner is None:
        try:
            importlib.import_module(DEVICE_RUNNER_MODULE)
        except ImportError as exc:
            raise RuntimeError(f"ops on tensors on a GPU device run as compiled one-op programs, which "
                               f"{DEVICE_RUNNER_MODULE} provides; importing it failed: {exc}") from exc
        if _device_runner is None:
            raise RuntimeError(f"{DEVICE_RUNNER_MODULE} was imported but set no device runner "
                               f"(tensorplay._dispatch.set_device_runner): ops on device tensors cannot run")
    return _device_runner


def _op(name: str) -> Op:
    op = _ops.get(name)
    if op is None:
        op = _ops[name] = registry.lookup(name)
    return op


def apply(op_name: str, *operands: Any, **attrs: Any) -> Any:
    """Apply tp op ``op_name`` to tensor operands (``None`` for absent optional ones).

    Returns one Tensor, or a tuple for ops with several results.
    """
    if _prof_state.active and not attrs.pop("_profiled", False):  # tensorplay.profiler records
        return _prof_state.hooks.apply(op_name, operands, attrs)
    from ._tensor import Tensor

    op = _op(op_name)
    attrs = op.normalize_attrs(attrs)
    # the op, the default float dtype (integer operands of float ops take it) and the operand
    # dtypes and shapes, while all are host arrays
    key: list | None = [op_name, _dtypes._default_float]
    for o in operands:
        if o is None:
            if key is not None:
                key.append(None)
        elif isinstance(o, Tensor):
            if o._root is not None:  # an alias: up to date with writes through its storage
                _views.sync(o)
            elif o._st is not None and o._st.pending is not None:
                _views.check_pending(o)
            if key is not None:
                d = o._data
                if type(d) is np.ndarray and o._sym is None:
                    key.append((d.dtype, d.shape))
                else:
                    key = None
        else:
            raise TypeError(f"{op_name}: operands must be tensors, got {type(o).__name__}")
    result_types = None
    if key is not None:
        try:
            key = (*key, *attrs.items())
            result_types = _verified.get(key)
        except TypeError:  # an unhashable attribute value
            key = None
    if result_types is None:
        result_types = op.verify([None if o is None else o._tensor_type() for o in operands], attrs)
        if key is not None and len(_verified) < _VERIFIED_MAX:
            _verified[key] = result_types
    handler = _handler.current
    view = op.name in _views.VIEW_OPS
    if handler is not None:
        out = handler(op, operands, attrs, result_types)
        if out is not NotImplemented:
            if view and isinstance(out, Tensor):
                _views.made(operands[0], out, op.name, attrs)
            return out
        if any(o is not None and o._sym is not None for o in operands):  # runs eagerly: concrete sizes
            result_types = op.verify([None if o is None else type_of_array(o._data) for o in operands], attrs)
    arrays = [None if o is None else o._data for o in operands]
    if any(type(a) is DeviceArray for a in arrays):  # tensors on a GPU device: the op runs there
        wrapped = _device_runner_or_load()(op, operands, attrs, result_types)
        if not view:  # a result in an operand's buffer (an identity) gets a buffer of its own
            for w in wrapped:
                d = w._data
                if type(d) is DeviceArray and any(type(a) is DeviceArray and a.view == d.view for a in arrays):
                    from .runtime.program import device_copy

                    w._data = device_copy(d)
    else:
        outs = op.evaluate(arrays, attrs, result_types)
        if not view:  # a result over an operand's memory (an identity) is a new tensor: a copy
            outs = [_own(a, arrays) for a in outs]
        wrapped = tuple(Tensor._wrap(a) for a in outs)
    for o in operands:
        if o is not None and o._requires_grad:
            if is_grad_enabled():  # autograd: the results remember how they were made
                record(op, operands, attrs, wrapped)
            break
    if view:
        _views.made(operands[0], wrapped[0], op.name, attrs)
    return wrapped[0] if len(wrapped) == 1 else wrapped


def _own(a: Any, arrays: list) -> Any:
    if type(a) is np.ndarray and (a.base is not None or any(a is x for x in arrays)):
        for x in arrays:
            if type(x) is np.ndarray and np.may_share_memory(a, x):
                return a.copy()
    return a


def current_handler() -> OpInterceptor | None:
    return _handler.current


@contextlib.contextmanager
def capture_handler(handler: OpInterceptor | None) -> Iterator[None]:
    """Install ``handler`` for the duration of the block (nesting restores the outer one)."""
    previous = _handler.current
    _handler.current = handler
    try:
        yield
    finally:
        _handler.current = previous
