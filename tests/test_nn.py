"""``tensorplay.nn``: Module bookkeeping, state dicts, modes, dtype conversion, printing,
containers, layer defaults and initializers, and layers against PyTorch."""

from __future__ import annotations

import copy
import math
import pickle
import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F


def _torch():
    return pytest.importorskip("torch")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.register_buffer("steps", tp.zeros(1))
        self.register_buffer("scratch", tp.zeros(2), persistent=False)
        self.scale = nn.Parameter(tp.ones(()))
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(4, 2, bias=False))

    def forward(self, x):
        return self.head(self.fc(x)) * self.scale


# --- Parameter ----------------------------------------------------------------------------------

def test_parameter_is_a_tensor_that_requires_grad_and_prints_like_torch():
    p = nn.Parameter(tp.ones(2))
    assert isinstance(p, tp.Tensor) and p.requires_grad
    assert repr(p) == "Parameter containing:\ntensor([1., 1.], requires_grad=True)"
    assert not nn.Parameter(tp.ones(2), requires_grad=False).requires_grad
    assert type(p * 2) is tp.Tensor and type(p.detach()) is tp.Tensor


def test_parameter_of_integers_cannot_require_grad():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        nn.Parameter(tp.tensor([1, 2]))
    assert nn.Parameter(tp.tensor([1, 2]), requires_grad=False).dtype is tp.int64


def test_parameter_shares_the_value_of_its_data():
    t = tp.arange(3.0)
    p = nn.Parameter(t)
    assert p.detach().numpy() is t.detach().numpy()
    assert nn.Parameter().shape == (0,)


# --- registration -------------------------------------------------------------------------------

def test_assignment_registers_parameters_buffers_and_modules_in_order():
    m = Net()
    assert list(m._parameters) == ["scale"]
    assert list(m._buffers) == ["steps", "scratch"]
    assert list(m._modules) == ["fc", "head"]
    assert [n for n, _ in m.named_parameters()] == ["scale", "fc.weight", "fc.bias", "head.1.weight"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in m.named_children()] == ["fc", "head"]
    assert [n for n, _ in m.named_modules()] == ["", "fc", "head", "head.0", "head.1"]
    assert [n for n, _ in m.named_parameters(prefix="model", recurse=False)] == ["model.scale"]


def test_reassigning_and_deleting_attributes_updates_the_registries():
    m = Net()
    m.scale = None
    assert m.scale is None and "scale" in m._parameters
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        m.scale = tp.ones(())
    m.fc = nn.Identity()
    assert isinstance(m._modules["fc"], nn.Identity)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        m.fc = 3
    m.steps = tp.ones(1)  # a buffer stays a buffer
    assert m._buffers["steps"].item() == 1
    m.fc = nn.Parameter(tp.ones(1))  # a module slot can become a parameter
    assert "fc" not in m._modules and "fc" in m._parameters
    del m.fc, m.steps, m.head
    assert "fc" not in m._parameters and "steps" not in m._buffers and "head" not in m._modules
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'head'"):
        m.head


def test_registration_rejects_bad_names_and_early_assignment():
    m = Net()
    with pytest.raises(KeyError, match="buffer name can.*t contain"):
        m.register_buffer("a.b", tp.ones(1))
    with pytest.raises(KeyError, match="attribute 'fc' already exists"):
        m.register_buffer("fc", tp.ones(1))
    with pytest.raises(KeyError, match="parameter name can.*t be empty string"):
        m.register_parameter("", None)
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer 'x'"):
        m.register_buffer("x", [1.0])
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'w'"):
        m.register_parameter("w", tp.ones(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", tp.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(tp.ones(1))

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Early()


def test_buffer_class_registers_with_its_persistence():
    m = nn.Module()
    m.mask = nn.Buffer(tp.ones(2), persistent=False)
    m.stats = nn.Buffer(tp.zeros(2))
    assert set(m._buffers) == {"mask", "stats"}
    assert type(m.mask) is tp.Tensor
    assert list(m.state_dict()) == ["stats"]


def test_weight_tying_is_deduplicated_and_survives_conversion():
    emb, head = nn.Embedding(5, 3), nn.Linear(3, 5, bias=False)
    model = nn.ModuleDict({"emb": emb, "head": head})
    emb.weight = head.weight
    assert [n for n, _ in model.named_parameters()] == ["emb.weight"]
    assert len(list(model.named_parameters(remove_duplicate=False))) == 2
    assert list(model.state_dict()) == ["emb.weight", "head.weight"]  # like PyTorch: both keys
    model.double()
    assert emb.weight is head.weight and head.weight.dtype is tp.float64


def test_shared_submodule_is_visited_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.children())) == 2
    assert len(seq.state_dict()) == 4


