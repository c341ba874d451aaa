"""tp.compile(opt.step): the optimizer's update as one compiled program, equal to eager's
step after step; the learning rate is an input (schedules never recompile), gradients are
read afresh each call, state is updated in place, and every other change of the optimizer's
Python state (options, parameters without gradients) is guarded."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

pytestmark = pytest.mark.iree

OPTIMIZERS = {
    "sgd": lambda p: tp.optim.SGD(p, lr=0.1),
    "sgd-nesterov": lambda p: tp.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "sgd-dampening": lambda p: tp.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.5),
    "adam-amsgrad": lambda p: tp.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=1e-3),
    "adamw": lambda p: tp.optim.AdamW(p, lr=1e-2, weight_decay=0.05),
    "rmsprop": lambda p: tp.optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True, weight_decay=1e-3),
}


@pytest.fixture(autouse=True)
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


def _net():
    tp.manual_seed(0)
    return tp.nn.Sequential(tp.nn.Linear(6, 16), tp.nn.Tanh(), tp.nn.Linear(16, 3))


def _train(make, compiled: bool, steps: int = 8, change=None):
    net = _net()
    opt = make(net.parameters())
    sched = tp.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    step = tp.compile(opt.step) if compiled else opt.step
    rng = np.random.default_rng(1)
    x = tp.tensor(rng.standard_normal((10, 6)).astype(np.float32))
    y = tp.tensor(rng.integers(0, 3, 10))
    for i in range(steps):
        if change is not None:
            change(i, net, opt)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        step()
        sched.step()
    return [p.detach().numpy().copy() for p in net.parameters()], step


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_compiled_step_equals_the_eager_step_under_a_schedule_and_compiles_once(name):
    want, _ = _train(OPTIMIZERS[name], compiled=False)
    got, step = _train(OPTIMIZERS[name], compiled=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    # PyTorch's first SGD step with dampening copies the gradient into a new buffer: that
    # first call is a graph of its own
    assert step.compile_count == (2 if name == "sgd-dampening" else 1)


def test_changes_of_options_or_of_which_parameters_have_gradients_recompile_and_stay_right():
    def change(i, net, opt):
        if i == 3:
            opt.param_groups[0]["betas"] = (0.8, 0.99)  # an option other than lr: guarded
        if i == 5:
            net[2].bias.requires_grad_(False)  # no gradient: that parameter is left alone
            net[2].bias.grad = None

    make = OPTIMIZERS["adamw"]
    want, _ = _train(make, compiled=False, change=change)
    got, step = _train(make, compiled=True, change=change)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert step.compile_count == 3


def test_the_learning_rate_and_gradients_are_inputs_of_the_compiled_step():
    net = _net()
    opt = tp.optim.Adam(net.parameters(), lr=1e-2)
    net(tp.randn(2, 6)).sum().backward()
    step = tp.compile(opt.step)
    step()
    (entry,) = step._group.order
    described = [b.describe() for b in entry.bindings]
    assert "param_groups[0]['lr']" in described and described.count("a parameter's .grad") == 4
    assert not any(n.op == "tp.constant" and np.ndim(n.attrs["value"]) == 0 and float(n.attrs["value"]) == 1e-2
                   for n in entry.graph.nodes)
