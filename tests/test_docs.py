"""Docs generated from the code must match it."""

import subprocess
import sys

from tensorplay.tools import gen_dialect_docs


def test_dialect_reference_is_up_to_date():
    current = gen_dialect_docs.DEFAULT_PATH.read_text(encoding="utf-8")
    assert current == gen_dialect_docs.render(), (
        "docs/dialect.md is stale; regenerate it with: python -m tensorplay.tools.gen_dialect_docs")


def test_dialect_reference_lists_every_registered_op():
    from tensorplay.dialects.tp import all_ops

    text = gen_dialect_docs.render()
    for op in all_ops():
        assert f"### `{op.name}`" in text
        assert op.summary, f"{op.name} has no one-line doc"


def test_generator_check_mode_reports_stale_file(tmp_path):
    stale = tmp_path / "dialect.md"
    stale.write_text("old\n")
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.gen_dialect_docs", "--check",
                           "-o", str(stale)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "stale" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.gen_dialect_docs", "-o", str(stale)],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert stale.read_text() == gen_dialect_docs.render()


def test_readme_python_example_runs_and_compiled_matches_eager():
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    # the eager and the compiled print show the same probabilities (printed to 4 decimals)
    eager, compiled = ([float(v) for v in re.findall(r"-?\d+\.\d+", part)]
                       for part in proc.stdout.split("tensor(")[1:3])
    assert len(eager) == len(compiled) == 6, proc.stdout
    assert max(abs(a - b) for a, b in zip(eager, compiled)) <= 1e-4, proc.stdout
