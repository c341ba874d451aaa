"""The optimizers Adadelta, Adagrad, Adamax, NAdam, RAdam, ASGD, Rprop and LBFGS and the
schedules ExponentialLR, MultiStepLR, ConstantLR, MultiplicativeLR, PolynomialLR,
CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR, ChainedScheduler and ReduceLROnPlateau
against PyTorch on the same parameters and gradients: updates, state_dict layout (and a
PyTorch state_dict loading and continuing), learning rates step by step; and the optimizers
inside compiled steps against eager."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")

OPTIMIZERS = {
    "Adadelta": ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1}),
    "Adagrad": ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.05, "initial_accumulator_value": 0.2}),
    "Adamax": ("Adamax", {"lr": 0.02, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    "NAdam": ("NAdam", {"lr": 0.02, "weight_decay": 0.1, "momentum_decay": 0.01}),
    "NAdam-decoupled": ("NAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    # beta2 = 0.9: the rectified step starts at step 3 (the plain momentum step before)
    "RAdam": ("RAdam", {"lr": 0.02, "betas": (0.9, 0.9), "weight_decay": 0.1}),
    "RAdam-decoupled": ("RAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True, "foreach": False}),
    # t0 = 3: the average starts moving from the parameters at step 4
    "ASGD": ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.6, "t0": 3, "weight_decay": 0.01}),
    "Rprop": ("Rprop", {"lr": 0.05, "etas": (0.4, 1.3), "step_sizes": (1e-3, 0.2), "maximize": True}),
    # the first four optimizers, for loading PyTorch's float64 state without rounding it
    "SGD": ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    "Adam": ("Adam", {"lr": 0.02, "amsgrad": True, "weight_decay": 0.1}),
    "AdamW": ("AdamW", {"lr": 0.02, "betas": (0.8, 0.9)}),
    "RMSprop": ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
}


def _problem(lib, dtype, w0, b0):
    w = lib.tensor(w0, dtype=dtype, requires_grad=True)
    b = lib.tensor(b0, dtype=dtype, requires_grad=True)
    return w, b


def _steps(lib, opt, w, b, dtype, start, stop):
    for k in range(start, stop):
        opt.zero_grad()
        x = lib.tensor(np.sin(np.arange(4.0) + k), dtype=dtype)
        (((w @ x + b) ** 2).sum() + (w ** 3).sum() * 0.1).backward()
        opt.step()


def _state_numpy(value):
    return np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value, dtype=np.float64)


# float64: the per-parameter eager update (foreach=False, in both libraries); float32: the
# default, whose steps past the second run as one compiled program over all parameters
@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.iree)])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_updates_and_state_dicts_match_pytorch(name, dtype):
    cls, options = OPTIMIZERS[name]
    if dtype == "float64":
        options = {**options, "foreach": False}
    rng = np.random.default_rng(5)
    w0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(3)
    out = {}
    for lib in (tp, torch):
        w, b = _problem(lib, getattr(lib, dtype), w0, b0)
        opt = getattr(lib.optim, cls)([{"params": [w]}, {"params": [b], "lr": options["lr"] / 2}], **options)
        _steps(lib, opt, w, b, getattr(lib, dtype), 0, 10)
        out[lib.__name__] = (w.detach().numpy().copy(), b.detach().numpy().copy(), opt.state_dict())
    (ow, ob, ostate), (tw, tb, tstate) = out["tensorplay"], out["torch"]
    # float64: the same formulas in the same order (measured: below 3e-16 relative);
    # float32: the scalar factors round differently by an ulp here and there (measured: at
    # most 1.2e-7 absolute on values of order 1)
    # float32, from the third step the compiled update: its fused multiply-adds round once where
    # the eager ops round twice (measured: at most 6.9e-7 absolute, Adam with amsgrad)
    tol = {"rtol": 1e-12, "atol": 1e-14} if dtype == "float64" else {"rtol": 1e-6, "atol": 1e-6}
    np.testing.assert_allclose(ow, tw, **tol)
    np.testing.assert_allclose(ob, tb, **tol)
    assert ostate["param_groups"] == tstate["param_groups"]
    assert sorted(ostate["state"]) == sorted(tstate["state"])
    for i, entries in tstate["state"].items():
        assert list(ostate["state"][i]) == list(entries), i  # the same names in the same order
        for key, value in entries.items():
            mine = ostate["state"][i][key]
            assert str(mine.dtype).split(".")[-1] == str(value.dtype).split(".")[-1], key
            np.testing.assert_allclose(_state_numpy(mine), _state_numpy(value), err_msg=key, **tol)


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_pytorch_state_dict_loads_and_continues_identically(name):
    cls, options = OPTIMIZERS[name]
    rng = np.random.default_rng(6)
    w0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(3)
    tw, tb = _problem(torch, torch.float64, w0, b0)
    topt = getattr(torch.optim, cls)([tw, tb], **options)
    _steps(torch, topt, tw, tb, torch.float64, 0, 5)
    ow, ob = _problem(tp, tp.float64, tw.detach().numpy(), tb.detach().numpy())
    oopt = getattr(tp.optim, cls)([ow, ob], **{**options, "lr": 1.0})
    oopt.load_state_dict(topt.state_dict())
    assert oopt.param_groups[0]["lr"] == options["lr"]
    for key, value in topt.state_dict()["state"][0].items():  # float64 moments stay float64, counts float32
        assert str(oopt.state_dict()["state"][0][key].dtype).split(".")[-1] == str(value.dtype).split(".")[-1]
    _steps(torch, topt, tw, tb, torch.float64, 5, 10)
    _steps(tp, oopt, ow, ob, tp.float64, 5, 10)
    # steps 3-5 after loading are the compiled update, whose fused multiply-adds round once
    # (measured: at most 2.2e-13 absolute, NAdam with decoupled decay)
    np.testing.assert_allclose(ow.detach().numpy(), tw.detach().numpy(), rtol=1e-12, atol=5e-13)
    np.testing.assert_allclose(ob.detach().numpy(), tb.detach().numpy(), rtol=1e-12, atol=5e-13)


def test_adagrad_has_its_state_from_construction_as_pytorch():
    mine = tp.optim.Adagrad([tp.zeros(2, requires_grad=True)], initial_accumulator_value=0.5).state_dict()
    theirs = torch.optim.Adagrad([torch.zeros(2, requires_grad=True)], initial_accumulator_value=0.5).state_dict()
    assert list(mine["state"][0]) == list(theirs["state"][0]) == ["step", "sum"]
    np.testing.assert_array_equal(mine["state"][0]["sum"].numpy(), [0.5, 0.5])


@pytest.mark.parametrize("cls,options,message", [
    ("Adadelta", {"rho": 1.5}, "Invalid rho value: 1.5"),
    ("Adadelta", {"lr": -1.0}, "Invalid learning rate: -1.0"),
    ("Adagrad", {"lr_decay": -0.1}, "Invalid lr_decay value: -0.1"),
    ("Adagrad", {"initial_accumulator_value": -1.0}, "Invalid initial_accumulator_value value: -1.0"),
    ("Adamax", {"betas": (0.9, 1.0)}, "Invalid beta parameter at index 1: 1.0"),
    ("NAdam", {"momentum_decay": -1.0}, "Invalid momentum_decay value: -1.0"),
    ("RAdam", {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    ("ASGD", {"weight_decay": -1.0}, "Invalid weight_decay value: -1.0"),
    ("Rprop", {"etas": (1.2, 0.5)}, "Invalid eta values: 1.2, 0.5"),
])
def test_invalid_options_raise_pytorchs_errors(cls, options, message):
    for lib in (tp, torch):
        with pytest.raises(ValueError, match=message):
            getattr(lib.optim, cls)([lib.zeros(2, requires_grad=True)], **options)


# -- LBFGS ---------------------------------------------------------------------------------------

def _rosenbrock(lib, x):
    return ((1 - x[:-1]) ** 2).sum() + (100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


def _least_squares(lib, x):
    a = lib.tensor(np.cos(np.arange(24.0)).reshape(6, 4))
    y = lib.tensor(np.arange(6.0) / 3)
    return ((a @ x - y) ** 2).mean() + (x ** 4).sum() * 0.01


def _lbfgs(lib, problem, line_search, steps, start=None, state=None):
    x = lib.tensor(np.array([-1.5, 2.0, 0.5, -0.7]) if start is None else start, requires_grad=True)
    opt = lib.optim.LBFGS([x], lr=1 if line_search else 0.2, max_iter=12, history_size=4,
                          line_search_fn=line_search)
    if state is not None:
        opt.load_state_dict(state)

    def closure():
        opt.zero_grad()
        loss = problem(lib, x)
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    return x, losses, opt


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
@pytest.mark.parametrize("problem", [_rosenbrock, _least_squares])
def test_lbfgs_follows_pytorch(problem, line_search):
    ox, olosses, oopt = _lbfgs(tp, problem, line_search, 3)
    tx, tlosses, topt = _lbfgs(torch, problem, line_search, 3)
    # float64, the same arithmetic; the losses' sums round differently in the last bit
    # (numpy's and PyTorch's kernels) and 36 iterations amplify that: measured 5e-14 apart
    # (Rosenbrock) and 7e-11 relative (least squares with the line search)
    np.testing.assert_allclose(ox.detach().numpy(), tx.detach().numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(olosses, tlosses, rtol=1e-9)
    ostate, tstate = oopt.state_dict(), topt.state_dict()
    assert ostate["param_groups"] == tstate["param_groups"]
    assert list(ostate["state"]) == [0] and sorted(ostate["state"][0]) == sorted(tstate["state"][0])
    for key in ("func_evals", "n_iter"):
        assert ostate["state"][0][key] == tstate["state"][0][key], key
    assert len(ostate["state"][0]["old_dirs"]) == len(tstate["state"][0]["old_dirs"])
    # PyTorch's state (history lists, flat gradient) loads and continues the same way
    ox2, _, _ = _lbfgs(tp, problem, line_search, 2, start=tx.detach().numpy(), state=tstate)
    tx2, _, _ = _lbfgs(torch, problem, line_search, 2, start=tx.detach().numpy(), state=tstate)
    np.testing.assert_allclose(ox2.detach().numpy(), tx2.detach().numpy(), rtol=1e-9, atol=1e-11)


def test_lbfgs_errors():
    x = tp.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="LBFGS.step\\(\\) requires a closure"):
        tp.optim.LBFGS([x]).step()
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        tp.optim.LBFGS([{"params": [x]}, {"params": [tp.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe'"):
        tp.optim.LBFGS([x], line_search_fn="armijo")


# -- schedules -------------------------------------------------------------------------------------

SCHEDULES = {
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.5),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95 if e % 2 else 1.02),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=1e-3),
    "OneCycleLR-cos": lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=31),
    "OneCycleLR-linear-three-phase": lambda S, o: S.OneCycleLR(o, max_lr=1.0, epochs=3, steps_per_epoch=11,
                                                               anneal_strategy="linear", three_phase=True,
                                                               pct_start=0.25),
    "CyclicLR-triangular2": lambda S, o: S.CyclicLR(o, 0.01, [0.1, 0.2], step_size_up=4, step_size_down=3,
                                                    mode="triangular2"),
    "CyclicLR-exp_range": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range", gamma=0.97),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=5),
                                                         S.ExponentialLR(o, gamma=0.9)]),
}


def _schedule(lib, name, optimizer="SGD"):
    w, b = lib.tensor([1.0], requires_grad=True), lib.tensor([1.0], requires_grad=True)
    groups = [{"params": [w]}, {"params": [b], "lr": 0.05}]
    opt = (lib.optim.SGD(groups, lr=0.1, momentum=0.9) if optimizer == "SGD"
           else lib.optim.Adam(groups, lr=0.1, betas=(0.9, 0.99)))
    return opt, SCHEDULES[name](lib.optim.lr_scheduler, opt)


def _momenta(opt):
    return [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_give_pytorchs_learning_rates_and_momenta(name):
    optimizer = "Adam" if name.startswith("OneCycleLR-linear") else "SGD"  # beta1 cycles for Adam
    seen, saved = {}, {}
    for lib in (tp, torch):
        opt, sched = _schedule(lib, name, optimizer)
        seen[lib.__name__] = [(sched.get_last_lr(), _momenta(opt))]
        for k in range(30):
            opt.step()
            sched.step()
            seen[lib.__name__].append((sched.get_last_lr(), _momenta(opt)))
            if k == 11:
                saved[lib.__name__] = sched.state_dict()
    assert seen["tensorplay"] == seen["torch"]  # the same formulas: equal floats
    # state_dict: PyTorch's entries (less its internal warning flag), and resuming from one
    # made by PyTorch continues the same way
    ours, theirs = saved["tensorplay"], saved["torch"]
    theirs_keys = set(theirs) - {"_get_lr_called_within_step"}
    assert set(ours) == theirs_keys
    for sub_ours, sub_theirs in zip(ours.get("_schedulers", []), theirs.get("_schedulers", [])):
        assert set(sub_ours) == set(sub_theirs) - {"_get_lr_called_within_step"}
    opt, sched = _schedule(tp, name, optimizer)
    sched.load_state_dict(theirs)
    for group, lr in zip(opt.param_groups, theirs.get("_last_lr", seen["torch"][12][0])):
        group["lr"] = lr
    resumed = []
    for _ in range(18):
        opt.step()
        sched.step()
        resumed.append(sched.get_last_lr())
    assert resumed == [lrs for lrs, _ in seen["torch"][13:]]


@pytest.mark.parametrize("name", ["ExponentialLR", "MultiStepLR", "ConstantLR", "PolynomialLR",
                                  "CosineAnnealingWarmRestarts"])
def test_stepping_to_an_epoch_uses_pytorchs_closed_forms(name):
    got = {}
    for lib in (tp, torch):
        _, sched = _schedule(lib, name)
        with pytest.warns(UserWarning) if lib is torch and name != "CosineAnnealingWarmRestarts" else _nothing():
            values = []
            for epoch in (5, 2, 9, 14, 3.5 if name == "CosineAnnealingWarmRestarts" else 3):
                sched.step(epoch)
                values.append(sched.get_last_lr())
        got[lib.__name__] = values
    np.testing.assert_allclose(got["tensorplay"], got["torch"], rtol=1e-14)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


METRICS = [1.0, 0.9, 0.95, 0.97, 0.89, 0.9, 0.9, 0.91, 0.5, 0.6, 0.7, 0.8, 0.8, 0.49, 0.499, 0.6, 0.7, 0.8, 0.9,
           1.0, 1.1, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]


@pytest.mark.parametrize("mode,threshold_mode,threshold", [("min", "rel", 0.05), ("min", "abs", 0.02),
                                                           ("max", "rel", 0.01), ("max", "abs", 0.1)])
def test_reduce_lr_on_plateau_follows_pytorch(mode, threshold_mode, threshold):
    got, states = {}, {}
    for lib in (tp, torch):
        opt, _ = _schedule(lib, "ExponentialLR")
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode=mode, factor=0.5, patience=1,
                                                         threshold=threshold, threshold_mode=threshold_mode,
                                                         cooldown=2, min_lr=[0.01, 0.02], eps=1e-3)
        lrs = []
        for k, m in enumerate(METRICS):
            sched.step(lib.tensor(m) if k % 2 else m)
            lrs.append(sched.get_last_lr())
        got[lib.__name__] = lrs
        states[lib.__name__] = sched.state_dict()
    assert got["tensorplay"] == got["torch"]
    assert len({tuple(lrs) for lrs in got["torch"]}) > 3  # it did reduce, several times, down to min_lr
    assert states["tensorplay"] == states["torch"]
    opt, _ = _schedule(tp, "ExponentialLR")
    sched = tp.optim.lr_scheduler.ReduceLROnPlateau(opt)
    sched.load_state_dict(states["torch"])
    assert sched.state_dict() == states["torch"]


def test_schedule_errors_are_pytorchs():
    S = tp.optim.lr_scheduler
    opt, _ = _schedule(tp, "ExponentialLR")
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="threshold mode relative is unknown"):
        S.ReduceLROnPlateau(opt, threshold_mode="relative")
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        S.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(4):
            sched.step()
    with pytest.raises(ValueError, match="Expected positive integer T_0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="expected 2 values for max_lr"):
        S.CyclicLR(opt, 0.01, [0.1, 0.2, 0.3])
    plain = tp.optim.Adagrad([tp.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        S.CyclicLR(plain, 0.01, 0.1)
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        S.ChainedScheduler([S.ExponentialLR(opt, 0.9), S.ReduceLROnPlateau(opt)])


# -- compiled steps ----------------------------------------------------------------------------------

COMPILED = {
    "Adadelta": lambda p: tp.optim.Adadelta(p, lr=0.5, weight_decay=1e-3),
    "Adagrad": lambda p: tp.optim.Adagrad(p, lr=0.05, lr_decay=0.01, initial_accumulator_value=0.1),
    "Adamax": lambda p: tp.optim.Adamax(p, lr=1e-2, weight_decay=1e-3),
    "NAdam": lambda p: tp.optim.NAdam(p, lr=1e-2, weight_decay=1e-2, decoupled_weight_decay=True),
    "RAdam": lambda p: tp.optim.RAdam(p, lr=1e-2, betas=(0.9, 0.9), weight_decay=1e-3),
    "ASGD": lambda p: tp.optim.ASGD(p, lr=0.05, t0=3, lambd=0.01),
    "Rprop": lambda p: tp.optim.Rprop(p, lr=0.01, maximize=True),
}


@pytest.fixture
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


def _net():
    tp.manual_seed(0)
    return tp.nn.Sequential(tp.nn.Linear(6, 16), tp.nn.Tanh(), tp.nn.Linear(16, 3))


def _train(make, compiled, steps=8):
    net = _net()
    opt = make(net.parameters())
    sched = tp.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
    step = tp.compile(opt.step) if compiled else opt.step
    rng = np.random.default_rng(1)
    x, y = tp.tensor(rng.standard_normal((10, 6)).astype(np.float32)), tp.tensor(rng.integers(0, 3, 10))
    for _ in range(steps):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        step()
        sched.step()
    return [p.detach().numpy().copy() for p in net.parameters()], step


@pytest.mark.iree
@pytest.mark.parametrize("name", ["Adagrad", "ASGD", "Rprop"])  # (NAdam and RAdam: the whole step below)
def test_a_compiled_optimizer_step_equals_eager_under_a_schedule_and_compiles_once(name, _fresh):
    want, _ = _train(COMPILED[name], compiled=False)
    got, step = _train(COMPILED[name], compiled=True)
    for a, b in zip(got, want):  # float32, fused differently by the compiler (measured: 5e-7)
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert step.compile_count == 1


@pytest.mark.iree
@pytest.mark.parametrize("name", ["NAdam", "RAdam"])
def test_a_whole_training_step_with_a_new_optimizer_compiles_once_and_equals_eager(name, _fresh):
    def run(compiled):
        net = _net()
        opt = COMPILED[name](net.parameters())
        rng = np.random.default_rng(2)

        def train_step(x, y):
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        step = tp.compile(train_step, fullgraph=True) if compiled else train_step
        losses = []
        for _ in range(6):
            x = tp.tensor(rng.standard_normal((10, 6)).astype(np.float32))
            losses.append(float(step(x, tp.tensor(rng.integers(0, 3, 10)))))
        return losses, [p.detach().numpy().copy() for p in net.parameters()], step

    want, got = run(False), run(True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert got[2].compile_count == 1 and got[2].cache_info()["graph_entries"] == 1


@pytest.mark.iree
def test_lbfgs_and_reduce_lr_on_plateau_inside_a_compiled_function_break_the_graph(_fresh):
    def run(compiled, fullgraph=False):
        rng = np.random.default_rng(0)
        a, y = tp.tensor(rng.standard_normal((8, 3))), tp.tensor(rng.standard_normal(8))
        w = tp.zeros(3, dtype=tp.float64, requires_grad=True)
        opt = tp.optim.LBFGS([w], history_size=3, max_iter=4, line_search_fn="strong_wolfe")
        plateau = tp.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)

        def closure():
            opt.zero_grad()
            loss = ((a @ w - y) ** 2).mean()
            loss.backward()
            return loss

        def train():
            loss = opt.step(closure)
            plateau.step(loss)
            return loss

        f = tp.compile(train, fullgraph=fullgraph) if compiled else train
        losses = [(float(f()), opt.param_groups[0]["lr"]) for _ in range(4)]
        return losses, w.detach().numpy().copy()

    want, got = run(False), run(True)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(tp.compiler.GraphCaptureError, match="LBFGS.step\\(\\)"):
        run(True, fullgraph=True)
