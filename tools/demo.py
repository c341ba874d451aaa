"""The tensorplay demo: a nanoGPT-style transformer and a small CNN, written once against the
PyTorch API, run eagerly and compiled with the default backend (``iree-cpu``), checked
against eager (and against PyTorch when it is installed).

    python -m tensorplay.tools.demo [--repeats N] [--backend NAME]

For each model it prints the checks, the compile time and whether the compiled programs came
from the on-disk cache (run the demo twice to see the second run hit it), and a timing table
(median of N forward passes).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.examples import GPTConfig, build_cnn, build_gpt

__all__ = ["main", "median_ms"]


#: seconds each timed series waits before it starts: OpenBLAS's worker threads (numpy's
#: matmul, tensorplay eager) and PyTorch's OpenMP threads spin for a while after each call; on
#: 2 cores a series started at once shares a core with them (transformer block compiled:
#: 5.2-5.8 ms after a pause, 8.0-9.9 ms right after 20 numpy matmuls of 256x256)
SETTLE_S = 0.25


#: seconds of warm-up calls after that pause: the first calls after an idle pause wake worker
#: threads and caches (an IREE worker pool's first step after 0.25 s idle took 1.5-3x its median)
WARMUP_S = 0.05


def median_ms(fn: Callable[[], Any], repeats: int, settle_s: float = SETTLE_S) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` after a pause of ``settle_s`` and
    warm-up calls (at least one, for at least :data:`WARMUP_S`), in ms."""
    time.sleep(settle_s)  # (threads the previous series left spinning go to sleep)
    start = time.perf_counter()
    fn()  # warm-up
    while time.perf_counter() - start < WARMUP_S:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _load_into_torch(torch: Any, tp_model: Any, torch_model: Any) -> None:
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in tp_model.state_dict().items()}
    torch_model.load_state_dict(state)
    torch_model.eval()


def _check(name: str, ours: np.ndarray, theirs: np.ndarray | None) -> str:
    if theirs is None:
        return f"{name}: output {list(ours.shape)}, finite: {bool(np.isfinite(ours).all())}"
    err = float(np.max(np.abs(ours - theirs)))
    ok = np.allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    return f"{name}: output {list(ours.shape)}, max |tensorplay - PyTorch| = {err:.2e} ({'OK' if ok else 'MISMATCH'})"


def _compile_report(stats: dict[str, int], seconds: float) -> str:
    if stats["compiles"] == 0 and stats["hits"]:
        return f"{seconds:.2f} s, all {stats['hits']} program(s) from the disk cache"
    return (f"{seconds:.2f} s, IREE compiled {stats['compiles']} program(s)"
            + (f", {stats['hits']} from the disk cache" if stats["hits"] else "")
            + " (run again: the next process loads them from the disk cache)")


def run(repeats: int = 20, backend: str | None = None, out=sys.stdout) -> bool:
    """Run the demo; returns True when every check passes."""
    from tensorplay.compiler.backends.cache import cache_dir, cache_stats, reset_cache_stats

    torch = None
    if importlib.util.find_spec("torch") is not None:
        import torch  # type: ignore[no-redef]

    backend = backend or tp.compiler.get_default_backend()
    tp.manual_seed(0)
    cfg = GPTConfig(block_size=64, vocab_size=256, n_layer=4, n_head=4, n_embd=128)
    gpt = build_gpt(tp, cfg).eval()
    idx = tp.randint(0, cfg.vocab_size, (4, 64))
    cnn = build_cnn(tp).eval()
    images = tp.randn(32, 1, 12, 12)

    cases = [("nanoGPT (4 layers, 128 wide, 4x64 tokens)", gpt, lambda m, lib, x: m(x)[0], idx,
              lambda lib: build_gpt(lib, cfg)),
             ("CNN (32 images of 1x12x12)", cnn, lambda m, lib, x: m(x), images, build_cnn)]
    all_ok = True
    rows = []
    print(f"tensorplay {tp.__version__}: eager (numpy on the host) and compiled with backend "
          f"{backend!r} (artifact cache: {cache_dir()})", file=out)
    for name, model, call, x, build in cases:
        with tp.no_grad():
            ours = call(model, tp, x).numpy()
            eager_ms = median_ms(lambda: call(model, tp, x), repeats)
            compiled_model = tp.compile(model, backend=backend)
            reset_cache_stats()
            t0 = time.perf_counter()
            got = call(compiled_model, tp, x).numpy()
            compile_s = time.perf_counter() - t0
            stats = cache_stats()
            compiled_ms = median_ms(lambda: call(compiled_model, tp, x), repeats)
        err = float(np.max(np.abs(got - ours)))
        same = bool(np.allclose(got, ours, rtol=1e-4, atol=1e-5))
        all_ok &= same
        theirs = torch_ms = None
        if torch is not None:
            ref = build(torch)
            _load_into_torch(torch, model, ref)
            tx = torch.from_numpy(np.array(x.numpy()))
            with torch.no_grad():
                theirs = call(ref, torch, tx).numpy()
                torch_ms = median_ms(lambda: call(ref, torch, tx), repeats)
        line = _check(name, ours, theirs)
        all_ok &= "MISMATCH" not in line and bool(np.isfinite(ours).all())
        print(line, file=out)
        print(f"  compiled: max |compiled - eager| = {err:.2e} ({'OK' if same else 'MISMATCH'}); "
              f"first call {_compile_report(stats, compile_s)}", file=out)
        rows.append((name, eager_ms, compiled_ms, torch_ms))
    print(file=out)
    print(f"{'model':45s} {'tensorplay eager':>17s} {'compiled':>11s} {'speed-up':>9s} {'PyTorch eager':>14s}",
          file=out)
    for name, ms, cms, tms in rows:
        tcol = f"{tms:11.2f} ms" if tms is not None else f"{'(not installed)':>14s}"
        print(f"{name:45s} {ms:14.2f} ms {cms:8.2f} ms {ms / cms:8.1f}x {tcol}", file=out)
    print(f"\nmedian of {repeats} runs per model", file=out)
    return all_ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed forward passes per model")
    parser.add_argument("--backend", default=None, help="compiler backend (default: the default backend)")
    args = parser.parse_args(argv)
    return 0 if run(args.repeats, args.backend) else 1


if __name__ == "__main__":
    sys.exit(main())
