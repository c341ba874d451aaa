"""How a loaded IREE program is called: the CPU driver chosen by timing a program's first calls
on both (:class:`_DriverTrial`), and calls that would make an empty tensor run on the host
where the device's driver cannot run a kernel over zero elements (:class:`_EmptyGuarded`,
:func:`empty_sizes_check`)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...dialects.tp.graph import Graph
from .. import _logging, tracedir

__all__ = ["empty_sizes_check"]

_log = _logging.get_logger("perf")


def empty_sizes_check(graph: Graph) -> Callable[[Sequence[Any]], bool] | None:
    """``check(arrays)``: whether a call of ``graph`` on ``arrays`` (one per input) makes an
    input or an op result with no elements, from the graph's symbolic sizes (plain integer
    arithmetic over the arrays' shapes); None when every size is static."""
    import sympy

    from ...dialects.tp import symbolic as sym

    names: dict[Any, str] = {}
    lines: list[str] = []
    for i, v in enumerate(graph.inputs):
        for d, size in enumerate(v.type.shape):
            if isinstance(size, sympy.Symbol) and size not in names:
                names[size] = f"v{len(names)}"
                lines.append(f"{names[size]} = arrays[{i}].shape[{d}]")
    if not names:
        return None
    tests: dict[str, None] = {}
    for v in [*graph.inputs, *(r for node in graph.nodes for r in node.results)]:
        for size in getattr(v.type, "shape", ()):
            if sym.is_symbolic(size) and sym.free_symbols([size]) <= set(names):
                tests.setdefault(f"({sym.size_to_python(size, names)}) == 0")
    if not tests:
        return None
    body = "\n    ".join(lines)
    source = f"def check(arrays):\n    {body}\n    return {' or '.join(tests)}\n"
    scope: dict[str, Any] = {}
    exec(compile(source, f"<empty sizes of {graph.name}>", "exec"), scope)  # noqa: S102
    return scope["check"]


#: how IREE 3.13's Vulkan HAL refuses a dispatch over an empty tensor
_EMPTY_BINDING = "resolved to an empty buffer range"


class _DriverTrial:
    """A CPU program loaded on both drivers, ``local-task`` (IREE's worker pool) and
    ``local-sync`` (the calling thread), that times its first calls on each and keeps the
    faster. Both run the same vmfb on host memory, so results do not depend on the choice.
    The pool wins on large dispatches (1.2-5.8x on the forward benchmarks) and loses where a
    program is many small ones: on the 2-core machine of docs/performance.md a hand-off costs
    20-60 us, and a training step of 80+ kernels (the example GPT's) ran 2x slower on it."""

    #: timed calls on each driver, after one untimed warm-up call each; their medians are
    #: compared (the pool's times on two cores are bimodal: a call that loses a core to another
    #: thread takes a scheduler slice longer, so the fastest call flatters it)
    TIMED = 5
    #: the drivers, in the order of the runners given
    DRIVERS = ("local-task", "local-sync")
    #: (a runtime Function underneath: device arrays are passed as they are)
    takes_device_arrays = True

    def __init__(self, task: Any, sync: Any, backend: str, graph_name: str, scope: Any):
        object.__setattr__(self, "_runners", (task, sync))
        object.__setattr__(self, "_times", ([], []))
        object.__setattr__(self, "_calls", 0)
        object.__setattr__(self, "_chosen", None)  # the runner kept, once the trial is over
        object.__setattr__(self, "_best", None)  # its index
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_about", (backend, graph_name, scope))

    def __call__(self, *arrays: Any) -> list:
        chosen = self._chosen
        if chosen is not None:
            return chosen(*arrays)
        with self._lock:
            k = self._calls
            object.__setattr__(self, "_calls", k + 1)
        which = k % 2
        start = time.perf_counter()
        out = self._runners[which](*arrays)
        if k >= 2:
            self._decide(which, time.perf_counter() - start)
        return out

    def _decide(self, which: int, seconds: float) -> None:
        with self._lock:
            self._times[which].append(seconds)
            task, sync = self._times
            if self._chosen is not None or min(len(task), len(sync)) < self.TIMED:
                return
            medians = [statistics.median(t) for t in (task, sync)]
            best = 0 if medians[0] <= medians[1] else 1
            object.__setattr__(self, "_best", best)
            object.__setattr__(self, "_chosen", self._runners[best])
        backend, graph_name, scope = self._about
        driver = self.DRIVERS[best]
        _log.info("%s: graph %r runs on %s (median of %d calls each: local-task %.1f us, local-sync %.1f us)",
                  backend, graph_name, driver, self.TIMED, 1e6 * medians[0], 1e6 * medians[1])
        tracedir.note(scope, driver=driver, driver_trial_us={d: round(1e6 * m, 1) for d, m in zip(self.DRIVERS, medians)})

    @property
    def driver(self) -> str | None:
        """The driver chosen, None while the first calls still time both."""
        return None if self._best is None else self.DRIVERS[self._best]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runners[0], name)

    def __setattr__(self, name: str, value: Any) -> None:
        for runner in self._runners:
            setattr(runner, name, value)


class _EmptyGuarded:
    """A runner that calls ``runner`` unless the call makes an empty tensor somewhere in the
    graph; then the graph runs through the reference implementations on the host and its
    results go to the arguments' device. IREE 3.13's CUDA driver launches a kernel over zero
    elements as it is, which the driver rejects (CUDA_ERROR_INVALID_VALUE), leaving the
    device failed for every later call (its HIP driver skips such launches); its Vulkan HAL
    refuses to bind an empty buffer range. A size the data decides (``retry``) is known only
    once the program runs: a call that Vulkan refuses that way runs on the host too."""

    #: (device arrays are passed to the Function underneath, or handled in the host fallback)
    takes_device_arrays = True

    def __init__(self, runner: Any, graph: Graph, empty: Callable[[Sequence[Any]], bool] | None, backend: str,
                 retry: bool = False):
        object.__setattr__(self, "_runner", runner)
        object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_empty", empty)
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_retry", retry)
        object.__setattr__(self, "_logged", False)

    def __call__(self, *arrays: Any) -> list:
        if self._empty is None or not self._empty(arrays):
            if not self._retry:
                return self._runner(*arrays)
            try:
                return self._runner(*arrays)
            except (ValueError, RuntimeError) as exc:
                if _EMPTY_BINDING not in str(exc):
                    raise
        import numpy as np

        from ...dialects.tp.graph import interpret
        from ...runtime.program import to_device
        from ...runtime.storage import DeviceArray, Donated

        if not self._logged:
            object.__setattr__(self, "_logged", True)
            _log.info("%s: a call of graph %r makes an empty tensor, which IREE's driver cannot run a kernel "
                      "over: such calls run through the reference implementations on the host",
                      self._backend, self._graph.name)
        arrays = [a.array if type(a) is Donated else a for a in arrays]  # (nothing is written here)
        drivers = {a.driver for a in arrays if type(a) is DeviceArray}
        host = [a.to_host() if type(a) is DeviceArray else a for a in arrays]
        outs = interpret(self._graph, host)
        if not drivers:
            return outs
        driver = next(iter(drivers))
        return [to_device(np.asarray(o), driver) for o in outs]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._runner, name, value)
