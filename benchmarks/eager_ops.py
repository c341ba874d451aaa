"""Eager float32 op speed and accuracy against PyTorch eager on the CPU.

    python benchmarks/eager_ops.py [--repeat 7] [--only gelu,erf] [--markdown]

Each op runs through the public frontend (``tp.<op>`` / ``tp.nn.functional``), so the time
includes dispatch. Elementwise ops take a 1024x1024 float32 input (1M elements); row-wise ops
(reductions along the last dim, softmax, norms, cumsum) a 512x1024 one, and the whole-tensor
reductions the 1M input. Times are the best of ``--repeat`` calls after a warm-up, for tp and
for torch with one thread and with its default thread count.

Error column: the largest distance, in float32 ulps, of the tp result (and, in brackets, of
torch's float32 result) from the float64 torch result rounded to float32 (0: correctly
rounded), over the elements whose exact value is at least 2**-10 in magnitude: formulas such
as gelu's ``1 + erf(x / sqrt(2))`` lose all relative precision where the result nears 0, in
both libraries. For reductions and cumsum (marked ``rel``) the largest error relative to the
largest result magnitude.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
import torch.nn.functional as TF


def _ulps(got: np.ndarray, want64: np.ndarray) -> float:
    """Largest ulp distance of float32 ``got`` from float64 ``want64`` rounded to float32
    where ``|want64| >= 2**-10`` (NaN must match NaN; equal infinities count 0)."""
    want = want64.astype(np.float32)
    got = np.asarray(got, np.float32)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    if np.any(nan_g != nan_w):
        return float("inf")
    ok = ~nan_w & (np.abs(want64) >= 2.0 ** -10)
    g = got[ok].view(np.int32).astype(np.int64)
    w = want[ok].view(np.int32).astype(np.int64)
    # map the sign-magnitude bit patterns onto a monotonic integer line
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    return float(np.max(np.abs(g - w))) if g.size else 0.0


def _rel(got: np.ndarray, want64: np.ndarray) -> float:
    got = np.asarray(got, np.float64)
    return float(np.max(np.abs(got - want64)) / np.max(np.abs(want64)))


def _best(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def _cases():
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((1024, 1024)).astype(np.float32) * 3
    pos = np.abs(flat) + np.float32(0.01)
    unit = rng.uniform(-0.999, 0.999, (1024, 1024)).astype(np.float32)
    other = rng.standard_normal((1024, 1024)).astype(np.float32)
    rows = rng.standard_normal((512, 1024)).astype(np.float32) * 3
    ew = "elementwise"
    # name, kind, input arrays, tp function, torch function (same signature)
    return [
        ("add", ew, (flat, other), tp.add, torch.add),
        ("mul", ew, (flat, other), tp.mul, torch.mul),
        ("div", ew, (flat, pos), tp.div, torch.div),
        ("pow", ew, (pos, other), tp.pow, torch.pow),
        ("maximum", ew, (flat, other), tp.maximum, torch.maximum),
        ("atan2", ew, (flat, other), tp.atan2, torch.atan2),
        ("neg", ew, (flat,), tp.neg, torch.neg),
        ("abs", ew, (flat,), tp.abs, torch.abs),
        ("exp", ew, (flat,), tp.exp, torch.exp),
        ("expm1", ew, (flat,), tp.expm1, torch.expm1),
        ("log", ew, (pos,), tp.log, torch.log),
        ("log1p", ew, (pos,), tp.log1p, torch.log1p),
        ("sqrt", ew, (pos,), tp.sqrt, torch.sqrt),
        ("rsqrt", ew, (pos,), tp.rsqrt, torch.rsqrt),
        ("reciprocal", ew, (pos,), tp.reciprocal, torch.reciprocal),
        ("sin", ew, (flat,), tp.sin, torch.sin),
        ("cos", ew, (flat,), tp.cos, torch.cos),
        ("tan", ew, (unit,), tp.tan, torch.tan),
        ("atan", ew, (flat,), tp.atan, torch.atan),
        ("tanh", ew, (flat,), tp.tanh, torch.tanh),
        ("sinh", ew, (unit,), tp.sinh, torch.sinh),
        ("asinh", ew, (flat,), tp.asinh, torch.asinh),
        ("atanh", ew, (unit,), tp.atanh, torch.atanh),
        ("erf", ew, (flat,), tp.erf, torch.erf),
        ("erfinv", ew, (unit,), tp.erfinv, torch.erfinv),
        ("sigmoid", ew, (flat,), tp.sigmoid, torch.sigmoid),
        ("relu", ew, (flat,), F.relu, TF.relu),
        ("leaky_relu", ew, (flat,), F.leaky_relu, TF.leaky_relu),
        ("gelu", ew, (flat,), F.gelu, TF.gelu),
        ("gelu_tanh", ew, (flat,), lambda x: F.gelu(x, approximate="tanh"),
         lambda x: TF.gelu(x, approximate="tanh")),
        ("silu", ew, (flat,), F.silu, TF.silu),
        ("softplus", ew, (flat,), F.softplus, TF.softplus),
        ("elu", ew, (flat,), F.elu, TF.elu),
        ("mish", ew, (flat,), F.mish, TF.mish),
        ("logsigmoid", ew, (flat,), F.logsigmoid, TF.logsigmoid),
        ("hardswish", ew, (flat,), F.hardswish, TF.hardswish),
        ("clamp", ew, (flat,), lambda x: tp.clamp(x, -1.0, 1.0), lambda x: torch.clamp(x, -1.0, 1.0)),
        ("where", ew, (flat, other), lambda a, b: tp.where(a > 0, a, b),
         lambda a, b: torch.where(a > 0, a, b)),
        ("sum", "reduction", (flat,), tp.sum, torch.sum),
        ("mean", "reduction", (flat,), tp.mean, torch.mean),
        ("sum rows", "reduction", (rows,), lambda x: tp.sum(x, -1), lambda x: torch.sum(x, -1)),
        ("mean rows", "reduction", (rows,), lambda x: tp.mean(x, -1), lambda x: torch.mean(x, -1)),
        ("var rows", "reduction", (rows,), lambda x: tp.var(x, -1), lambda x: torch.var(x, -1)),
        ("std rows", "reduction", (rows,), lambda x: tp.std(x, -1), lambda x: torch.std(x, -1)),
        ("amax rows", "reduction", (rows,), lambda x: tp.amax(x, -1), lambda x: torch.amax(x, -1)),
        ("argmax rows", "index", (rows,), lambda x: tp.argmax(x, -1), lambda x: torch.argmax(x, -1)),
        ("logsumexp rows", "reduction", (rows,), lambda x: tp.logsumexp(x, -1),
         lambda x: torch.logsumexp(x, -1)),
        ("cumsum rows", "reduction", (rows,), lambda x: tp.cumsum(x, -1),
         lambda x: torch.cumsum(x, -1)),
        ("softmax rows", ew, (rows,), lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1)),
        ("log_softmax rows", ew, (rows,), lambda x: F.log_softmax(x, -1),
         lambda x: TF.log_softmax(x, -1)),
        ("layer_norm rows", ew, (rows,), lambda x: F.layer_norm(x, (1024,)),
         lambda x: TF.layer_norm(x, (1024,))),
        ("rms_norm rows", ew, (rows,), lambda x: F.rms_norm(x, (1024,)),
         lambda x: TF.rms_norm(x, (1024,))),
    ]


def measure(repeat: int, only: set[str] | None):
    default_threads = torch.get_num_threads()
    rows = []
    with tp.no_grad(), torch.no_grad():
        for name, kind, arrays, tp_fn, torch_fn in _cases():
            if only and name not in only:
                continue
            tps = [tp.tensor(a) for a in arrays]
            ts = [torch.from_numpy(a) for a in arrays]
            t64 = [t.double() for t in ts]
            tp_ms = _best(lambda: tp_fn(*tps), repeat)
            torch.set_num_threads(1)
            t1_ms = _best(lambda: torch_fn(*ts), repeat)
            torch.set_num_threads(default_threads)
            tn_ms = _best(lambda: torch_fn(*ts), repeat)
            got = tp_fn(*tps).numpy()
            want = torch_fn(*t64).numpy()
            mine = torch_fn(*ts).numpy()
            if kind == "index":
                err = f"{int(np.sum(got != mine))} differ"
            elif kind == "reduction":
                err = f"rel {_rel(got, want):.0e} ({_rel(mine, want):.0e})"
            else:
                err = f"{_ulps(got, want):.0f} ulp ({_ulps(mine, want):.0f})"
            rows.append((name, tp_ms, t1_ms, tn_ms, tp_ms / t1_ms, err))
    return rows, default_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated op names")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    rows, threads = measure(args.repeat, only)
    head = ("op", "tp ms", "torch 1T ms", f"torch {threads}T ms", "tp / torch 1T", "max error")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name, a, b, c, r, err in rows:
            print(f"| {name} | {a:.2f} | {b:.2f} | {c:.2f} | {r:.1f} | {err} |")
        return
    print(f"{head[0]:<18}{head[1]:>9}{head[2]:>13}{head[3]:>13}{head[4]:>15}  {head[5]}")
    for name, a, b, c, r, err in rows:
        print(f"{name:<18}{a:>9.2f}{b:>13.2f}{c:>13.2f}{r:>15.1f}  {err}")


if __name__ == "__main__":
    main()
