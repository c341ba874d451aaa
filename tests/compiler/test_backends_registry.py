"""The backend registry: registration forms, tags, lookup with suggestions, availability,
capabilities, the default backend, the eager backend, entry points and the documented
third-party example. Nothing here runs IREE except the entry-point subprocess's import."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay.compiler import InvalidBackend
from tensorplay.compiler.backends import BackendCapabilities, BackendUnavailable
from tensorplay.compiler.backends.eager import interpret
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType as T

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = {"iree-cpu", "iree-vulkan", "iree-cuda", "iree-rocm", "iree-vmvx", "eager"}


def _graph(name="g"):
    g = Graph(name)
    x = g.add_input(T((3,), tp.float32))
    y = g.add_input(T((3,), tp.float32))
    g.set_outputs([g.add1("tp.mul", [g.add1("tp.add", [x, y]), y])])
    return g


X = np.array([1.0, 2.0, 3.0], np.float32)
Y = np.array([0.5, -1.0, 2.0], np.float32)


def dummy_backend(graph, example_inputs, options=None):
    return lambda *arrays: interpret(graph, arrays)


@pytest.fixture
def cleanup():
    """Names registered by a test are removed and the default restored afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if name in tpc.list_backends(None, include_unavailable=True):
            tpc.unregister_backend(name)
    tpc.set_default_backend(None)


# --- listing and tags ----------------------------------------------------------------------

def test_builtins_are_listed_and_debug_experimental_ones_hidden_by_default():
    everything = set(tpc.list_backends(None, include_unavailable=True))
    assert BUILTINS <= everything
    default = tpc.list_backends()
    assert "iree-cpu" in default
    assert not {"eager", "iree-vmvx", "iree-rocm"} & set(default)
    assert {"eager", "iree-vmvx"} <= set(tpc.list_backends(exclude_tags=()))
    assert "iree-rocm" in tpc.list_backends(exclude_tags=["debug"], include_unavailable=True)
    assert default == sorted(default)


def test_unavailable_builtin_is_hidden_unless_asked_for():
    caps = tpc.get_backend_capabilities("iree-cuda")
    assert ("iree-cuda" in tpc.list_backends()) == caps.available
    assert "iree-cuda" in tpc.list_backends(include_unavailable=True)


# --- registration forms --------------------------------------------------------------------

def test_bare_decorator_registers_under_the_function_name(cleanup):
    @tpc.register_backend
    def my_bare_backend(graph, example_inputs):
        return lambda *a: interpret(graph, a)

    cleanup.append("my_bare_backend")
    assert tpc.lookup_backend("my_bare_backend") is my_bare_backend
    assert "my_bare_backend" in tpc.list_backends()


def test_decorator_with_name_tags_and_capabilities(cleanup):
    @tpc.register_backend(name="deco-backend", tags=("fast",), capabilities={"device_kind": "cpu"})
    def fn(graph, example_inputs):
        return lambda *a: interpret(graph, a)

    cleanup.append("deco-backend")
    assert callable(fn) and tpc.lookup_backend("deco-backend") is fn
    assert tpc.get_backend_capabilities("deco-backend").device_kind == "cpu"
    assert "deco-backend" not in tpc.list_backends(exclude_tags=("fast",))


def test_call_form_and_positional_name(cleanup):
    assert tpc.register_backend(dummy_backend, name="called-backend") is dummy_backend
    assert tpc.register_backend(dummy_backend, "positional-name") is dummy_backend
    cleanup += ["called-backend", "positional-name"]
    assert tpc.lookup_backend("called-backend") is dummy_backend
    assert tpc.lookup_backend("positional-name") is dummy_backend


