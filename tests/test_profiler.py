"""tensorplay.profiler: the events recorded (eager ops, autograd, optimizer steps, compiled
calls, captures, compiles and graph breaks), the table, the Chrome trace, PyTorch's names."""

import inspect
import json
import threading

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import profiler
from tensorplay.profiler._state import state


def _by_name(events, name):
    return [e for e in events if e.name == name]


def test_eager_ops_are_named_and_nested_under_record_function():
    a, b = tp.randn(3, 4), tp.randn(4)
    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("block"):
            c = a + b
            d = c.relu()
        e = d.sum()
    events = prof.events()
    block, = _by_name(events, "block")
    add, = _by_name(events, "tp.add")
    relu, = _by_name(events, "tp.relu")
    total, = _by_name(events, "tp.sum")
    assert add.cpu_parent is block and relu.cpu_parent is block and total.cpu_parent is None
    assert block.cpu_children == [add, relu]
    assert add.input_shapes == [[3, 4], [4]] and relu.input_shapes == [[3, 4]]
    assert add.args["ran"] == "numpy"
    for child in (add, relu):  # inside the block's interval
        assert block.time_range.start <= child.time_range.start <= child.time_range.end <= block.time_range.end
    assert block.self_cpu_time_total == pytest.approx(
        block.cpu_time_total - add.cpu_time_total - relu.cpu_time_total, abs=1e-6)
    np.testing.assert_array_equal(e.numpy(), np.maximum(a.numpy() + b.numpy(), 0).sum())


def test_shapes_only_when_asked_and_record_function_as_decorator():
    @profiler.record_function("decorated")
    def f(x):
        return x * 2

    with profiler.profile() as prof:
        f(tp.ones(2))
    mul, = _by_name(prof.events(), "tp.mul")
    assert mul.cpu_parent.name == "decorated"
    assert mul.input_shapes == [] and "input_shapes" not in mul.args
    with pytest.raises(RuntimeError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)


def test_backward_nodes_and_optimizer_step():
    lin = tp.nn.Linear(3, 2)
    opt = tp.optim.SGD(lin.parameters(), lr=0.1)
    with profiler.profile() as prof:
        lin(tp.randn(5, 3)).sum().backward()
        opt.step()
    events = prof.events()
    names = [e.name for e in events]
    assert "autograd::engine::evaluate_function: SumBackward0" in names
    assert "autograd::engine::evaluate_function: MatmulBackward0" in names
    assert names.count("autograd::engine::evaluate_function: AccumulateGrad") == 2  # weight and bias
    matmul_back, = _by_name(events, "autograd::engine::evaluate_function: MatmulBackward0")
    assert {c.name for c in matmul_back.cpu_children} >= {"tp.matmul"}  # the rule's ops are its children
    step, = _by_name(events, "Optimizer.step#SGD.step")
    assert step.cpu_children  # the update's ops (or its compiled program's call)
    assert all(c.name.startswith(("tp.", "tp.compile")) for c in step.cpu_children)


def test_nothing_is_recorded_outside_a_profile():
    x = tp.randn(3)
    with profiler.record_function("outside"):  # no profile: nothing happens
        x + x
    assert not state.active
    prof = profiler.profile()
    x * x
    prof.start()
    assert state.active
    x - x
    prof.stop()
    assert not state.active
    x / x
    assert [e.name for e in prof.events()] == ["tp.sub"]
    with pytest.raises(ValueError):  # an exception inside the block ends the recording too
        with profiler.profile() as prof2:
            x.exp()
            raise ValueError("boom")
    assert not state.active
    assert [e.name for e in prof2.events()] == ["tp.exp"]


def test_one_profile_at_a_time_and_unsupported_options():
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            profiler.profile().start()
    with pytest.raises(TypeError, match="profile_memory"):
        profiler.profile(profile_memory=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        profiler.profile(bogus=1)
    profiler.profile(activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.CUDA],
                     with_stack=False)  # accepted


