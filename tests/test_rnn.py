"""``nn.RNN``/``LSTM``/``GRU``, their cells and ``nn.utils.rnn`` against PyTorch with the same
weights (PyTorch's state_dict loaded): outputs, final states and the gradients of the input, the
initial states and every parameter, for the options that change the computation; packed
sequences; errors; and a compiled forward and training step against eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

I_, H_, P_ = 3, 5, 2  # input size, hidden size, LSTM projection size
# Measured largest differences from PyTorch over every comparison below (outputs, states and
# gradients, values of order 1): float64 8.9e-16, float32 4.8e-7; the tolerances leave a factor
# of about 4 for other CPUs' summation orders.
TOL = {"float64": {"rtol": 1e-14, "atol": 4e-15}, "float32": {"rtol": 1e-6, "atol": 2e-6}}


def _pair(name, args, kw, dtype):
    """The same module in both libraries, ours holding PyTorch's weights."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kw).to(getattr(torch, dtype))
    ours = getattr(nn, name)(*args, **kw).to(getattr(tp, dtype))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, a), b in zip(theirs.state_dict().items(), ours.state_dict().values()):
        assert tuple(a.shape) == tuple(b.shape), k
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _leaf(array):
    return torch.tensor(array, requires_grad=True), tp.tensor(array, requires_grad=True)


def _flat(x):
    """Tensors of a (possibly nested) result, in order."""
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _flat(item)]
    return [x] if x is not None else []


def _close(got, want, dtype, what):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype], err_msg=what)


def _compare_backward(theirs, ours, t_out, o_out, leaves, dtype, seed=1):
    """Backpropagate the same random cotangents through both results and compare the gradients
    of ``leaves`` (pairs) and of every parameter."""
    rng = np.random.default_rng(seed)
    t_loss, o_loss = 0, 0
    for a, b in zip(_flat(t_out), _flat(o_out)):
        w = rng.standard_normal(tuple(a.shape)).astype(dtype)
        t_loss = t_loss + (a * torch.from_numpy(w)).sum()
        o_loss = o_loss + (b * tp.tensor(w)).sum()
    t_loss.backward()
    o_loss.backward()
    for i, (a, b) in enumerate(leaves):
        _close(b.grad, a.grad, dtype, f"grad of leaf {i}")
    for (k, a), b in zip(theirs.named_parameters(), ours.parameters()):
        _close(b.grad, a.grad, dtype, f"grad of {k}")


# --- structure --------------------------------------------------------------------------------

def test_parameters_names_init_and_repr_are_pytorchs():
    kw = {"num_layers": 2, "bias": False, "batch_first": True, "dropout": 0.25, "bidirectional": True}
    for name, extra in [("LSTM", {"proj_size": P_}), ("GRU", {}), ("RNN", {"nonlinearity": "relu"})]:
        theirs, ours = _pair(name, (I_, H_), {**kw, **extra}, "float32")
        assert repr(ours) == repr(theirs)
        assert ours._flat_weights_names == theirs._flat_weights_names
        assert [[p.shape for p in ws] for ws in ours.all_weights] == \
            [[tuple(p.shape) for p in ws] for ws in theirs.all_weights]
        assert ours.flatten_parameters() is None
    for name, args in [("RNNCell", (I_, H_, False, "relu")), ("LSTMCell", (I_, H_)), ("GRUCell", (I_, H_))]:
        theirs, ours = _pair(name, args, {}, "float32")
        assert repr(ours) == repr(theirs)
    tp.manual_seed(0)
    bound = 1 / np.sqrt(16)
    for module in (nn.LSTM(8, 16, proj_size=4, bidirectional=True), nn.GRUCell(8, 16)):
        for p in module.parameters():
            values = np.abs(p.detach().numpy())
            assert values.max() <= bound and values.max() > 0.9 * bound
    assert nn.GRU(2, 3, dtype=tp.float64).weight_hh_l0.dtype is tp.float64


def test_a_state_dict_saved_by_pytorch_loads():
    st = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(I_, H_, num_layers=2, bidirectional=True, proj_size=P_)
    ours = nn.LSTM(I_, H_, num_layers=2, bidirectional=True, proj_size=P_)
    ours.load_state_dict(tp.safetensors.load(st.save(theirs.state_dict())))
    x = np.random.default_rng(8).standard_normal((3, 2, I_)).astype(np.float32)
    with torch.no_grad():
        want = theirs(torch.from_numpy(x))
    for a, b in zip(_flat(want), _flat(ours(tp.tensor(x)))):
        _close(b, a, "float32", "after loading")


