"""Training eagerly: the import-swap models (tests/data/pytorch_models.py, written for PyTorch)
take 20 optimizer steps from PyTorch's initial weights on the same data, on tensorplay and on
PyTorch, and give the same losses and parameters within float32 tolerance; the optimizers'
and schedules' own behaviour (state_dict layout, parameter groups, lr values) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tests.test_import_swap import SOURCE, SWAPPED, _load

torch = pytest.importorskip("torch")

STEPS = 20


def _data(model: str, rng: np.random.Generator):
    if model == "MLP":
        return rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16)
    if model == "TinyGPT":
        idx = rng.integers(0, 50, (2, 8))
        return idx, np.roll(idx, -1, axis=1)
    return rng.standard_normal((4, 3, 16, 16)).astype(np.float32), rng.integers(0, 10, 4)


def _loss(lib, model: str, net, x, y):
    F = lib.nn.functional
    if model == "TinyGPT":
        return net(x, y)[1]
    if model == "SmallCNN":
        return F.nll_loss(net(x), y)
    return F.cross_entropy(net(x), y, label_smoothing=0.1)


OPTIMIZERS = {
    "sgd": lambda lib, p: lib.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "adamw": lambda lib, p: lib.optim.AdamW(p, lr=3e-3, weight_decay=0.05, amsgrad=True),
}


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("model", ["MLP", "TinyGPT", "SmallCNN"])
def test_twenty_steps_match_pytorch(model, opt):
    ours_mod, theirs_mod = _load(SWAPPED, "tp_models"), _load(SOURCE, "torch_models")
    torch.manual_seed(0)
    # eval(): dropout draws differ between the libraries' generators; gradients flow all the same
    theirs = getattr(theirs_mod, model)().eval()
    ours = getattr(ours_mod, model)().eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    o_opt, t_opt = OPTIMIZERS[opt](tp, ours.parameters()), OPTIMIZERS[opt](torch, theirs.parameters())
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        x, y = _data(model, rng)
        o_opt.zero_grad()
        t_opt.zero_grad()
        o_loss = _loss(tp, model, ours, tp.tensor(x), tp.tensor(y))
        t_loss = _loss(torch, model, theirs, torch.from_numpy(x), torch.from_numpy(y))
        o_loss.backward()
        t_loss.backward()
        o_opt.step()
        t_opt.step()
        assert o_loss.item() == pytest.approx(t_loss.item(), rel=2e-4, abs=1e-5), f"step {step}"
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        a, b = p.detach().numpy(), theirs_params[name].detach().numpy()
        if opt == "adamw" and name.endswith("attn.c_attn.bias"):
            # the key bias shifts every score of a query equally, so softmax makes its exact
            # gradient 0: both libraries get rounding noise (~1e-9), which Adam scales up to
            # full-size steps in unrelated directions; the query and value biases must agree
            n = a.shape[0] // 3
            a, b = np.delete(a, np.s_[n:2 * n]), np.delete(b, np.s_[n:2 * n])
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4, err_msg=name)


@pytest.mark.parametrize("name,make", [
    ("SGD", lambda lib, p: lib.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.2)),
    ("SGD-maximize", lambda lib, p: lib.optim.SGD(p, lr=0.1, maximize=True)),
    ("Adam", lambda lib, p: lib.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    ("RMSprop", lambda lib, p: lib.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
    ("RMSprop-plain", lambda lib, p: lib.optim.RMSprop(p, lr=0.01)),
])
@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
def test_updates_and_state_dicts_match_pytorch(name, make):
    rng = np.random.default_rng(2)
    w0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(3)
    params = {}
    for lib in (tp, torch):
        w, b = lib.tensor(w0, requires_grad=True), lib.tensor(b0, requires_grad=True)
        opt = make(lib, [{"params": [w]}, {"params": [b], "lr": 0.02}])
        for k in range(5):
            opt.zero_grad()
            x = lib.tensor(np.sin(np.arange(4.0) + k))
            (((w @ x + b) ** 2).sum()).backward()
            opt.step()
        params[lib.__name__] = (w, b, opt.state_dict())
    (ow, ob, ostate), (tw, tb, tstate) = params["tensorplay"], params["torch"]
    np.testing.assert_allclose(ow.detach().numpy(), tw.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(ob.detach().numpy(), tb.detach().numpy(), rtol=1e-10)
    assert [g["params"] for g in ostate["param_groups"]] == [g["params"] for g in tstate["param_groups"]]
    assert {k for g in ostate["param_groups"] for k in g} <= {k for g in tstate["param_groups"] for k in g}
    assert sorted(ostate["state"]) == sorted(tstate["state"])
    for i, entries in tstate["state"].items():
        assert sorted(ostate["state"][i]) == sorted(entries), (i, sorted(entries))
        for key, value in entries.items():
            np.testing.assert_allclose(np.asarray(ostate["state"][i][key].detach().numpy()),
                                       value.detach().numpy(), rtol=1e-10, err_msg=key)


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
def test_load_state_dict_resumes_the_same_trajectory():
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(5)

    def run(steps, w, opt):
        for k in range(steps):
            opt.zero_grad()
            ((w * tp.tensor(np.cos(np.arange(5.0) + k))).exp().sum()).backward()
            opt.step()

    w = tp.tensor(w0, requires_grad=True)
    opt = tp.optim.Adam([w], lr=0.05)
    run(6, w, opt)
    straight = w.detach().numpy().copy()
    w2 = tp.tensor(w0, requires_grad=True)
    opt2 = tp.optim.Adam([w2], lr=0.05)
    run(3, w2, opt2)
    saved = opt2.state_dict()
    w3 = tp.tensor(w2.detach().numpy(), requires_grad=True)
    opt3 = tp.optim.Adam([w3], lr=0.5)
    opt3.load_state_dict(saved)
    assert opt3.param_groups[0]["lr"] == 0.05
    for k in range(3, 6):
        opt3.zero_grad()
        ((w3 * tp.tensor(np.cos(np.arange(5.0) + k))).exp().sum()).backward()
        opt3.step()
    np.testing.assert_allclose(w3.detach().numpy(), straight, rtol=1e-12)


@pytest.mark.parametrize("name", ["StepLR", "LambdaLR", "CosineAnnealingLR", "LinearLR", "SequentialLR"])
def test_schedules_give_pytorchs_learning_rates(name):
    def make(lib, opt):
        S = lib.optim.lr_scheduler
        if name == "StepLR":
            return S.StepLR(opt, step_size=3, gamma=0.5)
        if name == "LambdaLR":
            return S.LambdaLR(opt, lambda e: 0.9 ** e)
        if name == "CosineAnnealingLR":
            return S.CosineAnnealingLR(opt, T_max=7, eta_min=0.01)
        if name == "LinearLR":
            return S.LinearLR(opt, start_factor=0.2, total_iters=4)
        return S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3),
                                    S.CosineAnnealingLR(opt, T_max=10)], milestones=[3])

    lrs = {}
    for lib in (tp, torch):
        w = lib.tensor([1.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        sched = make(lib, opt)
        seen = []
        for _ in range(20):
            opt.step()
            sched.step()
            seen.append(opt.param_groups[0]["lr"])
        lrs[lib.__name__] = seen
    np.testing.assert_allclose(lrs["tensorplay"], lrs["torch"], rtol=1e-12)


def test_optimizer_errors_are_pytorchs():
    w = tp.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tp.optim.SGD([w], lr=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        tp.optim.Adam([])
    with pytest.raises(ValueError, match="more than one parameter group"):
        tp.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        tp.optim.SGD([w * 2], lr=0.1)


def test_clip_grad_norm_and_value_match_pytorch():
    rng = np.random.default_rng(4)
    grads = [rng.standard_normal((3, 4)) * 5, rng.standard_normal(6)]
    for norm_type, max_norm in ((2.0, 1.0), (1.0, 3.0), (float("inf"), 0.5), (2.0, 1e3)):
        out = {}
        for lib in (tp, torch):
            params = [lib.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
            for p, g in zip(params, grads):
                p.grad = lib.tensor(g)
            total = lib.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
            out[lib.__name__] = (float(total), [p.grad.detach().numpy().copy() for p in params])
        assert out["tensorplay"][0] == pytest.approx(out["torch"][0], rel=1e-6)
        for a, b in zip(out["tensorplay"][1], out["torch"][1]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    p = tp.tensor([0.0, 0.0], requires_grad=True)
    p.grad = tp.tensor([3.0, -7.0])
    tp.nn.utils.clip_grad_value_([p], 2.5)
    np.testing.assert_allclose(p.grad.numpy(), [2.5, -2.5])
    p.grad = tp.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        tp.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


@pytest.mark.iree
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clipping_from_the_third_call_runs_as_one_program_and_matches_eager(norm_type):
    from tensorplay.nn.utils import clip_grad

    rng = np.random.default_rng(5)
    grads = [(rng.standard_normal(s) * 5).astype(np.float32) for s in ((3, 4), (6,), (2, 2, 5), (7,))]
    params = [tp.zeros(g.shape, requires_grad=True) for g in grads]

    def clip(foreach=None):
        for p, g in zip(params, grads):
            p.grad = tp.tensor(g)
        total = tp.nn.utils.clip_grad_norm_(params, 0.5, norm_type=norm_type, foreach=foreach)
        return float(total), [p.grad.numpy().copy() for p in params]

    eager = clip(foreach=False)
    key = (tuple(id(p) for p in params), norm_type)
    assert key not in clip_grad._calls  # (foreach=False counts nothing)
    calls = [clip() for _ in range(4)]
    assert clip_grad._calls[key] == 2  # two eager calls, then one program for the next two
    assert clip_grad._programs[key].compile_count == 1
    tp.runtime.reset_stats()
    later = clip()
    moved = tp.runtime.stats().by_program["clip_grad_norm_"]
    assert moved.uploads + moved.imports >= len(grads)  # the program read every gradient
    for total, got in calls + [later]:
        # the program may sum in another order than numpy: the total within 2 ulps (equal here;
        # 1.3e-7 relative for the example GPT's 28 gradients at norm_type 1), the scaled
        # gradients then within as much relatively
        assert total == pytest.approx(eager[0], rel=2.5e-7)
        for a, b in zip(got, eager[1]):
            np.testing.assert_allclose(a, b, rtol=2.5e-7, atol=0)
    assert clip(foreach=False)[0] == eager[0]  # foreach=False stays eager, the same values


def test_save_and_load_round_trip_state_dicts_without_pickle(tmp_path):
    state = {"model": {"w": tp.tensor(np.arange(6.0).reshape(2, 3)), "b16": tp.tensor([1.5, 2.0], dtype=tp.bfloat16),
                       "step": tp.tensor(3.0), "idx": tp.tensor([1, 2], dtype=tp.int64)},
             "optimizer": {"state": {0: {"exp_avg": tp.zeros(2)}}, "param_groups": [{"lr": 0.1, "betas": (0.9, 0.99),
                                                                                    "params": [0]}]},
             "nan": float("nan"), "name": "run", "none": None}
    path = tmp_path / "ckpt.tp"
    tp.save(state, path)
    got = tp.load(path)
    assert got["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.99)  # tuples stay tuples
    assert list(got["optimizer"]["state"]) == [0]  # int keys stay ints
    assert np.isnan(got["nan"]) and got["name"] == "run" and got["none"] is None
    for k, v in state["model"].items():
        assert got["model"][k].dtype is v.dtype and got["model"][k].shape == v.shape, k
        np.testing.assert_array_equal(got["model"][k].numpy().astype(np.float64), v.numpy().astype(np.float64))
    import zipfile

    with zipfile.ZipFile(path) as z:
        assert sorted(n for n in z.namelist() if not n.startswith("tensors/")) == ["tensorplay.json"]
    with pytest.raises(TypeError, match="checkpoints hold tensors"):
        tp.save({"f": object()}, tmp_path / "bad.tp")
    assert not (tmp_path / "bad.tp").exists()
    (tmp_path / "junk.tp").write_bytes(b"\x80\x04not a zip")
    with pytest.raises(ValueError, match="not a tensorplay checkpoint"):
        tp.load(tmp_path / "junk.tp")


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
def test_the_training_example_lowers_the_loss_and_resumes_exactly(tmp_path):
    import io

    from tensorplay.examples import train_gpt

    log = io.StringIO()
    straight = train_gpt.train(steps=16, batch=8, checkpoint=None, log=log, sample_chars=20)
    assert np.mean(straight["losses"][-4:]) < np.mean(straight["losses"][:4]) - 0.3
    assert "step   10/16" in log.getvalue() and "sample: 'the " in log.getvalue()
    ckpt = tmp_path / "gpt.tp"
    train_gpt.train(steps=16, batch=8, checkpoint=str(ckpt), log=io.StringIO(), sample_chars=1, stop_at=8)
    resumed = train_gpt.train(steps=16, batch=8, checkpoint=str(ckpt), resume=True, log=io.StringIO(),
                              sample_chars=1)
    np.testing.assert_allclose(resumed["losses"], straight["losses"][8:], rtol=1e-5)
