"""The GPT example trained data-parallel on two ranks (``train_gpt --ddp`` under
``python -m tensorplay.distributed.run``) follows a single process on the same global batches."""

import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp

STEPS = 3
BATCH = 7  # uneven on purpose: rank 0 takes rows 0-3, rank 1 rows 4-6


def _skip_without_mpi():
    from tensorplay import distributed as dist
    from tensorplay.distributed.run import find_mpiexec

    if not dist.is_available():
        pytest.skip("tensorplay.distributed is not available here (no mpi4py)")
    if find_mpiexec() is None:
        pytest.skip("no mpiexec next to this Python or on PATH")


@pytest.mark.iree  # (eagerly too: from its third step the optimizer updates through a compiled program)
@pytest.mark.parametrize("compile_mode", [None, "step"])
def test_two_ranks_follow_one_process_on_the_same_global_batches(tmp_path, compile_mode):
    _skip_without_mpi()
    from tensorplay.examples import train_gpt

    ddp_ckpt = tmp_path / "ddp.tp"
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", "2",
           "-m", "tensorplay.examples.train_gpt", "--ddp", "--steps", str(STEPS), "--batch", str(BATCH),
           "--sample-chars", "0", "--checkpoint", str(ddp_ckpt)]
    if compile_mode:
        cmd += ["--compile", compile_mode]
    # one BLAS thread per rank: two ranks on a two-core machine
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[rank1]:" not in proc.stdout  # only rank 0 prints
    printed = {int(m.group(1)): float(m.group(2))
               for m in re.finditer(r"^\[rank0\]: step +(\d+)/\d+ +loss ([\d.]+)", proc.stdout, re.M)}
    assert sorted(printed) == [1, STEPS], proc.stdout
    assert "2 ranks, 4 of 7 rows" in proc.stdout

    one_ckpt = tmp_path / "one.tp"
    ref = train_gpt.train(steps=STEPS, batch=BATCH, checkpoint=str(one_ckpt), log=io.StringIO(), sample_chars=0)
    for step, loss in printed.items():
        # printed with 4 decimals (rounding: 5e-5); the split batch's float32 sums add ~1e-6
        assert abs(loss - ref["losses"][step - 1]) <= 5e-5 + 2e-6, (step, loss, ref["losses"])

    # the checkpoint rank 0 saved (model.module's state) against the single process's: the
    # gradients are the same sums in another order (float32 rounding, ~1e-7 relative), which
    # AdamW's division by sqrt(v) + eps enlarges for gradient entries near zero: measured at most
    # 3e-6 after 3 steps (an unscaled local loss, the mean of the ranks' means, is off by 1e-2)
    ours, theirs = tp.load(str(ddp_ckpt)), tp.load(str(one_ckpt))
    assert ours["step"] == theirs["step"] == STEPS
    assert set(ours["model"]) == set(theirs["model"])
    for name, value in theirs["model"].items():
        np.testing.assert_allclose(ours["model"][name].numpy(), value.numpy(), rtol=0, atol=1e-5, err_msg=name)
