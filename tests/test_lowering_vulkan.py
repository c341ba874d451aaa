"""convert-tp-to-linalg on IREE's Vulkan (SPIR-V) backend, differentially: one recorded call
of each (op, operand dtypes) pair in the dtypes iree-vulkan supports, lowered with the
SPIR-V pipeline (no float64 intermediates, int64 division by shift-and-subtract, outer-dim
reductions not fused with their consumers), compiled for vulkan-spirv, run on the Vulkan
device (Mesa's lavapipe in CI) and compared with the op's reference implementation. The
same lowering options are also checked on llvm-cpu, so they are tested where no Vulkan
device exists."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.backends.iree import TARGETS, bind, compile_mlir, get_iree_backend, lowering_pipeline
from tensorplay.compiler.backends.widening import widen_io
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp.graph import Graph
from tensorplay.passes import run_pipeline
from tensorplay.runtime import Program
from tests.test_lowering import CALLS, LOWERED_TOLERANCE, _graph

pytest.importorskip("iree.runtime")

VULKAN = TARGETS["iree-vulkan"]
VULKAN_DTYPES = set(VULKAN.dtypes)
#: the SPIR-V lowering: tp-to-linalg with Vulkan's convert-tp-to-linalg options
LOWERING_PIPELINE_SPIRV = lowering_pipeline(VULKAN)


def _pairs():
    """The first recorded call of each (op, operand dtypes) pair Vulkan can take."""
    seen, keep = set(), []
    for c in CALLS:
        types = [t for t in (*c.types, *c.result_types) if t is not None]
        if any(t.dtype.name not in VULKAN_DTYPES for t in types):
            continue
        key = (c.op.name, tuple(None if t is None else t.dtype for t in c.types))
        if key not in seen:
            seen.add(key)
            keep.append(c)
    return keep


PAIRS = _pairs()
#: functions per IREE module (SPIR-V compile time grows faster than the module)
MODULE_SIZE = 60
CHUNKS = [PAIRS[i:i + MODULE_SIZE] for i in range(0, len(PAIRS), MODULE_SIZE)]


def _compile(calls, backend: str):
    prepared = [widen_io(_graph(i, c), VULKAN.io_widening) for i, c in enumerate(calls)]
    module = M.emit([p.graph for p in prepared])
    run_pipeline(module, LOWERING_PIPELINE_SPIRV)
    be = get_iree_backend(backend)
    vmfb = compile_mlir(M.print_module(module), be.flags(), backend=backend, name="ops")
    return prepared, vmfb


def _check(calls, prepared, program) -> list[str]:
    failures = []
    for i, (c, p) in enumerate(zip(calls, prepared)):
        where = f"{c.op.name} {[None if x is None else str(x) for x in c.types]} {c.attrs}"
        run = bind(program, p, f"f{i}", results="host")
        results = run(*[a for a in c.operands if a is not None])
        expected = c.op.evaluate(c.operands, c.attrs, c.result_types)
        for r, e, t in zip(results, expected, c.result_types):
            if t.dtype is tp.uint8 and r.dtype == np.int8:
                r = r.view(np.uint8)
            if r.shape != e.shape or r.dtype != e.dtype:
                failures.append(f"{where}: got {r.dtype}{list(r.shape)}, expected {e.dtype}{list(e.shape)}")
            elif t.dtype.is_floating_point:
                rtol, atol = LOWERED_TOLERANCE[t.dtype]
                if not np.allclose(r.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
                    failures.append(f"{where}: max diff {np.nanmax(np.abs(r.astype(np.float64) - e.astype(np.float64)))}")
            elif not np.array_equal(r, e):
                failures.append(f"{where}: integer results differ")
    return failures


def _vulkan():
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan unavailable here: {caps.reason}")


def test_the_spirv_pipeline_is_the_registered_one_with_vulkans_lowering_options():
    assert LOWERING_PIPELINE_SPIRV == ("tp-optimize,convert-tp-to-linalg{float64=false int64-division=false "
                                       "fuse-outer-reductions=false depthwise-conv=false conv-by-columns=false},"
                                       "canonicalize,cse")
    assert lowering_pipeline(TARGETS["iree-cpu"]) == "tp-to-linalg"


def test_the_sample_covers_every_lowered_op():
    ops = {c.op.name for c in CALLS}
    assert ops - {c.op.name for c in PAIRS} <= {c.op.name for c in CALLS
                                                  if all(t is None or t.dtype.name not in VULKAN_DTYPES
                                                         for t in c.types)}
    assert len(PAIRS) > 400


@pytest.mark.vulkan
@pytest.mark.parametrize("chunk", range(len(CHUNKS)))
def test_lowered_ops_match_reference_on_vulkan(chunk):
    _vulkan()
    calls = CHUNKS[chunk]
    prepared, vmfb = _compile(calls, "iree-vulkan")
    failures = _check(calls, prepared, Program(vmfb, "vulkan", name="ops"))
    assert not failures, f"{len(failures)} of {len(calls)} calls differ:\n" + "\n".join(failures[:30])


# the SPIR-V lowering options where no Vulkan device is needed: the ops they change, on llvm-cpu
# (not log10: its float32 form there is math.log10, which llvm-cpu cannot link)
CHANGED = {"tp.pow", "tp.arange", "tp.abs", "tp.floor_div", "tp.trunc_div", "tp.remainder",
           "tp.fmod", "tp.div", "tp.avg_pool2d", "tp.softmax", "tp.log_softmax", "tp.amax", "tp.sum"}


@pytest.mark.iree
def test_spirv_lowering_options_on_cpu():
    calls = [c for c in PAIRS if c.op.name in CHANGED]
    assert {c.op.name for c in calls} == CHANGED
    prepared, vmfb = _compile(calls, "iree-cpu")
    failures = _check(calls, prepared, Program(vmfb, "local-sync", name="ops"))
    assert not failures, f"{len(failures)} of {len(calls)} calls differ:\n" + "\n".join(failures[:30])


def _fenced(fn_graph: Graph) -> str:
    module = M.emit([fn_graph])
    run_pipeline(module, LOWERING_PIPELINE_SPIRV)
    return M.print_module(module)


def test_outer_reductions_are_fenced_from_their_consumers():
    from tensorplay.dialects.tp import dtypes as dt
    from tensorplay.dialects.tp.types import TensorType

    g = Graph("center")
    x = g.add_input(TensorType((3, 20), dt.float32))
    g.set_outputs([g.add1("tp.sub", [x, g.add1("tp.amax", [x], {"dims": [0], "keepdim": True})], {})])
    text = _fenced(g)
    assert text.count("iree_tensor_ext.compute_barrier") == 1
    inner = Graph("rows")
    y = inner.add_input(TensorType((3, 20), dt.float32))
    inner.set_outputs([inner.add1("tp.sub", [y, inner.add1("tp.amax", [y], {"dims": [1], "keepdim": True})], {})])
    assert "iree_tensor_ext.compute_barrier" not in _fenced(inner)  # a trailing-dim reduction fuses
    # with a dynamic size the barrier takes the size as an operand
    d = Graph("dynamic")
    z = d.add_input(TensorType((3, None), dt.float32))
    d.set_outputs([d.add1("tp.sub", [z, d.add1("tp.amax", [z], {"dims": [0], "keepdim": True})], {})])
    text = _fenced(d)
    (line,) = [ln for ln in text.splitlines() if "iree_tensor_ext.compute_barrier" in ln]
    assert "tensor<?xf32>{%" in line, line  # (the amax before its keepdim reshape)


@pytest.mark.vulkan
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions_over_outer_dims_feed_their_consumers_correctly_on_vulkan(dim, dynamic):
    _vulkan()

    def fn(t):
        return t - t.mean(dim, keepdim=True), tp.nn.functional.log_softmax(t, dim=dim), t / t.abs().amax(dim, keepdim=True)

    tp.compiler.reset()
    try:
        compiled = tp.compile(fn, backend="iree-vulkan", dynamic=dynamic)
        for k, shape in enumerate([(3, 40, 6), (2, 20, 9), (5, 8, 3)] if dynamic else [(3, 40, 6)]):
            x = tp.tensor(np.random.default_rng(k).standard_normal(shape).astype(np.float32))
            for g, w in zip(compiled(x), fn(x)):
                np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=2e-5, atol=2e-5)
        assert compiled.compile_count == 1
    finally:
        tp.compiler.reset()
