"""Eager autograd (docs/autograd.md): every differentiable case of the op table against
PyTorch's autograd and against finite differences in float64, second order for the
elementwise, reduction, matmul and normalization families, and the engine's behaviour
(accumulation, hooks, modes, in-place changes, custom Functions) with PyTorch's errors."""

from __future__ import annotations

import importlib.util
import zlib

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.dialects.tp import all_ops
from tests.opinfo import ALL, OpInfo, to_lib

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (optional oracle)")


def test_every_op_has_a_gradient_rule_or_declares_none():
    missing = sorted(op.name for op in all_ops() if op.differentiable and op.vjp is None)
    assert not missing, f"differentiable tp ops without a gradient rule (Op.vjp): {missing}"


def test_one_rule_context_for_eager_and_compiled_gradients(monkeypatch):
    # the same rule is given the engine's Node eagerly and the differentiator's context when
    # a compiled call is traced: both are RuleContexts
    from tensorplay.autograd.rule_context import RuleContext

    sin = type(tp.dialects.tp.registry.lookup("tp.sin"))
    rule, seen = sin.vjp, []

    def recording(self, ctx, grads):
        seen.append((type(ctx).__name__, isinstance(ctx, RuleContext)))
        return rule(self, ctx, grads)

    monkeypatch.setattr(sin, "vjp", recording)
    x = tp.randn(3, requires_grad=True)
    x.sin().sum().backward()
    tp.compile(lambda t: t.sin().sum(), backend="eager")(x).backward()
    assert {name for name, _ in seen} == {"Node", "_RuleContext"} and all(ok for _, ok in seen), seen


# --- the op table against PyTorch ---------------------------------------------------------------

def _float64_cases():
    for info in ALL:
        if tp.float64 in info.dtypes and info.compare_values:
            yield pytest.param(info, id=info.name)


def _samples(info: OpInfo):
    rng = np.random.default_rng(zlib.crc32(f"{info.name}-grad".encode()))
    return list(info.samples(rng, tp.float64))


def _leaves(lib, args, requires):
    """The sample's arguments as ``lib`` tensors; float arrays require grad."""
    out, leaves = [], []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype == np.float64 and requires:
            t = tp.tensor(a, requires_grad=True) if lib is tp else lib.tensor(a, requires_grad=True)
            leaves.append(t)
            out.append(t)
        elif isinstance(a, (list, tuple)) and any(isinstance(v, np.ndarray) for v in a):
            inner, more = _leaves(lib, a, requires)
            out.append(type(a)(inner))
            leaves += more
        else:
            out.append(to_lib(lib, a))
    return out, leaves


def _float_outputs(value):
    if isinstance(value, (tuple, list)):
        return [o for v in value for o in _float_outputs(v)]
    if hasattr(value, "dtype") and hasattr(value, "requires_grad") and value.dtype.is_floating_point:
        return [value]
    return []


def _loss(lib, outs, seed):
    """A scalar that weighs every output element by a fixed random cotangent."""
    rng = np.random.default_rng(seed)
    total = None
    for o in outs:
        w = rng.uniform(0.5, 1.5, size=tuple(o.shape))
        w = tp.tensor(w, dtype=o.dtype) if lib is tp else lib.tensor(w, dtype=o.dtype)
        term = (o * w).sum()
        total = term if total is None else total + term
    return total


def _grads(lib, info, sample, seed):
    args, leaves = _leaves(lib, sample.args, True)
    kwargs = {k: to_lib(lib, v) for k, v in sample.kwargs.items()}
    outs = [o for o in _float_outputs(info.fn(lib, *args, **kwargs)) if o.requires_grad]
    if not outs or not leaves:
        return None, leaves
    _loss(lib, outs, seed).backward()
    return [None if t.grad is None else t.grad.detach().numpy() for t in leaves], leaves