def test_duplicate_name_is_an_error_unless_replace(cleanup):
    tpc.register_backend(dummy_backend, name="dup-backend")
    cleanup.append("dup-backend")
    with pytest.raises(ValueError, match="'dup-backend' is already registered.*replace=True"):
        tpc.register_backend(dummy_backend, name="dup-backend")
    with pytest.raises(ValueError, match="'iree-cpu' is already registered"):
        tpc.register_backend(dummy_backend, name="iree-cpu")

    def other(graph, example_inputs):
        return dummy_backend(graph, example_inputs)

    tpc.register_backend(other, name="dup-backend", replace=True)
    assert tpc.lookup_backend("dup-backend") is other


def test_registration_rejects_bad_arguments():
    with pytest.raises(TypeError, match="must be callable"):
        tpc.register_backend(42, name="x")
    with pytest.raises(TypeError, match="unexpected keyword.*colour"):
        tpc.register_backend(dummy_backend, name="x", colour="red")
    with pytest.raises(TypeError, match="tags must be strings"):
        tpc.register_backend(dummy_backend, name="x", tags=(1,))
    with pytest.raises(TypeError, match="capabilities must be"):
        tpc.register_backend(dummy_backend, name="x", capabilities=3.5)
    assert "x" not in tpc.list_backends(None, include_unavailable=True)


def test_debug_and_experimental_registration_add_their_tag(cleanup):
    tpc.register_debug_backend(dummy_backend, name="dbg-backend", tags=("mine",))
    tpc.register_experimental_backend(name="exp-backend")(dummy_backend)
    cleanup += ["dbg-backend", "exp-backend"]
    listed = tpc.list_backends()
    assert "dbg-backend" not in listed and "exp-backend" not in listed
    assert {"dbg-backend", "exp-backend"} <= set(tpc.list_backends(exclude_tags=None))
    assert "dbg-backend" not in tpc.list_backends(exclude_tags=("mine",))
    assert "exp-backend" in tpc.list_backends(exclude_tags=("debug",))


def test_unregister_backend(cleanup):
    tpc.register_backend(dummy_backend, name="gone-backend")
    tpc.unregister_backend("gone-backend")
    with pytest.raises(InvalidBackend):
        tpc.lookup_backend("gone-backend")
    with pytest.raises(InvalidBackend, match="unknown backend 'never-registered'"):
        tpc.unregister_backend("never-registered")


# --- lookup --------------------------------------------------------------------------------

def test_unknown_name_raises_invalid_backend_with_close_matches():
    with pytest.raises(InvalidBackend) as info:
        tpc.lookup_backend("iree-cpx")
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, RuntimeError)
    assert err.name == "iree-cpx" and err.suggestions[0] == "iree-cpu"
    assert "did you mean 'iree-cpu'" in str(err)
    with pytest.raises(InvalidBackend) as info:
        tpc.lookup_backend("IREE_VULKAN")
    assert "iree-vulkan" in info.value.suggestions
    with pytest.raises(InvalidBackend) as info:
        tpc.lookup_backend("zzzzzz")
    assert info.value.suggestions == []


def test_lookup_validates_callables():
    assert tpc.lookup_backend(dummy_backend) is dummy_backend
    with pytest.raises(TypeError, match="must accept \\(graph, example_inputs\\)"):
        tpc.lookup_backend(lambda: None)
    with pytest.raises(TypeError, match="registered name or a callable"):
        tpc.lookup_backend(3)


def test_unavailable_backend_is_hidden_and_selecting_it_says_what_is_missing(cleanup):
    tpc.register_backend(dummy_backend, name="needs-frob",
                         capabilities=BackendCapabilities(available=False, reason="the frob device is missing",
                                                          install_hint="pip install frob"))
    cleanup.append("needs-frob")
    assert "needs-frob" not in tpc.list_backends()
    assert "needs-frob" in tpc.list_backends(include_unavailable=True)
    with pytest.raises(BackendUnavailable) as info:
        tpc.lookup_backend("needs-frob")
    assert isinstance(info.value, RuntimeError)
    assert "'needs-frob' is not available: the frob device is missing; pip install frob" in str(info.value)


