"""The state fuzzer (tests/fuzz/state.py) in the suite: a seeded sample of scenarios whose
Python state changes between calls, every compiled result equal to eager.
``TENSORPLAY_FUZZ_STATE_COUNT=N`` runs N scenarios instead; ``python -m tests.fuzz.state``
runs long campaigns."""

from __future__ import annotations

import os

import pytest

from tests.fuzz import state

COUNT = int(os.environ.get("TENSORPLAY_FUZZ_STATE_COUNT", "200"))
SEED = int(os.environ.get("TENSORPLAY_FUZZ_SEED", "0"))
CHUNK = 50


@pytest.mark.parametrize("start", range(0, COUNT, CHUNK))
@pytest.mark.slow
def test_compiled_results_follow_python_state_like_eager(start):
    failures = state.run(SEED, min(CHUNK, COUNT - start), start=start)
    assert not failures, f"{len(failures)} scenarios differ from eager; the first:\n{failures[0]}"


@pytest.mark.iree
@pytest.mark.slow
def test_a_sample_on_iree_cpu():
    failures = state.run(SEED + 1, 6, backend="iree-cpu")
    assert not failures, failures[0]


@pytest.mark.slow
def test_the_fuzzer_finds_stale_results_when_value_guards_are_off(monkeypatch):
    from tensorplay.compiler.capture import reads

    monkeypatch.setattr(reads.ReadGuard, "__call__", lambda self: True)
    failures = state.run(SEED, 30)
    assert len(failures) >= 10
    assert "reproducer:" in failures[0] and "compiled = tp.compile(target" in failures[0]


@pytest.mark.iree
def test_a_reproducer_runs_on_its_own(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "repro.py"
    script.write_text(state.generate(SEED, 3).script())
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0 eager:" in proc.stdout and "compiled:" in proc.stdout