@needs_torch
@pytest.mark.parametrize("info", list(_float64_cases()))
def test_gradients_match_pytorch(info):
    import torch

    checked = 0
    for k, sample in enumerate(_samples(info)):
        what = f"{info.name} {sample.desc}"
        try:
            theirs, _ = _grads(torch, info, sample, k)
        except RuntimeError:
            continue  # PyTorch does not differentiate this case (an in-place op on a leaf, an argument
            # it has no derivative for): compared where it does
        ours, _ = _grads(tp, info, sample, k)
        if theirs is None:
            assert ours is None or all(g is None for g in ours), f"{what}: PyTorch computes no gradient here"
            continue
        if ours is None:  # no path to the arguments: right where PyTorch's gradients are all zero
            assert all(b is None or not np.any(b) for b in theirs), f"{what}: no gradient, PyTorch has one"
            continue
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if b is None or not np.any(b):
                assert a is None or not np.any(a), f"{what}: argument {i} has a gradient, PyTorch's is none/zero"
                continue
            assert a is not None, f"{what}: argument {i} has no gradient"
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, equal_nan=True, err_msg=f"{what}: argument {i}")
        checked += 1
    if checked == 0:
        pytest.skip(f"{info.name}: no sample PyTorch differentiates")


# --- finite differences, no PyTorch -------------------------------------------------------------

#: cases whose results are not differentiable functions of their inputs by design
FD_NOT_APPLICABLE = {
    "nn_batch_norm_running_stats": "the running statistics are updated under no_grad (as PyTorch's), so no "
                                   "gradient flows from the batch into them",
}


def _fd_cases():
    for info in ALL:
        if tp.float64 in info.dtypes and info.compare_values and info.name not in FD_NOT_APPLICABLE:
            yield pytest.param(info, id=info.name)


@pytest.mark.parametrize("info", list(_fd_cases()))
def test_gradients_match_finite_differences(info):
    """Central differences; where the one-sided differences disagree the function has a kink
    or a jump there (relu at 0, floor, a tie of max), and that element is not compared. Cases
    with results below float64 are not compared either (a 1e-6 step is below their precision)."""
    checked = 0
    for k, sample in enumerate(_samples(info)[:3]):
        try:
            got, leaves = _grads(tp, info, sample, k)
        except RuntimeError as exc:
            if "in-place operation" in str(exc):
                continue  # an in-place op on a leaf, refused as PyTorch does
            raise
        if got is None:
            continue

        def loss_at(values):
            it = iter(values)
            args = [next(it) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a for a in sample.args]
            with tp.no_grad(), np.errstate(all="ignore"):
                outs = _float_outputs(info.fn(tp, *to_lib(tp, args), **sample.kwargs))
                return float(_loss(tp, outs, k).item()) if outs else 0.0

        with tp.no_grad():
            if any(o.dtype is not tp.float64 for o in _float_outputs(info.fn(tp, *to_lib(tp, sample.args),
                                                                             **sample.kwargs))):
                continue

        base = [t.detach().numpy().copy() for t in leaves]
        for i, g in enumerate(got):
            for j in range(min(base[i].size, 24)):
                eps = 1e-6
                up = [b.copy() for b in base]
                down = [b.copy() for b in base]
                up[i].flat[j] += eps
                down[i].flat[j] -= eps
                hi, mid, lo = loss_at(up), loss_at(base), loss_at(down)
                a, right, left = (hi - lo) / (2 * eps), (hi - mid) / eps, (mid - lo) / eps
                if not np.isfinite(a) or abs(right - left) > 1e-3 * max(1.0, abs(a)):
                    continue
                want = 0.0 if g is None else g.flat[j]
                assert abs(want - a) <= 1e-4 * max(1.0, abs(a)), \
                    f"{info.name} {sample.desc}: argument {i} element {j}: autograd {want}, differences {a}"
                checked += 1
    if checked == 0:
        pytest.skip(f"{info.name}: nothing differentiable to compare")


# --- second order -------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("family", ["elementwise", "reduction", "matmul", "normalization"])
def test_second_order_gradients_match_pytorch(family):
    import torch

    def f(lib, x, w):
        F = lib.nn.functional
        if family == "elementwise":
            return ((x.tanh() * x.exp()) / (1 + x * x) + x.sigmoid() ** 2).sum()
        if family == "reduction":
            return (x.logsumexp(1) * x.mean(0).sum()).sum() + x.var(1).sum() + x.prod(0).sum()
        if family == "matmul":
            return ((x @ w).tanh() @ w.transpose(0, 1)).sum()
        return (F.layer_norm(x, (x.shape[-1],)).softmax(-1) * F.log_softmax(x, -1)).sum()

    rng = np.random.default_rng(3)
    xv, wv = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(-1, 1, (4, 4))
    results = []
    for lib in (tp, torch):
        x, w = lib.tensor(xv, requires_grad=True), lib.tensor(wv, requires_grad=True)
        gx, gw = lib.autograd.grad(f(lib, x, w), (x, w), create_graph=True, allow_unused=True)
        total = (gx * gx).sum() + (0 if gw is None else (gw * gw).sum())
        hx, hw = lib.autograd.grad(total, (x, w), allow_unused=True)
        results.append([None if h is None else h.detach().numpy() for h in (hx, hw)])
    for ours, theirs in zip(*results):
        if theirs is None:
            assert ours is None or not np.any(ours)
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)