def test_events_of_other_threads_have_their_thread_id():
    x = tp.randn(3)
    with profiler.profile() as prof:
        t = threading.Thread(target=lambda: x.cos())
        t.start()
        t.join()
        x.sin()
    cos, = _by_name(prof.events(), "tp.cos")
    sin, = _by_name(prof.events(), "tp.sin")
    assert cos.thread != sin.thread and sin.thread == threading.get_native_id()


def test_graph_break_capture_and_compile_events():
    def f(x):
        y = x * 2
        if y.sum().item() > -1e9:  # a graph break
            y = y + 1
        return y

    cf = tp.compile(f, backend="eager")
    x = tp.randn(4)
    with profiler.profile() as prof:
        out = cf(x)
    np.testing.assert_allclose(out.numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    events = prof.events()
    capture, = _by_name(events, "tp.compile capture: f")
    brk, = _by_name(events, "graph break")
    assert brk.is_instant and brk.category == "compile" and brk.cpu_parent is capture
    assert "item()" in brk.args["reason"] and brk.args["loc"].startswith(__file__)
    compiles = [e for e in events if e.name.startswith("compile @f_segment")]
    assert len(compiles) == 2 and all(e.cpu_parent is capture and e.args["backend"] == "eager" for e in compiles)
    mul = _by_name(events, "tp.mul")[0]
    assert mul.args["ran"] == "captured into a graph" and mul.cpu_parent is capture


@pytest.mark.iree
def test_compiled_call_phases_and_bytes_moved():
    from tensorplay.runtime import stats

    g = tp.compile(lambda x, y: (x @ y).sin())
    x, y = tp.randn(16, 16), tp.randn(16, 16)
    g(x, y)  # capture and compile
    with profiler.profile() as prof:
        before = stats()
        out = g(x, y)
        moved = stats() - before
    np.testing.assert_allclose(out.numpy(), np.sin(x.numpy() @ y.numpy()), rtol=1e-5, atol=1e-6)
    events = prof.events()
    call, = [e for e in events if e.name.startswith("tp.compile: ")]
    assert call.args["entry"] == "graph"
    assert [c.name for c in call.cpu_children] == ["compiled: guards", "compiled: arguments", "iree: @lambda",
                                                   "compiled: results"]
    program = call.cpu_children[2]
    assert [c.name for c in program.cpu_children] == ["iree: upload", "iree: invoke", "iree: download"]
    assert program.args["driver"].startswith("local")
    # the bytes the call moved are what the runtime counted, and the two inputs were moved
    for k in ("uploads", "upload_bytes", "downloads", "download_bytes"):
        assert call.args[k] == program.args[k] == getattr(moved, k)
    assert moved.upload_bytes + 0 * moved.imports == 2 * 16 * 16 * 4 or moved.imports == 2
    upload = program.cpu_children[0]
    assert upload.args["upload_bytes"] == moved.upload_bytes
    # children tile their parent in order, inside it
    for parent in (call, program):
        kids = parent.cpu_children
        assert parent.time_range.start <= kids[0].time_range.start
        assert kids[-1].time_range.end <= parent.time_range.end + 1e-3
        for a, b in zip(kids, kids[1:]):
            assert a.time_range.end <= b.time_range.start + 1e-3
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["iree: @lambda"].upload_bytes == moved.upload_bytes


def _profile_for_table():
    x = tp.randn(8, 8)
    with profiler.profile(record_shapes=True) as prof:
        for _ in range(3):
            x = x + 1
        x.sum()
        x[:2].sum()
    return prof


def test_table_columns_sort_and_limit():
    prof = _profile_for_table()
    table = prof.key_averages().table(sort_by="count", row_limit=2)
    lines = table.splitlines()
    header = lines[1].split()
    assert " ".join(header) == "Name Self CPU % Self CPU CPU total % CPU total CPU time avg # of Calls"
    rows = lines[3:-2]
    assert len(rows) == 2
    assert rows[0].split()[0] == "tp.add" and rows[0].split()[-1] == "3"
    assert rows[1].split()[0] == "tp.sum" and rows[1].split()[-1] == "2"
    assert lines[-1].startswith("Self CPU time total: ")
    averages = prof.key_averages()
    for key in ("cpu_time_total", "self_cpu_time_total", "cpu_time"):
        rows = averages.table(sort_by=key).splitlines()[3:-2]
        names = [r.split()[0] for r in rows]
        by_key = sorted(averages, key=lambda a: getattr(a, key), reverse=True)
        assert names == [a.key for a in by_key]
    shaped = prof.key_averages(group_by_input_shape=True)
    sums = [a for a in shaped if a.key == "tp.sum"]
    assert sorted(str(a.input_shapes) for a in sums) == ["[[2, 8]]", "[[8, 8]]"]
    assert "Input Shapes" in shaped.table()
    with pytest.raises(ValueError, match="host time only"):
        averages.table(sort_by="cuda_time_total")
    with pytest.raises(ValueError, match="expected one of"):
        averages.table(sort_by="nonsense")


def test_chrome_trace_is_well_formed(tmp_path):
    prof = _profile_for_table()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    assert {e["ph"] for e in events} <= {"X", "i", "M"}
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
    for e in complete:
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0 and isinstance(e["args"], dict)
    add = next(e for e in complete if e["name"] == "tp.add")
    assert add["args"]["input_shapes"] == [[8, 8], []] and add["args"]["ran"] == "numpy"
    names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names == ["MainThread"]
    assert [e["ts"] for e in complete] == sorted(e["ts"] for e in complete)


def test_schedule_and_on_trace_ready(tmp_path):
    ready = []
    x = tp.randn(2)
    with profiler.profile(schedule=profiler.schedule(wait=1, warmup=1, active=2),
                          on_trace_ready=lambda p: ready.append([e.name for e in p.events()])) as prof:
        for step in range(5):
            x = x + step
            prof.step()
    # steps 0 (wait) and 1 (warmup) are not recorded; 2 and 3 are, then the trace is handed over
    assert len(ready) == 1
    assert ready[0] == ["ProfilerStep#2", "tp.add", "ProfilerStep#3", "tp.add"]
    handler = profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profiler.profile(schedule=profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
                          on_trace_ready=handler) as prof:
        for _ in range(3):  # one recorded step, then none (repeat=1)
            x + 1
            prof.step()
    written, = tmp_path.iterdir()
    assert written.name.startswith("w.") and written.name.endswith(".pt.trace.json")
    assert "traceEvents" in json.loads(written.read_text())


def test_torch_profiler_names_exist():
    torch = pytest.importorskip("torch")
    tprof = torch.profiler
    for name in tprof.__all__:
        if name in ("DeviceType", "ExecutionTraceObserver"):  # no device types or execution traces here
            continue
        assert hasattr(profiler, name), name
    assert [a.name for a in profiler.ProfilerActivity] == list(tprof.ProfilerActivity.__members__)
    assert {a.name for a in profiler.ProfilerAction} <= set(tprof.ProfilerAction.__members__)
    ours = inspect.signature(profiler.profile)
    for name in ("activities", "schedule", "on_trace_ready", "record_shapes"):
        assert name in ours.parameters
    for method in ("start", "stop", "step", "events", "key_averages", "export_chrome_trace"):
        assert hasattr(profiler.profile, method) and hasattr(tprof.profile, method)
    for method in ("table", "key_averages", "export_chrome_trace", "total_average"):
        assert hasattr(profiler.EventList, method)
    table_params = set(inspect.signature(torch.autograd.profiler_util.EventList.table).parameters)
    assert set(inspect.signature(profiler.EventList.table).parameters) >= table_params
    for kw in (dict(wait=1, warmup=1, active=2, repeat=2, skip_first=1), dict(wait=2, warmup=0, active=1),
               dict(wait=3, warmup=1, active=2, repeat=1, skip_first_wait=1)):
        with pytest.warns(UserWarning) if kw["warmup"] == 0 else _no_warning():
            theirs = [tprof.schedule(**kw)(i).name for i in range(14)]
        assert [profiler.schedule(**kw)(i).name for i in range(14)] == theirs
    # the same script runs against both libraries
    for lib in (torch, tp):
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
            with lib.profiler.record_function("block"):
                lib.ones(2, 3).add(1)
        averages = {a.key: a for a in prof.key_averages()}
        assert averages["block"].count == 1
        assert "Self CPU time total" in prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
