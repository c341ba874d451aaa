"""Data-parallel step time of the example GPT (``tensorplay/examples/train_gpt.py``, its default
model and global batch of 16 x 32 tokens) on one and on two ranks of this machine: eager, with
the model compiled (``--compile model``) and with the whole step compiled (``--compile step``).

    python benchmarks/distributed.py [--steps 40] [--warmup 5] [--repeats 3] [--modes eager,model,step]
                                     [--ranks 1,2] [--keep-threads]

Each row is the faster of ``--repeats`` fresh jobs (the rows take turns), each started with
``python -m tensorplay.distributed.run --nproc-per-node N`` running this file with
``--worker``; rank 0 reports. "1" is the plain single process (no DDP),
"1+DDP" one rank with the DDP wrapper (its hooks and buckets, nothing to send), "2" two ranks
with DDP, each on 8 of the 16 rows. Per row: the median step time after ``--warmup`` steps
(compiles happen there), the speed-up over "1" of the same mode, the time a step spends inside
DDP's end-of-backward callback (``DistributedDataParallel._finish_backward``: waiting for the
buckets' all-reduces and writing the averaged gradients) and in its gradient hooks (copying each
gradient into its bucket, starting a full bucket's all-reduce), that callback's share of the
step (median over the steps of wait / step time; the wait includes waiting for the slower rank),
and the bytes all-reduced per step (the buckets' sizes). The DDP methods are timed by
wrapping them in the worker process; the library is not changed.

Every job gets ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` = cores // ranks (``--keep-threads``
leaves the environment as it is): two ranks with a BLAS thread per core each would run four
spinning threads on two cores.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


# --- one rank ----------------------------------------------------------------------------------------------------


def worker(mode: str, ddp: bool, steps: int, warmup: int) -> None:
    from tensorplay.examples import train_gpt
    from tensorplay.nn.parallel import DistributedDataParallel as DDP

    waits: list[float] = []  # seconds in each backward's end-of-backward callback
    hooks: list[float] = []  # seconds in each gradient hook of the backward under way
    step_hooks: list[float] = []  # the hooks' seconds, summed per backward
    wrappers: list = []
    original_init, original_hook, original_finish = DDP.__init__, DDP._grad_ready, DDP._finish_backward

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        wrappers.append(self)

    def hook(self, p):
        t = time.perf_counter()
        try:
            return original_hook(self, p)
        finally:
            hooks.append(time.perf_counter() - t)

    def finish(self):
        step_hooks.append(sum(hooks))
        hooks.clear()
        t = time.perf_counter()
        try:
            return original_finish(self)
        finally:
            waits.append(time.perf_counter() - t)

    DDP.__init__, DDP._grad_ready, DDP._finish_backward = init, hook, finish

    log = io.StringIO()
    result = train_gpt.train(steps=steps, compile=mode if mode != "eager" else False, ddp=ddp, sample_chars=0,
                             log=log)
    params = re.search(r"model (\d+) parameters", log.getvalue())
    rank, world = 0, 1
    if ddp:
        from tensorplay import distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
    if rank != 0:
        return
    times = result["times"][warmup:]
    report = {"mode": mode, "ddp": ddp, "world": world, "steps": len(times),
              "step_ms": 1e3 * statistics.median(times), "step_ms_mean": 1e3 * statistics.fmean(times),
              "final_loss": result["losses"][-1], "params": params and int(params.group(1)),
              "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default")}
    if ddp:
        model = wrappers[0]
        waits, hook_s = waits[warmup:], step_hooks[warmup:]
        report.update(
            finish_ms=1e3 * statistics.median(waits), finish_ms_mean=1e3 * statistics.fmean(waits),
            hooks_ms=1e3 * statistics.median(hook_s),
            comm_share=statistics.median(w / t for w, t in zip(waits, times)), buckets=len(model._buckets),
            bytes_per_step=sum(b.flat.nbytes for b in model._buckets) if world > 1 else 0)
    print("RESULT " + json.dumps(report), flush=True)


# --- the launcher side -------------------------------------------------------------------------------------------


def cpu_line() -> tuple[str, int]:
    """The CPU's model name and its core count (``lscpu``; ``os.cpu_count()`` where it is missing)."""
    info: dict[str, str] = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    cores = os.cpu_count() or 1
    if "Core(s) per socket" in info and "Socket(s)" in info:
        cores = int(info["Core(s) per socket"]) * int(info["Socket(s)"])
    name = info.get("Model name", "unknown CPU")
    return f"{name}, {cores} cores, {info.get('CPU(s)', os.cpu_count())} logical CPUs", cores


