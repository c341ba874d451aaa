"""The capture session: the dispatch handler that records tp ops into graphs.

A :class:`Capture` runs in one of two modes:

* ``trace``: the first call of a compiled function for a guard key. Tensor arguments and
  the parameters and buffers of the modules involved are *borrowed*: their objects are
  turned into capture tensors for the duration (identity kept) and restored afterwards.
  A trace that finishes without a graph break yields one whole graph, run later without
  Python.
* ``lazy``: after a graph break, and on every call of a function known to break. Ops are
  recorded lazily; when Python needs a value the pending graph (a *segment*) is compiled,
  cached by its structural hash, and run, and every live capture tensor becomes concrete
  in place.

:class:`Capture` is put together from one class per concern, each in a module of its own:
:class:`~.recording.OpRecorder` (the dispatch handler: ops become graph nodes),
:class:`~.borrowing.ArgumentBorrowing` (outside tensors read as graph inputs),
:class:`~.segments.Segments` (running the pending graph at a graph break),
:class:`~.size_settling.SizeSettling` (symbolic sizes), :class:`~.random_draws.RandomDraws`,
:class:`~.graph_backward.BackwardInGraph` (``backward()`` and ``.grad`` inside a trace) and
:class:`~.trace_driver.TraceDriver` (running the function, finishing the trace). This module
holds the session's state and its public contract (breaks, guards, eager calls, regions);
:mod:`.active` says which capture runs, :mod:`.records` holds what it hands out,
:mod:`.user_frames` finds the user's line and :mod:`.region_compilers` the backends nested
regions ask for.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ... import _views
from ..._capture_handler import CaptureHandler
from ..._tensor import Tensor
from ...dialects.tp.graph import SourceLoc
from ...profiler._state import state as _prof_state
from .. import tracedir
from .._logging import get_logger
from ..errors import GraphCaptureError
from ..symbolic.shape_env import ShapeEnv
from . import pytree
from .active import current_capture, exporting, is_compiling, is_exporting, without_capture
from .bindings import ReadInput
from .borrowing import ArgumentBorrowing
from .graph_backward import BackwardInGraph
from .random_draws import RandomDraws
from .read_guards import ReadGuard
from .read_tracer import ReadRecorder
from .recording import OpRecorder
from .records import LAZY, TRACE, BreakInfo, CaptureConfig, SegmentInfo, TraceResult
from .region_compilers import region_backward_compiler, region_compiler, set_region_compiler
from .segments import Segments
from .size_settling import SizeSettling
from .trace_driver import TraceDriver
from .user_frames import source_line, user_loc

__all__ = ["Capture", "CaptureConfig", "BreakInfo", "SegmentInfo", "current_capture", "is_compiling",
           "is_exporting", "exporting", "without_capture", "TRACE", "LAZY", "region_compiler",
           "region_backward_compiler", "set_region_compiler", "capture_once", "TraceResult", "user_loc"]

_log_breaks = get_logger("breaks")


class Capture(OpRecorder, ArgumentBorrowing, Segments, SizeSettling, RandomDraws, BackwardInGraph, TraceDriver,
              CaptureHandler):
    """A capture session; see :mod:`tensorplay.compiler.capture` for the public contract."""

    captures_program = True

    def __init__(self, config: CaptureConfig, mode: str = TRACE):
        self.config = config
        self.mode = mode
        self.exporting = config.exporting or is_exporting()
        self.dynamic = config.dynamic
        self.breaks: list[BreakInfo] = []
        self.segments: list[SegmentInfo] = []
        #: the segments run and the breaks between them, in order (graphs and BreakInfo)
        self.timeline: list[Any] = []
        #: where each guard of ``guards`` was added (only while a trace folder is written)
        self.guard_sites: list[SourceLoc | None] = []
        #: id(segment graph) -> the tensor each of its inputs read; kept only while a trace
        #: folder is written or explain() asks (set to a dict to record)
        self.segment_sources: dict[int, list[Any]] | None = {} if tracedir.current() is not None else None
        self.guards: list[tuple[str, Callable[[], bool]]] = []
        self.read_guard: ReadGuard | None = None
        #: calls that later calls of the traced graph make after running it (run_after_program)
        self.deferred: list[tuple[Callable[..., Any], tuple]] = []
        self._active_recorder: ReadRecorder | None = None
        self._atomic: list[str] = []
        self._regions: list[Any] = []  # regions._RegionFrame, innermost last
        self._segment_index = 0
        self.shape_env = ShapeEnv(config.name)
        self.shape_env.on_data_dependent = self._on_data_dependent
        self._arg_dims: list[tuple[int, int, str, Any]] = []  # symbolic argument dims
        #: concrete tensors this capture gave symbolic sizes (Tensor._sym), cleared when it ends
        self._sym_tensors: list[weakref.ref] = []
        #: symbol of an argument dimension -> the argument (a segment that needs the size reads it)
        self._size_sources: dict[Any, weakref.ref] = {}
        #: tensors whose .grad a backward() inside the trace set (replayed on every call)
        self._grad_targets: dict[int, Tensor] = {}
        #: first touches of a .grad whose guard depends on what comes next (see zero_grad)
        self._grad_pending: dict[int, tuple] = {}
        #: tensors whose .grad library code read before the trace set it (guarded as found)
        self._grad_read: set[int] = set()
        self._new_graph()

    @property
    def fullgraph(self) -> bool:
        """True when a graph break must raise instead of splitting the graph."""
        return bool(self.config.fullgraph or self.config.strict_native or self.exporting
                    or self._atomic or self._regions)

    def loc(self) -> SourceLoc | None:
        """The user's frame: the first one outside tensorplay."""
        return user_loc(2)

    def graph_break(self, reason: str, loc: SourceLoc | None = None) -> None:
        """Split here (compile and run what is captured so far) or raise under fullgraph."""
        loc = loc or user_loc(2)
        info = BreakInfo(reason, loc, source_line(loc))
        self.breaks.append(info)
        _log_breaks.info("graph break in %s at %s: %s%s", self.config.name, loc or "<unknown>",
                         reason, f"\n    {info.source}" if info.source else "")
        if _prof_state.active:  # tensorplay.profiler records
            _prof_state.hooks.graph_break(self.config.name, reason, loc)
        if self.fullgraph:
            raise self._break_error(info)
        self._flush()
        self.timeline.append(info)
        # from here the function's Python runs on every call (segments): what was deferred
        # ran in this call already, and runs in Python on the later ones
        self.deferred.clear()

    def _break_error(self, info: BreakInfo) -> GraphCaptureError:
        where = f" at {info.loc}" if info.loc is not None else ""
        if self._regions:
            scope = f" inside {self._regions[-1].name}"
            hint = "a nested compile region must capture as one graph"
        elif self._atomic:
            scope = f" inside {self._atomic[-1]}"
            hint = f"{self._atomic[-1]} must capture as one graph"
        elif self.exporting:
            scope, hint = "", "export captures the whole program as one graph"
        elif self.config.strict_native:
            scope, hint = "", "strict_native=True runs nothing outside the compiled graph"
        else:
            scope, hint = "", "fullgraph=True forbids graph breaks; compile with fullgraph=False to run in segments"
        text = f"graph break{scope} in {self.config.name}{where}: {info.reason}"
        if info.source:
            text += f"\n    {info.source}"
        err = GraphCaptureError(f"{text}\n({hint})")
        err.reason = info.reason
        err.loc = info.loc
        err.source = info.source
        return err

    def run_eagerly(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                    reason: str) -> Any:
        """Break the graph, run ``fn`` eagerly on concrete tensors and return its results."""
        self.graph_break(reason)
        with without_capture():
            return fn(*args, **(kwargs or {}))

    def eagerly(self) -> AbstractContextManager[None]:
        """A block that runs eagerly without ending the segment: no op is recorded and no
        capture is current (its tensors must be concrete)."""
        return without_capture()

    def run_after_program(self, fn: Callable[..., Any], args: Sequence[Any], reason: str) -> Any:
        """Python that changes only Python state which the graph reads afresh on every call
        through :meth:`input_from` with ``scheduled=True`` (a schedule's ``step()`` setting each
        group's ``lr``). In a trace it runs now, and each later call of the graph runs it after
        the program, as eagerly it runs after the ops before it; a scheduled read later in the
        same trace breaks the graph (the program would read the value from before the call).
        Elsewhere (segments, nested regions, export) it runs eagerly at a graph break."""
        if self.mode != TRACE or self._regions or self._atomic or self.exporting:
            return self.run_eagerly(fn, args, {}, reason)
        with without_capture():
            result = fn(*args)
        self.deferred.append((fn, tuple(args)))
        return result

    def call_atomic(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                    name: str) -> Any:
        """Trace ``fn`` into the current graph; a break inside raises GraphCaptureError."""
        self._atomic.append(name)
        try:
            return fn(*args, **(kwargs or {}))
        finally:
            self._atomic.pop()

    def call_region(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], *,
                    key: Any, compiler: Any = None, bw_compiler: Any = None) -> Any:
        """Call ``fn`` as a nested compile region: traced once per key into a callee graph,
        then a call of that callee at every site (``compiler``/``bw_compiler``: the backends
        of its forward and of its backward, None: its caller's)."""
        from .regions import call_region

        return call_region(self, fn, tuple(args), dict(kwargs or {}), key, compiler, bw_compiler)

    def add_guard(self, description: str, check: Callable[[], bool]) -> None:
        """A condition the cached graph relies on; a call where it is false recompiles.

        Only traced (whole-graph) entries keep guards: segmented functions run their
        Python on every call, so nothing captured there is reused without it."""
        if self.mode == TRACE:
            self.guards.append((description, check))
            if tracedir.current() is not None:
                self.guard_sites.append(user_loc(2))

    def input_from(self, getter: Callable[[], Any], what: str, dtype: Any = None, scheduled: bool = False) -> Any:
        """A graph input that later calls read through ``getter`` (a tensor, or a Python
        number as a 0-d tensor of ``dtype``): what library code reads from its own state
        afresh each call, so no value of this call is baked in (an optimizer's learning
        rate and the gradients its parameters hold). The caller guards what the getter
        relies on (``add_guard``). Outside a trace (lazy segments run Python every call) it
        is the value itself. ``scheduled``: state that a deferred call changes (see
        :meth:`run_after_program`)."""
        from ... import ops

        if scheduled and self.deferred and self.mode == TRACE:
            self.graph_break(f"{what} is read after a call that changes it ran in this call "
                             f"(a schedule's step() before the optimizer's)")
        value = getter()
        if not isinstance(value, Tensor):
            value = ops.creation.tensor(value, dtype=dtype)
        if self.mode != TRACE or self._regions or not _views.has_memory(value):
            return value
        binding = ReadInput(getter, _views.held(value), what)
        return self._wrap_results([self._add_input(value._tensor_type(), binding)], self.graph)


