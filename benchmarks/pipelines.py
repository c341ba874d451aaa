"""Which compile options make each benchmark case fastest: every case of ``bench.py`` compiled
with each candidate pipeline, checked against eager, and timed in interleaved rounds (each
round calls every pipeline once per case, so drift of the machine hits all alike).

    python benchmarks/pipelines.py [--cases chain,norm,...] [--rounds 30] [--backend iree-cpu]

The table gives each pipeline's median time per case relative to the first one (IREE's
default, O0), its compile time and dispatch count; the last line the geometric mean over the
cases. This is how the backend's default pipeline was chosen (docs/performance.md)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402

import tensorplay as tp  # noqa: E402

#: name -> options; the first is the baseline the others are compared with
CANDIDATES = {
    "O0 (IREE default)": {"opt_level": "O0"},
    "O2": {"opt_level": "O2"},
    "O3": {"opt_level": "O3"},
    "O2 + data tiling": {"opt_level": "O2", "data_tiling": True},
    "O3 + data tiling + ukernels": {"opt_level": "O3", "data_tiling": True, "ukernels": "all"},
    "O2, local-task": {"opt_level": "O2", "runtime_driver": "local-task"},
    "O2 + data tiling, local-task": {"opt_level": "O2", "data_tiling": True, "runtime_driver": "local-task"},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="iree-cpu")
    parser.add_argument("--cases", default=",".join(c for c in bench.CASES if c != "tiny"))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--candidates", default=None, help="JSON object name -> options, replacing the built-in set")
    args = parser.parse_args(argv)
    candidates = json.loads(args.candidates) if args.candidates else CANDIDATES
    names = list(candidates)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    table: dict[str, dict[str, tuple]] = {}
    ok = True
    for key in cases:
        case = bench.CASES[key]
        fn, args_, _model = bench._built(tp, case)
        with tp.no_grad():
            eager = bench._to_numpy(fn(*args_))
            compiled, compile_s = {}, {}
            for name in names:
                tp.compiler.reset()
                c = tp.compile(fn, backend=args.backend, options=candidates[name])
                t0 = time.perf_counter()
                got = bench._to_numpy(c(*args_))
                compile_s[name] = time.perf_counter() - t0
                good = bool(np.allclose(got, eager, rtol=case.rtol, atol=case.atol))
                ok &= good
                compiled[name] = (c, good, bench._dispatches(c, args.backend, candidates[name]))
            times: dict[str, list[float]] = {n: [] for n in names}
            for _ in range(args.rounds):
                for name in names:
                    c = compiled[name][0]
                    t0 = time.perf_counter()
                    bench._to_numpy(c(*args_))
                    times[name].append((time.perf_counter() - t0) * 1e3)
        table[key] = {n: (statistics.median(times[n]), compile_s[n], compiled[n][1], compiled[n][2]) for n in names}
    base = names[0]
    print(f"backend {args.backend}; median of {args.rounds} interleaved rounds; each cell: time relative to "
          f"{base!r} (below 1 is faster), [compile s, dispatches]")
    width = max(len(n) for n in names) + 2
    print(f"{'case':12s} {base + ' ms':>14s} " + " ".join(f"{n:>{width}s}" for n in names[1:]))
    means = {n: [] for n in names[1:]}
    for key, row in table.items():
        base_ms = row[base][0]
        cells = []
        for n in names[1:]:
            t, cs, good, disp = row[n]
            means[n].append(t / base_ms)
            cells.append(f"{t / base_ms:5.2f}{'' if good else '!'} [{cs:4.1f}s,{disp}]".rjust(width))
        print(f"{key:12s} {base_ms:10.3f} [{row[base][3]}] " + " ".join(cells))
    print(f"{'geomean':12s} {'':>14s} " + " ".join(f"{float(np.exp(np.mean(np.log(v)))):{width}.2f}"
                                              for v in means.values()))
    if not ok:
        print("! marks a result that differs from eager")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
