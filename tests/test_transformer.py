"""``nn.Transformer`` and its encoder/decoder stacks and layers, and ``nn.EmbeddingBag`` /
``F.embedding_bag``, against PyTorch with the same weights: state_dict keys, forward with
every kind of mask, gradients, and compiled forward and training steps."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

torch = pytest.importorskip("torch")

E, H, FF = 8, 2, 16
# float32 forward passes through a few layers differ from PyTorch's by at most 1.1e-6 (measured),
# hence 2e-6; gradients of the squared-sum loss (values of order 10) by at most 3e-6, hence 1e-5


def _pair(make_torch, make_ours, dtype="float32"):
    """The same module in both libraries, ours holding PyTorch's weights."""
    torch.manual_seed(0)
    theirs = make_torch().to(getattr(torch, dtype))
    ours = make_ours().to(getattr(tp, dtype))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, a), b in zip(theirs.state_dict().items(), ours.state_dict().values()):
        assert tuple(a.shape) == tuple(b.shape), k
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _both(array):
    return torch.from_numpy(array), tp.tensor(array)


# --- structure ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"bias": False, "norm_first": True, "batch_first": True}])
def test_state_dict_keys_and_shapes_are_pytorchs(kw):
    for name, args in [("TransformerEncoderLayer", (E, H, FF)), ("TransformerDecoderLayer", (E, H, FF)),
                       ("Transformer", (E, H, 2, 1, FF))]:
        _pair(lambda: getattr(torch.nn, name)(*args, **kw), lambda: getattr(nn, name)(*args, **kw))
    _pair(lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, FF, **kw), 3,
                                              torch.nn.LayerNorm(E), enable_nested_tensor=False),
          lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, **kw), 3, nn.LayerNorm(E),
                                        enable_nested_tensor=False))
    _pair(lambda: torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, FF, **kw), 2),
          lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, **kw), 2))


def test_layers_are_independent_copies_and_transformer_init_is_xavier():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF), 2, enable_nested_tensor=False)
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    np.testing.assert_array_equal(enc.layers[0].linear1.weight.detach().numpy(),
                                  enc.layers[1].linear1.weight.detach().numpy())
    tp.manual_seed(0)
    model = nn.Transformer(16, 2, 1, 1, 32)
    bound = np.sqrt(6.0 / (32 + 16))  # xavier_uniform_ of linear1.weight (32, 16)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert model.encoder.layers[0].self_attn.in_proj_bias.detach().numpy().tolist() == [0.0] * 48
    assert model.encoder.norm is not None and model.decoder.norm is not None
    assert model.encoder.use_nested_tensor is False  # batch_first=False, as PyTorch decides


def test_generate_square_subsequent_mask_is_pytorchs():
    got = nn.Transformer.generate_square_subsequent_mask(5)
    assert got.dtype is tp.float32
    np.testing.assert_array_equal(got.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(5).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=tp.float64).dtype is tp.float64


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="TransformerEncoderLayer: activation should be relu/gelu, not 'tanh'"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")
    with pytest.raises(TypeError, match="TransformerDecoderLayer: activation must be"):
        nn.TransformerDecoderLayer(E, H, activation=3)
    model = nn.Transformer(E, H, 1, 1, FF)
    with pytest.raises(ValueError, match="the batch number of src and tgt must be equal, got 2 and 3"):
        model(tp.zeros(4, 2, E), tp.zeros(4, 3, E))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        model(tp.zeros(4, 2, E), tp.zeros(4, 2, 6))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        model.encoder(tp.zeros(4, 2, E), is_causal=True)


# --- against PyTorch ----------------------------------------------------------------------------

class _Classifier:
    """An encoder over token embeddings, mean-pooled, and a linear head; in both libraries."""

    def __init__(self, lib, batch_first, norm_first, activation):
        lnn = lib.nn
        act = getattr(lnn.functional, activation[2:]) if activation.startswith("F.") else activation
        layer = lnn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=act,
                                            batch_first=batch_first, norm_first=norm_first)
        self.modules = lnn.ModuleDict({
            "emb": lnn.Embedding(11, E),
            "encoder": lnn.TransformerEncoder(layer, 2, lnn.LayerNorm(E), enable_nested_tensor=False),
            "head": lnn.Linear(E, 3)})
        self.batch_first = batch_first

    def loss(self, lib, tokens, labels, mask, padding):
        m = self.modules
        x = m["emb"](tokens)
        if not self.batch_first:
            x = x.transpose(0, 1)
        h = m["encoder"](x, mask=mask, src_key_padding_mask=padding)
        pooled = h.mean(1 if self.batch_first else 0)
        return lib.nn.functional.cross_entropy(m["head"](pooled), labels)


