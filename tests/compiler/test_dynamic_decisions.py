"""Automatic dynamic that generalizes (a size sweep compiles twice whichever size changes
first), decisions remembered on disk (a second process captures once and compiles nothing),
and cache bundles (one file carries every artifact and decision to an empty cache)."""

import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import dynamic_decisions
from tensorplay.compiler.backends import cache
from tensorplay.examples import GPTConfig, build_gpt

pytestmark = pytest.mark.iree

BATCHES = (1, 2, 3, 7, 16, 33, 64)
LENGTHS = (1, 5, 9, 128)
CONFIG = dict(block_size=128, vocab_size=64, n_layer=1, n_head=2, n_embd=32)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache of the test's own, with decisions remembered (the suite turns them off)."""
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TENSORPLAY_REMEMBER_DYNAMIC", "1")
    tp.compiler.reset()
    yield tmp_path / "cache"
    tp.compiler.reset()


def _sweep(lengths_first: bool):
    if lengths_first:
        return [(b, t) for b in BATCHES for t in LENGTHS]
    return [(b, t) for t in LENGTHS for b in BATCHES]


@pytest.mark.parametrize("lengths_first", [True, False], ids=["lengths-first", "batch-first"])
def test_a_sweep_compiles_twice_and_matches_eager(own_cache, lengths_first):
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig(**CONFIG)).eval()
    fast = tp.compile(model)
    rng = np.random.default_rng(0)
    before = cache.cache_stats()["compiles"]
    with tp.no_grad():
        for b, t in _sweep(lengths_first):
            idx = tp.tensor(rng.integers(0, 64, (b, t)))
            np.testing.assert_allclose(fast(idx)[0].numpy(), model(idx)[0].numpy(), rtol=1e-4, atol=1e-5)
    assert fast.compiled_function.compile_count == 2
    assert cache.cache_stats()["compiles"] - before == 2


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorplay as tp
    from tensorplay.compiler.backends import cache
    from tensorplay.examples import GPTConfig, build_gpt

    if sys.argv[1] == "load":
        info = tp.compiler.load_cache_bundle(sys.argv[2])
        assert info["installed"] == info["entries"] > 0, info
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig(**{config})).eval()
    fast = tp.compile(model)
    rng = np.random.default_rng(0)
    worst = 0.0
    with tp.no_grad():
        for b in {batches}:
            for t in {lengths}:
                idx = tp.tensor(rng.integers(0, 64, (b, t)))
                worst = max(worst, float(np.abs(fast(idx)[0].numpy() - model(idx)[0].numpy()).max()))
    if sys.argv[1] == "save":
        tp.compiler.save_cache_bundle(sys.argv[2])
    print(json.dumps({{"captures": fast.compiled_function.compile_count,
                       "iree_compiles": cache.cache_stats()["compiles"], "worst": worst}}))
""").format(config=CONFIG, batches=BATCHES, lengths=LENGTHS)


def _run(tmp_path, cache_dir, *args, remember="1"):
    script = tmp_path / "sweep.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TENSORPLAY_CACHE_DIR=str(cache_dir), TENSORPLAY_REMEMBER_DYNAMIC=remember)
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["worst"] < 1e-4
    return out


def test_a_second_process_starts_with_the_dynamic_graph(tmp_path):
    first = _run(tmp_path, tmp_path / "cache", "run")
    assert (first["captures"], first["iree_compiles"]) == (2, 2)
    second = _run(tmp_path, tmp_path / "cache", "run")
    assert (second["captures"], second["iree_compiles"]) == (1, 0)


def test_decisions_can_be_turned_off(tmp_path):
    _run(tmp_path, tmp_path / "cache", "run", remember="0")
    again = _run(tmp_path, tmp_path / "cache", "run", remember="0")
    assert (again["captures"], again["iree_compiles"]) == (2, 0)  # static first, then dynamic: both cached


def test_a_bundle_warms_an_empty_cache(tmp_path):
    bundle = tmp_path / "warm.tpbundle"
    first = _run(tmp_path, tmp_path / "a", "save", str(bundle))
    assert first["iree_compiles"] == 2 and bundle.exists()
    warm = _run(tmp_path, tmp_path / "b", "load", str(bundle))
    assert (warm["captures"], warm["iree_compiles"]) == (1, 0)


def _bundle(own_cache, tmp_path):
    f = tp.compile(lambda x: (x * 2).sum(1))
    for n in (3, 4):
        f(tp.ones(2, n))
    return tp.compiler.save_cache_bundle(tmp_path / "b.tpbundle")


def test_bundle_contents_and_reload(own_cache, tmp_path):
    info = _bundle(own_cache, tmp_path)
    assert info["entries"] == 3  # the static program, the dynamic one and the decision
    again = tp.compiler.load_cache_bundle(info["path"])
    assert again == {"entries": 3, "installed": 0, "present": 3, "differences": []}
    cache.clear_cache()
    assert tp.compiler.load_cache_bundle(info["path"])["installed"] == 3
    assert not [p for p in own_cache.iterdir() if p.name.endswith(".tmp")]


def test_damaged_bundles_are_refused(own_cache, tmp_path):
    info = _bundle(own_cache, tmp_path)
    data = bytearray(open(info["path"], "rb").read())
    cache.clear_cache()
    bad = tmp_path / "bad.tpbundle"
    bad.write_bytes(bytes(data[:-10]))
    with pytest.raises(ValueError, match="truncated or damaged"):
        tp.compiler.load_cache_bundle(bad)
    data[-5] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not match its checksum"):
        tp.compiler.load_cache_bundle(bad)
    bad.write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a tensorplay cache bundle"):
        tp.compiler.load_cache_bundle(bad)
    assert not [p for p in own_cache.iterdir() if p.name.endswith(cache.SUFFIX)]  # nothing half-installed


def test_a_bundle_of_another_iree_or_tensorplay_is_refused(own_cache, tmp_path, monkeypatch):
    info = _bundle(own_cache, tmp_path)
    cache.clear_cache()
    with monkeypatch.context() as m:
        m.setitem(cache._versions, "iree", "VERSION='3.12.0'")
        with pytest.raises(ValueError, match=r"built by another IREE compiler or tensorplay \(iree: bundle .*, here "
                                             r"\"VERSION='3\.12\.0'\"\): none of its 3 entries could be used here; "
                                             r"nothing installed\. Build the bundle again"):
            tp.compiler.load_cache_bundle(info["path"])
    with monkeypatch.context() as m:
        m.setitem(cache._versions, "tp", "0.0.1+0123456789abcdef")
        with pytest.raises(ValueError, match=r"\(tensorplay: bundle .*, here '0\.0\.1\+0123456789abcdef'\)"):
            tp.compiler.load_cache_bundle(info["path"])
    assert not list(own_cache.glob("*" + cache.SUFFIX))


def _rewrite_index(path, edit) -> None:
    """Rewrite a bundle's index with ``edit(index)`` (the entries are kept)."""
    data = open(path, "rb").read()
    _, length = struct.unpack_from("<8sQ", data)
    index = json.loads(data[16:16 + length])
    edit(index)
    head = json.dumps(index).encode()
    open(path, "wb").write(data[:8] + struct.pack("<Q", len(head)) + head + data[16 + length:])


