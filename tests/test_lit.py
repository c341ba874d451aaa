"""Runs the lit suite in tests/lit (tpc-opt + FileCheck) as part of the pytest run."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parent / "lit"


def test_lit_suite_passes():
    # lit and filecheck are declared test dependencies: missing, the suite fails (a skip would
    # hide that the tpc-opt tests never ran); both run as modules of this Python, so an
    # environment used without activating it finds them
    missing = [m for m in ("lit", "filecheck") if importlib.util.find_spec(m) is None]
    assert not missing, (f"{', '.join(missing)} not installed in {sys.executable}: "
                         f"python -m pip install -e '.[test]'")
    proc = subprocess.run([sys.executable, "-c", "from lit.main import main; main()", "-q", str(LIT_DIR)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lit_roundtrip_file_covers_every_op_and_is_current():
    from tensorplay.dialects.tp import all_ops
    from tensorplay.tools import regen

    text = (LIT_DIR / "roundtrip.mlir").read_text()
    assert text == regen.render("tests/lit/roundtrip.mlir"), \
        "tests/lit/roundtrip.mlir is stale; regenerate with: python -m tensorplay.tools.regen"
    for op in all_ops():
        assert f'"{op.name}"' in text
