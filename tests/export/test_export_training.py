"""Exported training steps: a module's @export train_step (forward, backward, clipping,
AdamW) becomes one entry point whose parameters and optimizer state are mutable IREE
globals; the learning rate is a trailing argument, state_dict() reads everything the step
updates back out, and a process with only the IREE runtime and numpy trains the same curve."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.examples import GPTConfig, build_gpt
from tests.export.conftest import WITHOUT_COMPILER

pytestmark = pytest.mark.iree

STEPS = 20


class Trainer(tp.nn.Module):
    """The example's GPT with its optimizer and one training step."""

    def __init__(self, vocab: int):
        super().__init__()
        tp.manual_seed(0)
        self.gpt = build_gpt(tp, GPTConfig(block_size=16, vocab_size=vocab, n_layer=2, n_head=2, n_embd=32,
                                           dropout=0.0))
        self.opt = tp.optim.AdamW(self.gpt.parameters(), lr=3e-3, weight_decay=0.05)

    def forward(self, idx):
        return self.gpt(idx)[0]

    @tp.compiler.export
    def train_step(self, idx, targets):
        _, loss = self.gpt(idx, targets)
        loss.backward()
        tp.nn.utils.clip_grad_norm_(self.gpt.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad()
        return loss


def _batches(vocab: int):
    rng = np.random.default_rng(5)
    data = (np.arange(400) * 7) % vocab  # a sequence the model can learn
    out = []
    for i in range(STEPS):
        starts = rng.integers(0, len(data) - 17, 4)
        out.append((np.stack([data[s:s + 16] for s in starts]), np.stack([data[s + 1:s + 17] for s in starts])))
    return out


def _lrs():
    return [3e-3 * min(1.0, (i + 1) / 5) for i in range(STEPS)]  # a warm-up: lr changes every step


def _eager_curve(vocab: int):
    model = Trainer(vocab)
    losses = []
    for (x, y), lr in zip(_batches(vocab), _lrs()):
        model.opt.param_groups[0]["lr"] = lr
        losses.append(float(model.train_step(tp.tensor(x), tp.tensor(y))))
    return losses, model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    vocab = 20
    model = Trainer(vocab)
    x, y = _batches(vocab)[0]
    program = tp.export(model, (tp.tensor(x),), method_args={"train_step": (tp.tensor(x), tp.tensor(y))})
    path = program.save(tmp_path_factory.mktemp("train") / "trainer.vmfb")
    # exporting traced the step: the model itself is untouched (no step was taken)
    fresh = Trainer(vocab)
    for a, b in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    return vocab, program, path


DEPLOY = WITHOUT_COMPILER + textwrap.dedent("""
    from tensorplay import runtime

    case = json.loads(sys.argv[1])
    data = np.load(case["batches"])
    trainer = runtime.load(case["vmfb"])
    losses = [float(trainer.train_step(data["x"][i], data["y"][i], lr=np.float32(lr)))
              for i, lr in enumerate(case["lrs"])]
    state = trainer.state_dict()
    np.savez(case["state"], **state)
    print(json.dumps({"losses": losses, "entry_points": trainer.entry_points,
                      "blocked": "iree.compiler" not in sys.modules}))
""")


def test_the_exported_step_trains_like_eager_in_a_process_without_the_compiler(exported, tmp_path,
                                                                                subprocess_env):
    vocab, program, path = exported
    assert "train_step" in program.entry_points
    batches = _batches(vocab)
    np.savez(tmp_path / "batches.npz", x=np.stack([b[0] for b in batches]), y=np.stack([b[1] for b in batches]))
    case = {"batches": str(tmp_path / "batches.npz"), "vmfb": str(path), "lrs": _lrs(),
            "state": str(tmp_path / "state.npz")}
    proc = subprocess.run([sys.executable, "-c", DEPLOY, json.dumps(case)], capture_output=True, text=True,
                          cwd=tmp_path, env=subprocess_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["blocked"] and report["entry_points"] == ["forward", "train_step", "state_dict"]
    want, model = _eager_curve(vocab)
    np.testing.assert_allclose(report["losses"], want, rtol=1e-4, atol=1e-5)
    assert report["losses"][-1] < report["losses"][0]
    # the trained parameters and the optimizer state come back out by their state names
    state = np.load(tmp_path / "state.npz")
    # (Adam moves an element whose gradient is rounding noise by up to lr per step whatever the
    # noise's size, so float32 programs summing in another order differ there by a fraction of
    # lr = 3e-3: atol 1e-4; a wrong gradient moves elements by about lr per step, 20 steps)
    for name, p in model.gpt.named_parameters():
        np.testing.assert_allclose(state[f"gpt.{name}"], p.detach().numpy(), rtol=1e-4, atol=1e-4)
    step = [k for k in state.files if k.endswith(".step")]
    assert step and all(float(state[k]) == STEPS for k in step)
    assert any(k.startswith("opt.gpt.") and k.endswith(".exp_avg_sq") for k in state.files)


def test_the_trained_globals_serve_the_forward_entry_and_load_into_a_model(exported):
    vocab, program, path = exported
    loaded = tp.runtime.load(path)
    x, y = _batches(vocab)[0]
    before = loaded.forward(x)
    for _ in range(3):
        loaded.train_step(x, y, lr=np.float32(3e-3))
    after = loaded.forward(x)
    assert not np.allclose(before, after)  # forward reads the parameters the steps updated
    model = Trainer(vocab)
    state = loaded.state_dict()
    # (what the steps update: parameters, a tied weight once; buffers stay as they were)
    missing, unexpected = model.gpt.load_state_dict({k[len("gpt."):]: v for k, v in state.items()
                                                     if k.startswith("gpt.")}, strict=False)
    assert not unexpected and all(k.endswith("attn.bias") or k == "lm_head.weight" for k in missing)
    np.testing.assert_allclose(model(tp.tensor(x)).detach().numpy(), after, rtol=1e-4, atol=1e-5)


def test_iree_run_module_runs_a_training_step(exported, tmp_path, iree_tool):
    run = iree_tool("iree-run-module")
    vocab, _, path = exported
    x, y = _batches(vocab)[0]
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    proc = subprocess.run([run, f"--module={path}", "--device=local-task", "--function=train_step",
                           f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'y.npy'}", "--input=f32=0.003",
                           f"--output=@{tmp_path / 'loss.npy'}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want, _ = _eager_curve(vocab)
    np.testing.assert_allclose(float(np.load(tmp_path / "loss.npy")), want[0], rtol=1e-4)


def test_a_step_that_leaves_gradients_or_updates_an_argument_is_refused_clearly():
    model = Trainer(20)
    x, y = (tp.tensor(a) for a in _batches(20)[0])

    def keeps_grads(idx, targets):
        model.opt.zero_grad()
        _, loss = model.gpt(idx, targets)
        loss.backward()
        model.opt.step()
        return loss

    with pytest.raises(ValueError, match=r"leaves gradients in the parameters' \.grad; call optimizer.zero_grad\(\)"):
        tp.export(keeps_grads, (x, y))


def test_a_training_step_with_weights_in_a_parameter_archive(tmp_path):
    class Small(tp.nn.Module):
        def __init__(self):
            super().__init__()
            tp.manual_seed(1)
            self.lin = tp.nn.Linear(6, 3)
            self.opt = tp.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

        def forward(self, x):
            return self.lin(x)

        @tp.compiler.export
        def train_step(self, x, y):
            loss = F.cross_entropy(self.lin(x), y)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            return loss

    rng = np.random.default_rng(2)
    x, y = tp.tensor(rng.standard_normal((8, 6)).astype(np.float32)), tp.tensor(rng.integers(0, 3, 8))
    program = tp.export(Small(), (x,), method_args={"train_step": (x, y)}, external_weights=True)
    path = program.save(tmp_path / "small.vmfb")
    assert (tmp_path / "small.irpa").exists()
    loaded, eager = tp.runtime.load(path), Small()
    for _ in range(3):  # the archive only initializes the globals; the steps update them
        np.testing.assert_allclose(float(loaded.train_step(x, y, lr=0.1)), float(eager.train_step(x, y)),
                                   rtol=1e-5)
    assert sorted(loaded.state_dict()) == ["lin.bias", "lin.weight", "opt.lin.bias.momentum_buffer",
                                           "opt.lin.weight.momentum_buffer"]
