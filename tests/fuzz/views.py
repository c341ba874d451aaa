"""Seeded random chains of views and in-place writes, run with tensorplay and PyTorch.

Program ``index`` of a ``seed`` makes a float64 tensor ``x``, takes one to three chains of
views of it (slices with steps, ``select``, ``narrow``, ``transpose``/``permute``/``t``,
``unsqueeze``/``squeeze``, ``view``/``reshape``/``flatten``, ``expand``, one piece of
``chunk``/``split``/``unbind``, ``detach``, ``.data``), then writes through some of them and
through ``x`` (``add_``, ``mul_``, ``zero_``, ``fill_``, ``copy_``, ``clamp_``,
``__setitem__``), reading views between the writes. Every program is Python source over a
module named ``torch``, so its text is its own reproducer: the same text runs on PyTorch and
on tensorplay, eagerly and compiled (``tp.compile``, static), and the results (every value
read, and ``x`` at the end, with each view's sizes, strides and storage offset eagerly) must
be equal, or both must raise.

``python -m tests.fuzz.views --count N --seed S`` runs a campaign; ``--index I --show``
prints one program.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from typing import Any

import numpy as np

__all__ = ["generate", "run_one", "main"]


class _Gen:
    def __init__(self, seed: int, index: int):
        self.r = random.Random(seed * 1_000_003 + index)
        self.lines: list[str] = []
        self.views: dict[str, tuple[int, ...]] = {}
        self.reads: list[str] = []
        self.writable: dict[str, bool] = {}
        self.n = 0

    def name(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def view_of(self, src: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...], bool] | None:
        """One view op on ``src``: (expression, shape, writable)."""
        r = self.r
        kinds = ["slice", "select", "narrow", "transpose", "permute", "unsqueeze", "flatten", "view",
                 "expand", "piece", "detach", "data", "squeeze", "t"]
        for _ in range(20):
            k = r.choice(kinds)
            nd = len(shape)
            if k == "slice" and nd:
                d = r.randrange(nd)
                n = shape[d]
                start = r.randrange(0, max(n, 1))
                stop = r.randrange(start, n + 1)
                step = r.choice([1, 1, 2, 3])
                key = ", ".join([":"] * d + [f"{start}:{stop}:{step}"])
                size = len(range(start, stop, step))
                return f"{src}[{key}]", shape[:d] + (size,) + shape[d + 1:], True
            if k == "select" and nd and all(shape):
                d = r.randrange(nd)
                i = r.randrange(-shape[d], shape[d])
                return f"{src}.select({d}, {i})", shape[:d] + shape[d + 1:], True
            if k == "narrow" and nd:
                d = r.randrange(nd)
                start = r.randrange(0, shape[d] + 1)
                length = r.randrange(0, shape[d] - start + 1)
                return f"{src}.narrow({d}, {start}, {length})", shape[:d] + (length,) + shape[d + 1:], True
            if k == "transpose" and nd >= 2:
                a, b = r.sample(range(nd), 2)
                s = list(shape)
                s[a], s[b] = s[b], s[a]
                return f"{src}.transpose({a}, {b})", tuple(s), True
            if k == "t" and nd == 2:
                return f"{src}.t()", (shape[1], shape[0]), True
            if k == "permute" and nd >= 2:
                p = list(range(nd))
                r.shuffle(p)
                return f"{src}.permute({', '.join(map(str, p))})", tuple(shape[i] for i in p), True
            if k == "unsqueeze" and nd < 4:
                d = r.randrange(-nd - 1, nd + 1)
                s = list(shape)
                s.insert(d if d >= 0 else nd + 1 + d, 1)
                return f"{src}.unsqueeze({d})", tuple(s), True
            if k == "squeeze" and 1 in shape:
                d = shape.index(1)
                return f"{src}.squeeze({d})", shape[:d] + shape[d + 1:], True
            if k == "flatten":
                return f"{src}.flatten()", (int(np.prod(shape)),), True
            if k == "view" and nd:
                n = int(np.prod(shape))
                if n and n % 2 == 0:
                    # reshape: a view when the layout allows, else a copy (PyTorch decides;
                    # writes through a copy must not reach x)
                    return f"{src}.reshape(2, -1)", (2, n // 2), True
            if k == "expand" and nd and 1 in shape:
                d = shape.index(1)
                s = list(shape)
                s[d] = 3
                return f"{src}.expand({', '.join(map(str, s))})", tuple(s), False
            if k == "piece" and nd and shape[0] >= 2:
                how = r.choice(["chunk", "split", "unbind"])
                if how == "unbind":
                    i = r.randrange(shape[0])
                    return f"{src}.unbind(0)[{i}]", shape[1:], True
                if how == "chunk":
                    c = r.randint(2, shape[0])
                    size = -(-shape[0] // c)
                    pieces = [min(size, shape[0] - j) for j in range(0, shape[0], size)]
                    i = r.randrange(len(pieces))
                    return f"{src}.chunk({c})[{i}]", (pieces[i],) + shape[1:], True
                size = r.randint(1, shape[0])
                pieces = [min(size, shape[0] - j) for j in range(0, shape[0], size)]
                i = r.randrange(len(pieces))
                return f"{src}.split({size})[{i}]", (pieces[i],) + shape[1:], True
            if k == "detach":
                return f"{src}.detach()", shape, True
            if k == "data":
                return f"{src}.data", shape, True
        return None

    def write(self, target: str, shape: tuple[int, ...]) -> str:
        r = self.r
        k = r.choice(["add_", "mul_", "zero_", "fill_", "copy_", "clamp_", "setitem", "setitem_row"])
        c = r.choice([2, -1, 3, 0.5])
        if k == "add_":
            return f"{target}.add_({c})"
        if k == "mul_":
            return f"{target}.mul_({c})"
        if k == "zero_":
            return f"{target}.zero_()"
        if k == "fill_":
            return f"{target}.fill_({c})"
        if k == "copy_":
            return f"{target}.copy_(torch.arange({int(np.prod(shape))}, dtype=torch.float64).reshape({shape!r}))"
        if k == "clamp_":
            return f"{target}.clamp_(-3, 4)"
        if k == "setitem_row" and shape and shape[0]:
            return f"{target}[{r.randrange(shape[0])}] = {c}"
        return f"{target}[...] = {c}"

    def build(self) -> str:
        r = self.r
        shape = tuple(r.randint(1, 5) for _ in range(r.randint(1, 3)))
        n = int(np.prod(shape))
        self.lines.append(f"x = torch.arange({n}, dtype=torch.float64).reshape({shape!r}) - {n // 2}")
        self.views["x"] = shape
        self.writable["x"] = True
        for _ in range(r.randint(1, 3)):  # chains of views
            src = r.choice(list(self.views))
            for _ in range(r.randint(1, 3)):
                made = self.view_of(src, self.views[src])
                if made is None:
                    break
                expr, vshape, writable = made
                v = self.name()
                self.lines.append(f"{v} = {expr}")
                self.views[v] = vshape
                self.writable[v] = writable and self.writable[src]
                src = v
        for _ in range(r.randint(1, 4)):  # writes, reads in between
            target = r.choice([v for v in self.views if self.writable[v]])
            self.lines.append(self.write(target, self.views[target]))
            read = r.choice(list(self.views))
            self.lines.append(f"reads.append({read} * 1)")
        self.lines.append("reads.append(x * 1)")
        return "\n".join(self.lines)


def generate(seed: int, index: int) -> str:
    """Program ``index`` of ``seed``: Python source over ``torch`` appending to ``reads``."""
    return _Gen(seed, index).build()


def _layouts(env: dict) -> list[tuple]:
    """Each tensor's sizes, strides and storage offset, and whether it is contiguous. Strides
    of dims of size 1, and every stride and the offset of an empty tensor, address no other
    element whatever their value; PyTorch's conventions for them are not reproduced
    (docs/tensors.md), so they are left out."""
    out = []
    for k, v in sorted(env.items()):
        if k == "x" or (k.startswith("v") and k[1:].isdigit()):
            shape = tuple(v.shape)
            empty = 0 in shape
            strides = None if empty else tuple(s for s, n in zip(v.stride(), shape) if n != 1)
            out.append((k, shape, strides, None if empty else v.storage_offset(), v.is_contiguous()))
    return out


def _execute(module: Any, source: str, compiled: bool = False) -> tuple[str, Any]:
    """('ok', (reads, layouts)) or ('error', message)."""
    env: dict[str, Any] = {"torch": module, "reads": []}
    try:
        if compiled:
            code = "def program():\n    reads = []\n" + "".join(f"    {ln}\n" for ln in source.splitlines()) + \
                   "    return reads\n"
            ns: dict[str, Any] = {"torch": module}
            exec(code, ns)
            reads = module.compile(ns["program"])()
            return "ok", ([np.array(t.numpy()) for t in reads], None)
        exec(source, env)
    except Exception as exc:  # noqa: BLE001 - both implementations must raise alike
        return "error", f"{type(exc).__name__}: {exc}"
    reads = [np.array(t.detach().numpy() if hasattr(t, "detach") else t.numpy()) for t in env["reads"]]
    return "ok", (reads, _layouts(env))


def run_one(seed: int, index: int, compiled: bool = True) -> str | None:
    """None if program ``index`` agrees everywhere, else a report with its source."""
    import torch

    import tensorplay as tp

    source = generate(seed, index)
    theirs = _execute(torch, source)
    variants = [("eager", False)] + ([("compiled", True)] if compiled else [])
    for label, comp in variants:
        ours = _execute(tp, source, comp)
        problem = _compare(ours, theirs, layouts=not comp)
        if problem:
            return (f"view program seed {seed} index {index} ({label}): {problem}\n"
                    f"--- reproducer (runs with `import torch` or `import tensorplay as torch`) ---\n"
                    f"reads = []\n{source}\n")
    return None


def _compare(ours: tuple, theirs: tuple, layouts: bool) -> str | None:
    if theirs[0] == "error" or ours[0] == "error":
        if theirs[0] == ours[0]:
            return None
        return f"PyTorch {theirs[0]}: {theirs[1] if theirs[0] == 'error' else 'ok'}; tensorplay " \
               f"{ours[0]}: {ours[1] if ours[0] == 'error' else 'ok'}"
    (our_reads, our_layouts), (their_reads, their_layouts) = ours[1], theirs[1]
    if len(our_reads) != len(their_reads):
        return f"{len(our_reads)} reads, PyTorch {len(their_reads)}"
    for i, (a, b) in enumerate(zip(our_reads, their_reads)):
        if a.shape != b.shape or not np.array_equal(a, b):
            return f"read {i} differs:\n  tensorplay {a.tolist()}\n  PyTorch    {b.tolist()}"
    if layouts and our_layouts != their_layouts:
        diff = [(a, b) for a, b in zip(our_layouts, their_layouts) if a != b]
        return f"sizes/strides/offset differ (tensorplay, PyTorch): {diff[:3]}"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--index", type=int, help="run (and with --show print) this one program")
    p.add_argument("--show", action="store_true")
    p.add_argument("--eager-only", action="store_true", help="skip the compiled variant")
    args = p.parse_args(argv)
    indices = [args.index] if args.index is not None else range(args.start, args.start + args.count)
    failures, t0 = 0, time.time()
    for n, i in enumerate(indices, 1):
        if args.show:
            print(generate(args.seed, i))
        try:
            report = run_one(args.seed, i, compiled=not args.eager_only)
        except Exception:  # noqa: BLE001 - a crash of the harness is a failure too
            report = f"view program seed {args.seed} index {i}: harness error\n{traceback.format_exc()}"
        if report:
            failures += 1
            print(report, flush=True)
        if n % 100 == 0:
            print(f"[views] {n} programs, {failures} failures, {time.time() - t0:.0f} s", flush=True)
    print(f"[views] {len(indices)} programs, {failures} failures, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
