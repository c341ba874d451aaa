"""A model file written for PyTorch runs on tensorplay by changing only its imports, and gives
PyTorch's numbers for the same weights."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

SOURCE = (Path(__file__).parent / "data" / "pytorch_models.py").read_text()
SWAPPED = (SOURCE.replace("import torch.nn.functional as F", "import tensorplay.nn.functional as F")
           .replace("import torch.nn as nn", "import tensorplay.nn as nn")
           .replace("import torch\n", "import tensorplay as torch\n"))


def _load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def test_only_the_imports_differ():
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), SWAPPED.splitlines()) if a != b]
    assert len(changed) == 3 and all(a.startswith("import torch") for a, _ in changed)


def test_swapped_program_runs_on_tensorplay_alone():
    import tensorplay as tp

    mod = _load(SWAPPED, "tp_models")
    tp.manual_seed(0)
    gpt = mod.TinyGPT().eval()
    idx = tp.randint(0, 50, (2, 8))
    logits, loss = gpt(idx, idx)
    assert logits.shape == (2, 8, 50) and np.isfinite(loss.item())
    out = mod.SmallCNN()(tp.randn(4, 3, 16, 16))
    assert out.shape == (4, 10) and np.allclose(out.exp().sum(1).detach().numpy(), 1.0, atol=1e-5)


@pytest.mark.parametrize("model", ["TinyGPT", "SmallCNN"])
def test_swapped_program_matches_pytorch(model):
    torch = pytest.importorskip("torch")
    import tensorplay as tp

    ours_mod, theirs_mod = _load(SWAPPED, "tp_models"), _load(SOURCE, "torch_models")
    torch.manual_seed(0)
    theirs = getattr(theirs_mod, model)().eval()
    ours = getattr(ours_mod, model)().eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    if model == "TinyGPT":
        idx = np.random.default_rng(0).integers(0, 50, (2, 8))
        with torch.no_grad():
            t_logits, t_loss = theirs(torch.from_numpy(idx), torch.from_numpy(idx))
        o_logits, o_loss = ours(tp.tensor(idx), tp.tensor(idx))
        np.testing.assert_allclose(o_logits.detach().numpy(), t_logits.detach().numpy(), rtol=1e-4, atol=1e-5)
        assert o_loss.item() == pytest.approx(t_loss.item(), rel=1e-5)
    else:
        x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)
        with torch.no_grad():
            expected = theirs(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(ours(tp.tensor(x)).detach().numpy(), expected, rtol=1e-4, atol=1e-5)