# --- the engine ---------------------------------------------------------------------------------

def test_gradients_accumulate_and_leaves_report_it():
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    assert x.is_leaf and not y.is_leaf and y.grad_fn.name() == "MulBackward0" and y.requires_grad
    y.sum().backward()
    first = x.grad
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])
    assert x.grad is first  # accumulated in place, as PyTorch
    assert not x.grad.requires_grad


def test_backward_errors_are_pytorchs():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        tp.tensor([1.0]).sum().backward()
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        x.numpy()
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tp.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        (x * 2).requires_grad = False


def test_retain_graph_allows_a_second_backward():
    x = tp.tensor([1.0, 2.0], dtype=tp.float64, requires_grad=True)
    y = (x.sin() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    want = 2 * (np.cos([1.0, 2.0]) * [1.0, 2.0] + np.sin([1.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_a_saved_tensor_changed_in_place_is_pytorchs_error():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    y = h * h  # saves h
    h.add_(1)
    assert h._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
        y.sum().backward()


def test_in_place_ops_on_non_leaves_are_differentiated():
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    h.mul_(x)  # h = x * x, recorded in place
    h[1] = h[1] * 10
    h.masked_fill_(tp.tensor([False, False, True]), 0.0)
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 40.0, 0.0])


def test_setitem_and_index_put_send_gradients_to_both_sides():
    x = tp.tensor(np.arange(6, dtype=np.float64).reshape(2, 3), requires_grad=True)
    v = tp.tensor([7.0, 8.0], requires_grad=True)
    y = x * 1
    y[:, 1] = v * 2
    (y * tp.tensor(np.arange(1.0, 7.0).reshape(2, 3))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 0.0, 3.0], [4.0, 0.0, 6.0]])
    np.testing.assert_allclose(v.grad.numpy(), [4.0, 10.0])


def test_hooks_retain_grad_and_detach():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    h = x * 3
    h.retain_grad()
    handle = h.register_hook(lambda g: seen.append(g.detach().numpy().copy()) or g * 2)
    x.register_hook(lambda g: g + 1)
    (h * h).sum().backward()
    np.testing.assert_allclose(seen[0], [6.0, 12.0])
    np.testing.assert_allclose(h.grad.numpy(), [12.0, 24.0])  # retain_grad sees the hooked gradient (last)
    np.testing.assert_allclose(x.grad.numpy(), [37.0, 73.0])  # 3 * (2 * g) + 1
    handle.remove()
    d = h.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    h2 = x * 2
    h2.detach_()
    assert h2.grad_fn is None and not h2.requires_grad


def test_grad_modes_as_context_managers_and_decorators():
    x = tp.tensor([1.0], requires_grad=True)
    with tp.no_grad():
        assert not (x * 2).requires_grad
        with tp.enable_grad():
            assert (x * 2).requires_grad
    with tp.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with tp.inference_mode():
        assert not (x * 2).requires_grad and tp.is_inference_mode_enabled()

    @tp.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad and (x * 2).requires_grad


def test_autograd_grad_leaves_dot_grad_alone_and_reports_unused():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    z = tp.tensor([1.0], requires_grad=True)
    (gx,) = tp.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(gx.numpy(), [2.0, 4.0])
    assert x.grad is None
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        tp.autograd.grad((x * 2).sum(), (x, z))
    gx, gz = tp.autograd.grad((x * 2).sum(), (x, z), allow_unused=True)
    assert gz is None
    gx, gz = tp.autograd.grad((x * 2).sum(), (x, z), materialize_grads=True)
    np.testing.assert_allclose(gz.numpy(), [0.0])


