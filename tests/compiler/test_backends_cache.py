"""The on-disk artifact cache: keys, atomic entries, corrupt and truncated entries rejected and
recompiled, one compile for concurrent threads and processes, and a second process that
reuses the artifact without compiling."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.backends import cache, iree
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType as T

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(folder))
    monkeypatch.delenv("TENSORPLAY_CACHE", raising=False)
    cache.reset_cache_stats()
    return folder


def _key(**changes):
    fields = dict(mlir="module {}", backend="iree-cpu", flags=["--a"], target="x86_64")
    fields.update(changes)
    return cache.cache_key(**fields)


def test_key_covers_graph_backend_flags_and_target():
    base = _key()
    assert base == _key() and len(base) == 64
    assert len({base, _key(mlir="module { }"), _key(backend="iree-vmvx"), _key(flags=["--b"]),
                _key(target="aarch64")}) == 5
    assert "3.13" in cache.iree_compiler_version()


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORPLAY_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "tensorplay"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "tensorplay"


def test_entries_round_trip_with_a_checked_header(cache_dir):
    key = _key()
    path = cache.store_entry(key, b"payload bytes")
    assert path.parent == cache_dir and path.read_bytes().startswith(cache.MAGIC)
    assert cache.load_entry(key) == b"payload bytes"
    assert not [p for p in cache_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "short"])
def test_damaged_entries_are_rejected_and_deleted(cache_dir, damage, caplog):
    key = _key(mlir=damage)
    path = cache.store_entry(key, b"x" * 100)
    data = path.read_bytes()
    if damage == "truncate":
        data = data[:-10]
    elif damage == "flip":
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif damage == "magic":
        data = b"NOTMAGIC" + data[8:]
    else:
        data = data[:20]
    path.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="tensorplay.compiler.perf"):
        assert cache.load_entry(key) is None
    assert not path.exists()
    assert cache.cache_stats()["corrupt"] == 1
    assert "is corrupt" in caplog.text and "compiling again" in caplog.text


def test_entries_of_the_previous_format_are_replaced_quietly(cache_dir, caplog):
    import hashlib
    import struct

    key = _key(mlir="old format")
    cache_dir.mkdir(parents=True)
    payload = b"an artifact written before entries named their versions"
    old = struct.pack("<8sQ32s", b"TPVMFB1\n", len(payload), hashlib.sha256(payload).digest()) + payload
    path = cache_dir / f"{key}{cache.SUFFIX}"
    path.write_bytes(old)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.perf"):
        assert cache.load_entry(key) is None
    assert not path.exists() and cache.cache_stats()["stale"] == 1 and cache.cache_stats()["corrupt"] == 0
    assert "older entry format" in caplog.text and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert cache.get_or_compile(key, lambda: b"new", what="old") == b"new" and cache.load_entry(key) == b"new"


def test_get_or_compile_recompiles_a_corrupt_entry(cache_dir, caplog):
    calls = []

    def compile_fn():
        calls.append(1)
        return b"fresh artifact"

    key = _key(mlir="recompile")
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler.perf"):
        assert cache.get_or_compile(key, compile_fn, what="graph 'g'") == b"fresh artifact"
        assert cache.get_or_compile(key, compile_fn, what="graph 'g'") == b"fresh artifact"
        path = next(cache_dir.glob(f"{key}*.tpc"))
        path.write_bytes(path.read_bytes()[:-3])                      # truncated by a crash
        assert cache.get_or_compile(key, compile_fn, what="graph 'g'") == b"fresh artifact"
    assert len(calls) == 2
    assert cache.cache_stats() == {"hits": 1, "misses": 2, "compiles": 2, "corrupt": 1, "stale": 0, "untrusted": 0,
                                   "writes": 2}
    assert "cache miss: graph 'g'" in caplog.text and "cache hit: graph 'g'" in caplog.text
    assert "IREE compile: graph 'g' took" in caplog.text
    assert cache.load_entry(key) == b"fresh artifact"


def test_concurrent_threads_compile_once(cache_dir):
    calls = []

    def slow_compile():
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return b"shared"

    key = _key(mlir="threads")
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compile(key, slow_compile, what="t")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [b"shared"] * 4 and len(calls) == 1


def test_cache_can_be_turned_off_and_cleared(cache_dir, monkeypatch):
    cache.store_entry(_key(mlir="a"), b"1")
    cache.store_entry(_key(mlir="b"), b"2")
    assert cache.clear_cache() == 2 and not list(cache_dir.glob("*.tpc"))
    monkeypatch.setenv("TENSORPLAY_CACHE", "0")
    cache.reset_cache_stats()
    assert cache.get_or_compile(_key(mlir="off"), lambda: b"z", what="off") == b"z"
    assert cache.cache_stats()["writes"] == 0 and not list(cache_dir.glob("*.tpc"))


@pytest.mark.iree
def test_corrupt_artifact_of_a_real_graph_is_recompiled_and_still_correct(cache_dir):
    g = Graph("cached_exp")
    x = g.add_input(T((4,), tp.float32))
    g.set_outputs([g.add1("tp.exp", [x])])
    xs = np.array([0.0, 1.0, -1.0, 2.0], np.float32)
    first = iree.cpu(g, [])(xs)[0]
    (entry,) = cache_dir.glob("*.tpc")
    entry.write_bytes(entry.read_bytes()[: len(entry.read_bytes()) // 2])
    second = iree.cpu(g, [])(xs)[0]
    np.testing.assert_array_equal(first, second)
    assert cache.cache_stats()["compiles"] == 2 and cache.cache_stats()["corrupt"] == 1


PROGRAM = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorplay as tp
    from tensorplay.compiler import lookup_backend
    from tensorplay.compiler.backends import cache
    from tensorplay.dialects.tp.graph import Graph
    from tensorplay.dialects.tp.types import TensorType as T
    g = Graph("two_process_mlp")
    x = g.add_input(T((4, 8), tp.float32))
    w = g.add_input(T((8, 8), tp.float32))
    g.set_outputs([g.add1("tp.tanh", [g.add1("tp.matmul", [x, w])])])
    rng = np.random.default_rng(0)
    run = lookup_backend("iree-cpu")(g, [])
    out = run(rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32))
    import logging
    print(json.dumps({"stats": cache.cache_stats(), "digest": out[0].tobytes().hex(),
                      "root_handlers": len(logging.root.handlers)}))
""")