def test_get_submodule_parameter_and_buffer():
    m = Net()
    assert m.get_submodule("head.1") is m.head[1]
    assert m.get_submodule("") is m
    assert m.get_parameter("head.1.weight") is m.head[1].weight
    assert m.get_buffer("steps") is m.steps
    with pytest.raises(AttributeError, match="Sequential has no attribute `7`"):
        m.get_submodule("head.7")
    with pytest.raises(AttributeError, match="`steps` is not an nn.Parameter"):
        m.get_parameter("steps")
    with pytest.raises(AttributeError, match="`scale` is not a buffer"):
        m.get_buffer("scale")
    m.set_submodule("head.0", nn.GELU())
    assert isinstance(m.head[0], nn.GELU)


def test_dir_lists_registered_names():
    names = dir(Net())
    assert {"fc", "head", "steps", "scale", "forward", "training"} <= set(names)
    assert not any(n[0].isdigit() for n in dir(nn.Sequential(nn.ReLU())))


def test_missing_forward_raises_not_implemented():
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required "forward"'):
        nn.Module()(1)


# --- hooks, apply, modes, grads ----------------------------------------------------------------

def test_forward_hooks_can_replace_inputs_and_outputs():
    m = nn.Identity()
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    h2 = m.register_forward_hook(lambda mod, args, out: out * 10)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(kwargs), with_kwargs=True)
    assert m(tp.tensor(1.0)).item() == 20.0
    h1.remove()
    with h2:
        assert m(tp.tensor(1.0)).item() == 10.0
    assert m(tp.tensor(1.0)).item() == 1.0
    assert len(calls) == 3


