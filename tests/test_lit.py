"""Runs the lit suite in tests/lit (tpc-opt + FileCheck) as part of the pytest run."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parent / "lit"


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="filecheck is not installed (test extra)")
def test_lit_suite_passes():
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
