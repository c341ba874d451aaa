"""Compiled callables called from several threads at once: every thread gets eager's result
for its own inputs, and the graph is captured and compiled once, with a counting backend and
with the real iree-cpu backend. An exported module's entry point is shared by threads too. A
capture affects its own thread only: a module runs eagerly in one thread while another captures
it, and two threads capture two functions of one module at once.
(Two processes compiling the same graph: tests/compiler/test_backends_cache.py.)"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, runtime
from tensorplay.compiler.backends import cache

from tests.compiler.conftest import CountingBackend, backend_param

THREADS = 8
CALLS = 6


def gelu_mix(x, y):
    return (x * y + 1).tanh() * 0.5 + (x - y).abs().sqrt()


def mlp():
    tp.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()


def inputs(thread, call, *shapes):
    rng = np.random.default_rng(1000 * thread + call)
    return [tp.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def run_in_threads(work):
    """``work(thread)`` in THREADS threads released together; returns their results by thread
    and re-raises the first failure."""
    barrier = threading.Barrier(THREADS)
    results: dict[int, object] = {}
    failures: list[BaseException] = []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported after join
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    assert sorted(results) == list(range(THREADS))
    return results


def calls_of(compiled, shapes):
    """Each thread calls ``compiled`` CALLS times with inputs of its own; returns (inputs,
    outputs) pairs as numpy."""
    def work(i):
        out = []
        for k in range(CALLS):
            args = inputs(i, k, *shapes)
            out.append(([a.detach().numpy() for a in args], compiled(*args).detach().numpy()))
        return out

    return run_in_threads(work)


def check_against_eager(results, eager, rtol, atol):
    for i, calls in results.items():
        for args, got in calls:
            want = eager(*[tp.tensor(a) for a in args]).detach().numpy()
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"thread {i}")


def test_compiled_function_from_threads_compiles_once(backend):
    compiled = tp.compile(gelu_mix, backend=backend, fullgraph=True)
    results = calls_of(compiled, [(4, 5), (4, 5)])
    assert backend.count == 1 and compiled.cache_info()["entries"] == 1
    check_against_eager(results, gelu_mix, 1e-6, 1e-6)


def test_compiled_module_from_threads_compiles_once():
    tp.compiler.reset()
    counting = CountingBackend()
    model = mlp()
    compiled = tp.compile(model, backend=counting)
    expected = {(i, k): model(*inputs(i, k, (3, 8))).detach().numpy() for i in range(THREADS) for k in range(CALLS)}
    results = calls_of(compiled, [(3, 8)])
    assert counting.count == 1
    for i, calls in results.items():
        for k, (_, got) in enumerate(calls):
            np.testing.assert_allclose(got, expected[i, k], rtol=1e-6, atol=1e-6)
    tp.compiler.reset()


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TENSORPLAY_CACHE", raising=False)
    return tmp_path / "cache"


@pytest.mark.parametrize("name", [backend_param("iree-cpu")])
def test_threads_share_one_iree_compile(name, fresh_cache):
    def twisted(x, y):  # a graph of this test's own: its compile cannot come from elsewhere
        return (x * 3 - y).sin() + x * y

    before = cache.cache_stats()["compiles"]
    compiled = tp.compile(twisted, backend=name, fullgraph=True)
    results = calls_of(compiled, [(6, 7), (6, 7)])
    assert compiled.compile_count == 1
    assert cache.cache_stats()["compiles"] - before == 1
    check_against_eager(results, twisted, 1e-5, 1e-5)


@pytest.mark.parametrize("name", [backend_param("iree-cpu")])
def test_threads_share_one_compiled_module_on_iree(name, fresh_cache):
    model = mlp()
    compiled = tp.compile(model, backend=name)
    expected = {(i, k): model(*inputs(i, k, (5, 8))).detach().numpy() for i in range(THREADS) for k in range(CALLS)}
    results = calls_of(compiled, [(5, 8)])
    assert compiled.compiled_function.compile_count == 1
    for i, calls in results.items():
        for k, (_, got) in enumerate(calls):
            np.testing.assert_allclose(got, expected[i, k], rtol=1e-5, atol=1e-5)


@pytest.mark.iree
def test_an_exported_module_serves_threads(tmp_path):
    model = mlp()
    loaded = runtime.load(tp.export(model, (tp.ones(5, 8),)).save(tmp_path / "mlp.vmfb"))

    def work(i):
        out = []
        for k in range(CALLS):
            (x,) = inputs(i, k, (5, 8))
            out.append((x, loaded.forward(x)))
        return out

    for i, calls in run_in_threads(work).items():
        for x, got in calls:
            np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=f"thread {i}")


# -- a capture affects its own thread only ---------------------------------------------------

EAGER_CALLS = 5


def test_eager_module_runs_while_another_thread_captures_it():
    """The capture borrows the module's parameters (they stand for graph values in its thread)
    while the other thread runs the module eagerly in a loop: the capture waits, inside the
    traced function, until the other thread has made EAGER_CALLS eager calls during it."""
    model = mlp()
    x = inputs(0, 0, (3, 8))[0]
    want = model(x).detach().numpy()
    capturing, ran, stop = threading.Event(), threading.Event(), threading.Event()
    eager_results: list = []
    failures: list[BaseException] = []

    def eager_loop():
        try:
            assert capturing.wait(60)
            while not stop.is_set():
                eager_results.append(model(x).detach().numpy())
                if len(eager_results) >= EAGER_CALLS:
                    ran.set()
        except BaseException as exc:  # noqa: BLE001 - reported after join
            failures.append(exc)
            ran.set()

    def overlap():  # plain Python inside the trace: the parameters are borrowed now
        capturing.set()
        assert ran.wait(60)

    def step(x):
        y = model(x)
        overlap()
        return model(x * 2) + y

    counting = CountingBackend()
    compiled = tp.compile(step, backend=counting, fullgraph=True)
    other = threading.Thread(target=eager_loop)
    other.start()
    try:
        got = compiled(x).detach().numpy()
    finally:
        stop.set()
        other.join()
    if failures:
        raise failures[0]
    assert len(eager_results) >= EAGER_CALLS
    for r in eager_results:
        np.testing.assert_allclose(r, want, rtol=1e-6, atol=1e-6)
    expected = model(x * 2).detach().numpy() + want
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert counting.count == 1
    np.testing.assert_allclose(compiled(x).detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    assert counting.count == 1 and compiled.cache_info()["entries"] == 1
    for p in model.parameters():  # nothing of the capture is left on the shared tensors
        assert p._data is not None and p._capture is None


def test_two_threads_capture_two_functions_of_one_module_at_once():
    """Two compiled functions using the same module are captured at the same moment, each in
    its own thread, both borrowing its parameters: each trace waits inside until the other
    has begun, so the two captures overlap."""
    model = mlp()
    x = inputs(0, 0, (4, 8))[0]
    barrier = threading.Barrier(2, timeout=60)

    def meet():
        barrier.wait()

    def first(x):
        y = model(x).relu()
        meet()
        return y.sum(dim=1)

    def second(x):
        y = model(x + 1)
        meet()
        return y * y

    backends = CountingBackend(), CountingBackend()
    compiled = [tp.compile(first, backend=backends[0], fullgraph=True),
                tp.compile(second, backend=backends[1], fullgraph=True)]
    results: dict[int, np.ndarray] = {}
    failures: list[BaseException] = []

    def body(i):
        try:
            results[i] = compiled[i](x).detach().numpy()
        except BaseException as exc:  # noqa: BLE001 - reported after join
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    y = model(x)
    np.testing.assert_allclose(results[0], y.relu().sum(dim=1).detach().numpy(), rtol=1e-6, atol=1e-6)
    z = model(x + 1)
    np.testing.assert_allclose(results[1], (z * z).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert [b.count for b in backends] == [1, 1]
    for p in model.parameters():
        assert p._data is not None and p._capture is None