def test_apply_train_eval_and_requires_grad():
    m = Net()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Net"]
    assert m.eval() is m and not any(mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("yes")
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_zero_grad_sets_gradients_to_none():
    m = nn.Linear(2, 2)
    m.weight.grad = tp.ones(2, 2)
    m.zero_grad(set_to_none=False)
    assert m.weight.grad.detach().numpy().sum() == 0
    m.zero_grad()
    assert m.weight.grad is None


def test_dropout_module_follows_training_flag():
    tp.manual_seed(0)
    drop = nn.Dropout(0.5)
    x = tp.ones(1000)
    y = drop(x).detach().numpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    assert 350 < (y == 0).sum() < 650
    drop.eval()
    assert drop(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(-0.1)


def test_dropout_is_deterministic_under_manual_seed():
    x = tp.ones(64)
    tp.manual_seed(3)
    a = F.dropout(x, 0.3).detach().numpy()
    tp.manual_seed(3)
    b = F.dropout(x, 0.3).detach().numpy()
    np.testing.assert_array_equal(a, b)


# --- dtype conversion ----------------------------------------------------------------------------

def test_to_converts_floating_parameters_and_buffers_in_place():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    weight = m[0].weight
    assert m.to(tp.float64) is m
    assert m[0].weight is weight and weight.dtype is tp.float64
    assert m[1].running_mean.dtype is tp.float64
    assert m[1].num_batches_tracked.dtype is tp.int64
    m.half()
    assert weight.dtype is tp.float16
    m.to(tp.ones(1, dtype=tp.bfloat16))
    assert weight.dtype is tp.bfloat16
    m.float()
    assert weight.dtype is tp.float32
    m.to("cpu")
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        m.to(tp.int32)
    with pytest.raises(ValueError, match="only device index 0"):
        m.to("cuda:3")
    assert all(t.device == tp.device("cpu") for t in [*m.parameters(), *m.buffers()])


def test_layers_accept_dtype_at_construction():
    m = nn.Linear(2, 3, dtype=tp.float64)
    assert m.weight.dtype is tp.float64 and m(tp.ones(2, dtype=tp.float64)).dtype is tp.float64


# --- state dicts ------------------------------------------------------------------------------

def test_state_dict_holds_persistent_entries_detached_in_torch_order():
    m = Net()
    sd = m.state_dict()
    assert list(sd) == ["scale", "steps", "fc.weight", "fc.bias", "head.1.weight"]
    assert type(sd["fc.weight"]) is tp.Tensor
    assert sd["fc.weight"].detach().numpy() is m.fc.weight.detach().numpy()
    kept = m.state_dict(keep_vars=True)
    assert kept["fc.weight"] is m.fc.weight
    assert list(m.state_dict(prefix="net."))[0] == "net.scale"


def test_load_state_dict_copies_numpy_values_in_place_keeping_dtypes():
    m = Net()
    weight = m.fc.weight
    source = {k: np.full(tuple(v.shape), 0.5, np.float64) for k, v in m.state_dict().items()}
    result = m.load_state_dict(source)
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert m.fc.weight is weight and weight.dtype is tp.float32
    np.testing.assert_array_equal(weight.detach().numpy(), np.full((4, 3), 0.5, np.float32))
    source["fc.weight"][:] = 7.0  # the module holds a copy
    assert weight.detach().numpy()[0, 0] == 0.5


def test_load_state_dict_from_tensorplay_state_dict_round_trips():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb
        np.testing.assert_array_equal(va.detach().numpy(), vb.detach().numpy())


def test_load_state_dict_strict_reports_missing_and_unexpected_keys():
    m = Net()
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    del sd["fc.bias"]
    sd["fc.extra"] = np.zeros(1)
    sd["other"] = np.zeros(1)
    message = ('Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.bias". '
               '\n\tUnexpected key(s) in state_dict: "other", "fc.extra". ')
    with pytest.raises(RuntimeError, match=re.escape(message)):
        m.load_state_dict(sd)
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert missing == ["fc.bias"] and unexpected == ["other", "fc.extra"]


def test_load_state_dict_shape_mismatch_names_key_and_shapes_even_when_not_strict():
    m = Net()
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    sd["fc.weight"] = np.zeros((3, 4), np.float32)
    pattern = (r"size mismatch for fc\.weight: copying a param with shape tensorplay\.Size\(\[3, 4\]\) "
               r"from checkpoint, the shape in current model is tensorplay\.Size\(\[4, 3\]\)")
    with pytest.raises(RuntimeError, match=pattern):
        m.load_state_dict(sd, strict=False)


def test_load_state_dict_rejects_non_mappings_and_non_tensors():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        m.load_state_dict([1, 2])
    with pytest.raises(RuntimeError, match='While copying the parameter named "weight"'):
        m.load_state_dict({"weight": "abc", "bias": np.zeros(2)})


def test_load_state_dict_assign_replaces_parameters():
    m = nn.Linear(2, 2)
    old = m.weight
    m.load_state_dict({"weight": np.ones((2, 2), np.float64), "bias": np.zeros(2)}, assign=True)
    assert m.weight is not old and isinstance(m.weight, nn.Parameter)
    assert m.weight.dtype is tp.float64 and m.weight.requires_grad


def test_load_state_dict_into_tied_weights_updates_both_modules():
    emb, head = nn.Embedding(5, 3), nn.Linear(3, 5, bias=False)
    model = nn.ModuleDict({"emb": emb, "head": head})
    emb.weight = head.weight
    model.load_state_dict({"emb.weight": np.ones((5, 3)), "head.weight": np.ones((5, 3))})
    assert emb.weight is head.weight and emb.weight.detach().numpy().sum() == 15


def test_extra_state_is_saved_and_restored():
    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.value = 1

        def get_extra_state(self):
            return {"value": self.value}

        def set_extra_state(self, state):
            self.value = state["value"]

    a = nn.Sequential(WithState())
    a[0].value = 5
    sd = a.state_dict()
    assert sd["0._extra_state"] == {"value": 5}
    b = nn.Sequential(WithState())
    b.load_state_dict(sd)
    assert b[0].value == 5


def test_module_deepcopies_and_pickles():
    m = Net()
    c = copy.deepcopy(m)
    assert c.fc.weight is not m.fc.weight and isinstance(c.fc.weight, nn.Parameter)
    np.testing.assert_array_equal(c.fc.weight.detach().numpy(), m.fc.weight.detach().numpy())
    p = pickle.loads(pickle.dumps(m))
    assert list(p.state_dict()) == list(m.state_dict()) and p.fc.weight.requires_grad
    x = tp.ones(2, 3)
    np.testing.assert_array_equal(p(x).detach().numpy(), m(x).detach().numpy())


# --- printing ------------------------------------------------------------------------------------

def test_repr_matches_torch_layout():
    m = Net()
    assert repr(m) == (
        "Net(\n"
        "  (fc): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (head): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Linear(in_features=4, out_features=2, bias=False)\n"
        "  )\n"
        ")")
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()])
    assert repr(blocks) == ("ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n"
                            "  (3): ReLU()\n)")


