"""Whole models written once for both libraries (tensorplay/examples/models.py): a nanoGPT-style
decoder in two attention variants, a small CNN and an attention classifier. They run on
tensorplay alone and, with PyTorch installed, load its weights and match its outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.examples.models import GPTConfig, build_attention_classifier, build_cnn, build_gpt

VARIANTS = {"tril_mask": False, "sdpa_causal": True}


def _tokens(cfg, batch=2, length=11, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, cfg.vocab_size, (batch, length))
    targets = rng.integers(0, cfg.vocab_size, (batch, length))
    targets[0, 3] = -1  # ignored position
    return idx, targets


# --- tensorplay alone ------------------------------------------------------------------------

@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_runs_on_tensorplay_alone(variant):
    cfg = GPTConfig(use_sdpa=VARIANTS[variant])
    tp.manual_seed(0)
    model = build_gpt(tp, cfg).eval()
    idx, targets = _tokens(cfg)
    logits, loss = model(tp.tensor(idx), tp.tensor(targets))
    assert logits.shape == (2, 11, cfg.vocab_size) and logits.dtype is tp.float32
    assert np.isfinite(logits.detach().numpy()).all()
    assert loss.shape == () and math.isfinite(loss.item())
    # untrained with small weights: the loss is close to log(vocab)
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.5
    last, none = model(tp.tensor(idx))
    assert last.shape == (2, 1, cfg.vocab_size) and none is None
    np.testing.assert_allclose(last.detach().numpy()[:, 0], logits.detach().numpy()[:, -1], rtol=1e-5, atol=1e-6)
    assert model.generate(tp.tensor(idx), 3).shape == (2, 14)


def test_gpt_ties_embedding_and_head_weights():
    cfg = GPTConfig()
    model = build_gpt(tp, cfg)
    assert model.transformer.wte.weight is model.lm_head.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "transformer.wte.weight" in names
    assert "lm_head.weight" in model.state_dict()
    n_params = sum(p.numel() for p in model.parameters())
    per_block = 2 * 2 * cfg.n_embd + (3 * cfg.n_embd ** 2 + 3 * cfg.n_embd) + (cfg.n_embd ** 2 + cfg.n_embd) \
        + (4 * cfg.n_embd ** 2 + 4 * cfg.n_embd) + (4 * cfg.n_embd ** 2 + cfg.n_embd)
    expected = (cfg.vocab_size + cfg.block_size) * cfg.n_embd + cfg.n_layer * per_block + 2 * cfg.n_embd
    assert n_params == expected
    assert [n for n, _ in model.named_buffers()] == [f"transformer.h.{i}.attn.bias" for i in range(cfg.n_layer)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_is_deterministic_under_manual_seed(variant):
    cfg = GPTConfig(use_sdpa=VARIANTS[variant], dropout=0.1)
    idx, _ = _tokens(cfg)
    outputs = []
    for _ in range(2):
        tp.manual_seed(1234)
        model = build_gpt(tp, cfg)  # training mode: dropout draws from the seeded generator
        outputs.append(model(tp.tensor(idx))[0].detach().numpy())
    np.testing.assert_array_equal(outputs[0], outputs[1])
    model.eval()
    assert not np.array_equal(model(tp.tensor(idx))[0].detach().numpy(), outputs[0])


def test_gpt_variants_agree_with_the_same_weights():
    cfg = GPTConfig()
    tp.manual_seed(0)
    masked = build_gpt(tp, cfg).eval()
    fused = build_gpt(tp, GPTConfig(use_sdpa=True)).eval()
    fused.load_state_dict(masked.state_dict(), strict=False)
    idx, targets = _tokens(cfg)
    a, la = masked(tp.tensor(idx), tp.tensor(targets))
    b, lb = fused(tp.tensor(idx), tp.tensor(targets))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert la.item() == pytest.approx(lb.item(), rel=1e-6)


def test_gpt_runs_in_float64():
    cfg = GPTConfig()
    model = build_gpt(tp, cfg).double().eval()
    idx, targets = _tokens(cfg)
    logits, loss = model(tp.tensor(idx), tp.tensor(targets))
    assert logits.dtype is tp.float64 and loss.dtype is tp.float64


def test_cnn_runs_on_tensorplay_alone():
    tp.manual_seed(0)
    model = build_cnn(tp).eval()
    x = tp.randn(4, 1, 12, 12)
    out = model(x)
    assert out.shape == (4, 10)
    np.testing.assert_allclose(np.exp(out.detach().numpy()).sum(1), np.ones(4), rtol=1e-5)
    tp.manual_seed(0)
    again = build_cnn(tp).eval()
    np.testing.assert_array_equal(again(x).detach().numpy(), out.detach().numpy())
    assert [n for n, _ in model.named_parameters()] == [
        "features.0.weight", "features.0.bias", "features.3.weight", "features.3.bias", "fc1.weight",
        "fc1.bias", "fc2.weight", "fc2.bias"]


def test_attention_classifier_runs_on_tensorplay_alone():
    tp.manual_seed(0)
    model = build_attention_classifier(tp).eval()
    tokens = tp.tensor([[3, 5, 7, 0, 0], [1, 2, 3, 4, 5]])
    logits, weights = model(tokens, tokens == 0)
    assert logits.shape == (2, 3) and weights.shape == (2, 5, 5)
    np.testing.assert_allclose(weights.detach().numpy()[0, :, 3:], 0.0)


# --- against PyTorch ------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _state_from(torch_model, as_numpy=True):
    return {k: (v.detach().numpy() if as_numpy else v) for k, v in torch_model.state_dict().items()}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-4), ("float64", 1e-10)])
def test_gpt_matches_torch(variant, dtype, rtol):
    torch = _torch()
    cfg = GPTConfig(use_sdpa=VARIANTS[variant])
    torch.manual_seed(0)
    theirs = build_gpt(torch, cfg).to(getattr(torch, dtype)).eval()
    ours = build_gpt(tp, cfg).to(getattr(tp, dtype)).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    result = ours.load_state_dict(_state_from(theirs))
    assert not result.missing_keys and not result.unexpected_keys
    assert ours.transformer.wte.weight is ours.lm_head.weight
    idx, targets = _tokens(cfg)
    with torch.no_grad():
        t_logits, t_loss = theirs(torch.from_numpy(idx), torch.from_numpy(targets))
        t_last, _ = theirs(torch.from_numpy(idx))
    p_logits, p_loss = ours(tp.tensor(idx), tp.tensor(targets))
    p_last, _ = ours(tp.tensor(idx))
    assert p_logits.dtype.name == dtype
    np.testing.assert_allclose(p_logits.detach().numpy(), t_logits.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(p_last.detach().numpy(), t_last.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
    assert p_loss.item() == pytest.approx(t_loss.item(), rel=rtol)


def test_gpt_loads_torch_tensors_directly_and_generates_the_same_tokens():
    torch = _torch()
    cfg = GPTConfig()
    torch.manual_seed(3)
    theirs = build_gpt(torch, cfg).double().eval()
    with torch.no_grad():  # larger weights so greedy decoding has clear winners
        for p in theirs.parameters():
            p.mul_(20)
    ours = build_gpt(tp, cfg).double().eval()
    ours.load_state_dict(theirs.state_dict())
    idx, _ = _tokens(cfg, length=6)
    with torch.no_grad():
        expected = theirs.generate(torch.from_numpy(idx), 12).detach().numpy()
    got = ours.generate(tp.tensor(idx), 12).detach().numpy()
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(expected[:, 6:])) > 2


def test_gpt_training_mode_loss_matches_torch_without_dropout():
    torch = _torch()
    cfg = GPTConfig(dropout=0.0)
    torch.manual_seed(0)
    theirs = build_gpt(torch, cfg)
    ours = build_gpt(tp, cfg)
    ours.load_state_dict(_state_from(theirs))
    idx, targets = _tokens(cfg, seed=5)
    with torch.no_grad():
        _, t_loss = theirs(torch.from_numpy(idx), torch.from_numpy(targets))
    _, p_loss = ours(tp.tensor(idx), tp.tensor(targets))
    assert p_loss.item() == pytest.approx(t_loss.item(), rel=1e-5)


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-4), ("float64", 1e-10)])
def test_cnn_matches_torch(dtype, rtol):
    torch = _torch()
    torch.manual_seed(0)
    theirs = build_cnn(torch).to(getattr(torch, dtype)).eval()
    ours = build_cnn(tp).to(getattr(tp, dtype)).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(_state_from(theirs, as_numpy=False))
    x = np.random.default_rng(0).standard_normal((5, 1, 12, 12)).astype(dtype)
    with torch.no_grad():
        expected = theirs(torch.from_numpy(x)).detach().numpy()
    got = ours(tp.tensor(x))
    assert got.dtype.name == dtype
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=rtol, atol=rtol * 1e-2)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-4), ("float64", 1e-10)])
def test_attention_classifier_matches_torch(dtype, rtol):
    torch = _torch()
    torch.manual_seed(0)
    theirs = build_attention_classifier(torch).to(getattr(torch, dtype)).eval()
    ours = build_attention_classifier(tp).to(getattr(tp, dtype)).eval()
    ours.load_state_dict(_state_from(theirs))
    tokens = np.array([[3, 5, 7, 0, 0], [1, 2, 3, 4, 5], [9, 0, 0, 0, 0]])
    with torch.no_grad():
        t_logits, t_weights = theirs(torch.from_numpy(tokens), torch.from_numpy(tokens == 0))
    p_logits, p_weights = ours(tp.tensor(tokens), tp.tensor(tokens == 0))
    np.testing.assert_allclose(p_logits.detach().numpy(), t_logits.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(p_weights.detach().numpy(), t_weights.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)


# --- capture ---------------------------------------------------------------------------------------

class _SymbolicTrace:
    """A capture handler that records every op and answers with data-less tensors, so any
    step that bypasses the tp ops (numpy on values, ``bool(t)``, ``.item()``) fails."""

    def __init__(self):
        self.ops: list[str] = []

    def __call__(self, op, operands, attrs, result_types):
        self.ops.append(op.name)
        outs = tuple(tp.Tensor._from_type(t, capture=len(self.ops)) for t in result_types)
        return outs[0] if len(outs) == 1 else outs


def _symbolic(array):
    return tp.Tensor._from_type(tp.tensor(array)._tensor_type(), capture="input")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gpt_traces_through_tp_ops_only(variant):
    from tensorplay._dispatch import capture_handler

    cfg = GPTConfig(use_sdpa=VARIANTS[variant])
    model = build_gpt(tp, cfg).eval()
    idx, targets = _tokens(cfg)
    trace = _SymbolicTrace()
    with capture_handler(trace):
        logits, loss = model(_symbolic(idx), _symbolic(targets))
    assert tuple(logits.shape) == (2, 11, cfg.vocab_size) and tuple(loss.shape) == ()
    assert {"tp.matmul", "tp.softmax", "tp.layer_norm", "tp.log_softmax", "tp.gather"} <= set(trace.ops)


def test_cnn_and_attention_classifier_trace_through_tp_ops_only():
    from tensorplay._dispatch import capture_handler

    cnn, classifier = build_cnn(tp).eval(), build_attention_classifier(tp).eval()
    tokens = np.array([[3, 5, 0], [1, 2, 3]])
    trace = _SymbolicTrace()
    with capture_handler(trace):
        out = cnn(_symbolic(np.zeros((2, 1, 12, 12), np.float32)))
        logits, _ = classifier(_symbolic(tokens), _symbolic(tokens == 0))
    assert tuple(out.shape) == (2, 10) and tuple(logits.shape) == (2, 3)
    assert {"tp.conv2d", "tp.max_pool2d", "tp.avg_pool2d", "tp.softmax"} <= set(trace.ops)


@pytest.mark.parametrize("dtype,tol", [("float16", 2e-3), ("bfloat16", 2e-2)])
def test_gpt_in_half_precision_stays_close_to_float32(dtype, tol):
    cfg = GPTConfig(use_sdpa=True)
    tp.manual_seed(0)
    model = build_gpt(tp, cfg).eval()
    idx, _ = _tokens(cfg)
    reference = model(tp.tensor(idx))[0].detach().numpy()
    out = model.to(getattr(tp, dtype))(tp.tensor(idx))[0]
    assert out.dtype.name == dtype
    np.testing.assert_allclose(out.float().detach().numpy(), reference, atol=tol)
