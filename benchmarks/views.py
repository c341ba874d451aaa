"""Views cost no memory and little time: peak RSS while 1,000 slices of a 256 MiB tensor are
alive, and the time of a view and of a write through one, next to PyTorch.

    python benchmarks/views.py [--mib 256] [--count 1000]

A view shares its base's memory (a numpy view on the host), so keeping ``count`` of them adds
only their bookkeeping; a copy per slice would add ``count`` times the slice's bytes.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time

import numpy as np


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (KiB on Linux)


def _time(fn, repeats: int = 2000) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--count", type=int, default=1000)
    args = p.parse_args()
    import tensorplay as tp

    rows = args.mib * 1024 * 1024 // 4 // 1024
    x = tp.zeros(rows, 1024)
    before = _peak_mib()
    views = [x[i % rows: i % rows + rows // 2] for i in range(args.count)]
    after = _peak_mib()
    slice_mib = views[0].numel() * 4 / 2**20
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}")
    print(f"{args.count} slices of a {args.mib} MiB tensor ({slice_mib:.0f} MiB each) kept alive: "
          f"peak RSS {before:.0f} MiB -> {after:.0f} MiB (+{after - before:.1f} MiB; copies would add "
          f"{slice_mib * args.count / 1024:.0f} GiB)")
    del views

    small = tp.zeros(64, 64)
    rows_out = [("x[:, 3]", lambda t: t[:, 3]), ("x.t()", lambda t: t.t()), ("x.view(-1)", lambda t: t.view(-1)),
                ("x[1:, 2].mul_(2)", lambda t: t[1:, 2].mul_(2))]
    try:
        import torch

        tsmall = torch.zeros(64, 64)
    except ImportError:
        torch = None
    print(f"\n{'op (64x64 float32)':<22}{'tensorplay us':>15}{'PyTorch us':>12}{'ratio':>8}")
    for label, fn in rows_out:
        ours = _time(lambda: fn(small))
        theirs = _time(lambda: fn(tsmall)) if torch is not None else float("nan")
        print(f"{label:<22}{ours:>15.2f}{theirs:>12.2f}{ours / theirs:>8.1f}")


if __name__ == "__main__":
    main()