def _layer_factories(lib):
    nn_ = lib.nn
    return [
        lambda: nn_.Linear(3, 4), lambda: nn_.Linear(3, 4, bias=False),
        lambda: nn_.Conv2d(3, 6, 3, stride=2, padding=1, dilation=2, groups=3, bias=False,
                           padding_mode="reflect"),
        lambda: nn_.Conv2d(1, 2, (3, 5), padding="same"),
        lambda: nn_.LayerNorm(4), lambda: nn_.LayerNorm([2, 3], elementwise_affine=False),
        lambda: nn_.LayerNorm(4, bias=False), lambda: nn_.GroupNorm(2, 4),
        lambda: nn_.BatchNorm2d(3), lambda: nn_.BatchNorm1d(3, momentum=None, affine=False),
        lambda: nn_.Embedding(4, 3, padding_idx=0), lambda: nn_.Embedding(4, 3, max_norm=1.0),
        lambda: nn_.ReLU(), lambda: nn_.ReLU(inplace=True), lambda: nn_.GELU(approximate="tanh"),
        lambda: nn_.SiLU(), lambda: nn_.Sigmoid(), lambda: nn_.Tanh(), lambda: nn_.Softmax(dim=1),
        lambda: nn_.LogSoftmax(dim=-1), lambda: nn_.LeakyReLU(0.2), lambda: nn_.ELU(),
        lambda: nn_.Softplus(), lambda: nn_.Hardtanh(), lambda: nn_.Threshold(0.1, 2.0),
        lambda: nn_.GLU(), lambda: nn_.Dropout(0.1), lambda: nn_.Flatten(),
        lambda: nn_.Unflatten(1, (2, 3)), lambda: nn_.Identity(), lambda: nn_.MaxPool2d(2),
        lambda: nn_.MaxPool2d(3, 1, 1, ceil_mode=True), lambda: nn_.AvgPool2d(2),
        lambda: nn_.MultiheadAttention(8, 2), lambda: nn_.MultiheadAttention(8, 2, kdim=3, vdim=5),
        lambda: nn_.CrossEntropyLoss(), lambda: nn_.RMSNorm(4), lambda: nn_.Bilinear(2, 3, 4),
        lambda: nn_.Sequential(nn_.Linear(1, 2), nn_.Sequential(nn_.ReLU(), nn_.Linear(2, 2))),
        lambda: nn_.ModuleDict({"a": nn_.ReLU(), "b": nn_.ModuleList([nn_.Tanh(), nn_.Tanh()])}),
        lambda: nn_.ParameterList([nn_.Parameter(lib.ones(2, 3)), nn_.Parameter(lib.ones(2))]),
        lambda: nn_.ModuleList(),
    ]


@pytest.mark.parametrize("index", range(len(_layer_factories(tp))))
def test_layer_repr_and_state_dict_keys_equal_torch(index):
    torch = _torch()
    ours = _layer_factories(tp)[index]()
    theirs = _layer_factories(torch)[index]()
    assert repr(ours) == repr(theirs).replace("torch.", "tensorplay.")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), k
        assert a.dtype.name == str(b.dtype).replace("torch.", ""), k
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


# --- containers -----------------------------------------------------------------------------------