@pytest.mark.parametrize("batch_first,norm_first,activation,causal", [
    (False, False, "relu", False), (True, True, "gelu", True), (True, False, "F.silu", True)])
def test_encoder_classifier_loss_and_gradients_match_pytorch(batch_first, norm_first, activation, causal):
    theirs, ours = _pair(lambda: _Classifier(torch, batch_first, norm_first, activation).modules,
                         lambda: _Classifier(tp, batch_first, norm_first, activation).modules)
    tc, oc = _Classifier.__new__(_Classifier), _Classifier.__new__(_Classifier)
    tc.modules, oc.modules, tc.batch_first, oc.batch_first = theirs, ours, batch_first, batch_first
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 11, (3, 5))
    labels = rng.integers(0, 3, 3)
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = padding[2, 4:] = True
    mask = np.triu(np.ones((5, 5), bool), 1) if causal else None
    want = tc.loss(torch, *(None if a is None else torch.from_numpy(a) for a in (tokens, labels, mask, padding)))
    want.backward()
    got = oc.loss(tp, *(None if a is None else tp.tensor(a) for a in (tokens, labels, mask, padding)))
    got.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    for (name, p), q in zip(theirs.named_parameters(), ours.parameters()):
        # float32 sums over a few hundred terms: measured differences are below 1e-7
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=5e-7, err_msg=name)


def _seq2seq_inputs(batch_first, rng):
    s, t, n = 6, 5, 3
    src = rng.standard_normal((n, s, E) if batch_first else (s, n, E)).astype(np.float32)
    tgt = rng.standard_normal((n, t, E) if batch_first else (t, n, E)).astype(np.float32)
    src_pad = np.zeros((n, s), bool)
    src_pad[0, 4:] = src_pad[2, 5:] = True
    tgt_pad = np.zeros((n, t), bool)
    tgt_pad[1, 4:] = True
    return src, tgt, src_pad, tgt_pad


