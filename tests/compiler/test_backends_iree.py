"""The IREE backends end to end: one mixed-dtype graph per backend (compiled once per module)
against the eager reference, call nodes, CUDA/ROCm compile-only checks, dtype rejection and
compile errors with context, and the tensorplay.runtime loading layer."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay import runtime
from tensorplay.compiler.backends import BackendCompileError, BackendUnavailable, cache, iree, probe
from tensorplay.compiler.backends.eager import interpret
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType as T
from tensorplay.runtime.program import load_vm_module

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

pytestmark = pytest.mark.iree

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3,
             np.dtype(ml_dtypes.bfloat16): 2e-2}


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path_factory.mktemp("tp-cache")))
        yield


def mixed_graph(f16=True, f64=True, name="mixed"):
    """Every dtype, a 0-d and a 0-size tensor, broadcasting, and an input returned as is."""
    g = Graph(name)
    a = g.add_input(T((2, 3), tp.float32))
    b = g.add_input(T((3,), tp.float32))
    u = g.add_input(T((5,), tp.uint8))
    m = g.add_input(T((5,), tp.bool))
    h = g.add_input(T((3,), tp.float16 if f16 else tp.float32))
    bf = g.add_input(T((3,), tp.bfloat16))
    i = g.add_input(T((3,), tp.int64))
    s = g.add_input(T((), tp.float32))
    z = g.add_input(T((0, 3), tp.float32))
    i8 = g.add_input(T((3,), tp.int8))
    outs = [g.add1("tp.mul", [g.add1("tp.add", [a, b]), s]), g.add1("tp.add", [u, u]),
            g.add1("tp.logical_not", [m]), g.add1("tp.mul", [h, h]), g.add1("tp.add", [bf, bf]),
            g.add1("tp.mul", [i, i]), g.add1("tp.neg", [s]), g.add1("tp.add", [z, b]),
            g.add1("tp.sum", [i8], {}), g.add1("tp.gt", [b, s]), g.add1("tp.exp", [a]), u]
    if f64:
        d = g.add_input(T((3,), tp.float64))
        outs.append(g.add1("tp.exp", [d]))
    g.set_outputs(outs)
    return g


def mixed_arrays(graph):
    rng = np.random.default_rng(0)
    arrays = []
    for v in graph.inputs:
        dtype, shape = v.type.dtype.np_dtype, v.type.shape
        if dtype == np.bool_:
            arrays.append(rng.random(shape) > 0.5)
        elif dtype == np.uint8:
            arrays.append(np.array([1, 200, 255, 7, 128], np.uint8))
        elif dtype == np.int64:
            arrays.append(np.array([2**40, -3, 5], np.int64))
        elif np.issubdtype(dtype, np.integer):
            arrays.append(np.array([100, -7, 3], dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def assert_matches_reference(graph, outputs, arrays):
    expected = interpret(graph, arrays)
    assert len(outputs) == len(expected)
    for k, (got, want) in enumerate(zip(outputs, expected)):
        assert got.dtype == want.dtype and got.shape == want.shape, (k, got.dtype, got.shape, want.dtype, want.shape)
        if want.dtype in TOLERANCE:
            tol = TOLERANCE[want.dtype]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                       err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {k}")


BACKEND_GRAPHS = {"iree-cpu": dict(), "iree-vmvx": dict(f16=False), "iree-vulkan": dict(f16=False, f64=False),
                  "eager": dict()}


@pytest.fixture(scope="module")
def compiled():
    """backend name -> (graph, arrays, run); each compiled once for the module."""
    out = {}
    for name, kw in BACKEND_GRAPHS.items():
        if not tpc.get_backend_capabilities(name).available:
            continue
        graph = mixed_graph(**kw)
        out[name] = (graph, mixed_arrays(graph), tpc.lookup_backend(name)(graph, []))
    return out


@pytest.mark.parametrize("name", list(BACKEND_GRAPHS))
def test_builtin_backend_matches_the_reference(compiled, name):
    caps = tpc.get_backend_capabilities(name)
    if not caps.available:
        pytest.skip(f"{name} is unavailable here: {caps.reason}")
    graph, arrays, run = compiled[name]
    outputs = run(*arrays)
    assert_matches_reference(graph, outputs, arrays)
    assert outputs[1].dtype == np.uint8 and outputs[1].tolist() == [2, 144, 254, 14, 0]
    assert outputs[6].shape == () and outputs[7].shape == (0, 3)
    # a second call reuses the loaded program and gives the same answer
    np.testing.assert_array_equal(run(*arrays)[0], outputs[0])


@pytest.mark.vulkan
def test_vulkan_runs_on_a_device(compiled):
    caps = tpc.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"no Vulkan device: {caps.reason}")
    _, _, run = compiled["iree-vulkan"]
    assert run.program.driver == "vulkan"
    assert caps.extra["devices"]


def test_call_nodes_compile_to_one_callee(compiled):
    body = Graph("block")
    a = body.add_input(T((4,), tp.float32))
    body.set_outputs([body.add1("tp.tanh", [body.add1("tp.mul", [a, a])])])
    g = Graph("two_blocks")
    x = g.add_input(T((4,), tp.float32))
    (h,) = g.add_call(body, [x])
    (h,) = g.add_call(body, [h])
    g.set_outputs([h])
    xs = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    (out,) = tpc.lookup_backend("iree-cpu")(g, [])(xs)
    np.testing.assert_allclose(out, np.tanh(np.tanh(xs * xs) ** 2), rtol=2e-5)
    assert iree.tp_mlir(g).operation.get_asm().count("func.func private @block") == 1


def test_cpu_driver_is_chosen_by_work_and_cores(monkeypatch):
    small = mixed_graph()
    big = Graph("big")
    p = big.add_input(T((512, 512), tp.float32))
    big.set_outputs([big.add1("tp.matmul", [p, p])])
    monkeypatch.setattr(probe, "usable_cpus", lambda: 16)
    assert iree.choose_cpu_driver(small) == "local-sync"
    assert iree.choose_cpu_driver(big) == "local-task"
    assert iree.choose_cpu_driver(big, "local-sync") == "local-sync"
    monkeypatch.setattr(probe, "usable_cpus", lambda: 2)  # two cores already pay for large graphs
    assert iree.choose_cpu_driver(big) == "local-task" and iree.choose_cpu_driver(small) == "local-sync"
    monkeypatch.setattr(probe, "usable_cpus", lambda: 1)  # one core: no pool to hand work to
    assert iree.choose_cpu_driver(big) == "local-sync"


def test_a_large_graph_times_both_cpu_drivers_on_its_first_calls_and_keeps_one(monkeypatch):
    monkeypatch.setattr(probe, "usable_cpus", lambda: 2)
    big = Graph("big")
    p = big.add_input(T((512, 512), tp.float32))
    big.set_outputs([big.add1("tp.matmul", [p, p])])
    backend = tpc.lookup_backend("iree-cpu")
    run = backend(big, [])
    assert isinstance(run, iree._DriverTrial) and run.driver is None
    x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    want = x @ x
    seen = []
    for _ in range(2 + 2 * run.TIMED + 2):  # two warm-ups, the timed calls, two calls after
        (out,) = run(x)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
        seen.append(run.driver)
    assert seen[:2 + 2 * run.TIMED - 1] == [None] * (2 + 2 * run.TIMED - 1)
    assert seen[-1] in ("local-task", "local-sync") and len(set(seen[2 + 2 * run.TIMED - 1:])) == 1
    # a driver named in the options is used as it is, and a small graph goes to local-sync at once
    named = backend(big, [], {"runtime_driver": "local-task"})
    assert not isinstance(named, iree._DriverTrial)
    assert not isinstance(backend(_small_graph(), []), iree._DriverTrial)


def test_cuda_target_follows_the_compute_capability():
    assert iree.cuda_target_for((8, 6)) == "sm_86"
    assert iree.cuda_target_for((9, 0)) == "sm_80"     # IREE 3.13 lacks an sm_90 description
    assert iree.cuda_target_for((10, 0)) == "sm_80"
    assert iree.cuda_target_for((12, 0)) == "sm_120"
    assert iree.cuda_target_for(None) == "sm_80"


def _small_graph(name="small"):
    g = Graph(name)
    x = g.add_input(T((4,), tp.float32))
    g.set_outputs([g.add1("tp.exp", [g.add1("tp.mul", [x, x])])])
    return g


def test_cuda_compiles_to_a_vmfb_holding_a_cuda_executable():
    vmfb = iree.compile_to_vmfb(_small_graph(), backend="iree-cuda")
    assert b"cuda-nvptx-fb" in vmfb
    module = load_vm_module(vmfb)   # a valid module: no device needed
    assert "small" in module.function_names


@pytest.mark.cuda
def test_cuda_runs_where_a_device_exists():
    caps = tpc.get_backend_capabilities("iree-cuda")
    if not caps.available:
        pytest.skip(f"no CUDA device: {caps.reason}")
    g = _small_graph("on_cuda")
    xs = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    (out,) = tpc.lookup_backend("iree-cuda")(g, [])(xs)
    np.testing.assert_allclose(out, np.exp(xs * xs), rtol=2e-5)


def test_rocm_compiles_to_a_vmfb_holding_a_hsaco_executable():
    vmfb = iree.compile_to_vmfb(_small_graph(), {"rocm_target": "gfx942"}, backend="iree-rocm")
    assert b"rocm-hsaco-fb" in vmfb


def test_unavailable_backend_refuses_to_run_but_names_the_device():
    caps = tpc.get_backend_capabilities("iree-cuda")
    if caps.available:
        pytest.skip("a CUDA device is present here")
    with pytest.raises(BackendUnavailable, match="'iree-cuda' is not available"):
        iree.cuda(_small_graph(), [])


def test_vulkan_rejects_unsupported_dtypes_before_compiling():
    g = Graph("doubles")
    x = g.add_input(T((3,), tp.float32))
    g.set_outputs([g.add1("tp.cast", [x], {"dtype": tp.float64})])
    before = cache.cache_stats()["compiles"]
    with pytest.raises(TypeError) as info:
        iree.compile_to_vmfb(g, backend="iree-vulkan")
    message = str(info.value)
    assert "iree-vulkan cannot compile graph 'doubles': float64 is not supported" in message
    assert "tp.cast in @doubles" in message and "backend='iree-cpu'" in message
    assert cache.cache_stats()["compiles"] == before


def test_iree_failure_is_reported_with_context_and_a_reproducer(capfd):
    with pytest.raises(BackendCompileError) as info:
        iree.compile_to_vmfb(_small_graph("hopper"), {"cuda_target": "sm_90"}, backend="iree-cuda")
    err = info.value
    message = str(err)
    assert message.startswith("iree-cuda: IREE could not compile graph 'hopper':")
    assert "missing GPU target" in message
    assert "reproduce with: iree-compile " in message and "--iree-cuda-target=sm_90" in message
    assert (err.backend, err.graph) == ("iree-cuda", "hopper")
    path = message.split("the linalg input is in ")[1].split()[0]
    assert "linalg" in Path(path).read_text() or "func.func" in Path(path).read_text()
    assert "missing GPU target" not in capfd.readouterr().err  # IREE's own print was captured


def test_rejected_flag_is_reported_as_a_compile_error():
    with pytest.raises(BackendCompileError, match="iree-compile rejected the flags.*iree-not-a-flag"):
        iree.compile_to_vmfb(_small_graph(), {"extra_flags": ["--iree-not-a-flag=1"]})


# --- tensorplay.runtime ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_vmfb(compiled):
    return iree.compile_to_vmfb(mixed_graph())    # a cache hit: the module compiled it already


def test_runtime_program_calls_functions_with_numpy(cpu_vmfb, tmp_path):
    graph = mixed_graph()
    arrays = mixed_arrays(graph)
    path = tmp_path / "mixed.vmfb"
    path.write_bytes(cpu_vmfb)
    program = runtime.load(path, device="cpu")
    assert program.driver == "local-task" and program.name == "mixed"
    assert program.function_names == ["mixed"]
    assert "tensor<2x3xf32>" in program.declaration("mixed")
    raw = program.call("mixed", *arrays)
    assert raw[1].dtype == np.int8      # IREE's signless i8 ...
    typed = program.function("mixed", [v.type.dtype.np_dtype for v in graph.outputs])(*arrays)
    assert typed[1].dtype == np.uint8 and typed[1].tolist() == [2, 144, 254, 14, 0]  # ... read as uint8
    assert_matches_reference(graph, typed, arrays)
    with pytest.raises(TypeError, match="argument 0 has dtype <U1, which IREE cannot take"):
        program.call("mixed", np.array(["a"]))
    with pytest.raises(ValueError, match=r"(?s)calling mixed with float32\[3\] failed: .*the function is: "
                                         r"sync func @mixed\(%input0: tensor<2x3xf32>"):
        program.call("mixed", np.zeros(3, np.float32))
    with pytest.raises(KeyError, match="has no function 'nope'; it exports mixed"):
        program.call("nope")
    program.close()
    with pytest.raises(RuntimeError, match="was closed"):
        program.call("mixed", *arrays)


def test_runtime_rejects_unknown_drivers_and_bad_files():
    with pytest.raises(ValueError, match="unknown IREE runtime driver 'tpu'; drivers: local-sync"):
        runtime.load(b"", device="tpu")
    with pytest.raises(ValueError, match=r"not a loadable IREE VM flatbuffer \(7 bytes\)"):
        runtime.load(b"garbage", device="local-sync")


RUNTIME_ONLY = textwrap.dedent("""
    import json, pickle, sys
    from tensorplay import runtime
    program = runtime.load(sys.argv[1], device="local-sync")
    keep_alive_until_exit = program
    with open(sys.argv[2], "rb") as f:
        inputs = pickle.load(f)
    out = program.call("mixed", *inputs)
    print(json.dumps({"out": out[0].tolist(), "compiler_imported": "iree.compiler" in sys.modules}))