def test_sequential_indexing_slicing_and_mutation():
    a, b, c = nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub._modules) == ["1", "2"]
    seq.append(nn.Tanh())
    assert list(seq._modules) == ["0", "1", "2", "3"]
    seq.insert(1, nn.GELU())
    assert isinstance(seq[1], nn.GELU) and len(seq) == 5
    del seq[1]
    assert list(seq._modules) == ["0", "1", "2", "3"] and seq[1] is b
    seq[3] = nn.Sigmoid()
    assert isinstance(seq[3], nn.Sigmoid)
    seq.extend([nn.Identity()])
    assert len(seq) == 5
    assert seq(tp.ones(4, 2)).shape == (4, 3)
    with pytest.raises(IndexError, match="index 9 is out of range"):
        seq[9]
    named = nn.Sequential(__import__("collections").OrderedDict(first=a, second=b))
    assert named.first is a and list(named._modules) == ["first", "second"]


def test_module_list_operations():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and layers[-1] is layers[2]
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh(), nn.Tanh()])
    layers.insert(0, nn.GELU())
    assert [type(m).__name__ for m in layers] == ["GELU", "Linear", "Linear", "Linear", "ReLU", "Tanh",
                                                  "Tanh"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    del layers[0]
    assert list(layers._modules) == [str(i) for i in range(6)]
    layers[0] = nn.Identity()
    assert isinstance(layers[0], nn.Identity)
    assert [n for n, _ in layers.named_parameters()] == ["1.weight", "1.bias", "2.weight", "2.bias"]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable"):
        layers.extend(nn.ReLU())
    with pytest.raises(IndexError):
        layers[10]


def test_module_dict_operations():
    d = nn.ModuleDict({"a": nn.ReLU()})
    d["b"] = nn.Linear(2, 2)
    d.update([("c", nn.Tanh())])
    assert list(d) == ["a", "b", "c"] and "b" in d and len(d) == 3
    assert list(d.keys()) == ["a", "b", "c"] and isinstance(d.pop("a"), nn.ReLU)
    assert [k for k, _ in d.items()] == ["b", "c"]
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias"]
    d.clear()
    assert len(d) == 0


def test_parameter_list_and_dict_register_parameters():
    pl = nn.ParameterList([tp.ones(2), nn.Parameter(tp.zeros(3))])
    assert isinstance(pl[0], nn.Parameter) and len(pl) == 2
    pl.append(tp.ones(1))
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pd = nn.ParameterDict({"w": tp.ones(2)})
    pd["b"] = tp.zeros(2)
    assert list(pd) == ["w", "b"] and isinstance(pd["b"], nn.Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["w", "b"]


# --- default initialization ------------------------------------------------------------------------

def test_linear_and_conv_weights_are_uniform_within_torch_bounds():
    tp.manual_seed(0)
    lin = nn.Linear(64, 128)
    bound = 1 / math.sqrt(64)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    conv = nn.Conv2d(4, 8, 3)
    cb = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= cb and np.abs(conv.bias.detach().numpy()).max() <= cb


def test_embedding_norms_and_attention_defaults():
    tp.manual_seed(0)
    emb = nn.Embedding(200, 50, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert np.all(w[3] == 0)
    assert abs(w.std() - 1) < 0.05 and abs(w.mean()) < 0.05
    ln = nn.LayerNorm(5)
    assert np.all(ln.weight.detach().numpy() == 1) and np.all(ln.bias.detach().numpy() == 0)
    mha = nn.MultiheadAttention(16, 4)
    limit = math.sqrt(6 / (16 + 48))
    assert np.abs(mha.in_proj_weight.detach().numpy()).max() <= limit
    assert np.all(mha.in_proj_bias.detach().numpy() == 0) and np.all(mha.out_proj.bias.detach().numpy() == 0)


def test_construction_is_deterministic_under_manual_seed():
    tp.manual_seed(7)
    a = nn.Linear(3, 3).weight.detach().numpy()
    tp.manual_seed(7)
    b = nn.Linear(3, 3).weight.detach().numpy()
    np.testing.assert_array_equal(a, b)


def test_init_functions_fill_in_place_with_the_requested_distribution():
    tp.manual_seed(0)
    w = tp.empty(200, 300)
    data_before = w
    assert nn.init.xavier_uniform_(w, gain=2.0) is data_before
    a = 2.0 * math.sqrt(6 / 500)
    assert np.abs(w.detach().numpy()).max() <= a and np.abs(w.detach().numpy()).max() > 0.95 * a
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.detach().numpy().std() - math.sqrt(2 / 200)) < 0.01 * math.sqrt(2 / 200) * 5
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    assert np.abs(w.detach().numpy()).max() <= 1 / math.sqrt(300)
    nn.init.xavier_normal_(w)
    assert abs(w.detach().numpy().std() - math.sqrt(2 / 500)) < 0.003
    nn.init.trunc_normal_(w, mean=1.0, std=2.0, a=-1.0, b=2.0)
    assert w.detach().numpy().min() >= -1.0 and w.detach().numpy().max() <= 2.0 and w.detach().numpy().min() < -0.9
    nn.init.uniform_(w, -0.5, 0.5)
    assert np.abs(w.detach().numpy()).max() <= 0.5
    nn.init.normal_(w, 3.0, 0.1)
    assert abs(w.detach().numpy().mean() - 3.0) < 0.01
    nn.init.constant_(w, 0.25)
    assert np.all(w.detach().numpy() == 0.25)
    nn.init.zeros_(w)
    nn.init.ones_(w)
    assert np.all(w.detach().numpy() == 1)
    nn.init.eye_(w)
    np.testing.assert_array_equal(w.detach().numpy(), np.eye(200, 300, dtype=np.float32))
    h = tp.empty(4, dtype=tp.float16)
    nn.init.normal_(h)
    assert h.dtype is tp.float16


def test_init_errors_and_gains():
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed"):
        nn.init.xavier_uniform_(tp.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_uniform_(tp.empty(3, 3), mode="fan_avg")
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        nn.init.eye_(tp.empty(2, 2, 2))


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("selu",)])
def test_calculate_gain_matches_torch(args):
    torch = _torch()
    assert nn.init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))


