"""``tensorplay.profiler``: where the time goes, in ``torch.profiler``'s shape.

::

    with tp.profiler.profile(record_shapes=True) as prof:
        with tp.profiler.record_function("train_step"):
            loss = model(x).sum(); loss.backward(); opt.step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    prof.export_chrome_trace("trace.json")      # chrome://tracing, Perfetto

It records, with wall start, duration, thread and arguments: every op applied through the
dispatch entry (where it ran: numpy, an IREE kernel on the host, or on a device; operand
shapes with ``record_shapes``), each autograd backward node, each call of a compiled
function (argument conversion, the IREE call split into upload, invoke and download with the
bytes moved, result wrapping), captures, backend compiles and graph breaks, each
``Optimizer.step`` and each :class:`record_function` block. Times are host wall times: a
device program's time is the host's wait for it. When no profile records, the instrumented
places cost one attribute read.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import _hooks
from ._state import state as _state

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "kineto_available",
           "EventList", "FunctionEvent", "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    """What to record. Only host activity is timed; ``CUDA`` (and the other device names) are
    accepted for PyTorch scripts: device programs show as the host's calls into IREE."""

    CPU = "CPU"
    XPU = "XPU"
    MTIA = "MTIA"
    CUDA = "CUDA"
    HPU = "HPU"
    PrivateUse1 = "PrivateUse1"


class ProfilerAction(enum.Enum):
    """What :func:`schedule` asks of a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set[ProfilerActivity]:
    return {ProfilerActivity.CPU}


def kineto_available() -> bool:
    """False: events are recorded in Python, not by PyTorch's Kineto library."""
    return False


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's step schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` unrecorded and ``active`` recorded steps (``repeat`` cycles; 0: no end). The last
    active step of a cycle is ``RECORD_AND_SAVE``: the trace is handed to ``on_trace_ready``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0")

    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        at = step - skip_first + (wait if skip_first_wait else 0)
        if repeat and at // cycle >= repeat:
            return ProfilerAction.NONE
        at %= cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each trace into ``dir_name`` as
    ``<worker>.<milliseconds>.pt.trace.json`` (the names TensorBoard's plugin reads)."""
    if use_gzip:
        raise TypeError("tensorboard_trace_handler(use_gzip=True) is not supported by tensorplay.profiler")

    def handler(prof: profile) -> None:
        import socket

        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{worker}.{int(time.time() * 1000)}.pt.trace.json"))

    return handler


# -- events --------------------------------------------------------------------------------------

class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        return self.end - self.start


class FunctionEvent:
    """One recorded event. Times are microseconds from the profile's start; ``args`` holds
    what the event knows besides (where an op ran, bytes moved, a graph break's reason)."""

    def __init__(self, id: int, name: str, category: str, thread: int, start_us: float,
                 end_us: float, input_shapes: list | None, args: dict, instant: bool = False):
        self.id = id
        self.name = name
        self.key = name
        self.category = category
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes or []
        self.args = args
        self.is_instant = instant
        self.count = 1
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def cpu_time_total(self) -> float:
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        return max(0.0, self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children))

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name!r} thread={self.thread} "
                f"start_us={self.time_range.start:.3f} cpu_time_total={self.cpu_time_total:.3f} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key (a name, or a name and input shapes) summed up."""

    def __init__(self, key: str, input_shapes: list | None = None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.upload_bytes = 0
        self.download_bytes = 0

    def add(self, event: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        if isinstance(event, FunctionEventAvg):
            self.upload_bytes += event.upload_bytes
            self.download_bytes += event.download_bytes
        else:  # (compiled calls, program calls and their upload and download phases)
            self.upload_bytes += event.args.get("upload_bytes", 0)
            self.download_bytes += event.args.get("download_bytes", 0)
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} cpu_time_total="
                f"{self.cpu_time_total:.3f} self_cpu_time_total={self.self_cpu_time_total:.3f}>")


#: sort_by keys of table(): PyTorch's host-time names
_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "count")
_DEVICE_KEYS = ("cuda_time", "cuda_time_total", "self_cuda_time_total", "device_time", "device_time_total",
                "self_device_time_total", "xpu_time_total", "self_xpu_time_total")


