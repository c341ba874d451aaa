"""What updating a compiled step's state in place saves: the peak memory of a process training
an MLP with large layers (AdamW, the whole step compiled with ``tp.compile``), with the step's
parameters and optimizer state written in place and with new buffers for them on every step,
and the time per step of each.

    python benchmarks/inplace.py [--width 2048] [--layers 4] [--steps 20]

Each mode runs in a fresh interpreter; peak memory is the process's maximum resident set
(``ru_maxrss``), over the same start-up, model and batch; the state (parameters and both AdamW
moments) is printed for scale."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

RUN = """
import json, resource, statistics, sys, time
import numpy as np, tensorplay as tp
import tensorplay.compiler.specialize as specialize
width, layers, steps, mode = {width}, {layers}, {steps}, {mode!r}
if mode == "new buffers":
    specialize._donations = lambda graph, trace: {{}}
tp.manual_seed(0)
mods = []
for _ in range(layers):
    mods += [tp.nn.Linear(width, width), tp.nn.GELU()]
net = tp.nn.Sequential(*mods, tp.nn.Linear(width, 10))
opt = tp.optim.AdamW(net.parameters(), lr=1e-4)

def step(x, y):
    loss = tp.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss

compiled = tp.compile(step)
rng = np.random.default_rng(0)
x, y = tp.tensor(rng.standard_normal((64, width)).astype(np.float32)), tp.tensor(rng.integers(0, 10, 64))
times, losses = [], []
for _ in range(steps):
    t = time.perf_counter()
    losses.append(compiled(x, y).item())
    times.append(time.perf_counter() - t)
state = sum(p.numel() * 3 * 4 for p in net.parameters())
print(json.dumps({{"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "state_mib": state / 2**20, "ms": 1e3 * statistics.median(times[2:]),
                  "loss": losses[-1]}}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    rows = {}
    for mode in ("in place", "new buffers"):
        code = RUN.format(width=args.width, layers=args.layers, steps=args.steps, mode=mode)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        rows[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    state = rows["in place"]["state_mib"]
    print(f"MLP of {args.layers} layers of {args.width}, AdamW, whole step compiled; parameters and "
          f"moments: {state:.0f} MiB")
    print(f"{'':14s} {'peak MiB':>9s} {'ms/step':>8s} {'last loss':>10s}")
    for mode, r in rows.items():
        print(f"{mode:14s} {r['peak_mib']:9.0f} {r['ms']:8.2f} {r['loss']:10.6f}")
    same = rows["in place"]["loss"] == rows["new buffers"]["loss"]
    print(f"losses {'identical' if same else 'DIFFER'}; in place saves "
          f"{rows['new buffers']['peak_mib'] - rows['in place']['peak_mib']:.0f} MiB of peak memory")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
