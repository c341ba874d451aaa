"""A word-level language model trained the way pytorch/examples' word_language_model trains
it: token embedding, a two-layer recurrent network, a linear decoder to log-probabilities;
the corpus cut into ``bsz`` columns and read in ``bptt``-step chunks, the hidden state carried
from chunk to chunk with its history cut, gradients clipped to norm 0.25 and the weights
updated by hand through ``p.data``. The same code runs on tensorplay and on PyTorch from the
same weights (loss per step compared), and as a compiled step with dynamic sizes (one program
for every chunk length and batch size) against eager tensorplay."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

VOCAB, EMSIZE, NHID, NLAYERS = 30, 16, 32, 2


def _model_class(lib):
    """The model, written once against ``lib`` (tensorplay or torch)."""
    nn = lib.nn

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.ntoken, self.rnn_type, self.nhid, self.nlayers = ntoken, rnn_type, nhid, nlayers
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type.startswith("RNN_"):
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=rnn_type[4:].lower(), dropout=dropout)
            else:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, tokens, hidden):
            output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
            logits = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return nn.functional.log_softmax(logits, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            shape = (self.nlayers, bsz, self.nhid)
            if self.rnn_type == "LSTM":
                return weight.new_zeros(*shape), weight.new_zeros(*shape)
            return weight.new_zeros(*shape)

    return RNNModel


def _corpus(n=2000, seed=0):
    """Token ids: each token follows from the one before (t -> 7t + 3 mod VOCAB) nine times in
    ten, else a uniformly drawn one: a source of about 0.64 nats a token, against ln 30 = 3.40
    for a model that has learnt nothing."""
    rng = np.random.default_rng(seed)
    tokens = np.empty(n, np.int64)
    tokens[0] = 0
    for i in range(1, n):
        tokens[i] = (7 * tokens[i - 1] + 3) % VOCAB if rng.random() < 0.9 else rng.integers(VOCAB)
    return tokens


def _batchify(lib, data, bsz):
    """(nbatch, bsz): column j holds the j-th consecutive stretch of the corpus."""
    nbatch = len(data) // bsz
    return lib.tensor(data[:nbatch * bsz]).view(bsz, -1).t().contiguous()


def _get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def _repackage_hidden(lib, h):
    """The hidden state with its history cut (a new leaf per tensor)."""
    if isinstance(h, lib.Tensor):
        return h.detach()
    return tuple(_repackage_hidden(lib, v) for v in h)


def _make_step(lib, model, lr, norms=None):
    """One training step of the example: forward, NLL loss, backward, clip, SGD through .data."""
    criterion = lib.nn.NLLLoss()

    def train_step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # foreach=False: the single-tensor clipping, eager in both libraries (tensorplay's
        # multi-tensor clipping runs as a compiled program from the third call; tests/test_training.py)
        total = lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25, foreach=False)
        if norms is not None:
            norms.append(total)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss, hidden

    return train_step


def _train(lib, model, step, data, schedule, bptt):
    """Epochs over ``data``, one (batch size, epochs) pair of ``schedule`` after the other;
    returns the loss of every step and the (chunk length, batch size) of every step."""
    losses, shapes = [], []
    model.train()
    for bsz, epochs in schedule:
        source = _batchify(lib, data, bsz)
        for _ in range(epochs):
            hidden = model.init_hidden(bsz)
            for i in range(0, source.size(0) - 1, bptt):
                x, y = _get_batch(source, i, bptt)
                loss, hidden = step(x, y, _repackage_hidden(lib, hidden))
                losses.append(loss.item())
                shapes.append(tuple(x.shape))
    return np.array(losses), shapes


def _mean_loss(lib, model, data, bsz=10, bptt=20):
    """The eval-mode loss over the whole corpus, as the example's ``evaluate``."""
    model.eval()
    source = _batchify(lib, data, bsz)
    total, count = 0.0, 0
    with lib.no_grad():
        hidden = model.init_hidden(bsz)
        for i in range(0, source.size(0) - 1, bptt):
            x, y = _get_batch(source, i, bptt)
            output, hidden = model(x, hidden)
            total += len(x) * lib.nn.functional.nll_loss(output, y).item()
            count += len(x)
    return total / count


