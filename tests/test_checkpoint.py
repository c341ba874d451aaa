"""``tp.utils.checkpoint``: recomputed activations give the gradients of the plain call, eager
(both variants) and compiled, against PyTorch and against the same code without checkpoints."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.checkpoint import checkpoint, checkpoint_sequential

X = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)


def _grads(lib, ck, reentrant, x_requires_grad=True, state=None):
    lib.manual_seed(0)
    l1, l2 = lib.nn.Linear(8, 8), lib.nn.Linear(8, 2)
    if state is not None:
        l1.load_state_dict(state[0])
        l2.load_state_dict(state[1])
    x = lib.tensor(X, requires_grad=x_requires_grad)
    h = ck(lambda a, scale: lib.tanh(l1(a)) * scale, x, 2.0, use_reentrant=reentrant)
    l2(h).sum().backward()
    grads = [l1.weight.grad, l1.bias.grad] + ([x.grad] if x_requires_grad else [])
    state = [{k: v.detach().numpy() for k, v in m.state_dict().items()} for m in (l1, l2)]
    return [None if g is None else g.detach().numpy() for g in grads], state


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_match_pytorch(reentrant):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tc

    theirs, state = _grads(torch, tc.checkpoint, reentrant)
    ours, _ = _grads(tp, checkpoint, reentrant, state=state)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_inputs_without_grad_warn_and_give_none_like_pytorch_reentrant():
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        grads, _ = _grads(tp, checkpoint, True, x_requires_grad=False)
    assert grads == [None, None]  # PyTorch's reentrant checkpoint leaves these None too
    grads, _ = _grads(tp, checkpoint, False, x_requires_grad=False)  # non-reentrant: recorded
    assert all(g is not None for g in grads)


def test_missing_use_reentrant_warns_and_defaults_to_reentrant():
    x = tp.tensor(X, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        y = checkpoint(tp.sin, x)
    assert y.grad_fn.name() == "_RecomputeBackward"
    with pytest.raises(ValueError, match="context_fn"):
        checkpoint(tp.sin, x, use_reentrant=True, context_fn=lambda: None)


def test_recomputation_replays_the_same_dropout_mask():
    def run(ck):
        tp.manual_seed(0)
        lin = tp.nn.Linear(8, 8)
        x = tp.tensor(X, requires_grad=True)
        f = lambda a: tp.nn.functional.dropout(lin(a), 0.5, training=True)  # noqa: E731
        y = ck(f, x) if ck else f(x)
        tp.randn(3)  # draws between forward and backward must not shift the recomputed mask
        (y * y).sum().backward()
        return y.detach().numpy(), x.grad.numpy(), lin.weight.grad.numpy()

    plain = run(None)
    checked = run(lambda f, x: checkpoint(f, x, use_reentrant=True))
    for a, b in zip(checked, plain):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_sequential_matches_the_plain_sequential():
    def run(segments):
        tp.manual_seed(0)
        seq = tp.nn.Sequential(*[tp.nn.Linear(8, 8) for _ in range(4)], tp.nn.Tanh())
        x = tp.tensor(X, requires_grad=True)
        y = checkpoint_sequential(seq, segments, x, use_reentrant=True) if segments else seq(x)
        y.sum().backward()
        return [x.grad.numpy()] + [p.grad.numpy() for p in seq.parameters()]

    for a, b in zip(run(2), run(0)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.iree
def test_compiled_step_with_checkpoints_matches_eager():
    def run(compiled):
        tp.manual_seed(0)
        l0, l1, l2 = tp.nn.Linear(8, 8), tp.nn.Linear(8, 8), tp.nn.Linear(8, 2)
        opt = tp.optim.SGD([*l0.parameters(), *l1.parameters(), *l2.parameters()], lr=0.1)

        def step(x):
            opt.zero_grad()
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no warning: use_reentrant is given, h requires grad
                h = checkpoint(lambda a: tp.tanh(l1(a)), l0(x), use_reentrant=True)
            loss = l2(h).square().mean()
            loss.backward()
            opt.step()
            return loss

        f = tp.compile(step) if compiled else step
        losses = [f(tp.tensor(X)).item() for _ in range(3)]
        return losses, l1.weight.detach().numpy()

    (le, we), (lc, wc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    np.testing.assert_allclose(wc, we, rtol=1e-6, atol=1e-7)