@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, False), (True, True)])
def test_seq2seq_transformer_with_causal_and_padding_masks_matches_pytorch(batch_first, norm_first):
    kw = dict(dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    theirs, ours = _pair(lambda: torch.nn.Transformer(E, H, 2, 2, FF, **kw),
                         lambda: nn.Transformer(E, H, 2, 2, FF, **kw))
    theirs.eval(), ours.eval()
    src, tgt, src_pad, tgt_pad = _seq2seq_inputs(batch_first, np.random.default_rng(1))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1 if batch_first else 0])
    with torch.no_grad():  # batch_first post-norm under no_grad: PyTorch's nested-tensor encoder
        want = theirs(torch.from_numpy(src), torch.from_numpy(tgt), tgt_mask=mask,
                      src_key_padding_mask=torch.from_numpy(src_pad),
                      tgt_key_padding_mask=torch.from_numpy(tgt_pad),
                      memory_key_padding_mask=torch.from_numpy(src_pad), tgt_is_causal=True).numpy()
    with tp.no_grad():
        got = ours(tp.tensor(src), tp.tensor(tgt), tgt_mask=tp.tensor(mask.numpy()),
                   src_key_padding_mask=tp.tensor(src_pad), tgt_key_padding_mask=tp.tensor(tgt_pad),
                   memory_key_padding_mask=tp.tensor(src_pad), tgt_is_causal=True).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    # training mode (dropout 0) with a float memory mask, gradients of the inputs
    theirs.train(), ours.train()
    memory_mask = np.linspace(-1, 0, tgt.shape[1 if batch_first else 0] * src.shape[1 if batch_first else 0],
                              dtype=np.float32).reshape(-1, src.shape[1 if batch_first else 0])
    (ts, os_), (tt, ot) = _both(src), _both(tgt)
    ts.requires_grad_(), os_.requires_grad_(), tt.requires_grad_(), ot.requires_grad_()
    want = theirs(ts, tt, tgt_mask=mask, memory_mask=torch.from_numpy(memory_mask))
    got = ours(os_, ot, tgt_mask=tp.tensor(mask.numpy()), memory_mask=tp.tensor(memory_mask))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-6, atol=2e-6)
    want.square().sum().backward()
    got.square().sum().backward()
    np.testing.assert_allclose(os_.grad.numpy(), ts.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ot.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_encoder_zeroes_padded_positions_where_pytorch_uses_nested_tensors():
    theirs, ours = _pair(lambda: torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(E, H, FF, batch_first=True), 2, torch.nn.LayerNorm(E)),
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, batch_first=True), 2,
                                      nn.LayerNorm(E)))
    assert ours.use_nested_tensor and theirs.use_nested_tensor
    theirs.eval(), ours.eval()
    x = np.random.default_rng(2).standard_normal((3, 5, E)).astype(np.float32)
    right = np.zeros((3, 5), bool)
    right[0, 3:] = right[1, 4:] = True
    middle = right.copy()
    middle[2, 1] = True  # padding inside a row: PyTorch keeps the dense path
    for pad in (right, middle):
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                want = theirs(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).detach().numpy()
            with tp.set_grad_enabled(grad):
                got = ours(tp.tensor(x), src_key_padding_mask=tp.tensor(pad)).detach().numpy()
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_unbatched_decoder_layer_and_callable_activation_match_pytorch():
    theirs, ours = _pair(lambda: torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation=torch.tanh),
                         lambda: nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation=tp.tanh))
    rng = np.random.default_rng(3)
    tgt, mem = rng.standard_normal((4, E)).astype(np.float32), rng.standard_normal((6, E)).astype(np.float32)
    pad = np.array([False] * 5 + [True])
    want = theirs(torch.from_numpy(tgt), torch.from_numpy(mem), memory_key_padding_mask=torch.from_numpy(pad))
    got = ours(tp.tensor(tgt), tp.tensor(mem), memory_key_padding_mask=tp.tensor(pad))
    assert tuple(got.shape) == (4, E)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-6, atol=2e-6)


# --- compiled ------------------------------------------------------------------------------------

