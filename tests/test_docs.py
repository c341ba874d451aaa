"""Docs generated from the code must match it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tensorplay.tools import regen

ROOT = Path(__file__).resolve().parents[1]


def test_dialect_reference_is_up_to_date():
    current = (ROOT / "docs" / "dialect.md").read_text(encoding="utf-8")
    assert current == regen.render("docs/dialect.md"), (
        "docs/dialect.md is stale; regenerate it with: python -m tensorplay.tools.regen")


def test_dialect_reference_lists_every_registered_op():
    from tensorplay.dialects.tp import all_ops

    text = regen.render("docs/dialect.md")
    for op in all_ops():
        assert f"### `{op.name}`" in text
        assert op.summary, f"{op.name} has no one-line doc"


def test_one_command_checks_and_rewrites_every_generated_file(tmp_path):
    assert set(regen.GENERATED) == {"docs/dialect.md", "tests/lit/roundtrip.mlir"}
    for rel in regen.GENERATED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "docs" / "dialect.md").write_text("old\n")  # stale; the lit file is missing
    check = [sys.executable, "-m", "tensorplay.tools.regen", "--check", "--root", str(tmp_path)]
    proc = subprocess.run(check, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"{rel} is stale; run: python -m tensorplay.tools.regen"
                                        for rel in regen.GENERATED]
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.regen", "--root", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for rel in regen.GENERATED:
        assert (tmp_path / rel).read_text(encoding="utf-8") == regen.render(rel)
        assert not list((tmp_path / rel).parent.glob(".*"))  # no temporary file left behind
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    # the checkout itself is current (what the two tests above check file by file)
    assert subprocess.run(check[:-2], capture_output=True, text=True).returncode == 0


@pytest.mark.iree  # the example compiles, in a subprocess the watch in conftest.py does not see
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