# --- layers against PyTorch ----------------------------------------------------------------------

def _copy_and_compare(torch, ours, theirs, *inputs, rtol=1e-5, atol=1e-6):
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        expected = theirs(*[torch.from_numpy(x) for x in inputs])
    got = ours(*[tp.tensor(x) for x in inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, expected):
        if e is None:
            assert g is None
            continue
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=rtol, atol=atol)
    return ours, theirs


def _layer_cases(lib):
    nn_ = lib.nn
    return {
        "linear": (lambda: nn_.Linear(4, 3), (2, 5, 4)),
        "conv_same": (lambda: nn_.Conv2d(2, 4, 3, padding="same"), (2, 2, 6, 5)),
        "conv_strided": (lambda: nn_.Conv2d(4, 4, 3, stride=2, padding=1, groups=2), (1, 4, 7, 7)),
        "conv_reflect": (lambda: nn_.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (1, 2, 5, 5)),
        "conv_circular": (lambda: nn_.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"),
                          (1, 2, 5, 6)),
        "layer_norm": (lambda: nn_.LayerNorm(6), (2, 3, 6)),
        "layer_norm_2d": (lambda: nn_.LayerNorm((3, 6), elementwise_affine=False), (2, 3, 6)),
        "group_norm": (lambda: nn_.GroupNorm(2, 4), (2, 4, 3, 3)),
        "rms_norm": (lambda: nn_.RMSNorm(6), (2, 3, 6)),
        "batch_norm_train": (lambda: nn_.BatchNorm2d(3), (4, 3, 2, 2)),
        "max_pool": (lambda: nn_.MaxPool2d(2), (1, 2, 5, 6)),
        "max_pool_padded": (lambda: nn_.MaxPool2d(3, 2, 1, ceil_mode=True), (1, 2, 6, 6)),
        "avg_pool": (lambda: nn_.AvgPool2d(2, 1), (1, 2, 4, 4)),
        "flatten": (lambda: nn_.Flatten(0, 1), (2, 3, 4)),
        "unflatten": (lambda: nn_.Unflatten(1, (2, 2)), (3, 4)),
        "relu": (lambda: nn_.ReLU(), (3, 4)),
        "gelu_tanh": (lambda: nn_.GELU("tanh"), (3, 4)),
        "silu": (lambda: nn_.SiLU(), (3, 4)),
        "sigmoid": (lambda: nn_.Sigmoid(), (3, 4)),
        "tanh": (lambda: nn_.Tanh(), (3, 4)),
        "softmax": (lambda: nn_.Softmax(dim=0), (3, 4)),
        "log_softmax": (lambda: nn_.LogSoftmax(dim=1), (3, 4)),
        "leaky_relu": (lambda: nn_.LeakyReLU(0.3), (3, 4)),
        "elu": (lambda: nn_.ELU(0.5), (3, 4)),
        "mish": (lambda: nn_.Mish(), (3, 4)),
        "hardswish": (lambda: nn_.Hardswish(), (3, 4)),
        "bilinear": (lambda: nn_.Bilinear(3, 3, 2), (4, 3)),
    }