@pytest.mark.iree
def test_compiled_transformer_forward_equals_eager():
    tp.compiler.reset()
    tp.manual_seed(0)
    model = nn.Transformer(E, H, 1, 1, FF, dropout=0.0, batch_first=True).eval()
    rng = np.random.default_rng(4)
    src, tgt = tp.tensor(rng.standard_normal((2, 5, E)).astype(np.float32)), \
        tp.tensor(rng.standard_normal((2, 4, E)).astype(np.float32))
    pad = np.zeros((2, 5), bool)
    pad[1, 3:] = True
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    run = tp.compile(lambda s, t, p: model(s, t, tgt_mask=mask, src_key_padding_mask=p,
                                           memory_key_padding_mask=p), fullgraph=True)
    with tp.no_grad():
        want = model(src, tgt, tgt_mask=mask, src_key_padding_mask=tp.tensor(pad),
                     memory_key_padding_mask=tp.tensor(pad)).numpy()
        got = run(src, tgt, tp.tensor(pad)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    tp.compiler.reset()


@pytest.mark.iree
def test_compiled_training_step_equals_eager():
    def train(compiled):
        tp.compiler.reset()
        tp.manual_seed(0)
        net = _Classifier(tp, True, False, "relu")
        # SGD, not Adam: the key bias's exact gradient is 0 and both runs hold rounding noise
        # there, which Adam's normalization would scale up to full steps
        opt = tp.optim.SGD(net.modules.parameters(), lr=0.1, momentum=0.9)
        mask = tp.tensor(np.triu(np.ones((5, 5), bool), 1))

        def step(tokens, labels):
            loss = net.loss(tp, tokens, labels, mask, None)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        run = tp.compile(step) if compiled else step
        rng = np.random.default_rng(5)
        losses = [float(run(tp.tensor(rng.integers(0, 11, (4, 5))), tp.tensor(rng.integers(0, 3, 4))))
                  for _ in range(3)]
        return losses, [p.detach().numpy().copy() for p in net.modules.parameters()], run

    want, want_params, _ = train(False)
    got, got_params, run = train(True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert run.compile_count == 1
    for a, b in zip(got_params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    tp.compiler.reset()


# --- EmbeddingBag ----------------------------------------------------------------------------------

_BAGS = {  # name: (input, offsets, extra keyword arguments)
    "offsets": (np.array([1, 2, 4, 5, 4, 3, 2, 9, 0]), np.array([0, 2, 2, 5]), {}),
    "last_offset": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 5, 8]), {"include_last_offset": True}),
    "2d": (np.array([[1, 2, 3], [4, 2, 2], [9, 0, 0]]), None, {}),
    "padding": (np.array([1, 2, 4, 5, 2, 3, 2, 2]), np.array([0, 2, 4, 7]), {"padding_idx": 2}),
    "padding_2d": (np.array([[1, 2, 3], [2, 2, 2]]), None, {"padding_idx": -8}),
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", sorted(_BAGS))
def test_embedding_bag_and_its_gradients_match_pytorch(case, mode):
    idx, offsets, kw = _BAGS[case]
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(10, 3, mode=mode, **kw).double()
    ours = nn.EmbeddingBag(10, 3, mode=mode, **kw).double()
    ours.load_state_dict(theirs.state_dict())
    args_t = [torch.from_numpy(idx)] + ([] if offsets is None else [torch.from_numpy(offsets)])
    args_o = [tp.tensor(idx)] + ([] if offsets is None else [tp.tensor(offsets)])
    psw = np.linspace(0.5, 2, idx.size).reshape(idx.shape) if mode == "sum" else None
    if psw is not None:
        tw, ow = torch.tensor(psw, requires_grad=True), tp.tensor(psw, requires_grad=True)
        want, got = theirs(*args_t, per_sample_weights=tw), ours(*args_o, per_sample_weights=ow)
    else:
        want, got = theirs(*args_t), ours(*args_o)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(6).standard_normal(tuple(want.shape))
    want.backward(torch.from_numpy(g))
    got.backward(tp.tensor(g))
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-12)
    if psw is not None:
        np.testing.assert_allclose(ow.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_functional_embedding_bag_float32_int32_and_errors():
    w = np.random.default_rng(7).standard_normal((6, 4)).astype(np.float32)
    idx, offsets = np.array([0, 5, 3, 3], np.int32), np.array([0, 1], np.int32)
    want = torch.nn.functional.embedding_bag(torch.from_numpy(idx), torch.from_numpy(w), torch.from_numpy(offsets))
    got = F.embedding_bag(tp.tensor(idx), tp.tensor(w), tp.tensor(offsets))
    assert got.dtype is tp.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    x, wt = tp.tensor(idx), tp.tensor(w)
    with pytest.raises(ValueError, match="embedding_bag: offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(x, wt)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(tp.tensor([[1, 2]]), wt, tp.tensor([0]))
    with pytest.raises(ValueError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(x, wt, tp.tensor(offsets), per_sample_weights=tp.ones(4))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        nn.EmbeddingBag(6, 4, mode="min")
    with pytest.raises(ValueError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(x, wt, tp.tensor([1, 2]))
    with pytest.raises(IndexError, match="embedding_bag: index out of range"):
        F.embedding_bag(tp.tensor([0, 6]), wt, tp.tensor([0]))
    with pytest.raises(TypeError, match="Long, Int"):
        F.embedding_bag(tp.tensor([0.0]), wt, tp.tensor([0]))
    bag = nn.EmbeddingBag.from_pretrained(wt, mode="max")
    assert not bag.weight.requires_grad and repr(bag) == "EmbeddingBag(6, 4, mode='max')"


@pytest.mark.iree
def test_compiled_embedding_bag_equals_eager():
    tp.compiler.reset()
    w = tp.tensor(np.random.default_rng(8).standard_normal((10, 3)).astype(np.float32))

    def bags(i, o, p):
        return (F.embedding_bag(i, w, o, mode="max", padding_idx=2),
                F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                F.embedding_bag(S2, w, mode="mean", padding_idx=2))

    S2 = tp.tensor([[1, 2, 3], [2, 2, 2]])
    args = tp.tensor([1, 2, 4, 5, 4, 3, 2, 9]), tp.tensor([0, 2, 2, 5]), tp.linspace(0.5, 2, 8)
    for got, want in zip(tp.compile(bags, fullgraph=True)(*args), bags(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    tp.compiler.reset()