def _spawn(cache_dir):
    env = dict(os.environ, TENSORPLAY_CACHE_DIR=str(cache_dir), TENSORPLAY_LOGS="perf")
    return subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)


def _result(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def test_processes_share_artifacts_compiling_once(cache_dir):
    racing = [_spawn(cache_dir), _spawn(cache_dir)]       # two processes, same graph, same moment
    (a, a_err), (b, b_err) = (_result(p) for p in racing)
    assert a["stats"]["compiles"] + b["stats"]["compiles"] == 1
    # one line per event: importing IREE's compiler API left no second (root) handler behind
    assert (a_err + b_err).count("IREE compile:") == 1 and a["root_handlers"] == b["root_handlers"] == 0
    assert a["stats"]["hits"] + b["stats"]["hits"] == 1
    later, err = _result(_spawn(cache_dir))               # a later process: a hit, no IREE compile
    assert later["stats"]["compiles"] == 0 and later["stats"]["hits"] == 1
    assert "cache hit: graph 'two_process_mlp' for iree-cpu" in err and "IREE compile" not in err
    assert a["digest"] == b["digest"] == later["digest"]
    assert "leaked" not in err
    assert len(list(cache_dir.glob("*.tpc"))) == 1


def test_an_entry_written_by_another_lowering_is_stale(cache_dir, tmp_path, monkeypatch):
    # the record names a hash of the lowering code, so a checkout whose lowering changed (the
    # same version number) never loads what an older one compiled
    key = _key(mlir="lowering")
    cache.store_entry(key, b"compiled by this lowering")
    assert cache.load_entry(key) == b"compiled by this lowering"
    version = cache._tensorplay_version()
    assert version.endswith("+" + cache._lowering_fingerprint())
    edited = tmp_path / "passes"
    edited.mkdir()
    (edited / "lowering.py").write_text("# changed\n")
    import importlib.machinery

    real = cache.importlib.util.find_spec

    def find_spec(name, *a):
        spec = real(name, *a)
        if name == "tensorplay.passes":
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(edited)]
        return spec

    monkeypatch.setattr(cache.importlib.util, "find_spec", find_spec)
    assert cache._lowering_fingerprint() != version.rsplit("+", 1)[1]
    monkeypatch.delitem(cache._versions, "tp")
    assert cache.load_entry(key) is None and cache.cache_stats()["stale"] == 1