def test_selecting_an_unavailable_builtin_names_the_missing_device():
    caps = tpc.get_backend_capabilities("iree-cuda")
    if caps.available:
        pytest.skip("a CUDA device is present here")
    with pytest.raises(BackendUnavailable, match="'iree-cuda' is not available: IREE runtime driver 'cuda'"):
        tpc.lookup_backend("iree-cuda")
    with pytest.raises(BackendUnavailable, match="NVIDIA GPU"):
        tpc.set_default_backend("iree-cuda")


# --- capabilities --------------------------------------------------------------------------

def test_builtin_capabilities_state_the_truth():
    cpu = tpc.get_backend_capabilities("iree-cpu")
    assert (cpu.name, cpu.target, cpu.device_kind) == ("iree-cpu", "llvm-cpu", "cpu")
    assert "float64" in cpu.dtypes and "bfloat16" in cpu.dtypes and cpu.available
    assert cpu.training is True and cpu.export_formats == ("vmfb",) and cpu.dynamic_shapes
    vk = tpc.get_backend_capabilities("iree-vulkan")
    assert vk.target == "vulkan-spirv" and vk.runtime_driver == "vulkan" and vk.device_kind == "gpu"
    assert "float64" not in vk.dtypes and "float16" not in vk.dtypes and "int64" in vk.dtypes
    assert vk.available == bool(vk.extra.get("devices")), vk.reason
    vmvx = tpc.get_backend_capabilities("iree-vmvx")
    assert vmvx.target == "vmvx" and "float16" not in vmvx.dtypes
    cuda = tpc.get_backend_capabilities("iree-cuda")
    assert cuda.target == "cuda" and (cuda.available or (cuda.reason and cuda.install_hint))
    eager = tpc.get_backend_capabilities("eager")
    assert eager.target is None and eager.training is True and eager.export_formats == ()
    assert tpc.get_backend_capabilities(tpc.lookup_backend("iree-cpu")) is cpu


def test_capabilities_are_probed_once_and_lazily(cleanup):
    calls = []

    def probe():
        calls.append(1)
        return BackendCapabilities(device_kind="cpu", dtypes=("float32",))

    tpc.register_backend(dummy_backend, name="probed-backend", capabilities=probe)
    cleanup.append("probed-backend")
    assert calls == []
    tpc.list_backends()
    caps = tpc.get_backend_capabilities("probed-backend")
    tpc.get_backend_capabilities("probed-backend")
    assert calls == [1]
    assert caps.name == "probed-backend" and caps.dtypes == ("float32",)


def test_capabilities_of_an_unregistered_callable():
    caps = tpc.get_backend_capabilities(dummy_backend)
    assert caps.name == "dummy_backend" and caps.dtypes is None and "no capabilities declared" in caps.description


# --- default backend -----------------------------------------------------------------------

def test_default_backend_set_get_and_restore(cleanup):
    assert tpc.get_default_backend() == "iree-cpu"
    tpc.set_default_backend("eager")
    assert tpc.get_default_backend() == "eager"
    with pytest.raises(InvalidBackend, match="did you mean 'eager'"):
        tpc.set_default_backend("eagre")
    assert tpc.get_default_backend() == "eager"
    tpc.set_default_backend(dummy_backend)
    assert tpc.get_default_backend() is dummy_backend
    tpc.set_default_backend(None)
    assert tpc.get_default_backend() == "iree-cpu"


def test_unregistering_the_default_restores_iree_cpu(cleanup):
    tpc.register_backend(dummy_backend, name="temp-default")
    tpc.set_default_backend("temp-default")
    tpc.unregister_backend("temp-default")
    assert tpc.get_default_backend() == "iree-cpu"


# --- the eager backend ---------------------------------------------------------------------

def test_eager_backend_matches_numpy_and_ignores_options():
    run = tpc.lookup_backend("eager")(_graph(), [])
    (out,) = run(X, Y)
    np.testing.assert_array_equal(out, (X + Y) * Y)
    (out,) = tpc.lookup_backend("eager")(_graph(), [], options={"opt_level": "O3"})(X, Y)
    np.testing.assert_array_equal(out, (X + Y) * Y)
    with pytest.raises(TypeError, match="takes 2 inputs, got 1"):
        run(X)