""")


def test_runtime_needs_no_compiler_and_leaves_no_leaks_at_exit(cpu_vmfb, tmp_path):
    graph = mixed_graph()
    arrays = mixed_arrays(graph)
    (tmp_path / "mixed.vmfb").write_bytes(cpu_vmfb)
    (tmp_path / "inputs.pkl").write_bytes(pickle.dumps(arrays))
    proc = subprocess.run([sys.executable, "-c", RUNTIME_ONLY, str(tmp_path / "mixed.vmfb"),
                           str(tmp_path / "inputs.pkl")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(result["out"], interpret(graph, arrays)[0], rtol=2e-5)
    assert result["compiler_imported"] is False
    assert "leaked" not in proc.stderr


WITH_TORCH_COMPILE = textwrap.dedent("""
    import numpy as np, tensorplay as tp, torch
    compiled = tp.compile(tp.nn.Linear(4, 3))
    y = compiled(tp.randn(2, 4))
    g = torch.compile(lambda a: a * 2 + 1)
    print(float(g(torch.ones(3))[0]), tuple(y.shape))
""")


@pytest.mark.iree
def test_a_process_using_torch_compile_too_reports_no_leaks_at_exit():
    # torch.compile keeps compiled callables (and their IREE function handles) alive past the
    # runtime's exit clean-up; closing a program drops the handles its bound functions hold
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", WITH_TORCH_COMPILE], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3.0", "(2,", "3)"]
    assert "leaked" not in proc.stderr, proc.stderr[-2000:]


def test_calls_making_an_empty_tensor_run_on_the_host_where_the_driver_cannot_launch_them():
    # IREE 3.13's CUDA driver fails on a kernel over zero elements (and the device stays
    # failed), so iree-cuda checks each call's sizes: t // 2 == 0 makes an empty slice
    from tensorplay.compiler.backends.iree import _EmptyGuarded, empty_sizes_check
    from tensorplay.compiler.backends.targets import TARGETS

    assert TARGETS["iree-cuda"].empty_dispatch_fails and not TARGETS["iree-cpu"].empty_dispatch_fails

    def f(x):
        t = x.shape[1]
        return x[:, : t // 2] * 2, x.sum(1)

    tp.compiler.reset()
    captured = tp.compile(f, backend="eager", dynamic=True)
    captured(tp.tensor(np.ones((2, 6), np.float32)))
    (graph,) = captured.graphs
    check = empty_sizes_check(graph)
    assert not check([np.ones((2, 6), np.float32)]) and not check([np.ones((3, 2), np.float32)])
    assert check([np.ones((3, 1), np.float32)]) and check([np.ones((0, 4), np.float32)])

    program_calls = []
    guarded = _EmptyGuarded(lambda *a: program_calls.append(a) or ["program"], graph, check, "iree-cuda")
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    half, total = guarded(x)
    assert program_calls == [] and half.shape == (3, 0) and np.array_equal(total, [0.0, 1.0, 2.0])
    assert guarded(np.ones((2, 4), np.float32)) == ["program"] and len(program_calls) == 1
    guarded.resident = frozenset({0})  # attributes reach the program's function
    tp.compiler.reset()
