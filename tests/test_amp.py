"""Mixed precision: ``tp.autocast``'s per-function cast policy (eager, autograd, compiled) and
``tp.amp.GradScaler``, against PyTorch's CPU autocast and GradScaler."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 8)).astype(np.float32)
W = RNG.standard_normal((16, 8)).astype(np.float32)
B = RNG.standard_normal(16).astype(np.float32)
T = RNG.standard_normal((4, 16)).astype(np.float32)
LABELS = np.array([1, 0, 3, 2])

#: name -> f(lib, F, x, w, b, t, labels), run inside autocast("cpu", bfloat16); every policy
#: kind appears (lower precision, float32, none) with mixed inputs
CASES = {
    "linear": lambda lib, F, x, w, b, t, y: F.linear(x, w, b),
    "matmul": lambda lib, F, x, w, b, t, y: x @ w.T,
    "mm": lambda lib, F, x, w, b, t, y: lib.mm(x, w.T),
    "bmm": lambda lib, F, x, w, b, t, y: lib.bmm(x[None], w.T[None]),
    "conv2d": lambda lib, F, x, w, b, t, y: F.conv2d(x.reshape(1, 2, 4, 4), w.reshape(16, 2, 2, 2), b),
    "conv_transpose1d": lambda lib, F, x, w, b, t, y: F.conv_transpose1d(x.reshape(1, 4, 8), w.reshape(4, 4, 8)),
    "prelu": lambda lib, F, x, w, b, t, y: F.prelu(x, b[:1]),
    "sdpa": lambda lib, F, x, w, b, t, y: F.scaled_dot_product_attention(x[None], x[None], x[None]),
    "mse_loss_of_linear": lambda lib, F, x, w, b, t, y: F.mse_loss(F.linear(x, w, b), t),
    "cross_entropy_of_linear": lambda lib, F, x, w, b, t, y: F.cross_entropy(F.linear(x, w, b), y),
    "nll_loss": lambda lib, F, x, w, b, t, y: F.nll_loss(F.log_softmax(F.linear(x, w, b), -1), y),
    "bce_with_logits": lambda lib, F, x, w, b, t, y: F.binary_cross_entropy_with_logits(F.linear(x, w, b), t.sigmoid()),
    "cdist_of_linear": lambda lib, F, x, w, b, t, y: lib.cdist(F.linear(x, w, b), t),
    "prod": lambda lib, F, x, w, b, t, y: F.linear(x, w, b).prod(),
    "softmax_stays_low": lambda lib, F, x, w, b, t, y: F.softmax(F.linear(x, w, b), -1),
    "exp_stays_low": lambda lib, F, x, w, b, t, y: F.linear(x, w, b).exp(),
    "layer_norm_stays_low": lambda lib, F, x, w, b, t, y: F.layer_norm(F.linear(x, w, b), (16,)),
    "add_promotes": lambda lib, F, x, w, b, t, y: F.linear(x, w, b) + t,
    "float64_is_not_cast": lambda lib, F, x, w, b, t, y: x.double() @ w.double().T,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cast_policy_matches_pytorch_cpu_autocast(name):
    torch = pytest.importorskip("torch")
    f = CASES[name]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = f(torch, torch.nn.functional, *map(torch.from_numpy, (X, W, B, T, LABELS)))
    with tp.autocast("cpu", dtype=tp.bfloat16):
        out = f(tp, F, *map(tp.tensor, (X, W, B, T, LABELS)))
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    # each bfloat16 rounding of a float32 computation may land on the other neighbour where the
    # float32 values differ in their last bits: one ulp of bfloat16 (2**-7 relative at most),
    # also in float32 results computed from bfloat16 intermediates
    rtol = 1e-12 if out.dtype == tp.float64 else 2.0 ** -7
    np.testing.assert_allclose(out.float().detach().numpy(), ref.float().detach().numpy(), rtol=rtol, atol=rtol)


def test_gradients_reach_float32_parameters_in_their_dtype_like_pytorch():
    torch = pytest.importorskip("torch")
    tw, tb = torch.tensor(W, requires_grad=True), torch.tensor(B, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = torch.nn.functional.cross_entropy(torch.nn.functional.linear(torch.tensor(X), tw, tb), torch.tensor(LABELS))
    tl.backward()
    w, b = tp.tensor(W, requires_grad=True), tp.tensor(B, requires_grad=True)
    with tp.autocast("cpu"):
        loss = F.cross_entropy(F.linear(tp.tensor(X), w, b), tp.tensor(LABELS))
        loss.backward()  # backward inside the region runs in the forward's dtypes
    assert loss.dtype == tp.float32 and w.grad.dtype == tp.float32 and b.grad.dtype == tp.float32
    assert loss.item() == pytest.approx(tl.item(), rel=1e-5)
    # the gradient of the product is computed in bfloat16 on both sides: one rounding each
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2.0 ** -7, atol=2.0 ** -9)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_state_nesting_and_queries():
    assert not tp.is_autocast_enabled() and tp.get_autocast_dtype("cpu") == tp.bfloat16
    assert tp.get_autocast_dtype("cuda") == tp.float16
    x, w = tp.tensor(X), tp.tensor(W)
    with tp.autocast("cpu"):
        assert tp.is_autocast_enabled("cpu") and not tp.is_autocast_enabled("cuda")
        with tp.autocast("cpu", enabled=False):
            assert (x @ w.T).dtype == tp.float32 and not tp.is_autocast_enabled()
        with tp.autocast("cpu", dtype=tp.float16):
            assert (x @ w.T).dtype == tp.float16
        with tp.autocast("cuda"):  # host tensors follow the cpu region only
            assert (x @ w.T).dtype == tp.bfloat16
        assert (x @ w.T).dtype == tp.bfloat16
    assert (x @ w.T).dtype == tp.float32

    @tp.autocast("cpu")
    def f(a, b):
        return a @ b

    assert f(x, w.T).dtype == tp.bfloat16 and not tp.is_autocast_enabled()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unsupported device type 'tpu'"):
        tp.autocast("tpu")
    with pytest.raises(ValueError, match="bfloat16 and torch.float16, got tensorplay.float64|got float64"):
        tp.autocast("cpu", dtype=tp.float64)
    with pytest.raises(TypeError, match="enabled"):
        tp.autocast("cpu", enabled="yes")


class _Mlp(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = tp.nn.Linear(8, 16), tp.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


@pytest.mark.iree
def test_compiled_call_follows_the_autocast_state_of_each_call():
    tp.manual_seed(0)
    model = _Mlp()
    compiled = tp.compile(model)
    x = tp.tensor(X)
    with tp.autocast("cpu"):
        eager, out = model(x), compiled(x)
    assert out.dtype == eager.dtype == tp.bfloat16
    np.testing.assert_array_equal(out.float().detach().numpy(), eager.float().detach().numpy())
    plain = compiled(x)  # outside the region: the guard on the autocast state recompiles
    assert plain.dtype == tp.float32
    np.testing.assert_allclose(plain.detach().numpy(), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.iree
def test_compiled_training_step_with_autocast_and_a_grad_scaler_matches_eager():
    def run(compiled):
        tp.manual_seed(0)
        model = _Mlp()
        opt = tp.optim.SGD(model.parameters(), lr=0.1)
        scaler = tp.amp.GradScaler("cpu", init_scale=1024.0)

        def step(x, y):
            with tp.autocast("cpu"):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            return loss

        f = tp.compile(step) if compiled else step
        losses = []
        for i in range(3):
            opt.zero_grad()
            losses.append(f(tp.tensor(X), tp.tensor(LABELS)).item())
            scaler.step(opt)
            scaler.update()
        return losses, model.fc1.weight.detach().numpy()

    (le, we), (lc, wc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    np.testing.assert_allclose(wc, we, rtol=1e-6, atol=1e-7)


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
def test_grad_scaler_follows_pytorch_through_overflow_and_growth():
    torch = pytest.importorskip("torch")
    scales = {}
    for lib in (torch, tp):
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        seen = []
        for factor in (1.0, 1.0, float("inf"), 1.0, 1.0, 1.0):
            opt.zero_grad()
            s.scale((p * factor).sum()).backward()
            if len(seen) == 3:
                s.unscale_(opt)
                with pytest.raises(RuntimeError, match="already been called"):
                    s.unscale_(opt)
            s.step(opt)
            s.update()
            seen.append((s.get_scale(), p.detach().numpy().copy().tolist()))
        scales[lib.__name__] = (seen, s.state_dict())
    assert scales["tensorplay"][0] == scales["torch"][0]
    ours, theirs = scales["tensorplay"][1], scales["torch"][1]
    assert ours.keys() == theirs.keys() and all(float(ours[k]) == float(theirs[k]) for k in ours)


def test_grad_scaler_state_and_disabled_paths():
    s = tp.amp.GradScaler("cpu")
    t = tp.amp.GradScaler("cpu", init_scale=1.0)
    t.load_state_dict(s.state_dict())
    assert t.get_scale() == 65536.0 and t.state_dict() == s.state_dict()
    off = tp.amp.GradScaler("cpu", enabled=False)
    loss = tp.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(ValueError, match="growth factor"):
        tp.amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(RuntimeError, match="No inf checks"):
        s.update()