class EventList(list):
    """A list of :class:`FunctionEvent` (from :meth:`profile.events`) or of
    :class:`FunctionEventAvg` (from :meth:`key_averages`)."""

    def __init__(self, *args: Any, profile_pid: int | None = None, thread_names: dict | None = None):
        super().__init__(*args)
        self._pid = profile_pid if profile_pid is not None else os.getpid()
        self._thread_names = thread_names or {}

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """One :class:`FunctionEventAvg` per event name (and input shapes, if asked), in the
        order the names first appear."""
        groups: dict[Any, FunctionEventAvg] = {}
        for e in self:
            if group_by_input_shape:
                shapes = getattr(e, "input_shapes", None) or []
                key = (e.key, str(shapes))
            else:
                shapes, key = None, e.key
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(e.key, shapes)
            avg.add(e)
        return EventList(groups.values(), profile_pid=self._pid, thread_names=self._thread_names)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """A text table as PyTorch prints it: name, self time and share, total time and share,
        average, calls; bytes uploaded and downloaded when a row moved any; input shapes when
        grouped by them. ``sort_by`` is one of cpu_time_total, self_cpu_time_total, cpu_time,
        count (descending); None keeps the list's order."""
        return _table(self, sort_by, row_limit, max_name_column_width, max_shapes_column_width, header,
                      top_level_events_only, time_unit)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events in the Chrome trace event format (``chrome://tracing``, Perfetto)."""
        events = [e for e in self if isinstance(e, FunctionEvent)]
        if len(events) != len(self):
            raise TypeError("export_chrome_trace needs the events themselves (profile.events()), "
                            "not key averages")
        out: list[dict] = [{"name": "process_name", "ph": "M", "ts": 0, "pid": self._pid, "tid": 0,
                            "args": {"name": "tensorplay"}}]
        for tid in sorted({e.thread for e in events}):
            out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": self._pid, "tid": tid,
                        "args": {"name": self._thread_names.get(tid, f"thread {tid}")}})
        for e in sorted(events, key=lambda e: (e.time_range.start, -e.cpu_time_total)):
            args = {k: v for k, v in e.args.items()}
            if e.input_shapes:
                args.setdefault("input_shapes", e.input_shapes)
            item = {"name": e.name, "cat": e.category, "ph": "i" if e.is_instant else "X",
                    "ts": round(e.time_range.start, 3), "pid": self._pid, "tid": e.thread, "args": args}
            if e.is_instant:
                item["s"] = "t"
            else:
                item["dur"] = round(e.cpu_time_total, 3)
            out.append(item)
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f, default=str)