def run_job(mode: str, ranks: int, ddp: bool, steps: int, warmup: int, threads: int | None) -> dict:
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(ranks), "--no-prefix",
           HERE, "--worker", "--mode", mode, "--steps", str(steps), "--warmup", str(warmup)]
    if ddp:
        cmd.append("--ddp")
    env = dict(os.environ)
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed (status {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the figures (compiles)")
    p.add_argument("--modes", default="eager,model,step", help="comma-separated: eager, model (tp.compile(model)), "
                   "step (the whole training step compiled)")
    p.add_argument("--repeats", type=int, default=3, help="jobs per row; the faster one is shown")
    p.add_argument("--ranks", default="1,2", help="comma-separated rank counts; 1 also runs as 1+DDP")
    p.add_argument("--keep-threads", action="store_true", help="leave OPENBLAS/OMP_NUM_THREADS as they are")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="eager", help=argparse.SUPPRESS)
    p.add_argument("--ddp", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.mode, a.ddp, a.steps, a.warmup)
        return 0
    if a.steps <= a.warmup:
        raise SystemExit("--steps must be larger than --warmup")
    cpu, cores = cpu_line()
    print(f"CPU: {cpu}")
    rows = [(mode, n, ddp) for mode in a.modes.split(",") for n in (int(r) for r in a.ranks.split(","))
            for ddp in ((False, True) if n == 1 else (True,))]
    best: dict = {}
    for rep in range(a.repeats):  # the rows in turn, so a busy spell of the machine hits one run of each
        for row in rows:
            mode, n, ddp = row
            print(f"run {rep + 1}/{a.repeats}: {mode}, {n} rank(s){', DDP' if ddp else ''}", file=sys.stderr,
                  flush=True)
            r = run_job(mode, n, ddp, a.steps, a.warmup, None if a.keep_threads else max(1, cores // n))
            if row not in best or r["step_ms"] < best[row]["step_ms"]:
                best[row] = r
    print(f"example GPT (2 layers, d=64, {best[rows[0]].get('params', '?')} parameters), global batch 16 x 32 "
          f"tokens; per row the median step of steps {a.warmup + 1}-{a.steps}, the faster of {a.repeats} jobs; "
          f"comm share = median over the steps of (time in DDP's end-of-backward wait) / (step time)")
    header = (f"{'mode':<6} {'ranks':<6} {'BLAS thr':>8} {'ms/step':>8} {'speed-up':>8} {'wait ms med/mean':>16} "
              f"{'hooks ms':>8} {'comm share':>10} {'all-reduced/step':>16}")
    print(header)
    print("-" * len(header))
    base: dict = {}
    for row in rows:
        mode, n, ddp = row
        r = best[row]
        if n == 1 and not ddp:
            base[mode] = r["step_ms"]
        speed = f"{base[mode] / r['step_ms']:.2f}x" if mode in base else "-"
        label = f"{n}{'+DDP' if ddp and n == 1 else ''}"
        if ddp:
            wait = f"{r['finish_ms']:.2f} / {r['finish_ms_mean']:.2f}"
            tail = (f"{wait:>16} {r['hooks_ms']:>8.2f} {100 * r['comm_share']:>9.1f}% "
                    f"{r['bytes_per_step'] / 1024:>10.1f} KiB")
        else:
            tail = f"{'-':>16} {'-':>8} {'-':>10} {'-':>16}"
        print(f"{mode:<6} {label:<6} {r['blas_threads']:>8} {r['step_ms']:>8.1f} {speed:>8} {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
