"""``python -m tensorplay.distributed.run``: start a script on several ranks (torchrun's flags).

The ranks are started by MPI's launcher (``mpiexec``, found next to this Python first, then on
``PATH``); each runs the script through :mod:`tensorplay.distributed._worker`, which sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``, prefixes each line the
script prints with ``[rankN]:``, and ends the whole job when the script fails (the launcher then
exits with a non-zero status)::

    python -m tensorplay.distributed.run --nproc-per-node 2 train.py --epochs 3
    python -m tensorplay.distributed.run --nproc-per-node 2 -m tensorplay.examples.train_gpt --ddp
    python -m tensorplay.distributed.run --nnodes 2 --nproc-per-node 4 --hosts node1,node2 train.py

Under Slurm, ``srun python -m tensorplay.distributed._worker train.py`` (or ``mpiexec`` inside an
allocation) starts the same ranks without this launcher; see docs/distributed.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

__all__ = ["find_mpiexec", "main", "mpiexec_command"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tensorplay.distributed.run",
        description="Run a script on several ranks over MPI, setting RANK, WORLD_SIZE and LOCAL_RANK.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                   help="ranks per machine: a number, or 'cpu' (one per core); default 1")
    p.add_argument("--nnodes", default="1", help="machines taking part (default 1); more than one needs "
                   "--hosts, --hostfile or a Slurm allocation")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0,
                   help="accepted for torchrun's sake: MPI starts every machine's ranks from one launcher, "
                   "so only node rank 0 runs this command")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                   help="set as MASTER_ADDR for scripts that read it (MPI itself needs no rendezvous address)")
    p.add_argument("--master-port", "--master_port", type=int, default=29500,
                   help="set as MASTER_PORT for scripts that read it")
    p.add_argument("--hosts", default=None, help="comma-separated machines for --nnodes > 1")
    p.add_argument("--hostfile", default=None, help="an MPI host file for --nnodes > 1")
    p.add_argument("--mpiexec", default=None, help="the MPI launcher to use (default: mpiexec next to this "
                   "Python, else on PATH)")
    p.add_argument("--no-prefix", action="store_true", help="print the ranks' output without [rankN]: prefixes")
    p.add_argument("-m", "--module", action="store_true", help="run the target as a module, as python -m")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the target as an executable rather than a Python script")
    p.add_argument("script", help="the script (or module with -m) each rank runs")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def find_mpiexec() -> str | None:
    """The MPI launcher the ranks start with: the ``mpiexec`` next to this Python (the mpich
    wheel's, in a virtual environment), else the one on ``PATH``; None when there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def _find_mpiexec(explicit: str | None) -> str:
    if explicit:
        return explicit
    found = find_mpiexec()
    if found is None:
        raise SystemExit("python -m tensorplay.distributed.run: no mpiexec found; install an MPI with "
                         "pip install \"tensorplay[distributed]\" (the mpich wheel brings mpiexec) or your "
                         "system's MPI")
    return found


def mpiexec_command(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The ``mpiexec`` command line and environment that ``main(argv)`` runs."""
    a = _parser().parse_args(argv)
    nproc = (os.cpu_count() or 1) if a.nproc_per_node in ("cpu", "auto") else int(a.nproc_per_node)
    nnodes = int(str(a.nnodes).split(":")[-1])
    if nproc < 1 or nnodes < 1:
        raise SystemExit(f"--nproc-per-node and --nnodes must be at least 1 (got {a.nproc_per_node}, {a.nnodes})")
    if a.node_rank != 0:
        raise SystemExit(f"--node-rank {a.node_rank}: with MPI one launcher on node 0 starts the ranks of every "
                         f"node (--hosts/--hostfile); run this command on node 0 only")
    cmd = [_find_mpiexec(a.mpiexec), "-n", str(nproc * nnodes)]
    if nnodes > 1:
        if a.hosts:
            cmd += ["-hosts", a.hosts]
        elif a.hostfile:
            cmd += ["-f", a.hostfile]
        elif "SLURM_JOB_ID" not in os.environ:
            raise SystemExit(f"--nnodes {nnodes}: name the machines with --hosts a,b or --hostfile FILE (or run "
                             f"inside a Slurm allocation)")
        cmd += ["-ppn", str(nproc)]
    worker = [] if a.no_python else [sys.executable, "-u", "-m", "tensorplay.distributed._worker"]
    if a.module and not a.no_python:
        worker.append("-m")
    cmd += worker + [a.script] + list(a.args)
    env = dict(os.environ)
    if nproc > 1:
        # the ranks of a machine share its cores: each gets its part for BLAS/OpenMP and for
        # IREE's CPU worker threads, unless the caller chose (torchrun sets OMP_NUM_THREADS=1)
        share = str(max(1, (os.cpu_count() or 1) // nproc))
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TENSORPLAY_CPU_THREADS"):
            env.setdefault(key, share)
    env.update({"TENSORPLAY_DISTRIBUTED_LAUNCHED": "1", "MASTER_ADDR": a.master_addr,
                "MASTER_PORT": str(a.master_port), "LOCAL_WORLD_SIZE": str(nproc),
                "TENSORPLAY_DISTRIBUTED_PREFIX": "0" if a.no_prefix else "1"})
    return cmd, env


def main(argv: list[str] | None = None) -> int:
    cmd, env = mpiexec_command(sys.argv[1:] if argv is None else argv)
    # MPI's launcher forwards its standard input to rank 0 and fails when that input comes faster
    # than rank 0 reads it: only a terminal (a user typing to rank 0, pdb) is passed on
    stdin = None if sys.stdin is not None and sys.stdin.isatty() else subprocess.DEVNULL
    try:
        proc = subprocess.run(cmd, env=env, stdin=stdin)
    except KeyboardInterrupt:
        return 130
    if proc.returncode != 0:
        print(f"python -m tensorplay.distributed.run: the job failed (mpiexec exit status {proc.returncode}); "
              f"the failing rank's error is printed above with its [rankN]: prefix", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
