"""Compiled callables called from several threads at once: every thread gets eager's result
for its own inputs, and the graph is captured and compiled once, with a counting backend and
with the real iree-cpu backend. An exported module's entry point is shared by threads too.
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