def test_custom_functions_run_their_backward():
    class Cube(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x ** 3 * scale, (x > 0)

        @staticmethod
        def backward(ctx, g, _mask_grad):
            (x,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return 3 * x * x * ctx.scale * g, None

    x = tp.tensor([1.0, -2.0], requires_grad=True)
    y, mask = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward" and not mask.requires_grad
    (y.sum() + x.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [7.0, 25.0])


def test_backward_from_two_outputs_of_one_node_reaches_the_leaves():
    # both roots share a backward node: it was counted twice as the leaves' producer, so the
    # leaves never became ready and got no gradient
    class Two(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = tp.tensor([1.0, -2.0], requires_grad=True)
    a, b = Two.apply(x)
    assert a.grad_fn is b.grad_fn
    tp.autograd.backward([a, b], [tp.ones(2), tp.full((2,), 2.0)])
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 8.0])


def test_broadcast_and_promoted_operands_get_gradients_in_their_own_shape_and_dtype():
    a = tp.tensor(np.ones((3, 1)), dtype=tp.float32, requires_grad=True)
    b = tp.tensor(np.ones(4), dtype=tp.float64, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.dtype is tp.float32
    assert b.grad.shape == (4,) and b.grad.dtype is tp.float64
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 4.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0))


def test_integer_results_and_comparisons_carry_no_gradient():
    x = tp.tensor([1.0, -2.0], requires_grad=True)
    assert not (x > 0).requires_grad and not x.argmax().requires_grad
    assert (x.to(tp.float32)).requires_grad and not x.to(tp.int64).requires_grad


