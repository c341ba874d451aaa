"""Models written the way the public PyTorch examples write them (tests/data/zoo_models.py),
loaded unchanged with ``torch`` resolved to tensorplay: forward, training steps with the
example's own optimizer and schedule, a compiled forward and a compiled training step, each
against PyTorch running the same code from the same weights on the same batches."""

from __future__ import annotations

import types
import zlib
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.run import torch_alias

torch = pytest.importorskip("torch")

SOURCE = (Path(__file__).parent / "data" / "zoo_models.py").read_text()


def _load(name: str, alias: bool) -> types.ModuleType:
    module = types.ModuleType(name)
    code = compile(SOURCE, str(Path(__file__).parent / "data" / "zoo_models.py"), "exec")
    if alias:
        with torch_alias():
            exec(code, module.__dict__)
    else:
        exec(code, module.__dict__)
    return module


OURS, THEIRS = _load("zoo_tp", True), _load("zoo_torch", False)
RNG = np.random.default_rng(0)


def _seed(name: str) -> None:
    """Each test draws its own data, whatever ran before it."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(name.encode()))


def _images(n, c, h, w=None):
    return RNG.standard_normal((n, c, h, w or h)).astype(np.float32)


def _tokens(shape, vocab):
    return RNG.integers(1, vocab, shape)


#: model -> (constructor kwargs, inputs, target maker, loss, optimizer + options, schedule)
#: mirroring the example each model comes from
ZOO = {
    # batch 4: batch norm over the last stage's 1x1 maps normalizes 4 values per channel
    "ResNet": dict(inputs=lambda: (_images(4, 3, 32),), target=lambda: RNG.integers(0, 10, 4),
                   loss="cross_entropy", opt=("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
                   sched=("StepLR", dict(step_size=1, gamma=0.5))),
    "MobileNetV2": dict(inputs=lambda: (_images(2, 3, 32),), target=lambda: RNG.integers(0, 10, 2),
                        loss="cross_entropy", opt=("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.9, eps=0.0316)),
                        sched=("ExponentialLR", dict(gamma=0.9))),
    "Generator": dict(inputs=lambda: (RNG.standard_normal((2, 8, 1, 1)).astype(np.float32),),
                      target=lambda: np.tanh(_images(2, 3, 16)), loss="mse_loss",
                      opt=("Adam", dict(lr=2e-3, betas=(0.5, 0.999))), sched=None),
    "Discriminator": dict(inputs=lambda: (_images(2, 3, 16),), target=lambda: np.array([1.0, 0.0], np.float32),
                          loss="binary_cross_entropy", opt=("Adam", dict(lr=2e-3, betas=(0.5, 0.999))), sched=None),
    "UNet": dict(inputs=lambda: (_images(1, 3, 12),), target=lambda: RNG.integers(0, 2, (1, 12, 12)),
                 loss="cross_entropy", opt=("RMSprop", dict(lr=1e-3, weight_decay=1e-8, momentum=0.9)),
                 sched=("ReduceLROnPlateau", dict(mode="max", patience=1))),
    "VAE": dict(inputs=lambda: (RNG.random((4, 1, 8, 8)).astype(np.float32),
                                RNG.standard_normal((4, 8)).astype(np.float32)),
                target=None, loss="vae", opt=("Adam", dict(lr=1e-3)), sched=None),
    "MnistNet": dict(inputs=lambda: (_images(4, 1, 14),), target=lambda: RNG.integers(0, 10, 4),
                     loss="nll_loss", opt=("Adadelta", dict(lr=1.0)), sched=("StepLR", dict(step_size=1, gamma=0.7))),
    "EncoderClassifier": dict(inputs=lambda: (_tokens((6, 2), 50),), target=lambda: RNG.integers(0, 3, 2),
                              loss="cross_entropy", opt=("SGD", dict(lr=0.5)),
                              sched=("StepLR", dict(step_size=1, gamma=0.95))),
    "Seq2Seq": dict(inputs=lambda: (_tokens((2, 5), 40), _tokens((2, 4), 40)),
                    target=lambda: RNG.integers(0, 40, (2, 4)), loss="seq_cross_entropy",
                    opt=("Adam", dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-9)), sched=None),
}


def _as(lib, a, double=False):
    a = np.asarray(a)
    if double and a.dtype == np.float32:
        a = a.astype(np.float64)
    return lib.tensor(a) if lib is tp else torch.from_numpy(a)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _loss(lib, kind, out, y, xs=()):
    F = lib.nn.functional
    if kind == "vae":  # the example's own loss: reconstruction BCE plus the KL term
        return (OURS if lib is tp else THEIRS).vae_loss(*out[:1], xs[0], *out[1:])
    if kind == "seq_cross_entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return getattr(F, kind)(out, y)


def _pair(name):
    torch.manual_seed(0)
    theirs = getattr(THEIRS, name)()
    ours = getattr(OURS, name)()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _no_dropout(model):
    """Training mode with dropout off (the two libraries draw different random masks), in
    float64: a few float32 steps of SGD with momentum through batch norm over two samples
    amplify rounding differences to percents, while float64 runs agree to 1e-10."""
    model.double().train()
    for m in model.modules():
        if type(m).__name__.startswith("Dropout"):
            m.eval()
    return model


def _train(lib, model, spec, batches, step_fn=None):
    opt_name, opt_kw = spec["opt"]
    # the single-tensor update in both libraries: eager tensorplay's formulas against PyTorch's
    # (tensorplay's default compiles the update from the third step; tests/test_optim.py)
    opt = getattr(lib.optim, opt_name)(model.parameters(), **opt_kw, foreach=False)
    sched = None
    if spec["sched"]:
        sched = getattr(lib.optim.lr_scheduler, spec["sched"][0])(opt, **spec["sched"][1])

    def step(*args):
        *xs, y = args
        opt.zero_grad()
        loss = _loss(lib, spec["loss"], model(*xs), y, xs)
        loss.backward()
        opt.step()
        return loss

    run = step_fn(step) if step_fn else step
    losses = []
    for xs, y in batches:
        loss = run(*[_as(lib, x, True) for x in xs], None if y is None else _as(lib, y, True))
        losses.append(loss.item())
        if sched is not None:
            sched.step(-loss.item()) if spec["sched"][0] == "ReduceLROnPlateau" else sched.step()
    return losses


# float32 models of a few layers: the two libraries' kernels sum in different orders
# (measured below 2e-5 relative on the outputs); float64 training: the same formulas,
# rounding differences of 1e-16 grown by three optimizer steps
FWD = dict(rtol=1e-4, atol=2e-5)
TRAIN = dict(rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_forward_and_training_steps_match_pytorch(name):
    _seed(name)
    spec = ZOO[name]
    ours, theirs = _pair(name)
    xs = spec["inputs"]()
    with torch.no_grad():
        expected = _first(theirs.eval()(*[_as(torch, x) for x in xs]))
    got = _first(ours.eval()(*[_as(tp, x) for x in xs]))
    np.testing.assert_allclose(got.detach().numpy(), expected.numpy(), **FWD)
    batches = [(spec["inputs"](), spec["target"]() if spec["target"] else None) for _ in range(3)]
    theirs_l = _train(torch, _no_dropout(theirs), spec, batches)
    ours_l = _train(tp, _no_dropout(ours), spec, batches)
    np.testing.assert_allclose(ours_l, theirs_l, **TRAIN)
    for (k, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        # relative to each tensor's scale (a weight near zero inherits its neighbours'
        # rounding), plus 1e-10: an attention key bias has an exact gradient of zero, so each
        # library's rounding noise (1e-17) becomes Adam steps of lr * noise / eps ~ 1e-11
        b = b.detach().numpy()
        scale = float(np.abs(b).max()) if b.size and b.dtype.kind == "f" else 0.0
        np.testing.assert_allclose(a.detach().numpy(), b, err_msg=k, rtol=TRAIN["rtol"],
                                   atol=TRAIN["rtol"] * scale + 1e-10)


# compiled: a forward for every model, a whole training step for one of each kind
COMPILED_STEPS = ("ResNet", "Generator", "MnistNet", "Seq2Seq", "VAE")


@pytest.mark.iree
@pytest.mark.parametrize("name", sorted(ZOO))
def test_compiled_forward_and_training_step_match_eager(name):
    _seed(name)
    spec = ZOO[name]
    model, _ = _pair(name)
    xs = [_as(tp, x) for x in spec["inputs"]()]
    model.eval()
    eager = _first(model(*xs)).detach().numpy()
    # the compiled kernels reassociate sums; measured below 1e-5 relative on these outputs
    np.testing.assert_allclose(_first(tp.compile(model)(*xs)).detach().numpy(), eager, rtol=2e-5, atol=2e-6)
    if name not in COMPILED_STEPS:
        return
    batches = [(spec["inputs"](), spec["target"]() if spec["target"] else None) for _ in range(3)]
    eager_model, _ = _pair(name)
    eager_l = _train(tp, _no_dropout(eager_model), spec, batches)
    compiled_l = _train(tp, _no_dropout(model), spec, batches, step_fn=tp.compile)
    np.testing.assert_allclose(compiled_l, eager_l, rtol=2e-5, atol=2e-6)