# --- layers -----------------------------------------------------------------------------------

_CASES = {  # id: (module, extra kwargs, batched, given initial state)
    "lstm": ("LSTM", {}, True, False),
    "lstm-2layer-bidir-proj-batch_first": ("LSTM", {"num_layers": 2, "bidirectional": True,
                                                    "proj_size": P_, "batch_first": True}, True, True),
    "lstm-unbatched-bidir": ("LSTM", {"bidirectional": True}, False, False),
    "gru-2layer-bidir-dropout0": ("GRU", {"num_layers": 2, "bidirectional": True, "dropout": 0.0}, True, True),
    "gru-unbatched-batch_first": ("GRU", {"batch_first": True, "bias": False}, False, True),
    "rnn-relu-batch_first-nobias": ("RNN", {"nonlinearity": "relu", "batch_first": True, "bias": False}, True, False),
    "rnn-2layer-unbatched": ("RNN", {"num_layers": 2}, False, True),
}


_FLOAT32 = ["lstm-2layer-bidir-proj-batch_first", "gru-2layer-bidir-dropout0", "rnn-relu-batch_first-nobias"]


@pytest.mark.parametrize("case,dtype", [(c, "float64") for c in _CASES] + [(c, "float32") for c in _FLOAT32])
def test_layer_outputs_states_and_gradients_match_pytorch(case, dtype):
    name, kw, batched, given = _CASES[case]
    theirs, ours = _pair(name, (I_, H_), kw, dtype)
    assert ours.training  # dropout=0 in train mode changes nothing
    rng = np.random.default_rng(0)
    steps, batch = 4, 3
    shape = ((batch, steps, I_) if kw.get("batch_first") else (steps, batch, I_)) if batched else (steps, I_)
    xt, xo = _leaf(rng.standard_normal(shape).astype(dtype))
    leaves = [(xt, xo)]
    t_args, o_args = [xt], [xo]
    if given:
        layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        lead = (layers, batch) if batched else (layers,)
        h = _leaf(rng.standard_normal(lead + (kw.get("proj_size") or H_,)).astype(dtype))
        leaves.append(h)
        if name == "LSTM":
            c = _leaf(rng.standard_normal(lead + (H_,)).astype(dtype))
            leaves.append(c)
            t_args.append((h[0], c[0]))
            o_args.append((h[1], c[1]))
        else:
            t_args.append(h[0])
            o_args.append(h[1])
    t_out, o_out = theirs(*t_args), ours(*o_args)
    for i, (a, b) in enumerate(zip(_flat(t_out), _flat(o_out))):
        assert tuple(b.shape) == tuple(a.shape) and b.dtype is getattr(tp, dtype)
        _close(b, a, dtype, f"result {i}")
    _compare_backward(theirs, ours, t_out, o_out, leaves, dtype)