@pytest.mark.iree
def test_compiled_calls_require_grad_like_eager_and_differentiate_like_eager():
    model = tp.nn.Linear(4, 3)
    compiled = tp.compile(model)
    x = tp.randn(2, 4)
    y = compiled(x)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    got = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for a, p in zip(got, model.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    with tp.no_grad():
        z = compiled(x)
    assert not z.requires_grad
    np.testing.assert_allclose(z.numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    def broken(a):  # a graph break: each segment's results carry that segment's backward
        b = a * 2
        return b.exp() if b.sum().item() > 0 else b

    a = tp.ones(3, requires_grad=True)
    tp.compile(broken)(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.exp(2 * np.ones(3)), rtol=1e-5)

    class Net(tp.nn.Module):  # which results require grad follows eager's dependencies
        def __init__(self):
            super().__init__()
            self.lin = tp.nn.Linear(2, 2)
            self.register_buffer("stat", tp.ones(2))

        def forward(self, x):
            return self.lin(x), self.stat * 2, x, self.lin(x) > 0

    net, x = Net(), tp.ones(1, 2)
    got, want = tp.compile(net)(x), net(x)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [True, False, False, False]
    assert got[2] is x
    tp.compiler.reset()


@pytest.mark.iree
@pytest.mark.parametrize("geometry", [dict(kernel_size=2), dict(kernel_size=(2, 3)),
                                      dict(kernel_size=3, stride=2, padding=1)])
def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window(geometry):
    F = tp.nn.functional
    # ties and NaNs in every window position: eager and compiled gradients against the rule
    # PyTorch's CPU kernel follows (the first maximum in row-major order, the first NaN)
    x = np.array([[1.0, 1.0, 0.0, 2.0, 2.0, 3.0, 1.0],
                  [1.0, 0.5, 2.0, np.nan, 1.0, 3.0, 3.0],
                  [4.0, 4.0, 4.0, 4.0, np.nan, np.nan, 0.0],
                  [4.0, 4.0, 1.0, 1.0, 1.0, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0]], np.float32)[None, None].repeat(2, axis=1)
    g = np.random.default_rng(3).standard_normal(F.max_pool2d(tp.tensor(x), **geometry).shape).astype(np.float32)
    want = np.zeros_like(x)
    _, idx = F.max_pool2d(tp.tensor(x), return_indices=True, **geometry)
    for (n, c, i, j), flat in np.ndenumerate(idx.numpy()):
        want[n, c].reshape(-1)[flat] += g[n, c, i, j]

    def grad_of(fn):
        a = tp.tensor(x, requires_grad=True)
        fn(a).backward(tp.tensor(g))
        return a.grad.numpy()

    def pool(a):
        return F.max_pool2d(a, **geometry)

    np.testing.assert_array_equal(grad_of(pool), want)
    np.testing.assert_array_equal(grad_of(tp.compile(pool)), want)
    if HAS_TORCH:
        import torch

        t = torch.tensor(x, requires_grad=True)
        torch.nn.functional.max_pool2d(t, **geometry).backward(torch.tensor(g))
        np.testing.assert_array_equal(t.grad.numpy(), want)


DEVICE_BACKENDS = {"iree-vulkan": "vulkan", "iree-cuda": "cuda"}


@pytest.mark.iree
@pytest.mark.parametrize("backend", list(DEVICE_BACKENDS))
def test_training_on_a_device_matches_the_host(backend):
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(f"{backend} is unavailable here: {caps.reason}")
    dev = DEVICE_BACKENDS[backend]
    results = {}
    for where in ("cpu", dev):
        tp.manual_seed(0)
        # few distinct ops: each is compiled for the device on first use
        net = tp.nn.Sequential(tp.nn.Conv2d(1, 2, 3, padding=1), tp.nn.ReLU(), tp.nn.Flatten(),
                               tp.nn.Linear(2 * 6 * 6, 3)).to(where)
        opt = tp.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(3):
            x = tp.tensor(rng.standard_normal((2, 1, 6, 6)).astype(np.float32)).to(where)
            y = tp.tensor(rng.standard_normal((2, 3)).astype(np.float32)).to(where)
            loss = ((net(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        p = next(iter(net.parameters()))
        assert p.grad.device.type == where and opt.state[p]["momentum_buffer"].device.type == where
        results[where] = (losses, [q.detach().cpu().numpy() for q in net.parameters()])
    np.testing.assert_allclose(results[dev][0], results["cpu"][0], rtol=1e-4, atol=1e-5)
    for a, b in zip(results[dev][1], results["cpu"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.iree
@pytest.mark.parametrize("backend", list(DEVICE_BACKENDS))
def test_moving_a_tensor_that_requires_grad_is_differentiable(backend):
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(f"{backend} is unavailable here: {caps.reason}")
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.to(DEVICE_BACKENDS[backend])
    assert y.requires_grad and not y.is_leaf
    (y * y).sum().backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    with tp.no_grad():
        assert not x.to(DEVICE_BACKENDS[backend]).requires_grad


def test_a_custom_function_sees_none_for_unused_outputs_when_it_does_not_materialize_grads():
    seen = []

    class Pair(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append(gb)
            return ga * 2 + (0 if gb is None else gb * 3), None

    for materialize in (True, False):
        x = tp.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Pair.apply(x, materialize)
        a.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert seen[0] is not None and not np.any(seen[0].numpy()) and seen[1] is None


# --- in-place activations -----------------------------------------------------------------------

_INPLACE_ACTIVATIONS = ["relu", "silu", "leaky_relu", "hardtanh", "relu6", "elu", "celu", "selu",
                        "hardsigmoid", "hardswish", "mish", "threshold"]


def _inplace_activation(lib, name, h):
    F = lib.nn.functional
    if name == "threshold":
        return F.threshold(h, 0.5, -2.0, inplace=True)
    return getattr(F, name)(h, inplace=True)


@needs_torch
@pytest.mark.parametrize("name", _INPLACE_ACTIVATIONS)
def test_in_place_activations_on_a_tracked_tensor_give_torch_gradients(name):
    # each F.<act>(h, inplace=True) on a non-leaf returns h itself, changed, and the gradient
    # reaching the leaf through it is PyTorch's; x spans both sides of every activation's kinks
    import torch

    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xn = rng.standard_normal((4, 6)) * 3
    wn = rng.standard_normal((4, 6))
    grads, values = [], []
    for lib in (tp, torch):
        x = lib.tensor(xn, requires_grad=True)
        h = x * 1.5
        y = _inplace_activation(lib, name, h)
        assert y is h
        (y * lib.tensor(wn)).sum().backward()
        grads.append(x.grad.numpy())
        values.append(h.detach().numpy())
    np.testing.assert_allclose(values[0], values[1], rtol=1e-15, atol=0)
    # PyTorch's CPU hardsigmoid backward multiplies by 1.0f / 6.0f, a float32 constant, also in
    # float64 (3e-8 relative to 1/6); ours divides by 6 in the tensor's dtype
    rtol = 5e-8 if name == "hardsigmoid" else 1e-15
    np.testing.assert_allclose(grads[0], grads[1], rtol=rtol, atol=1e-15)


@pytest.mark.parametrize("name", ["silu", "elu", "relu"])
def test_in_place_activations_compiled_give_eager_gradients(name):
    # the same in-place call inside a compiled forward: the gradient of the compiled graph
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    xn = rng.standard_normal((4, 6)).astype(np.float32) * 3

    def f(x):
        h = x * 1.5
        return _inplace_activation(tp, name, h) * 2

    grads = []
    for fn in (f, tp.compile(f, backend="eager")):
        x = tp.tensor(xn, requires_grad=True)
        fn(x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