def test_a_bundle_records_its_backends_and_refuses_one_this_install_lacks(own_cache, tmp_path):
    info = _bundle(own_cache, tmp_path)
    assert info["backends"] == ["iree-cpu"]
    _, length = struct.unpack_from("<8sQ", open(info["path"], "rb").read())
    index = json.loads(open(info["path"], "rb").read()[16:16 + length])
    assert sorted(str(e["backend"]) for e in index["entries"]) == ["None", "iree-cpu", "iree-cpu"]  # + the decision
    cache.clear_cache()
    _rewrite_index(info["path"], lambda i: i.update(backends=["iree-cpu", "iree-npu9"]))
    with pytest.raises(ValueError, match=r"built for backend\(s\) iree-npu9, which this tensorplay does not have "
                                         r"\(it has .*iree-cpu.*\); nothing installed"):
        tp.compiler.load_cache_bundle(info["path"])
    assert not list(own_cache.glob("*" + cache.SUFFIX))


def test_a_pinned_digest_admits_only_that_bundle(own_cache, tmp_path):
    info = _bundle(own_cache, tmp_path)
    assert info["sha256"] == hashlib.sha256(open(info["path"], "rb").read()).hexdigest()
    cache.clear_cache()
    assert tp.compiler.load_cache_bundle(info["path"], sha256="SHA256:" + info["sha256"].upper())["installed"] == 3
    cache.clear_cache()
    _rewrite_index(info["path"], lambda i: i.update(note="copied"))  # the same entries, another file
    with pytest.raises(ValueError, match=rf"has sha256 [0-9a-f]{{64}}, not the pinned {info['sha256']}: it is not "
                                         r"the file you pinned .*nothing of it was loaded"):
        tp.compiler.load_cache_bundle(info["path"], sha256=info["sha256"])
    with pytest.raises(ValueError, match=r"sha256='abc' is not a sha256 digest"):
        tp.compiler.load_cache_bundle(info["path"], sha256="abc")
    assert not list(own_cache.glob("*" + cache.SUFFIX))
    assert tp.compiler.load_cache_bundle(info["path"])["installed"] == 3  # unpinned, the edited index still loads


def test_function_ids_follow_the_code():
    def f(x):
        return x + 1

    def g(x):
        return x + 2

    assert dynamic_decisions.function_id(f) == dynamic_decisions.function_id(f)
    assert dynamic_decisions.function_id(f) != dynamic_decisions.function_id(g)
    assert dynamic_decisions.function_id(len) is None
    assert "test_function_ids_follow_the_code.<locals>.f" in dynamic_decisions.function_id(f)


def test_programs_for_a_named_cpu_are_keyed_by_its_name_only(own_cache, monkeypatch):
    def f(x):
        return x * 3 - 1

    x = tp.ones(5)
    here = cache.host_target()
    for options, again in (({"target_cpu": "generic"}, 0), (None, 1)):
        monkeypatch.setitem(cache._versions, "host", here)
        tp.compiler.reset()
        tp.compile(f, options=options)(x)
        monkeypatch.setitem(cache._versions, "host", "another cpu")  # as on another machine
        tp.compiler.reset()
        before = cache.cache_stats()["compiles"]
        np.testing.assert_allclose(tp.compile(f, options=options)(x).numpy(), np.full(5, 2.0))
        assert cache.cache_stats()["compiles"] - before == again