def test_eager_interpreter_runs_call_nodes():
    body = Graph("block")
    a = body.add_input(T((3,), tp.float32))
    body.set_outputs([body.add1("tp.relu", [body.add1("tp.sub", [a, body.add1("tp.exp", [a])])]), a])
    g = Graph("model")
    x = g.add_input(T((3,), tp.float32))
    h, same = g.add_call(body, [x])
    (h2, _) = g.add_call(body, [g.add1("tp.neg", [h])])
    g.set_outputs([h2, same])
    out, passthrough = interpret(g, [X])
    ref = lambda v: np.maximum(v - np.exp(v), 0)  # noqa: E731
    np.testing.assert_allclose(out, ref(-ref(X)), rtol=1e-6)
    np.testing.assert_array_equal(passthrough, X)


# --- the documented third-party example ----------------------------------------------------

def _doc_example() -> str:
    text = (ROOT / "docs" / "backends.md").read_text()
    match = re.search(r"<!-- example: third-party-backend -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/backends.md lost its third-party backend example"
    return match.group(1)


def test_documented_third_party_backend_runs(cleanup):
    namespace: dict = {}
    exec(compile(_doc_example(), "docs/backends.md", "exec"), namespace)
    cleanup.append("numpy-interpreter")
    assert "numpy-interpreter" in tpc.list_backends()
    run = tpc.lookup_backend("numpy-interpreter")(_graph(), [tp.tensor(X), tp.tensor(Y)])
    (out,) = run(X, Y)
    np.testing.assert_array_equal(out, (X + Y) * Y)
    assert tpc.get_backend_capabilities("numpy-interpreter").device_kind == "cpu"


# --- entry points --------------------------------------------------------------------------

ENTRY_POINT_SCRIPT = textwrap.dedent("""
    import json, numpy as np
    import tensorplay as tp
    import tensorplay.compiler as tpc
    from tensorplay.dialects.tp.graph import Graph
    from tensorplay.dialects.tp.types import TensorType as T
    import sys
    lazily_loaded = "tp_backend_demo" not in sys.modules
    listed = tpc.list_backends(exclude_tags=None)
    g = Graph("via_entry_point")
    x = g.add_input(T((3,), tp.float32))
    g.set_outputs([g.add1("tp.mul", [x, x])])
    run = tpc.lookup_backend("demo-numpy")(g, [])
    out = run(np.array([1.0, 2.0, 3.0], np.float32))[0]
    import tp_backend_demo
    print(json.dumps({"lazy": lazily_loaded, "listed": listed, "out": out.tolist(),
                      "compiled": tp_backend_demo.compiled_graphs,
                      "hidden_by_tag": "demo-numpy" not in tpc.list_backends(exclude_tags=("demo",)),
                      "caps": tpc.get_backend_capabilities("demo-numpy").description}))
""")


def test_backend_from_an_installed_entry_point_distribution(tmp_path):
    pytest.importorskip("setuptools", reason="building the test distribution needs setuptools")
    source = tmp_path / "src"
    shutil.copytree(ROOT / "tests" / "data" / "tp_backend_dist", source)  # the build writes next to it
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                              "--no-index", "--quiet", "--target", str(target), str(source)],
                             capture_output=True, text=True)
    if install.returncode != 0:
        pytest.skip(f"pip cannot build the test distribution offline here: {install.stderr[-500:]}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", ENTRY_POINT_SCRIPT], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["lazy"] is True
    assert "demo-numpy" in result["listed"]
    assert result["out"] == [1.0, 4.0, 9.0]
    assert result["compiled"] == ["via_entry_point"]
    assert result["hidden_by_tag"] is True
    assert result["caps"] == "numpy reference semantics (third-party demo)"