def _format_time(us: float, unit: str | None) -> str:
    if unit is None:
        unit = "s" if abs(us) >= 1e6 else "ms" if abs(us) >= 1e3 else "us"
    scale = {"s": 1e6, "ms": 1e3, "us": 1.0}.get(unit)
    if scale is None:
        raise ValueError(f"time_unit must be 's', 'ms' or 'us', got {unit!r}")
    return f"{us / scale:.3f}{unit}"


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _table(events: EventList, sort_by: str | None, row_limit: int, name_width: int, shapes_width: int,
           header: str | None, top_level_only: bool, time_unit: str | None) -> str:
    rows = list(events)
    if top_level_only:
        rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
    if sort_by is not None:
        if sort_by in _DEVICE_KEYS:
            raise ValueError(f"sort_by={sort_by!r}: tensorplay.profiler measures host time only (a device "
                             f"program's time is the host's wait for it, in cpu_time_total); sort by one of "
                             f"{', '.join(_SORT_KEYS)}")
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"sort_by={sort_by!r}: expected one of {', '.join(_SORT_KEYS)}")
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    total_self = sum(e.self_cpu_time_total for e in events) or 1.0
    shown = rows[:row_limit] if row_limit is not None and row_limit >= 0 else rows
    with_bytes = any(getattr(e, "upload_bytes", 0) or getattr(e, "download_bytes", 0) for e in rows)
    with_shapes = any(getattr(e, "input_shapes", None) for e in rows)
    name_w = min(max([len("Name")] + [len(e.key) for e in shown]), name_width)
    cols = [("Name", name_w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12), ("CPU total", 12),
            ("CPU time avg", 12), ("# of Calls", 12)]
    if with_bytes:
        cols += [("Uploaded", 12), ("Downloaded", 12)]
    if with_shapes:
        shapes_w = min(max([len("Input Shapes")] + [len(str(e.input_shapes)) for e in shown]), shapes_width)
        cols.append(("Input Shapes", shapes_w))
    line = "  ".join("-" * w for _, w in cols)
    out = []
    if header:
        out.append("=" * len(line))
        out.append(header)
    out += [line, "  ".join(f"{title:>{w}}" if i else f"{title:<{w}}" for i, (title, w) in enumerate(cols)), line]
    for e in shown:
        name = e.key if len(e.key) <= name_w else e.key[:name_w - 3] + "..."
        cells = [f"{name:<{name_w}}", f"{100 * e.self_cpu_time_total / total_self:.2f}%",
                 _format_time(e.self_cpu_time_total, time_unit), f"{100 * e.cpu_time_total / total_self:.2f}%",
                 _format_time(e.cpu_time_total, time_unit), _format_time(e.cpu_time, time_unit), str(e.count)]
        if with_bytes:
            cells += [_format_bytes(getattr(e, "upload_bytes", 0)), _format_bytes(getattr(e, "download_bytes", 0))]
        if with_shapes:
            s = str(e.input_shapes or [])
            cells.append(s if len(s) <= shapes_w else s[:shapes_w - 3] + "...")
        out.append("  ".join(c if i == 0 else f"{c:>{w}}" for i, (c, (_, w)) in enumerate(zip(cells, cols))))
    out.append(line)
    out.append(f"Self CPU time total: {_format_time(total_self if events else 0.0, time_unit)}")
    return "\n".join(out) + "\n"


# -- recording -----------------------------------------------------------------------------------

_lock = threading.Lock()
_NOT_SUPPORTED = ("profile_memory", "with_stack", "with_flops", "with_modules", "experimental_config",
                  "execution_trace_observer", "acc_events", "custom_trace_id_callback")