# Tolerances of the float64 comparison after 200 steps: (rtol of the losses, rtol of the total
# gradient norms, atol of the final weights). Measured largest differences from PyTorch:
#   LSTM      losses 1.2e-11, norms 5.0e-11, weights 5.3e-11
#   GRU       losses 4.1e-15, norms 1.4e-14, weights 1.9e-14
#   RNN_TANH  losses 2.1e-12, norms 4.3e-12, weights 9.1e-12
# The rounding differences of the first steps (4e-16 in the losses) are amplified by the training
# itself, most while the loss leaves its plateau (LSTM: below 1e-15 for 80 steps, then about 10x
# more every 20 to 40 steps until step 160); the tolerances leave a factor of about 5 for other
# CPUs' summation orders.
_TOL = {"LSTM": (6e-11, 2.5e-10, 2.5e-10), "GRU": (2e-14, 7e-14, 1e-13), "RNN_TANH": (1e-11, 2e-11, 5e-11)}


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN_TANH"])
def test_training_matches_pytorch_step_by_step(rnn_type):
    torch = pytest.importorskip("torch")
    lr, bsz, bptt, epochs = 5.0, 20, 5, 10  # 100 rows of 20 columns: 20 chunks an epoch, 200 steps
    torch.manual_seed(0)
    theirs = _model_class(torch)(rnn_type, VOCAB, EMSIZE, NHID, NLAYERS).double()
    ours = _model_class(tp)(rnn_type, VOCAB, EMSIZE, NHID, NLAYERS).to(tp.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    data = _corpus()
    their_norms, our_norms = [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: threads only wait for each other (seconds on a busy machine)
    try:
        want, want_shapes = _train(torch, theirs, _make_step(torch, theirs, lr, their_norms), data,
                                   [(bsz, epochs)], bptt)
    finally:
        torch.set_num_threads(threads)
    got, got_shapes = _train(tp, ours, _make_step(tp, ours, lr, our_norms), data, [(bsz, epochs)], bptt)
    assert got_shapes == want_shapes and len(got) == 200
    assert all(n.dtype is tp.float64 for n in our_norms)  # the total norm in the gradients' dtype
    loss_rtol, norm_rtol, weight_atol = _TOL[rnn_type]
    np.testing.assert_allclose(got, want, rtol=loss_rtol, atol=0, err_msg="loss per step")
    np.testing.assert_allclose([n.item() for n in our_norms], [n.item() for n in their_norms],
                               rtol=norm_rtol, atol=0, err_msg="total gradient norm per step")
    # learnt: from ln(30) = 3.40 to well under half of it (measured means of the last 20 steps:
    # LSTM 1.48, GRU 0.65, RNN_TANH 0.59)
    assert abs(got[0] - np.log(VOCAB)) < 0.01
    assert got[-20:].mean() < 0.5 * np.log(VOCAB)
    for (k, a), b in zip(theirs.state_dict().items(), ours.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=weight_atol, err_msg=k)
    # the example's evaluation of the trained model (measured 1.6e-11, 2.4e-15, 7.1e-14 relative)
    assert _mean_loss(tp, ours, data) == pytest.approx(_mean_loss(torch, theirs, data), rel=loss_rtol, abs=0)


def test_training_with_dropout_lowers_the_loss():
    """Dropout on the embeddings, between the layers and on the outputs (random draws differ
    from PyTorch's, so only the effect is checked)."""
    tp.manual_seed(0)
    model = _model_class(tp)("LSTM", VOCAB, EMSIZE, NHID, NLAYERS, dropout=0.2).to(tp.float64)
    data = _corpus()
    before = _mean_loss(tp, model, data)
    tokens = _batchify(tp, data, 4)[:5]
    model.train()
    with tp.no_grad():
        first, _ = model(tokens, model.init_hidden(4))
        second, _ = model(tokens, model.init_hidden(4))
    assert not np.array_equal(first.numpy(), second.numpy())  # dropout draws anew
    losses, _ = _train(tp, model, _make_step(tp, model, 20.0), data, [(20, 6)], 5)
    after = _mean_loss(tp, model, data)
    # measured with seeds 0, 1, 2: eval loss 3.40 -> 1.06, 1.16, 1.26; mean training loss of
    # the last 20 steps 1.41, 1.43, 1.64 (of the first 20: 3.37 to 3.38)
    assert abs(before - np.log(VOCAB)) < 0.01
    assert after < 2.0 and losses[-20:].mean() < 2.2


@pytest.mark.iree
def test_compiled_training_step_with_dynamic_sizes_equals_eager():
    """One program for chunks of 35 steps and the shorter last chunk of each epoch, and for
    batch sizes 20 and 16 (the hidden state's size changes with them)."""
    data = _corpus()
    schedule = [(20, 1), (16, 1), (20, 1)]  # 100 rows: 35, 35, 29; 125 rows: 35, 35, 35, 19

    def run(compiled):
        tp.compiler.reset()
        tp.manual_seed(0)
        model = _model_class(tp)("LSTM", VOCAB, EMSIZE, NHID, NLAYERS)
        step = _make_step(tp, model, 5.0)
        if compiled:
            step = tp.compile(step, dynamic=True, backend="iree-cpu")
        losses, shapes = _train(tp, model, step, data, schedule, 35)
        return losses, shapes, step, [p.detach().numpy().copy() for p in model.parameters()]

    want, want_shapes, _, want_params = run(False)
    got, shapes, step, got_params = run(True)
    tp.compiler.reset()
    assert shapes == want_shapes
    assert shapes == [(35, 20), (35, 20), (29, 20), (35, 16), (35, 16), (35, 16), (19, 16),
                      (35, 20), (35, 20), (29, 20)]
    assert step.compile_count == 1
    # float32, the compiled kernels round differently from numpy: measured up to 1.4e-7
    # relative in the losses and 1.5e-7 absolute in the weights (values up to 0.52)
    np.testing.assert_allclose(got, want, rtol=6e-7, atol=0)
    for a, b in zip(got_params, want_params):
        np.testing.assert_allclose(a, b, rtol=0, atol=5e-7)
