"""The view-chain fuzzer (tests/fuzz/views.py) in the suite: random chains of views and
in-place writes give PyTorch's values, sizes, strides and offsets, eagerly and compiled.
``TENSORPLAY_FUZZ_VIEWS_COUNT=N`` runs N eager programs; ``python -m tests.fuzz.views``
runs long campaigns."""

from __future__ import annotations

import os

import pytest

from tests.fuzz import views

pytest.importorskip("torch")

COUNT = int(os.environ.get("TENSORPLAY_FUZZ_VIEWS_COUNT", "400"))
SEED = int(os.environ.get("TENSORPLAY_FUZZ_SEED", "0"))


def test_eager_view_programs_match_pytorch():
    failures = [r for r in (views.run_one(SEED, i, compiled=False) for i in range(COUNT)) if r]
    assert not failures, f"{len(failures)} of {COUNT} programs differ; the first:\n{failures[0]}"


@pytest.mark.iree
@pytest.mark.slow
@pytest.mark.parametrize("index", range(1000, 1008))
def test_compiled_view_programs_match_pytorch(index):
    report = views.run_one(SEED, index)
    assert report is None, report


def test_the_fuzzer_sees_writes_that_do_not_reach_the_base(monkeypatch):
    """With views that copy (the old value semantics) most programs differ."""
    import numpy as np

    from tensorplay import _views

    monkeypatch.setattr(_views, "made", lambda src, out, name, attrs: setattr(out, "_data", np.array(out._data)))
    failures = [r for r in (views.run_one(SEED, i, compiled=False) for i in range(40)) if r]
    assert len(failures) >= 15, len(failures)
    assert "reproducer" in failures[0] and "reads = []" in failures[0]