@pytest.mark.parametrize("name", sorted(_layer_cases(tp)))
def test_layer_forward_matches_torch(name):
    torch = _torch()
    make_ours, shape = _layer_cases(tp)[name]
    make_theirs, _ = _layer_cases(torch)[name]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    inputs = (x, x[::-1].copy()) if name == "bilinear" else (x,)
    ours, theirs = _copy_and_compare(torch, make_ours(), make_theirs(), *inputs)
    if name == "batch_norm_train":
        np.testing.assert_allclose(ours.running_mean.detach().numpy(), theirs.running_mean.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(ours.running_var.detach().numpy(), theirs.running_var.detach().numpy(), rtol=1e-5)
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)
        ours.eval(), theirs.eval()
        with torch.no_grad():
            expected = theirs(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(ours(tp.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_embedding_matches_torch_with_padding_idx():
    torch = _torch()
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    _copy_and_compare(torch, nn.Embedding(4, 5, padding_idx=0), torch.nn.Embedding(4, 5, padding_idx=0),
                      idx)


def test_embedding_max_norm_renormalizes_used_rows_in_place():
    torch = _torch()
    ours, theirs = nn.Embedding(6, 4, max_norm=1.0), torch.nn.Embedding(6, 4, max_norm=1.0)
    with torch.no_grad():
        theirs.weight.mul_(3)
    idx = np.array([0, 2, 2, 5])
    _copy_and_compare(torch, ours, theirs, idx)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5)


def test_embedding_from_pretrained():
    w = tp.arange(6.0).reshape(3, 2)
    emb = nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(tp.tensor([2])).detach().numpy(), [[4.0, 5.0]])


@pytest.mark.parametrize("name,kwargs", [
    ("CrossEntropyLoss", {}), ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 1}),
    ("NLLLoss", {"reduction": "sum"}), ("MSELoss", {}), ("L1Loss", {"reduction": "none"}),
    ("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.5}), ("BCEWithLogitsLoss", {}),
])
def test_loss_modules_match_torch(name, kwargs):
    torch = _torch()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    if name in ("CrossEntropyLoss", "NLLLoss"):
        y = rng.integers(0, 4, 5)
    elif name == "BCEWithLogitsLoss":
        y = rng.random((5, 4)).astype(np.float32)
    else:
        y = rng.standard_normal((5, 4)).astype(np.float32)
    ours = getattr(nn, name)(**kwargs)(tp.tensor(x), tp.tensor(y))
    theirs = getattr(torch.nn, name)(**kwargs)(torch.from_numpy(x), torch.from_numpy(y))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_with_all_targets_ignored_is_nan_like_torch():
    out = F.cross_entropy(tp.ones(3, 4), tp.tensor([-100, -100, -100]))
    assert math.isnan(out.item())


# --- multi-head attention against PyTorch ---------------------------------------------------------

_KPM = np.array([[False] * 4 + [True] * 2, [False] * 6, [False, True] + [False] * 4])
_CAUSAL = np.triu(np.ones((4, 6), bool), 1)

