"""Compile modes and options: the mode table, option validation, every flag accepted by
iree-compile 3.13, and the two non-default modes compiling a small MLP that matches eager."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay.compiler.backends import iree
from tensorplay.compiler.backends.eager import interpret
from tensorplay.compiler.backends.modes import MODES, OPTIONS, compile_flags, resolve_options, validate_options
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType as T


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path_factory.mktemp("tp-cache")))
        yield


def test_list_mode_options_returns_each_modes_patch():
    table = tpc.list_mode_options()
    assert set(table) == {"default", "reduce-overhead", "max-autotune"}
    assert table["default"] == {}
    assert tpc.list_mode_options("reduce-overhead") == {"runtime_driver": "local-sync"}
    assert tpc.list_mode_options("max-autotune")["opt_level"] == "O3"
    table["default"]["opt_level"] = "O0"       # a copy: the modes stay as they were
    assert tpc.list_mode_options("default") == {}
    with pytest.raises(ValueError, match="unknown compile mode 'turbo'; modes: default, reduce-overhead, "
                                         "max-autotune"):
        tpc.list_mode_options("turbo")


def test_resolve_options_follows_torch_compile_rules():
    assert resolve_options(None, None) == {}
    assert resolve_options("default", None) == {}
    assert resolve_options("max-autotune", None) == MODES["max-autotune"]
    assert resolve_options(None, {"opt_level": "O1"}) == {"opt_level": "O1"}
    with pytest.raises(ValueError, match="either mode or options, not both"):
        resolve_options("default", {})
    with pytest.raises(ValueError, match="unknown compile mode 'fast'"):
        resolve_options("fast", None)
    with pytest.raises(ValueError, match="unknown compile option 'opt'; options: opt_level, data_tiling"):
        resolve_options(None, {"opt": "O3"})


@pytest.mark.parametrize("options, message", [
    ({"opt_level": "O7"}, "'opt_level' expects one of O0, O1, O2, O3, got 'O7'"),
    ({"data_tiling": "yes"}, "'data_tiling' expects a bool"),
    ({"ukernels": "mmt4d,bogus"}, "'ukernels' expects"),
    ({"runtime_driver": "vulkan"}, "'runtime_driver' expects one of auto, local-sync, local-task"),
    ({"extra_flags": ["-O3"]}, "'extra_flags' expects a list of '--iree-...' strings"),
    ({"target_cpu": ""}, "'target_cpu' expects"),
])
def test_bad_option_values_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        validate_options(options)


SAMPLE_VALUES = {"opt_level": ["O0", "O1", "O2", "O3"], "data_tiling": [True, False],
                 "ukernels": ["default", "none", "all", "mmt4d,pack"], "aggressive_fusion": [True, False],
                 "runtime_driver": ["auto", "local-sync", "local-task"], "target_cpu": ["host", "znver4"],
                 "cuda_target": ["sm_80"], "rocm_target": ["gfx942"], "vulkan_target": ["rdna3"],
                 "extra_flags": [["--iree-opt-const-eval=false"]]}


def test_every_mode_and_option_maps_to_flags_iree_accepts():
    from iree.compiler.api import Session

    assert set(SAMPLE_VALUES) == set(OPTIONS)
    option_sets = [dict(patch) for patch in MODES.values()]
    option_sets += [{key: value} for key, values in SAMPLE_VALUES.items() for value in values]
    checked = set()
    for backend in iree.TARGETS:
        for options in option_sets:
            flags = tuple(iree.get_iree_backend(backend).flags(validate_options(options)))
            if flags in checked:
                continue
            checked.add(flags)
            session = Session()
            try:
                session.set_flags(*flags)    # raises on an unknown flag or a bad value
            finally:
                session.close()
    assert compile_flags({"ukernels": "all"}, "vulkan-spirv") == []
    assert "--iree-llvmcpu-enable-ukernels=all" in compile_flags({"ukernels": "all"}, "llvm-cpu")
    assert "--iree-rocm-enable-ukernels=all" in compile_flags({"ukernels": "all"}, "rocm")


def mlp():
    g = Graph("mode_mlp")
    x = g.add_input(T((8, 32), tp.float32))
    w1 = g.add_input(T((32, 32), tp.float32))
    b1 = g.add_input(T((32,), tp.float32))
    w2 = g.add_input(T((32, 16), tp.float32))
    h = g.add1("tp.relu", [g.add1("tp.add", [g.add1("tp.matmul", [x, w1]), b1])])
    g.set_outputs([g.add1("tp.matmul", [h, w2])])
    return g


@pytest.mark.iree
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_modes_compile_and_match_eager(mode):
    graph = mlp()
    driver = "local-sync" if mode == "reduce-overhead" else iree.choose_cpu_driver(graph)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]
    run = tpc.lookup_backend("iree-cpu")(graph, [], options=resolve_options(mode, None))
    assert run.program.driver == driver
    (out,) = run(*arrays)
    np.testing.assert_allclose(out, interpret(graph, arrays)[0], rtol=1e-4, atol=1e-4)
