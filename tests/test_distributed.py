"""tensorplay.distributed and DistributedDataParallel on real ranks (docs/distributed.md).

The multi-rank checks run scripts in tests/distributed/ on 2 and 3 local ranks started by
``python -m tensorplay.distributed.run``; each script checks its results against numpy or a
single-process reference itself and prints a line when all passed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.distributed import _worker, run

HERE = Path(__file__).parent / "distributed"
ROOT = Path(__file__).resolve().parents[1]


needs_mpi = pytest.mark.skipif(not dist.is_available() or run.find_mpiexec() is None,
                               reason="tensorplay.distributed needs mpi4py and mpiexec: pip install "
                                      "\"tensorplay[distributed]\"")


def launch(script: str, nproc: int, *args: str, timeout: float = 300, runner: bool = False) -> subprocess.CompletedProcess:
    """``python -m tensorplay.distributed.run --nproc-per-node N [-m tensorplay.run] SCRIPT ARGS``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    target = ["-m", "tensorplay.run", str(HERE / script)] if runner else [str(HERE / script)]
    return subprocess.run([sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(nproc),
                           *target, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def _alive(marker: str) -> list[str]:
    """Processes whose command line mentions ``marker`` (orphaned ranks)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def passes_on_every_rank(script: str, nproc: int, word: str, *args: str) -> None:
    """``script`` on ``nproc`` ranks exits 0 and every rank printed ``<word> ok``."""
    p = launch(script, nproc, *args)
    assert p.returncode == 0, p.stdout + p.stderr
    for k in range(nproc):
        assert f"[rank{k}]: {word} ok" in p.stdout, p.stdout + p.stderr


@needs_mpi
@pytest.mark.parametrize("nproc", [2, 3])
def test_every_collective_and_dtype_against_numpy(nproc):
    passes_on_every_rank("ranks_collectives.py", nproc, "collectives")


@needs_mpi
@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_trains_as_one_process_on_the_whole_batches(nproc):
    # SGD with momentum and AdamW; eager, tp.compile(ddp) and a compiled whole step; no_sync,
    # find_unused_parameters, several buckets, a failed backward; with 3 ranks the batch of 10
    # splits 4/3/3
    passes_on_every_rank("ranks_ddp.py", nproc, "ddp")


def _vulkan():
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    return pytest.param("vulkan", marks=pytest.mark.skipif(not caps.available, reason=f"no Vulkan device: {caps.reason}"))


@needs_mpi
@pytest.mark.vulkan
@pytest.mark.parametrize("device", [_vulkan()])
def test_device_tensors_take_part_through_the_host(device):
    # one rank first: a group of one works too, and it fills the artifact cache, so the two ranks
    # do not both compile the same device kernels at once
    passes_on_every_rank("ranks_device.py", 1, "device", device)
    passes_on_every_rank("ranks_device.py", 2, "device", device)


@needs_mpi
@pytest.mark.parametrize("mode", ["raise", "die", "timeout"])
def test_a_failing_rank_ends_the_job_with_an_error(mode):
    p = launch("ranks_fail.py", 2, mode, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "rank 0 was not stopped" not in out
    assert "[rank0]: [rank0]" not in out  # one prefix per line
    if mode == "raise":
        assert "[rank1]: ValueError: rank 1 gives up" in out, out
    if mode == "timeout":
        assert "DistBackendError: all_reduce timed out after" in out and "rank 0 of 2" in out, out
    assert "the job failed" in out
    assert not _alive(str(HERE / "ranks_fail.py")), _alive(str(HERE / "ranks_fail.py"))


@needs_mpi
def test_a_pytorch_ddp_script_runs_unchanged_and_matches_pytorch():
    torch = pytest.importorskip("torch")
    import numpy as np

    p = launch("torch_ddp_script.py", 2, runner=True)
    assert p.returncode == 0, p.stdout + p.stderr
    out = [line[len("[rank0]: "):] for line in p.stdout.splitlines() if line.startswith("[rank0]: ")]
    losses_printed = [float(line.split()[-1]) for line in out if line.startswith("epoch ")]
    weight_printed = next(line for line in out if line.startswith("weight ")).split()[1:]
    # PyTorch in this process: 2 ranks with DistributedSampler(shuffle=False) and 8 samples each
    # per step make each step one of 16 samples (rank r's the indices r, r+2, ...), averaged
    g = np.random.default_rng(0)
    x = torch.tensor(g.standard_normal((64, 10)), dtype=torch.float32)
    y = torch.tensor(g.standard_normal((64, 1)), dtype=torch.float32)
    lin = torch.nn.Linear(10, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(np.linspace(-1, 1, 10)[None], dtype=torch.float32))
        lin.bias.fill_(0.1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.05, momentum=0.5)
    for epoch in range(2):
        for step in range(4):
            parts = [torch.arange(r, 64, 2)[step * 8:(step + 1) * 8] for r in range(2)]
            opt.zero_grad()
            losses = [torch.nn.functional.mse_loss(lin(x[i]), y[i]) for i in parts]
            (sum(losses) / 2).backward()
            opt.step()
        want = float(sum(losses).detach() / 2)
        # float32: the two ranks' gradients are summed in another order than one process sums
        # them (measured 2e-7 relative)
        assert losses_printed[epoch] == pytest.approx(want, rel=1e-6), (epoch, p.stdout)
    got = np.array([float(v) for v in weight_printed])
    np.testing.assert_allclose(got, lin.weight.detach().numpy().ravel(), rtol=1e-6, atol=1e-7)


@needs_mpi
def test_the_launcher_does_not_hand_piped_input_to_the_ranks():
    # MPI's launcher forwards stdin to rank 0 and fails when rank 0 does not read it ("process
    # reading stdin too slowly"): a launcher run in a pipeline or by CI must not pass it on
    p = subprocess.run([sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", "2", "--no-python",
                        "sleep", "1"], input="x" * (1 << 22), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_collectives_need_a_process_group():
    assert dist.is_available() in (True, False)
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(tp.ones(2))
    with pytest.raises(ValueError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(ValueError, match="init_process_group"):
        tp.nn.parallel.DistributedDataParallel(tp.nn.Linear(2, 2))


def test_without_mpi4py_the_error_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mpi4py" else real(name, *a))
    assert dist.is_available() is False
    with pytest.raises(RuntimeError, match=r'pip install "tensorplay\[distributed\]"'):
        dist.init_process_group()


def test_launcher_command_line():
    cmd, env = run.mpiexec_command(["--nproc-per-node", "3", "train.py", "--lr", "0.1"])
    assert cmd[1:3] == ["-n", "3"] and cmd[-3:] == ["train.py", "--lr", "0.1"]
    assert cmd[3:7] == [sys.executable, "-u", "-m", "tensorplay.distributed._worker"]
    assert env["TENSORPLAY_DISTRIBUTED_LAUNCHED"] == "1" and env["LOCAL_WORLD_SIZE"] == "3"
    cmd, _ = run.mpiexec_command(["--nnodes", "2", "--nproc_per_node", "4", "--hosts", "a,b", "-m", "pkg.mod"])
    assert cmd[1:7] == ["-n", "8", "-hosts", "a,b", "-ppn", "4"] and cmd[-2:] == ["-m", "pkg.mod"]
    with pytest.raises(SystemExit, match="--hosts"):
        run.mpiexec_command(["--nnodes", "2", "x.py"])
    with pytest.raises(SystemExit, match="node 0"):
        run.mpiexec_command(["--node-rank", "1", "x.py"])


def test_worker_reads_every_launchers_environment():
    assert _worker.launcher_environment({"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1",
                                         "MPI_LOCALNRANKS": "2"}) == {
        "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert _worker.launcher_environment({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3",
                                         "OMPI_COMM_WORLD_LOCAL_RANK": "0"})["WORLD_SIZE"] == "3"
    assert _worker.launcher_environment({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                                         "SLURM_NTASKS_PER_NODE": "4(x2)"})["LOCAL_WORLD_SIZE"] == "4"


def test_backend_names():
    from tensorplay.distributed._api import _backend_name

    assert _backend_name(None) == "mpi" and _backend_name("gloo") == "mpi"
    assert _backend_name("cpu:gloo,cuda:nccl") == "nccl"
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        _backend_name("ucc")