@pytest.mark.parametrize("name,kw", [
    ("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": P_}),
    ("GRU", {"bidirectional": True, "batch_first": True}),
    ("RNN", {"nonlinearity": "tanh"}),
])
def test_packed_sequences_with_unsorted_lengths_match_pytorch(name, kw):
    dtype = "float64"
    theirs, ours = _pair(name, (I_, H_), kw, dtype)
    rng = np.random.default_rng(2)
    lengths = [2, 5, 1, 3]
    bf = kw.get("batch_first", False)
    xt, xo = _leaf(rng.standard_normal((4, 5, I_) if bf else (5, 4, I_)))
    t_pack = torch.nn.utils.rnn.pack_padded_sequence(xt, lengths, batch_first=bf, enforce_sorted=False)
    o_pack = nn.utils.rnn.pack_padded_sequence(xo, tp.tensor(lengths), batch_first=bf, enforce_sorted=False)
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h = _leaf(rng.standard_normal((layers, 4, kw.get("proj_size") or H_)))
    leaves = [(xt, xo), h]
    if name == "LSTM":
        c = _leaf(rng.standard_normal((layers, 4, H_)))
        leaves.append(c)
        t_out, o_out = theirs(t_pack, (h[0], c[0])), ours(o_pack, (h[1], c[1]))
    else:
        t_out, o_out = theirs(t_pack, h[0]), ours(o_pack, h[1])
    assert isinstance(o_out[0], nn.utils.rnn.PackedSequence)
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(o_out[0], field).tolist() == getattr(t_out[0], field).tolist()
    _close(o_out[0].data, t_out[0].data, dtype, "packed output")
    for a, b in zip(_flat(t_out[1]), _flat(o_out[1])):  # final states: each at its own length
        _close(b, a, dtype, "final state")
    t_pad, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out[0], batch_first=bf)
    o_pad, _ = nn.utils.rnn.pad_packed_sequence(o_out[0], batch_first=bf)
    _close(o_pad, t_pad, dtype, "padded output")
    _compare_backward(theirs, ours, (t_pad, t_out[1]), (o_pad, o_out[1]), leaves, dtype)
    # the default initial state, sorted lengths
    t_pack = torch.nn.utils.rnn.pack_padded_sequence(xt.detach(), [5, 3, 2, 1], batch_first=bf)
    o_pack = nn.utils.rnn.pack_padded_sequence(xo.detach(), [5, 3, 2, 1], batch_first=bf)
    assert o_pack.sorted_indices is None and o_pack.unsorted_indices is None
    for a, b in zip(_flat(theirs(t_pack)[1]), _flat(ours(o_pack)[1])):
        _close(b, a, dtype, "final state, default initial state")


def test_dropout_between_layers_applies_in_training_only():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, I_))
    theirs, ours = _pair("GRU", (I_, H_), {"num_layers": 3, "dropout": 1.0}, "float64")
    # dropout=1 zeroes every layer's output but the last: deterministic, as in PyTorch
    for a, b in zip(_flat(theirs(torch.tensor(x))), _flat(ours(tp.tensor(x)))):
        _close(b, a, "float64", "train mode, dropout=1")
    theirs.eval()
    ours.eval()
    for a, b in zip(_flat(theirs(torch.tensor(x))), _flat(ours(tp.tensor(x)))):
        _close(b, a, "float64", "eval mode")
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(I_, H_, dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.LSTM(I_, H_, num_layers=2, dropout=0.5)


# --- cells ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args", [
    ("RNNCell", (I_, H_)), ("RNNCell", (I_, H_, False, "relu")), ("LSTMCell", (I_, H_)),
    ("LSTMCell", (I_, H_, False)), ("GRUCell", (I_, H_)),
])
def test_cells_match_pytorch(name, args, dtype):
    theirs, ours = _pair(name, args, {}, dtype)
    rng = np.random.default_rng(4)
    for batch in ((3,), ()):  # batched and unbatched
        for given in (True, False):
            for p in list(theirs.parameters()) + list(ours.parameters()):
                p.grad = None
            xt, xo = _leaf(rng.standard_normal(batch + (I_,)).astype(dtype))
            leaves = [(xt, xo)]
            if not given:
                t_out, o_out = theirs(xt), ours(xo)
            elif name == "LSTMCell":
                h, c = _leaf(rng.standard_normal(batch + (H_,)).astype(dtype)), \
                    _leaf(rng.standard_normal(batch + (H_,)).astype(dtype))
                leaves += [h, c]
                t_out, o_out = theirs(xt, (h[0], c[0])), ours(xo, (h[1], c[1]))
            else:
                h = _leaf(rng.standard_normal(batch + (H_,)).astype(dtype))
                leaves.append(h)
                t_out, o_out = theirs(xt, h[0]), ours(xo, h[1])
            for a, b in zip(_flat(t_out), _flat(o_out)):
                assert tuple(b.shape) == tuple(a.shape)
                _close(b, a, dtype, f"{name} output")
            _compare_backward(theirs, ours, t_out, o_out, leaves, dtype)


# --- nn.utils.rnn -----------------------------------------------------------------------------

