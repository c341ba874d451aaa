"""Compile time of an N-layer transformer with and without ``nested_compile_region``.

    python benchmarks/nested_regions.py [--layers 2,4,8] [--backend iree-cpu]

Each row builds a nanoGPT-style model with N blocks, compiles it (a fresh artifact cache, so
every compile is real) and reports the first call's wall time (capture + lowering + IREE
compile + one run) split into phases, the size of the compiled vmfb, the median of 20 later
calls, the ops of the top-level graph, the ops lowered in all (callees counted
once) and the max difference to eager. With the region the Block's body is one callee called
N times, so the lowered and compiled code does not grow with N.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def measure(n_layer: int, region: bool, backend: str) -> dict:
    import tensorplay as tp
    import tensorplay.compiler as tpc
    from tensorplay.dialects.tp.graph import CALL
    from tensorplay.examples.models import GPTConfig, build_gpt

    from tensorplay.compiler.backends import iree

    phases = {"lower": 0.0, "iree": 0.0}

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases[name] += time.perf_counter() - t0
        return wrapper

    iree.lower_to_linalg = timed("lower", iree.lower_to_linalg)
    iree._compile_in_process = timed("iree", iree._compile_in_process)
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig(n_layer=n_layer, n_embd=32, n_head=4, block_size=16, vocab_size=61))
    model.eval()
    block_cls = type(model.transformer.h[0])
    if region:
        block_cls.forward = tpc.nested_compile_region(block_cls.forward)
    idx = tp.tensor(np.random.default_rng(0).integers(0, 61, (2, 16)))
    expected = model(idx)[0].detach().numpy()
    compiled = tpc.compile(model, backend=backend, fullgraph=True, name=f"gpt{n_layer}{'r' if region else ''}")
    start = time.perf_counter()
    out = compiled(idx)[0].detach().numpy()
    first = time.perf_counter() - start
    runs = []
    for _ in range(20):
        t0 = time.perf_counter()
        compiled(idx)
        runs.append(time.perf_counter() - t0)
    graph = compiled.compiled_function.graphs[0]
    cache = os.environ["TENSORPLAY_CACHE_DIR"]
    vmfb = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache) if ".vmfb" in f)
    lowered = sum(len(g.nodes) for g in [graph, *graph.callees()])
    return {"layers": n_layer, "region": region, "first_call_s": first, "lower_s": phases["lower"],
            "iree_s": phases["iree"], "call_ms": 1e3 * sorted(runs)[len(runs) // 2], "vmfb_kib": vmfb / 1024, "top_ops": len(graph.nodes),
            "calls": sum(n.op == CALL for n in graph.nodes), "lowered_ops": lowered,
            "max_err": float(np.abs(out - expected).max())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="2,4,8")
    parser.add_argument("--backend", default="iree-cpu")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per row; the fastest is shown (compile times on a busy machine vary)")
    args = parser.parse_args(argv)
    print("| layers | region | first call (s) | tp→linalg (s) | IREE compile (s) | rest: capture, "
          "emit, load, run (s) | vmfb (KiB) | later call (ms) | top-level ops | region calls | ops lowered | max err |")
    print("| ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in [int(v) for v in args.layers.split(",")]:
        for region in (False, True):
            # one process per run, each with an empty artifact cache: nothing is shared

            code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
                    f"import nested_regions as m; print(repr(m.measure({n}, {region}, {args.backend!r})))")
            rows = []
            for _ in range(args.repeats):
                os.environ["TENSORPLAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tensorplay-regions-")
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      env=os.environ)
                if proc.returncode != 0:
                    sys.exit(proc.stderr)
                rows.append(eval(proc.stdout.strip().splitlines()[-1]))
            row = min(rows, key=lambda r: r["first_call_s"])
            rest = row["first_call_s"] - row["lower_s"] - row["iree_s"]
            print(f"| {row['layers']} | {'yes' if row['region'] else 'no'} | {row['first_call_s']:.2f} | "
                  f"{row['lower_s']:.2f} | {row['iree_s']:.2f} | {rest:.2f} | {row['vmfb_kib']:.0f} | {row['call_ms']:.2f} | {row['top_ops']} | {row['calls']} | {row['lowered_ops']} | {row['max_err']:.1e} |")


if __name__ == "__main__":
    main()
