"""Start-up and call-overhead figures: ``import tensorplay``, the first call of the 2-layer GPT
of ``bench.py`` in a new process with a cold and with a warm disk cache, and where the time of a
tiny compiled call (``a + 1`` on 4 floats, result not read) goes; with ``--trace``, the same
first call and tiny call with ``TENSORPLAY_TRACE_DIR`` set (every stage written to a folder).

    python benchmarks/startup.py [--runs 5] [--trace]

Each start-up figure is the median over ``--runs`` fresh interpreters (bytecode cached, as after
``pip install``); the call stages are the best of 5 batches of 20,000 calls."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

IMPORT = "import time; t = time.perf_counter(); import tensorplay; print(time.perf_counter() - t)"

FIRST_CALL = """
import time, numpy as np, tensorplay as tp
from tensorplay.examples import GPTConfig, build_gpt
tp.manual_seed(0)
model = build_gpt(tp, GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128)).eval()
idx = tp.tensor(np.random.default_rng(4).integers(0, 512, (4, 64)))
compiled = tp.compile(model)
with tp.no_grad():
    t = time.perf_counter(); compiled(idx); print(time.perf_counter() - t)
"""


def _fresh(code: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _best_us(fn, n: int = 20000, batches: int = 5) -> float:
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def call_stages(trace_dir: str | None = None) -> list[tuple[str, float]]:
    """The tiny call, whole and by stage (each stage timed alone, in the order a call runs them);
    compiled with ``options={"trace_dir": trace_dir}`` when given."""
    import numpy as np

    import tensorplay as tp
    from tensorplay.compiler.capture import pytree
    from tensorplay.compiler.capture.guards import call_key

    f = tp.compile(lambda a: a + 1, options={"trace_dir": trace_dir} if trace_dir else None)
    a = tp.tensor(np.arange(4, dtype=np.float32))
    f(a)
    cf = getattr(f, "compiled_function", f)
    leaves, tree = pytree.flatten_call((a,), {})
    key = call_key(tree, leaves)
    entry = cf._lookup(key, leaves)
    arrays = [b.fetch(leaves) for b in entry.bindings]
    fn = entry.runner
    program = fn.program
    vm_args = program._VariantList(1)
    vm_args.push_ref(program.upload(arrays[0]))

    def invoke_only():
        results = program._VariantList(1)
        program._context.invoke(fn._vm_function, vm_args, results)
        return results

    return [
        ("whole call (tp.compile(lambda a: a + 1)(a))", _best_us(lambda: f(a))),
        ("  flatten arguments", _best_us(lambda: pytree.flatten_call((a,), {}))),
        ("  call key (guard structure)", _best_us(lambda: call_key(tree, leaves))),
        ("  cache lookup + guards", _best_us(lambda: cf._lookup(key, leaves))),
        ("  program call (upload, invoke, result)", _best_us(lambda: fn(*arrays))),
        ("    of which IREE invoke alone", _best_us(invoke_only)),
        ("  result tensor", _best_us(lambda: tp.Tensor._wrap(arrays[0]))),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trace", action="store_true", help="also with TENSORPLAY_TRACE_DIR set")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    _fresh(IMPORT, env)  # bytecode written
    imports = [_fresh(IMPORT, env) for _ in range(args.runs)]
    env.pop("TENSORPLAY_TRACE_DIR", None)
    cold, warm, traced = [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            run_env = {**env, "TENSORPLAY_CACHE_DIR": cache}
            cold.append(_fresh(FIRST_CALL, run_env))
            warm.append(_fresh(FIRST_CALL, run_env))
        if args.trace:
            with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as trace:
                traced.append(_fresh(FIRST_CALL, {**env, "TENSORPLAY_CACHE_DIR": cache,
                                                  "TENSORPLAY_TRACE_DIR": trace}))
    print(f"median of {args.runs} fresh processes")
    print(f"{'import tensorplay':52s} {statistics.median(imports):8.3f} s")
    print(f"{'first call, 2-layer GPT, cold disk cache':52s} {statistics.median(cold):8.3f} s")
    if traced:
        print(f"{'  the same, TENSORPLAY_TRACE_DIR set':52s} {statistics.median(traced):8.3f} s")
    print(f"{'first call, 2-layer GPT, warm disk cache':52s} {statistics.median(warm):8.3f} s")
    print("tiny compiled call, best of 5 x 20,000 calls")
    for name, us in call_stages():
        print(f"{name:52s} {us:8.2f} us")
    if args.trace:
        with tempfile.TemporaryDirectory() as trace:
            whole = call_stages(trace)[0][1]
        print(f"{'  whole call, compiled with a trace folder':52s} {whole:8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