def test_pad_pack_and_unpack_utilities_match_pytorch():
    R, TR = nn.utils.rnn, torch.nn.utils.rnn
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((n, 2)) for n in (2, 4, 1)]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    os_ = [tp.tensor(a, requires_grad=True) for a in arrays]
    for kw in ({}, {"batch_first": True, "padding_value": -1.5}, {"padding_side": "left"}):
        want = TR.pad_sequence(ts, **kw)
        got = R.pad_sequence(os_, **kw)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    # pack_sequence -> pad_packed_sequence, with total_length and batch_first; gradients through both
    for enforce_sorted, seqs in ((False, (ts, os_)), (True, ([ts[1], ts[0], ts[2]], [os_[1], os_[0], os_[2]]))):
        t_pack, o_pack = TR.pack_sequence(seqs[0], enforce_sorted), R.pack_sequence(seqs[1], enforce_sorted)
        np.testing.assert_array_equal(o_pack.data.detach().numpy(), t_pack.data.detach().numpy())
        assert o_pack.batch_sizes.tolist() == t_pack.batch_sizes.tolist() == [3, 2, 1, 1]
        assert o_pack.batch_sizes.dtype is tp.int64
        for field in ("sorted_indices", "unsorted_indices"):
            a, b = getattr(t_pack, field), getattr(o_pack, field)
            assert (b is None) if a is None else b.tolist() == a.tolist()
        t_pad, t_len = TR.pad_packed_sequence(t_pack, batch_first=True, padding_value=9.0, total_length=6)
        o_pad, o_len = R.pad_packed_sequence(o_pack, batch_first=True, padding_value=9.0, total_length=6)
        np.testing.assert_array_equal(o_pad.detach().numpy(), t_pad.detach().numpy())
        assert o_len.tolist() == t_len.tolist() and o_len.dtype is tp.int64
        w = rng.standard_normal(tuple(t_pad.shape))
        (t_pad * torch.tensor(w)).sum().backward()
        (o_pad * tp.tensor(w)).sum().backward()
        for a, b in zip(ts, os_):
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-15)
        for u, v in zip(R.unpack_sequence(o_pack), TR.unpack_sequence(t_pack)):
            np.testing.assert_array_equal(u.detach().numpy(), v.detach().numpy())
    padded = R.pad_sequence(os_, batch_first=True)
    for u, a in zip(R.unpad_sequence(padded, tp.tensor([2, 4, 1]), batch_first=True), arrays):
        np.testing.assert_array_equal(u.detach().numpy(), a)
    for u, a in zip(R.unpad_sequence(R.pad_sequence(os_), [2, 4, 1]), arrays):
        np.testing.assert_array_equal(u.detach().numpy(), a)
    packed = R.PackedSequence(tp.zeros(3, 1), tp.tensor([2, 1]), tp.tensor([1, 0]))
    assert packed.unsorted_indices.tolist() == [1, 0]
    assert packed.double().data.dtype is tp.float64 and packed.double().batch_sizes is packed.batch_sizes


# --- errors -----------------------------------------------------------------------------------