class profile:
    """Record what runs between :meth:`start` and :meth:`stop` (or inside ``with``), on every
    thread. One profile records at a time.

    ``activities``: :class:`ProfilerActivity` values (host activity is what is recorded);
    ``record_shapes``: the operand shapes of each op; ``schedule`` and ``on_trace_ready`` as in
    PyTorch (:func:`schedule`, :meth:`step`). Options PyTorch has and this profiler does not
    (``profile_memory``, ``with_stack``, ``with_flops``, ``with_modules``, ...) raise a TypeError
    when set.
    """

    def __init__(self, *, activities: Iterable[Any] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[[profile], Any] | None = None, record_shapes: bool = False,
                 use_cuda: bool | None = None, **options: Any):
        for name, value in options.items():
            if name not in _NOT_SUPPORTED:
                raise TypeError(f"profile() got an unexpected keyword argument {name!r}")
            if value not in (None, False):
                raise TypeError(f"profile({name}=...) is not supported by tensorplay.profiler, which records "
                                f"host times, op shapes and bytes moved; leave {name} unset")
        self.activities = set(supported_activities() if activities is None else activities)
        for a in self.activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"activities: expected ProfilerActivity values, got {a!r}")
        self.record_shapes = bool(record_shapes)
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._recorder: _hooks.Recorder | None = None
        self._events: EventList | None = None
        self._action = ProfilerAction.RECORD if schedule is None else schedule(0)
        self._step_span: Any = None

    # -- start and stop ------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()
            if self.schedule is not None:  # (steps are marked from the start when a schedule counts them)
                self._step_span = self._recorder.begin(f"ProfilerStep#{self.step_num}", "step")
        elif self.schedule is not None:
            _claim(self)  # (a scheduled profile owns the switch while its steps run)

    def stop(self) -> None:
        if self._recorder is not None:
            self._end()
            if self.schedule is not None and self.on_trace_ready is not None:
                self.on_trace_ready(self)
        _release(self)

    def step(self) -> None:
        """Mark the end of a training step: the schedule's next action takes effect (recording
        starts, stops, or hands a finished trace to ``on_trace_ready``)."""
        rec = self._recorder
        if rec is not None and self._step_span is not None:
            rec.end(self._step_span)
            self._step_span = None
        previous = self._action
        self.step_num += 1
        self._action = ProfilerAction.RECORD if self.schedule is None else self.schedule(self.step_num)
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if previous == ProfilerAction.RECORD_AND_SAVE or (previous in recording and self._action not in recording):
            self._end()
            if previous == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if self._action in recording and self._recorder is None:
            self._begin()
        if self._recorder is not None:
            self._step_span = self._recorder.begin(f"ProfilerStep#{self.step_num}", "step")

    def _begin(self) -> None:
        _claim(self)
        self._recorder = _hooks.Recorder(self.record_shapes)
        self._events = None
        _hooks.recorder = self._recorder
        _state.hooks = _hooks
        _state.active = True

    def _end(self) -> None:
        rec = self._recorder
        if rec is None:
            return
        if self._step_span is not None:
            rec.end(self._step_span)
            self._step_span = None
        _state.active = False
        _hooks.recorder = None
        self._recorder = None
        self._events = _events_of(rec)

    # -- results -------------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every recorded event, by start time (after :meth:`stop`, or the last saved trace)."""
        if self._events is None:
            if self._recorder is not None:
                raise RuntimeError("profile.events(): the profile is still recording; call stop() first "
                                   "(or leave the with block)")
            raise RuntimeError("profile.events(): nothing was recorded (the profile never started, or its "
                               "schedule has not saved a trace yet)")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        if group_by_stack_n:
            raise TypeError("key_averages(group_by_stack_n=...) needs with_stack, which tensorplay.profiler "
                            "does not record")
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)


_owner: profile | None = None


def _claim(prof: profile) -> None:
    global _owner
    with _lock:
        if _owner is not None and _owner is not prof:
            raise RuntimeError("a tensorplay.profiler.profile is already recording; one records at a time")
        _owner = prof


def _release(prof: profile) -> None:
    global _owner
    with _lock:
        if _owner is prof:
            _owner = None


def _events_of(rec: _hooks.Recorder) -> EventList:
    spans = sorted(rec.spans, key=lambda s: (s.start_ns, -(s.dur_ns or 0)))
    base = rec.start_ns
    made: dict[int, FunctionEvent] = {}
    out = []
    for s in spans:
        start = (s.start_ns - base) / 1e3
        end = start + (s.dur_ns or 0) / 1e3
        shapes = [list(x) for x in s.shapes] if s.shapes is not None else None
        e = FunctionEvent(s.id, s.name, s.cat, s.tid, start, end, shapes, s.args, instant=s.dur_ns is None)
        made[id(s)] = e
        out.append(e)
    for s in spans:
        parent = s.parent
        while parent is not None and id(parent) not in made:  # a span left open when the profile stopped
            parent = parent.parent
        if parent is not None:
            e = made[id(s)]
            e.cpu_parent = made[id(parent)]
            e.cpu_parent.cpu_children.append(e)
    return EventList(out, thread_names=dict(rec.thread_names))


class record_function:
    """A named span around a block (``with record_function("name"):``) or each call of a
    function (``@record_function("name")``). Records nothing when no profile records."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._span: Any = None
        self._rec: Any = None

    def __enter__(self) -> record_function:
        rec = _hooks.recorder
        if _state.active and rec is not None:
            self._rec = rec
            self._span = rec.begin(self.name, "user_annotation", {"args": self.args} if self.args else None)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._span is not None:
            self._rec.end(self._span)
            self._span = self._rec = None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            with record_function(name, args):
                return fn(*a, **k)

        return wrapper
