"""Lowered elementwise chains over broadcast operands do not materialize the broadcasts, so
IREE fuses the whole chain into one dispatch; a reduction one op reads through two indexing
maps is kept out of that op's dispatch (IREE 3.13 computes such a fused dispatch wrongly)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.backends.iree import get_iree_backend
from tensorplay.dialects.tp import mlir as M
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType
from tensorplay.passes import run_pipeline


def _chain() -> Graph:
    g = Graph("chain")
    x = g.add_input(TensorType((64, 128), tp.float32))
    bias = g.add_input(TensorType((128,), tp.float32))
    scale = g.add_input(TensorType((64, 1), tp.float32))
    y = g.add1("tp.add", [x, bias])
    y = g.add1("tp.mul", [y, scale])
    y = g.add1("tp.gelu", [y], {"approximate": "tanh"})
    y = g.add1("tp.sub", [y, bias])
    g.set_outputs([g.add1("tp.exp", [y])])
    return g


def _lowered_text() -> str:
    module = M.emit(_chain())
    run_pipeline(module, "tp-to-linalg")
    return M.print_module(module)


def test_broadcast_operands_are_never_materialized():
    text = _lowered_text()
    assert "linalg.broadcast" not in text
    assert "tp." not in text.replace("tensor<", "")  # every tp op is lowered
    # every generic reads the bias and scale at their own shapes
    for ins in re.findall(r"ins\(([^)]*)\)", text):
        types = ins.split(":")[1]
        assert "tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>" not in types
    assert "tensor<128xf32>" in text and "tensor<64x1xf32>" in text


@pytest.mark.iree
def test_iree_fuses_the_chain_into_one_dispatch():
    iree_compiler = pytest.importorskip("iree.compiler")
    # the iree-compile tool, not the backends' in-process compile: the dispatches are counted
    # in the flow-level IR, and --compile-to (stop after a phase, print the IR) is a flag of
    # the tool only (iree.compiler.api has no such option)
    flags = [*get_iree_backend("iree-cpu").flags(), "--compile-to=flow"]
    flow = iree_compiler.compile_str(_lowered_text(), extra_args=flags).decode()
    dispatches = re.findall(r"flow\.dispatch @", flow)
    assert len(dispatches) == 1, flow


def _lowered(graph: Graph) -> str:
    module = M.emit(graph)
    run_pipeline(module, "tp-to-linalg")
    return M.print_module(module)


def test_a_reduction_read_through_two_maps_is_fenced_from_its_reader():
    g = Graph("pairwise")
    x = g.add_input(TensorType((7, 4), tp.float32))
    s = g.add1("tp.sum", [x], {"dims": [1]})
    rows = g.add1("tp.reshape", [s], {"shape": (1, 7)})
    cols = g.add1("tp.reshape", [s], {"shape": (7, 1)})
    g.set_outputs([g.add1("tp.add", [rows, cols])])
    assert _lowered(g).count("iree_tensor_ext.compute_barrier") == 1
    # read through one map (as layer_norm reads its mean), the reduction still fuses
    same = Graph("centered")
    y = same.add_input(TensorType((7, 4), tp.float32))
    mean = same.add1("tp.mean", [y], {"dims": [1], "keepdim": True})
    same.set_outputs([same.add1("tp.mul", [same.add1("tp.sub", [y, mean]), mean])])
    assert "iree_tensor_ext.compute_barrier" not in _lowered(same)


@pytest.mark.iree
def test_reductions_read_as_rows_and_columns_compile_to_the_eager_result():
    pytest.importorskip("iree.compiler")

    def pairwise(x):
        sq = (x * x).sum(-1)
        return (sq[:, None] + sq[None, :] - 2 * x @ x.t(), x.sum(-1, keepdim=True) + x.amax(-1, keepdim=True).t(),
                tp.outer(x.sum(0), x.sum(0)))

    x = tp.tensor(np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32))
    tp.compiler.reset()
    try:
        for got, want in zip(tp.compile(pairwise, fullgraph=True)(x), pairwise(x)):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    finally:
        tp.compiler.reset()


def test_a_matmul_reads_a_transposed_operand_through_its_maps():
    # x @ w.t() (every nn.Linear) and q @ k.transpose(-2, -1) (attention): no transpose is
    # left for IREE to run or to fold into its data-tiling packs
    g = Graph("linear_attention")
    x = g.add_input(TensorType((6, 8), tp.float32))
    w = g.add_input(TensorType((5, 8), tp.float32))
    q = g.add_input(TensorType((2, 3, 4, 8), tp.float32))
    k = g.add_input(TensorType((2, 3, 7, 8), tp.float32))
    lin = g.add1("tp.matmul", [x, g.add1("tp.permute", [w], {"dims": [1, 0]})])
    att = g.add1("tp.matmul", [q, g.add1("tp.permute", [k], {"dims": [0, 1, 3, 2]})])
    # a transposed lhs, and a transpose that also feeds another op (it stays for that one)
    wt = g.add1("tp.permute", [w], {"dims": [1, 0]})
    lhs = g.add1("tp.matmul", [g.add1("tp.permute", [x], {"dims": [1, 0]}), x])
    g.set_outputs([lin, att, lhs, g.add1("tp.matmul", [x, wt]), g.add1("tp.exp", [wt])])
    text = _lowered(g)
    assert text.count("linalg.transpose") == 1, text  # only the one exp reads
    assert "linalg.matmul" in text and "linalg.batch_matmul" in text


@pytest.mark.iree
def test_matmuls_of_transposed_operands_compile_to_the_eager_result():
    pytest.importorskip("iree.compiler")
    rng = np.random.default_rng(1)

    def f(x, w, q, k, v):
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        return (tp.nn.functional.linear(x, w), att @ v, w @ x.t(), x.t() @ x, q[0].transpose(-2, -1) @ q[0],
                x @ w.t().t().t())

    args = [tp.tensor(rng.standard_normal(s).astype(np.float32))
            for s in ((6, 8), (5, 8), (2, 3, 4, 8), (2, 3, 7, 8), (2, 3, 7, 8))]
    tp.compiler.reset()
    try:
        for options in (None, {"opt_level": "O2", "data_tiling": True}):
            compiled = tp.compile(f, fullgraph=True, options=options)
            for got, want in zip(compiled(*args), f(*args)):
                np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    finally:
        tp.compiler.reset()


def test_the_transpose_of_a_product_is_the_product_in_the_other_order():
    # a weight's gradient (x^T g)^T: IREE folds a transpose after a matmul into a contraction
    # whose operands it reads in a slow order, so (A B)^T is lowered as B^T A^T, no transpose
    g = Graph("weight_gradient")
    x = g.add_input(TensorType((64, 30), tp.float32))
    grad = g.add_input(TensorType((64, 20), tp.float32))
    product = g.add1("tp.matmul", [g.add1("tp.permute", [x], {"dims": [1, 0]}), grad])
    g.set_outputs([g.add1("tp.permute", [product], {"dims": [1, 0]})])
    text = _lowered(g)
    assert "linalg.transpose" not in text.split("linalg.matmul")[-1], text
    assert re.search(r"linalg\.matmul .*ins\(%arg1, %arg0 : tensor<64x20xf32>, tensor<64x30xf32>\) "
                     r"outs\(%\S+ : tensor<20x30xf32>\)", text), text


@pytest.mark.iree
@pytest.mark.parametrize("dynamic", [False, True])
def test_transposed_products_compile_to_the_eager_result(dynamic):
    pytest.importorskip("iree.compiler")
    rng = np.random.default_rng(2)

    def f(x, g, h):
        p = x @ g.t()
        return ((x.t() @ h).t(), (x @ g.t()).t(), (x.t() @ h.t().t()).t() * 2, p.t() + 1, p,
                (h.half().t() @ x.half()).t())

    args = [tp.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((16, 9), (7, 9), (16, 5))]
    compiled = tp.compile(f, fullgraph=True, dynamic=dynamic)
    for got, want in zip(compiled(*args), f(*args)):
        tol = 1e-2 if want.dtype == tp.float16 else 1e-5
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=tol, atol=tol)
    # a training step's weight gradients take that path: equal to eager's
    tp.manual_seed(4)
    model = tp.nn.Sequential(tp.nn.Linear(9, 12), tp.nn.GELU(), tp.nn.Linear(12, 3))
    x = args[0]
    model(x).square().sum().backward()
    eager = [p.grad for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    tp.compile(model, dynamic=dynamic)(x).square().sum().backward()
    for p, want in zip(model.parameters(), eager):
        np.testing.assert_allclose(p.grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.iree
def test_a_strided_slice_update_read_by_a_pad_or_a_padded_convolution_compiles_to_the_eager_result():
    # the input gradient of a strided convolution: the gradient spread out by the stride, padded
    # (IREE 3.13 folded the pad into the insert and dropped its strides when two outer dims exceed 1)
    pytest.importorskip("iree.compiler")
    from tensorplay import _dispatch

    rng = np.random.default_rng(2)

    def spread(g):
        z = tp.zeros(4, 6, 7, 7)
        return _dispatch.apply("tp.slice_update", z, g, starts=(0, 0, 0, 0), ends=(4, 6, 7, 7), steps=(1, 1, 2, 2))

    def f(g, w):
        s = spread(g)
        return (_dispatch.apply("tp.pad", s, low=(0, 0, 2, 1), high=(0, 0, 1, 2)),
                tp.nn.functional.conv2d(spread(g * 2), w, padding=1, groups=2))

    g = tp.tensor(rng.standard_normal((4, 6, 4, 4)).astype(np.float32))
    w = tp.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    (graph,) = tp.compiler.explain(f, g, w).graphs
    assert _lowered(graph).count("iree_tensor_ext.compute_barrier") == 2  # each strided insert, before its pad
    tp.compiler.reset()
    try:
        for got, want in zip(tp.compile(f, fullgraph=True)(g, w), f(g, w)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        tp.compiler.reset()



def _product_then(reduce: str, a: tuple, b: tuple, dims: list) -> Graph:
    g = Graph("weighted")
    x = g.add_input(TensorType(a, tp.float32))
    v = g.add_input(TensorType(b, tp.float32))
    g.set_outputs([g.add1(reduce, [g.add1("tp.mul", [x, v])], {"dims": dims})])
    return g


def test_a_product_broadcast_over_part_of_the_reduced_dims_is_fenced_from_the_reduction():
    fenced = [((2, 5), (5,), [0, 1]), ((2, 3, 5), (5,), [1, 2]), ((2, 5), (2, 1), [0, 1])]
    fused = [((2, 5), (2, 5), [0, 1]), ((2, 5), (5,), [0]), ((4, 3, 5), (3, 5), [1, 2])]
    for reduce in ("tp.sum", "tp.mean"):
        for a, b, dims in fenced:
            assert "iree_tensor_ext.compute_barrier" in _lowered(_product_then(reduce, a, b, dims)), (reduce, a, b, dims)
        for a, b, dims in fused:
            assert "iree_tensor_ext.compute_barrier" not in _lowered(_product_then(reduce, a, b, dims)), (reduce, a, b, dims)


@pytest.mark.iree
def test_weighted_sums_compile_to_the_eager_result():
    # (x * v).sum() with v broadcast over rows: IREE 3.13 failed every such compile before
    pytest.importorskip("iree.compiler")
    rng = np.random.default_rng(3)

    def f(x, v, y):
        return (x * v).sum(), (x * v).mean(), (y * v).sum(dim=(1, 2)), (y * v).sum()

    args = [tp.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((6, 40), (40,), (3, 6, 40))]
    tp.compiler.reset()
    try:
        for got, want in zip(tp.compile(f, fullgraph=True)(*args), f(*args)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        tp.compiler.reset()


@pytest.mark.iree
def test_a_fence_keeps_its_dispatches_apart_without_a_host_wait():
    """A fence splits dispatches and is erased after: the program is still one queue submission
    (an optimization barrier left a host wait and a second submission per fence)."""
    from iree import compiler as iree_compiler

    g = Graph("pairs")
    x = g.add_input(TensorType((7, 4), tp.float32))
    s = g.add1("tp.sum", [x], {"dims": [1]})
    g.set_outputs([g.add1("tp.add", [g.add1("tp.reshape", [s], {"shape": (1, 7)}),
                                     g.add1("tp.reshape", [s], {"shape": (7, 1)})])])
    text = _lowered(g)
    assert text.count("iree_tensor_ext.compute_barrier") == 1
    flags = [*get_iree_backend("iree-cpu").flags(), "--compile-to=vm"]
    vm = iree_compiler.compile_str(text, extra_args=flags).decode()
    calls = re.findall(r"vm\.call[.a-z]* @(hal\.[a-z_.]+)", vm)
    assert calls.count("hal.command_buffer.dispatch") == 2, "the fence no longer splits the dispatches"
    assert calls.count("hal.device.queue.execute.indirect") == 1, "the fence costs a queue submission"
    assert calls.count("hal.fence.await") == 1, "the fence costs a host wait"


def _splat_reductions(x, b, u):
    """Reductions of tensors holding one repeated value: fills, and integers or bools compared
    or combined with themselves or their negation, which IREE folds to fills."""
    ones = tp.ones_like(x)
    return (ones.sum(), ones.sum(1), ones.sum(0), ones.mean(), (ones * 2).prod(1),
            tp.full_like(x, 3.0).amax(1), ones.reshape(-1).sum(), (ones + 1).sum(1, keepdim=True),
            (b == b).sum(1), (b <= b).sum(), (~b != b).sum(1), (b | ~b).sum(1),
            tp.logical_or(b > 0, tp.logical_not(b > 0)).sum(1), (b ^ ~b).sum(0)) + (
        # uint8's all-ones; not on a Vulkan device without 8-bit storage, where (~u).sum(1)
        # of a uint8 u is wrong by itself (docs/limitations.md)
        () if u is None else ((u | ~u).sum(1),))


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", pytest.param("iree-vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_reductions_of_splats_compile_to_the_eager_result(backend, dynamic):
    # IREE 3.13 folds the reduction of a fill over the innermost dim to the fill's value
    # (ones(7, 5).sum(1) gave ones, .sum() gave 5), and folds x == x to such a fill: the
    # lowering fences a splat from the reduction reading it, and tp-canonicalize makes the
    # self-comparisons fills
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(f"{backend} unavailable here: {caps.reason}")
    rng = np.random.default_rng(0)
    x = tp.tensor(rng.standard_normal((7, 5)).astype(np.float32))
    b = tp.tensor(rng.integers(-5, 5, (7, 5)).astype(np.int32))
    narrow = backend == "iree-cpu" or all(caps.extra.get("vulkan_features", {}).values())
    u = b.to(tp.uint8) if narrow else None
    tp.compiler.reset()
    try:
        got = tp.compile(_splat_reductions, backend=backend, fullgraph=True, dynamic=dynamic)(x, b, u)
        for i, (g, w) in enumerate(zip(got, _splat_reductions(x, b, u))):
            np.testing.assert_array_equal(g.cpu().numpy(), w.numpy(), err_msg=f"result {i}")
    finally:
        tp.compiler.reset()


@pytest.mark.iree
def test_a_mask_combined_with_itself_and_compared_reduces_to_the_eager_count():
    # ((x >= 0.5) & (x >= 0.5)) == (x >= 0.5), summed over (1, 6, 3): IREE 3.13 folded it to a
    # splat itself and counted 3, not 18 (program fuzzer seed 0, 3463); tp-canonicalize
    # makes b & b (and two equal comparisons) one value, so the comparison becomes a fill
    def f(x):
        m = x >= 0.5
        return ((m & m) == m).sum(), ((m * m) == m).float().mean(), (((x >= 0.5) & (x >= 0.5)) == (x >= 0.5)).sum()

    x = tp.tensor(np.random.default_rng(4).uniform(-3, 3, (1, 6, 3)).astype(np.float32))
    tp.compiler.reset()
    try:
        for g, w in zip(tp.compile(f, fullgraph=True)(x), f(x)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    finally:
        tp.compiler.reset()


@pytest.mark.iree
def test_a_where_between_a_bool_and_its_float_cast_compiles():
    # where(b.float() > 0, b, b.float()) is b.float(): IREE 3.13 found that after forming
    # dispatches and mixed up the results of the dispatch computing it with a sibling cast
    # ("'tensor.expand_shape' op expected collapsed type to be 'tensor<f32>', but got
    # 'tensor<i64>'"; program fuzzer seed 0, 2930); tp-canonicalize folds it first
    def f(b):
        v0 = b.to(tp.float32)
        v1 = tp.where(v0 > 0, b, v0)
        v2 = b.to(tp.int64)
        v3 = v1.reshape(1, 1, 1, 1)
        return v0, v1, v2, v3, v3.float().mean()

    tp.compiler.reset()
    try:
        for b in (tp.tensor(True), tp.tensor(False)):
            for g, w in zip(tp.compile(f, fullgraph=True)(b), f(b)):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    finally:
        tp.compiler.reset()


def test_self_comparisons_of_integers_become_fills_and_splats_are_fenced_from_reductions():
    g = Graph("splats")
    x = g.add_input(TensorType((7, 5), tp.int32))
    f = g.add_input(TensorType((7, 5), tp.float32))
    eq = g.add1("tp.eq", [x, x])
    feq = g.add1("tp.eq", [f, f])  # NaN != NaN: a float compared with itself stays
    g.set_outputs([g.add1("tp.sum", [eq], {"dims": (1,), "keepdim": False}),
                   g.add1("tp.sum", [feq], {"dims": (1,), "keepdim": False})])
    module = M.emit(g)
    run_pipeline(module, "tp-optimize")
    text = M.print_module(module)
    assert text.count('"tp.full"') == 1 and text.count('"tp.eq"') == 1, text
    run_pipeline(module, "convert-tp-to-linalg")
    lowered = M.print_module(module)
    assert lowered.count("iree_tensor_ext.compute_barrier.start") == 1, lowered


def test_self_comparison_check_reads_operands_only_of_negations():
    # 3 - x with 3 a tp.constant: the check looked at the constant's first operand (it has
    # none) and tp-canonicalize failed with IndexError (fuzzer seed 0, index 2)
    g = Graph("constant_operand")
    x = g.add_input(TensorType((), tp.int64))
    three = g.add1("tp.constant", [], {"value": np.asarray(3, np.int64)})
    g.set_outputs([g.add1("tp.sub", [three, x]), g.add1("tp.sub", [x, three])])
    module = M.emit(g)
    run_pipeline(module, "tp-canonicalize")
    assert M.print_module(module).count('"tp.sub"') == 2