_MHA_CASES = {
    "plain": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "no_bias_no_weights": ({"bias": False}, {"need_weights": False}),
    "per_head_weights": ({}, {"average_attn_weights": False}),
    "kdim_vdim": ({"kdim": 5, "vdim": 7}, {}),
    "kdim_vdim_sdpa": ({"kdim": 5, "vdim": 7}, {"need_weights": False}),
    "key_padding_mask": ({}, {"key_padding_mask": _KPM}),
    "key_padding_mask_sdpa": ({"batch_first": True}, {"key_padding_mask": _KPM, "need_weights": False}),
    "bool_attn_mask": ({}, {"attn_mask": _CAUSAL}),
    "both_masks_sdpa": ({}, {"attn_mask": _CAUSAL, "key_padding_mask": _KPM, "need_weights": False}),
    "float_masks": ({}, {"attn_mask": np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6),
                         "key_padding_mask": np.where(_KPM, -np.inf, 0).astype(np.float32)}),
    "3d_attn_mask": ({}, {"attn_mask": np.linspace(-1, 1, 144, dtype=np.float32).reshape(6, 4, 6)}),
    "bias_kv_zero_attn": ({"add_bias_kv": True, "add_zero_attn": True},
                          {"attn_mask": _CAUSAL, "key_padding_mask": _KPM}),
    "bias_kv_zero_attn_sdpa": ({"add_bias_kv": True, "add_zero_attn": True},
                               {"attn_mask": _CAUSAL, "key_padding_mask": _KPM, "need_weights": False}),
    "unbatched": ({}, {"unbatched": True}),
    "causal_hint": ({"batch_first": True}, {"attn_mask": np.triu(np.ones((4, 4), bool), 1),
                                            "is_causal": True, "source": 4}),
    "self_attention_eval": ({"batch_first": True}, {"self": True, "need_weights": False}),
}


@pytest.mark.parametrize("case", sorted(_MHA_CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_multihead_attention_matches_torch(case, dtype):
    torch = _torch()
    ctor, call = _MHA_CASES[case]
    call = dict(call)
    unbatched, self_attn = call.pop("unbatched", False), call.pop("self", False)
    length, source = 4, call.pop("source", 6)
    n, e = 3, 8
    kdim, vdim = ctor.get("kdim", e), ctor.get("vdim", e)
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(e, 2, **ctor).to(getattr(torch, dtype)).eval()
    ours = nn.MultiheadAttention(e, 2, **ctor).to(getattr(tp, dtype)).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    rng = np.random.default_rng(1)

    def shape(seq, dim):
        if unbatched:
            return (seq, dim)
        return (n, seq, dim) if ctor.get("batch_first") else (seq, n, dim)

    q = rng.standard_normal(shape(length, e)).astype(dtype)
    k = rng.standard_normal(shape(source, kdim)).astype(dtype)
    v = rng.standard_normal(shape(source, vdim)).astype(dtype)
    if self_attn:
        k = v = q
    call = {key: val.astype(dtype) if isinstance(val, np.ndarray) and val.dtype.kind == "f" else val
            for key, val in call.items()}
    if unbatched and "key_padding_mask" in call:
        call["key_padding_mask"] = call["key_padding_mask"][0]
    with torch.no_grad():
        tq = torch.from_numpy(q)
        tk, tv = (tq, tq) if self_attn else (torch.from_numpy(k), torch.from_numpy(v))
        expected = theirs(tq, tk, tv, **{key: torch.from_numpy(val) if isinstance(val, np.ndarray) else val
                                         for key, val in call.items()})
    pq = tp.tensor(q)
    pk, pv = (pq, pq) if self_attn else (tp.tensor(k), tp.tensor(v))
    got = ours(pq, pk, pv, **{key: tp.tensor(val) if isinstance(val, np.ndarray) else val
                              for key, val in call.items()})
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0].detach().numpy(), expected[0].detach().numpy(), rtol=tol, atol=tol)
    if expected[1] is None:
        assert got[1] is None
    else:
        np.testing.assert_allclose(got[1].detach().numpy(), expected[1].detach().numpy(), rtol=tol, atol=tol)


def test_multihead_attention_validates_arguments():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    mha = nn.MultiheadAttention(8, 2)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(tp.ones(3, 1, 8), tp.ones(3, 1, 8), tp.ones(3, 1, 8), is_causal=True)
    with pytest.raises(ValueError, match="The shape of the 2D attn_mask is"):
        mha(tp.ones(3, 1, 8), tp.ones(3, 1, 8), tp.ones(3, 1, 8), attn_mask=tp.ones(2, 2))


def test_multihead_attention_dropout_only_in_training():
    tp.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = tp.randn(5, 2, 8)
    mha.eval()
    a = mha(x, x, x)[0].detach().numpy()
    np.testing.assert_array_equal(a, mha(x, x, x)[0].detach().numpy())
    mha.train()
    assert not np.allclose(mha(x, x, x)[0].detach().numpy(), a)
