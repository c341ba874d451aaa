"""Exports shared by the export tests (each compiled once per session): the nanoGPT-style
model with an extra ``@export`` method, and the CNN, with their eager results."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.examples.models import GPTConfig, build_cnn, build_gpt

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

ROOT = Path(__file__).resolve().parents[2]

#: the start of a deployment script: a Python with iree-base-runtime and numpy, whose imports
#: of the compiler fail as where it is not installed
WITHOUT_COMPILER = """
import json, sys
import numpy as np

class BlockCompiler:
    def find_spec(self, name, path=None, target=None):
        if name == "iree.compiler" or name.startswith("iree.compiler."):
            raise ImportError(f"{name} is not installed here")
        return None

sys.meta_path.insert(0, BlockCompiler())
"""


@pytest.fixture(scope="session")
def iree_tool():
    """``iree_tool(name)``: an IREE command-line tool installed with the wheels (next to this
    Python, or on PATH); the test is skipped when it is missing."""
    def find(name: str) -> str:
        here = Path(sys.executable).with_name(name)
        found = str(here) if here.exists() else shutil.which(name)
        if found is None:
            pytest.skip(f"{name} is not installed (it comes with the iree-base-runtime wheel)")
        return found

    return find


@pytest.fixture(scope="session", autouse=True)
def _export_cache(tmp_path_factory):
    """A cache folder of the session's own, so compile counts are this session's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENSORPLAY_CACHE_DIR", str(tmp_path_factory.mktemp("export-cache")))
        yield


def gpt_with_encode():
    """The nanoGPT-style model, its class extended by ``encode`` (hidden states), an entry
    point marked with ``@tp.compiler.export``."""
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig())
    base = type(model)

    class GPTWithEncode(base):
        @tp.compiler.export
        def encode(self, idx):
            t = idx.size(1)
            x = self.transformer.wte(idx) + self.transformer.wpe(tp.arange(0, t, dtype=tp.long))
            for block in self.transformer.h:
                x = block(x)
            return self.transformer.ln_f(x)

    model.__class__ = GPTWithEncode
    return model.eval()


@pytest.fixture(scope="session")
def gpt(tmp_path_factory):
    """(model, tokens, exported program, saved vmfb path, eager logits, eager hidden states)."""
    model = gpt_with_encode()
    tokens = tp.tensor(np.random.default_rng(1).integers(0, 61, (2, 8)))
    program = tp.export(model, (tokens,), method_args={"encode": (tokens,)})
    path = program.save(tmp_path_factory.mktemp("gpt") / "gpt.vmfb")
    logits, loss = model(tokens)
    assert loss is None
    return model, tokens, program, path, logits.detach().numpy(), model.encode(tokens).detach().numpy()


@pytest.fixture(scope="session")
def cnn(tmp_path_factory):
    """(model, images, exported program, saved vmfb path, eager log-probabilities)."""
    tp.manual_seed(0)
    model = build_cnn(tp).eval()
    images = tp.randn(2, 1, 12, 12)
    program = tp.export(model, (images,))
    path = program.save(tmp_path_factory.mktemp("cnn") / "cnn.vmfb")
    return model, images, program, path, model(images).detach().numpy()


@pytest.fixture(scope="session")
def cnn_external(tmp_path_factory):
    """The CNN exported with its weights in a parameter archive: (model, images, program,
    vmfb path, archive path)."""
    tp.manual_seed(0)
    model = build_cnn(tp).eval()
    images = tp.randn(2, 1, 12, 12)
    program = tp.export(model, (images,), external_weights=True)
    path = program.save(tmp_path_factory.mktemp("cnn-irpa") / "cnn.vmfb")
    return model, images, program, path, path.with_suffix(".irpa")


@pytest.fixture(scope="session")
def subprocess_env():
    """The environment of a fresh Python that imports this checkout of tensorplay."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