def test_bad_arguments_raise_clear_errors():
    R = nn.utils.rnn
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'gelu'"):
        nn.RNN(2, 3, nonlinearity="gelu")
    with pytest.raises(ValueError, match="RNNBase: proj_size argument is only supported for LSTM"):
        nn.modules.rnn.RNNBase("GRU", 2, 3, proj_size=1)
    with pytest.raises(ValueError, match="LSTM: proj_size has to be smaller than hidden_size"):
        nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(ValueError, match="LSTM: dropout should be a number in range"):
        nn.LSTM(2, 3, dropout=1.5)
    with pytest.raises(TypeError, match="GRU: hidden_size should be of type int, got: float"):
        nn.GRU(2, 3.0)
    with pytest.raises(ValueError, match="RNN: num_layers must be greater than zero"):
        nn.RNN(2, 3, num_layers=0)
    with pytest.raises(ValueError, match="LSTMCell: input_size must not be negative, got -1"):
        nn.LSTMCell(-1, 3)
    lstm = nn.LSTM(2, 3, num_layers=2)
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D"):
        lstm(tp.zeros(1, 1, 1, 2))
    with pytest.raises(ValueError, match="LSTM: input.size\\(-1\\) must be equal to input_size. Expected 2, got 4"):
        lstm(tp.zeros(3, 1, 4))
    with pytest.raises(ValueError, match="LSTM: expected a sequence of at least one step"):
        lstm(tp.zeros(0, 1, 2))
    with pytest.raises(ValueError, match=r"LSTM: expected h_0 of size \(2, 1, 3\), got \(1, 1, 3\)"):
        lstm(tp.zeros(3, 1, 2), (tp.zeros(1, 1, 3), tp.zeros(2, 1, 3)))
    with pytest.raises(ValueError, match="LSTM: for unbatched 2-D input, h_0 should also be 2-D but got 3-D"):
        lstm(tp.zeros(3, 2), (tp.zeros(2, 1, 3), tp.zeros(2, 1, 3)))
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        lstm(tp.zeros(3, 1, 2), tp.zeros(2, 1, 3))
    with pytest.raises(TypeError, match="GRU: input must have the dtype of the parameters, float32, got float64"):
        nn.GRU(2, 3)(tp.zeros(3, 1, 2, dtype=tp.float64))
    with pytest.raises(ValueError, match="GRUCell: input has inconsistent input_size: got 3 expected 2"):
        nn.GRUCell(2, 3)(tp.zeros(1, 3))
    with pytest.raises(ValueError, match=r"LSTMCell: expected c_0 of size \(1, 3\), got \(1, 4\)"):
        nn.LSTMCell(2, 3)(tp.zeros(1, 2), (tp.zeros(1, 3), tp.zeros(1, 4)))
    with pytest.raises(ValueError, match="RNNCell: Expected input to be 1D or 2D, got 3D"):
        nn.RNNCell(2, 3)(tp.zeros(1, 1, 2))
    with pytest.raises(ValueError, match="pack_padded_sequence: lengths must be sorted in decreasing order"):
        R.pack_padded_sequence(tp.zeros(3, 2, 1), [1, 3])
    with pytest.raises(ValueError, match="pack_padded_sequence: every length must be greater than 0"):
        R.pack_padded_sequence(tp.zeros(3, 2, 1), [3, 0])
    with pytest.raises(ValueError, match="pack_padded_sequence: a length of 4 is longer than the 3 steps"):
        R.pack_padded_sequence(tp.zeros(3, 2, 1), [4, 1])
    with pytest.raises(ValueError, match="pack_padded_sequence: expected len\\(lengths\\) to equal the batch size"):
        R.pack_padded_sequence(tp.zeros(3, 2, 1), [3])
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 3"):
        R.pad_packed_sequence(R.pack_sequence([tp.zeros(3), tp.zeros(1)]), total_length=2)
    with pytest.raises(ValueError, match="pad_sequence: padding_side must be 'left' or 'right'"):
        R.pad_sequence([tp.zeros(2)], padding_side="middle")
    with pytest.raises(ValueError, match="pad_sequence: every sequence must have the trailing shape"):
        R.pad_sequence([tp.zeros(2, 1), tp.zeros(2, 2)])


# --- compiled ---------------------------------------------------------------------------------

class _Tagger(nn.Module):
    """An LSTM over token embeddings with a per-step linear head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, I_)
        self.lstm = nn.LSTM(I_, H_, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * H_, 3)

    def forward(self, tokens):
        out, (h, c) = self.lstm(self.embed(tokens))
        return self.head(out), h, c


@pytest.mark.iree
def test_compiled_lstm_forward_equals_eager_at_two_lengths():
    tp.compiler.reset()
    tp.manual_seed(0)
    model = _Tagger().eval()
    run = tp.compile(lambda tokens: model(tokens), fullgraph=True)
    rng = np.random.default_rng(6)
    with tp.no_grad():
        for steps in (3, 5, 3):
            tokens = tp.tensor(rng.integers(0, 7, (2, steps)))
            for got, want in zip(run(tokens), model(tokens)):
                # float32: the compiled kernels round differently (measured up to 5e-7)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)
    assert run.compile_count == 2  # static sizes: one program per length (dynamic=True: one, test_scan.py)
    tp.compiler.reset()


@pytest.mark.iree
def test_compiled_training_step_equals_eager():
    def train(compiled):
        tp.compiler.reset()
        tp.manual_seed(0)
        model = _Tagger()
        opt = tp.optim.SGD(model.parameters(), lr=0.1)

        def step(tokens, labels):
            logits, _, _ = model(tokens)
            loss = nn.functional.cross_entropy(logits.reshape(-1, 3), labels.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        run = tp.compile(step) if compiled else step
        rng = np.random.default_rng(7)
        losses = [float(run(tp.tensor(rng.integers(0, 7, (2, 4))), tp.tensor(rng.integers(0, 3, (2, 4)))))
                  for _ in range(3)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()], run

    want, want_params, _ = train(False)
    got, got_params, run = train(True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert run.compile_count == 1
    for a, b in zip(got_params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    tp.compiler.reset()