def capture_once(fn: Callable[..., Any], args: tuple, kwargs: dict, *, name: str,
                 modules: Sequence[tuple[str, Any]] = (), regions: dict | None = None, exporting: bool = True,
                 paths: Sequence[str] | None = None,
                 dynamic_dims: dict[int, dict[int, Any]] | None = None) -> TraceResult:
    """Trace one call of ``fn`` as a whole graph (fullgraph; an export session when
    ``exporting``), borrowing the parameters and buffers of ``modules`` (``(prefix, module)``
    pairs) like a compiled function does. ``paths`` names the flattened arguments in messages;
    ``dynamic_dims`` makes argument dims symbolic (see :class:`CaptureConfig`)."""
    leaves, treedef = pytree.flatten((args, kwargs or {}))
    paths = list(paths) if paths is not None else pytree.leaf_paths(treedef)
    config = CaptureConfig(name=name, fullgraph=True, exporting=exporting,
                           regions=regions if regions is not None else {}, dynamic_dims=dynamic_dims)
    with (_exporting_block() if exporting else _no_block()):
        trace = Capture(config).run_trace(fn, args, kwargs or {}, leaves, paths, list(modules))
    if trace is None:  # fullgraph breaks raise; kept as a clear failure
        raise GraphCaptureError(f"{name}: the capture did not produce one graph")
    return trace


_exporting_block = exporting


@contextmanager
def _no_block() -> Iterator[None]:
    yield
