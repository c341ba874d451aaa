"""Eager vs compiled timings of tensorplay, next to PyTorch eager and torch.compile.

    python benchmarks/bench.py [--backend iree-cpu] [--device auto] [--repeats 50] [--cases chain,mlp,block,gpt] [--sweep]

Every case is written once against the PyTorch API and built for both libraries with the same
weights; each compiled result is checked against eager before it is timed. Inputs are made with
each library's ``tensor()`` (a copy into memory the library allocates, 64-byte aligned in both);
a ``from_numpy`` view of numpy's own memory, which starts 16 bytes off that alignment, is copied
by tensorplay's CPU programs on every call (see docs/performance.md). Steady-state times
are medians over ``--repeats`` calls after a warm-up; compile time is the first call's wall time
(capture + lowering + IREE compile, or a disk-cache hit on later runs). One table per run, all
ratios from that run.

With a GPU backend (``--backend iree-cuda``, ``iree-vulkan``) the model and inputs are moved to
its device first (``--device auto``; ``--device cpu`` keeps them on the host, so each call
uploads its inputs and reads its results back). Every table shows the bytes each compiled call
moved between host and device (``runtime.stats()`` over the timed calls) next to what a call
moved before tensors could live on a device (every weight and input up, every result down).

``--symbolic`` adds a table of the same cases compiled with every argument size symbolic
(``dynamic=True``) next to static sizes: the run-time cost of a graph that serves every size.

``--train`` adds one training step of the training example's model (forward, backward, AdamW):
tensorplay eager, compiled forward+backward and the whole step compiled as one program, against
PyTorch eager and torch.compile.

``--lstm`` adds the word_language_model example's LSTM language model (vocabulary 10000, 2 layers of
256, 35 steps of a batch of 16): its forward with and without the decoder, compiled with static and
with symbolic sizes, and a training step with gradient clipping and SGD, against PyTorch eager (a
native LSTM kernel) and torch.compile (``--cases "" --lstm`` runs it alone).

``--sweep`` adds a shape sweep: a transformer block called with batch sizes 1, 2, 3, 7, 16, 33,
64, each with sequence lengths 1, 5, 9, 128 (28 calls, the length changing first), compiled with
each library's default dynamic policy (tensorplay: automatic dynamic; torch.compile: its
automatic dynamic). It reports how many graphs each compiled and the sweep's total time
(compiles included), each result checked against eager: tensorplay in this process with an
empty cache, then in a second process sharing that cache (which starts from the remembered
dynamic decisions and loads the program from disk).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay import runtime
from tensorplay.compiler.backends.iree import _DriverTrial
from tensorplay.examples import GPTConfig, build_cnn, build_gpt
from tensorplay.tools.demo import median_ms


@dataclass
class Case:
    name: str
    build: Callable[[Any], Any]  # library -> (callable, inputs)
    rtol: float = 1e-4
    atol: float = 1e-5
    numpy: bool = False  # also time numpy (OpenBLAS for matmul) on the same inputs


def _rng(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _chain(lib: Any):
    def f(x, y):
        h = lib.nn.functional.gelu(x * 1.5 + y)
        return (h.sin() * x.tanh() - h.exp().clamp(max=4.0)) / (1.0 + y * y)

    return f, (lib.tensor(_rng(0, 1024, 1024)), lib.tensor(_rng(1, 1, 1024)))


def _norm(lib: Any):
    F = lib.nn.functional
    weights = lib.nn.Module()  # holds the weights so that they move with --device
    weights.register_buffer("w", lib.tensor(_rng(6, 1024)))
    weights.register_buffer("b", lib.tensor(_rng(7, 1024)))

    def f(x):
        return F.softmax(F.gelu(F.layer_norm(x, (1024,), weights.w, weights.b)), dim=-1)

    return f, (lib.tensor(_rng(5, 512, 1024)),), weights


def _matmul(n: int):
    def build(lib: Any):
        return (lambda a, b: a @ b), (lib.tensor(_rng(8, n, n)), lib.tensor(_rng(9, n, n)))

    return build


def _mlp(lib: Any):
    nn = lib.nn
    lib.manual_seed(0)

    class MLPBlock(nn.Module):
        def __init__(self, d: int = 512, hidden: int = 2048):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.up = nn.Linear(d, hidden)
            self.down = nn.Linear(hidden, d)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    model = MLPBlock().eval()
    return model, (lib.tensor(_rng(2, 64, 512)),)


def _block(lib: Any):
    cfg = GPTConfig(block_size=128, vocab_size=512, n_layer=1, n_head=8, n_embd=256)
    model = build_gpt(lib, cfg).eval().transformer.h[0]
    return model, (lib.tensor(_rng(3, 8, 128, 256)),)


_GPT = GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128)


def _gpt(lib: Any):
    lib.manual_seed(0)
    model = build_gpt(lib, _GPT).eval()
    idx = lib.tensor(np.random.default_rng(4).integers(0, _GPT.vocab_size, (4, 64)))
    return (lambda i: model(i)[0]), (idx,), model


def _cnn(lib: Any):
    lib.manual_seed(0)
    return build_cnn(lib).eval(), (lib.tensor(_rng(10, 32, 1, 12, 12)),)


def _tiny(lib: Any):
    return (lambda a: a + 1), (lib.tensor(np.arange(4, dtype=np.float32)),)


CASES = {
    "chain": Case("elementwise chain (1024x1024)", _chain),
    "norm": Case("layer_norm > gelu > softmax (512x1024)", _norm, rtol=1e-4, atol=1e-6),
    "matmul512": Case("matmul 512x512x512", _matmul(512), rtol=1e-4, atol=1e-3, numpy=True),
    "matmul1024": Case("matmul 1024x1024x1024", _matmul(1024), rtol=1e-4, atol=2e-3, numpy=True),
    "mlp": Case("MLP block (64x512, hidden 2048)", _mlp),
    "block": Case("transformer block (8x128x256, 8 heads)", _block, rtol=1e-3, atol=1e-4),
    "gpt": Case("GPT forward (2 layers, d=128, 4x64 tokens)", _gpt, rtol=1e-3, atol=1e-4),
    "cnn": Case("small CNN forward (batch 32)", _cnn, rtol=1e-4, atol=1e-5),
    "tiny": Case("tiny call a + 1 (4 floats)", _tiny),
}


def _first_call_s(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


#: calls each compiled function makes after its first before it is timed: a CPU program's
#: first calls time both IREE drivers (2 untimed, then _DriverTrial.TIMED on each, alternating),
#: so a median over them would mix the two; torch.compile gets the same calls
WARMUP_CALLS = 2 + 2 * _DriverTrial.TIMED


def _warm(fn: Callable[[], Any]) -> None:
    for _ in range(WARMUP_CALLS):
        fn()


def _built(lib: Any, case: Case):
    built = case.build(lib)
    fn, args = built[0], built[1]
    model = built[2] if len(built) > 2 else fn
    return fn, args, model


def _to_numpy(out: Any) -> np.ndarray:
    if isinstance(out, tp.Tensor):
        return np.asarray(out)  # a device tensor's values come to the host
    return np.asarray(out.detach().numpy() if hasattr(out, "detach") else out.numpy())


#: the device of each GPU backend (--device auto)
GPU_DEVICES = {"iree-vulkan": "vulkan", "iree-cuda": "cuda", "iree-rocm": "hip"}


def _place(model: Any, args: tuple, device: str) -> tuple:
    """Model weights and inputs on ``device`` (unchanged on the host)."""
    if device == "cpu":
        return args
    if isinstance(model, tp.nn.Module):
        model.to(device)
    return tuple(a.to(device) if isinstance(a, tp.Tensor) else a for a in args)


def _nbytes(values: Any) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, tp.Tensor))


def _kib(n: float) -> str:
    return f"{n / 1024:9.1f}"


def _share_weights(torch: Any, tp_model: Any, torch_model: Any) -> None:
    if hasattr(tp_model, "state_dict"):
        state = {k: torch.from_numpy(np.array(v.cpu().numpy())) for k, v in tp_model.state_dict().items()}
        torch_model.load_state_dict(state)


def _dispatches(compiled: Any, backend: str, options: dict | None) -> str:
    """IREE's dispatch count of each whole graph the compiled callable holds ("-" if none)."""
    if not backend.startswith("iree-"):
        return "-"
    from tensorplay.compiler.backends.iree import count_dispatches

    cf = getattr(compiled, "compiled_function", compiled)
    try:
        counts = [count_dispatches(g, backend, options) for g in cf.graphs]
    except Exception as exc:  # noqa: BLE001 - a count is a figure, not a check
        return f"({type(exc).__name__})"
    return "+".join(map(str, counts)) or "-"


def _geomean(values: list[float]) -> float | None:
    return float(np.exp(np.mean(np.log(values)))) if values else None


def run(cases: list[str], backend: str, repeats: int, use_torch: bool, out=sys.stdout, device: str = "auto",
        options: dict | None = None) -> bool:
    if device == "auto":
        device = GPU_DEVICES.get(backend, "cpu")
    torch = None
    if use_torch and importlib.util.find_spec("torch") is not None:
        import torch  # type: ignore[no-redef]

        torch.set_num_threads(max(1, torch.get_num_threads()))
    rows, ok = [], True
    for key in cases:
        case = CASES[key]
        fn, host_args, model = _built(tp, case)
        with tp.no_grad():
            eager = _to_numpy(fn(*host_args))
            weights = _nbytes(model.parameters()) + _nbytes(model.buffers()) if isinstance(model, tp.nn.Module) else 0
            args = _place(model, host_args, device)
            eager_ms = median_ms(lambda: _to_numpy(fn(*args)), max(3, repeats // 10))
            compiled = tp.compile(fn, backend=backend, options=options)
            compile_s, got = _first_call_s(lambda: compiled(*args))
            _warm(lambda: compiled(*args))
            good = np.allclose(_to_numpy(got), eager, rtol=case.rtol, atol=case.atol)
            ok &= good
            calls = [0]

            def call():
                calls[0] += 1
                return compiled(*args)

            before = runtime.stats()
            call_ms = median_ms(call, repeats)  # the result tensor, not read
            moved = runtime.stats() - before
            compiled_ms = median_ms(lambda: _to_numpy(compiled(*args)), repeats)  # read to numpy
            per_call = ((moved.upload_bytes + moved.download_bytes) / max(calls[0], 1),
                        weights + _nbytes(host_args) + eager.nbytes)
            dispatches = _dispatches(compiled, backend, options)
        numpy_ms = None
        if case.numpy:
            arrays = [np.asarray(a) for a in host_args]
            numpy_ms = median_ms(lambda: np.matmul(*arrays), repeats)
        t_compiled_ms = t_compile_s = None
        if torch is not None:
            tfn, targs, tmodel = _built(torch, case)
            _share_weights(torch, model, tmodel)
            targs = tuple(torch.tensor(np.asarray(a)) for a in host_args)
            with torch.no_grad():
                tcompiled = torch.compile(tfn)
                t_compile_s, _ = _first_call_s(lambda: tcompiled(*targs))
                _warm(lambda: tcompiled(*targs))
                t_compiled_ms = median_ms(lambda: tcompiled(*targs).numpy(), repeats)
        rows.append((case.name, good, eager_ms, compile_s, call_ms, compiled_ms, t_compile_s, t_compiled_ms,
                     numpy_ms, dispatches, per_call))

    def ms(v: float | None) -> str:
        return f"{v:9.3f}" if v is not None else f"{'-':>9s}"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:7.2f}x" if a is not None and b is not None else f"{'-':>8s}"

    print(f"tensorplay {tp.__version__}, backend {backend}, options {options or 'default'}, tensors on {device}; "
          f"median of {repeats} calls, times in ms (compile in s)"
          f"{'' if torch is not None else '; no PyTorch columns (not installed or --no-torch)'}", file=out)
    head = (f"{'case':42s} {'check':5s} {'tp eager':>9s} {'compile':>8s} {'tp call':>9s} {'tp comp.':>9s} "
            f"{'t.compile':>9s} {'t.comp.':>9s} {'numpy':>9s} {'t.comp/tp':>9s} {'numpy/tp':>9s} "
            f"{'dispatches':>10s} {'KiB/call':>9s}")
    print(head, file=out)
    print("-" * len(head), file=out)
    speedups = []
    for name, good, e, cs, call, c, tcs, tc, npm, disp, (moved, _old) in rows:
        if tc is not None:
            speedups.append(tc / c)
        print(f"{name:42s} {'OK' if good else 'FAIL':5s} {ms(e)} {cs:7.2f}s {ms(call)} {ms(c)} "
              f"{(f'{tcs:8.2f}s' if tcs is not None else '-'):>9s} {ms(tc)} {ms(npm)} {ratio(tc, c):>9s} "
              f"{ratio(npm, c):>9s} {disp:>10s} {_kib(moved)}", file=out)
    mean = _geomean(speedups)
    if mean is not None:
        print(f"geometric mean of t.comp/tp over {len(speedups)} cases: {mean:.2f} "
              f"(above 1: tensorplay compiled is faster than torch.compile); lowest "
              f"{min(speedups):.2f}", file=out)
    print("tp call: a compiled call up to its result tensor (not read); tp comp. and t.comp.: a call with its "
          "result read to numpy (tensorplay, torch.compile inductor); t.comp/tp and numpy/tp: their time over "
          "tensorplay's (above 1: tensorplay is faster); dispatches: IREE kernels per graph; KiB/call: bytes a "
          "call copied between host and device buffers (runtime.stats)", file=out)
    return ok


def run_symbolic(cases: list[str], backend: str, repeats: int, out=sys.stdout) -> bool:
    """Each case compiled twice, static sizes (the default) and every argument size symbolic
    (``dynamic=True``), checked against eager and timed in one run: what a symbolic graph costs."""
    rows, ok = [], True
    for key in cases:
        case = CASES[key]
        fn, args, _ = _built(tp, case)
        with tp.no_grad():
            eager = _to_numpy(fn(*args))
            times, counts = [], []
            for dynamic in (False, True):
                compiled = tp.compile(fn, backend=backend, dynamic=dynamic)
                good = np.allclose(_to_numpy(compiled(*args)), eager, rtol=case.rtol, atol=case.atol)
                _warm(lambda: compiled(*args))
                ok &= good
                times.append(median_ms(lambda: _to_numpy(compiled(*args)), repeats) if good else float("nan"))
                counts.append(_dispatches(compiled, backend, None))
        rows.append((case.name, times, counts))
    print(f"static vs symbolic sizes: backend {backend}, median of {repeats} calls read to numpy, ms", file=out)
    head = (f"{'case':42s} {'static':>9s} {'symbolic':>9s} {'sym/static':>10s} "
            f"{'dispatches':>10s} {'(symbolic)':>10s}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, (st, sy), (dst, dsy) in rows:
        print(f"{name:42s} {st:9.3f} {sy:9.3f} {sy / st:9.2f}x {dst:>10s} {dsy:>10s}", file=out)
    print("symbolic: compile(..., dynamic=True), every dimension of every tensor argument a symbol "
          "(sizes read at run time; IREE compiles one program for all sizes)", file=out)
    return ok


#: the sweep: each batch size with each sequence length (lengths change first, then the batch)
SWEEP_BATCHES = (1, 2, 3, 7, 16, 33, 64)
SWEEP_LENGTHS = (1, 5, 9, 128)


def sweep_shapes() -> list[tuple[int, int]]:
    """(batch, sequence) pairs: every batch size with every sequence length, lengths first."""
    return [(b, t) for b in SWEEP_BATCHES for t in SWEEP_LENGTHS]


def _sweep_block(lib: Any):
    cfg = GPTConfig(block_size=128, vocab_size=64, n_layer=1, n_head=4, n_embd=64)
    lib.manual_seed(0)
    return build_gpt(lib, cfg).eval().transformer.h[0]


def _sweep_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.standard_normal((b, t, 64), dtype=np.float32) for b, t in sweep_shapes()]


def _tp_sweep(backend: str) -> dict[str, Any]:
    """The sweep in this process with tensorplay: captures, IREE compiles, total seconds, check."""
    from tensorplay.compiler.backends import cache

    inputs = _sweep_inputs()
    model = _sweep_block(tp)
    with tp.no_grad():
        eager = [model(tp.from_numpy(x)).numpy() for x in inputs]
        tp.compiler.reset()
        before = cache.cache_stats()["compiles"]
        compiled = tp.compile(model, backend=backend)
        ok = True
        t0 = time.perf_counter()
        for x, want in zip(inputs, eager):
            ok &= bool(np.allclose(compiled(tp.from_numpy(x)).numpy(), want, rtol=1e-3, atol=1e-4))
        total = time.perf_counter() - t0
    return {"captures": compiled.compiled_function.compile_count,
            "iree": cache.cache_stats()["compiles"] - before, "total": total, "ok": ok}


def run_sweep(backend: str, use_torch: bool, out=sys.stdout) -> bool:
    """The shape sweep: captures, IREE compiles and total time of tensorplay in a process with
    an empty cache and in a second process sharing that cache, and of torch.compile."""
    import os
    import subprocess
    import tempfile

    pairs = sweep_shapes()
    with tempfile.TemporaryDirectory(prefix="tensorplay-sweep-cache-") as folder:
        saved = {k: os.environ.get(k) for k in ("TENSORPLAY_CACHE_DIR", "TENSORPLAY_REMEMBER_DYNAMIC")}
        os.environ.update(TENSORPLAY_CACHE_DIR=folder, TENSORPLAY_REMEMBER_DYNAMIC="1")
        try:
            first = _tp_sweep(backend)
            proc = subprocess.run([sys.executable, __file__, "--sweep-child", backend], capture_output=True,
                                  text=True, env=dict(os.environ))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=out)
        return False
    second = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [(f"tensorplay {backend}, empty cache", first["captures"], first["iree"], first["total"], first["ok"]),
            (f"tensorplay {backend}, 2nd process", second["captures"], second["iree"], second["total"], second["ok"])]
    if use_torch and importlib.util.find_spec("torch") is not None:
        import torch
        from torch._inductor.compile_fx import compile_fx

        count = [0]

        def counting(gm: Any, example_inputs: Any) -> Any:
            count[0] += 1
            return compile_fx(gm, example_inputs)

        model = _sweep_block(tp)
        tmodel = _sweep_block(torch)
        _share_weights(torch, model, tmodel)
        inputs = _sweep_inputs()
        with tp.no_grad():
            eager = [model(tp.from_numpy(x)).numpy() for x in inputs]
        torch._dynamo.reset()
        tcompiled = torch.compile(tmodel, backend=counting)
        good = True
        with torch.no_grad():
            t0 = time.perf_counter()
            for x, want in zip(inputs, eager):
                good &= bool(np.allclose(tcompiled(torch.from_numpy(x)).numpy(), want, rtol=1e-3, atol=1e-4))
            t_total = time.perf_counter() - t0
        rows.append(("torch.compile (inductor)", count[0], None, t_total, good))
    print(f"shape sweep: transformer block (n_embd 64, 4 heads), {len(pairs)} calls: batch sizes "
          f"{', '.join(map(str, SWEEP_BATCHES))} x sequence lengths {', '.join(map(str, SWEEP_LENGTHS))} "
          f"(lengths change first), default dynamic policy", file=out)
    head = f"{'compiler':36s} {'check':5s} {'graphs':>6s} {'IREE':>5s} {'total s':>9s} {'ms/call':>9s}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, n, iree, total, good in rows:
        print(f"{name:36s} {'OK' if good else 'FAIL':5s} {n:6d} {('-' if iree is None else str(iree)):>5s} "
              f"{total:9.2f} {1e3 * total / len(pairs):9.2f}", file=out)
    print("graphs: captures (tensorplay) or graphs compiled (torch.compile); IREE: programs IREE compiled "
          "(the rest came from the disk cache); total: the whole sweep, compiles included", file=out)
    return first["ok"] and second["ok"] and all(r[4] for r in rows)


def _train_mlp(lib: Any):
    nn = lib.nn
    lib.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
    rng = np.random.default_rng(11)
    batch = (_rng(12, 64, 256), rng.integers(0, 10, 64))
    return net, batch, lambda net, x, y: lib.nn.functional.cross_entropy(net(x), y)


def _train_gpt(lib: Any):
    from tensorplay.examples.train_gpt import _Data, corpus

    data = _Data(corpus(), block=32, seed=1)
    cfg = GPTConfig(block_size=32, vocab_size=len(data.chars), n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    lib.manual_seed(0)
    x, y = data.batch(16, 0)
    return build_gpt(lib, cfg), (x.numpy(), y.numpy()), lambda net, x, y: net(x, y)[1]


def _train_cnn(lib: Any):
    lib.manual_seed(0)
    net = build_cnn(lib).eval()  # (dropout off: the same step in both libraries; gradients still flow)
    rng = np.random.default_rng(13)
    batch = (_rng(14, 32, 1, 12, 12), rng.integers(0, 10, 32))
    return net, batch, lambda net, x, y: lib.nn.functional.nll_loss(net(x), y)


TRAIN_CASES = {"mlp": ("MLP (256-512-512-10, batch 64)", _train_mlp),
               "gpt": ("the example's GPT (2 layers, d=64, batch 16x32)", _train_gpt),
               "cnn": ("small CNN (batch 32)", _train_cnn)}


def run_train(use_torch: bool, repeats: int, out=sys.stdout) -> bool:
    """One training step (forward, backward, AdamW) of each TRAIN_CASES model from the same
    weights and batch: tensorplay eager, compiled forward+backward (``tp.compile(model)``),
    the whole step compiled as one program (``tp.compile(train_step)``), PyTorch eager,
    torch.compile with the optimizer eager (as torch users do by default) and with
    ``torch.compile(opt.step)`` too. The first-step losses must agree; "first s" is the first
    step's wall time (compiles included); the last column is the min-cut partitioner's saved
    activation bytes next to saving everything (``explain().backward``)."""
    torch = None
    if use_torch and importlib.util.find_spec("torch") is not None:
        import torch
    ok = True
    for label, build in TRAIN_CASES.values():
        setups = [("tensorplay eager", tp, None), ("tensorplay compiled fw+bw", tp, "model"),
                  ("tensorplay compiled step", tp, "step")]
        if torch is not None:
            setups += [("PyTorch eager", torch, None), ("torch.compile fw+bw", torch, "model"),
                       ("torch.compile fw+bw, opt.step", torch, "model+opt")]
        reference, (bx, by), _ = build(tp)
        state = {k: v.numpy().copy() for k, v in reference.state_dict().items()}
        rows, first_losses = [], []
        for name, lib, mode in setups:
            net, _, loss_fn = build(lib)
            if lib is tp:
                net.load_state_dict(state)
                x, y = tp.tensor(bx), tp.tensor(by)
            else:
                net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
                x, y = torch.tensor(bx), torch.tensor(by)
            opt = lib.optim.AdamW(net.parameters(), lr=1e-3)
            forward = lib.compile(net) if mode in ("model", "model+opt") else net
            opt_step = torch.compile(opt.step) if mode == "model+opt" else opt.step

            def train_step(x, y, forward=forward, opt=opt, opt_step=opt_step, loss_fn=loss_fn):
                loss = loss_fn(forward, x, y)
                opt.zero_grad()
                loss.backward()
                opt_step()
                return loss

            step_fn = tp.compile(train_step) if mode == "step" else train_step
            losses: list[float] = []

            def step(step_fn=step_fn, x=x, y=y, losses=losses):
                losses.append(float(step_fn(x, y).item()))

            first_s, _ = _first_call_s(step)
            if mode is not None:
                _warm(step)
            ms = median_ms(step, repeats)
            first_losses.append(losses[0])
            rows.append((name, first_s, ms))
        good = all(abs(a - first_losses[0]) <= 1e-4 * max(1.0, abs(a)) for a in first_losses)
        ok &= good
        saved = ""
        net, (sx, sy), loss_fn = build(tp)
        report = tp.compiler.explain(lambda x, y: loss_fn(net, x, y), tp.tensor(sx), tp.tensor(sy))
        m = [re.search(r"(\d+) bytes \(min_cut; saving every value the backward reads: (\d+) bytes", t)
             for t in report.backward]
        if m and m[0]:
            saved = f"saved activations: {int(m[0].group(1)) / 1024:.0f} KiB min-cut, {int(m[0].group(2)) / 1024:.0f} KiB saving all"
        print(f"\ntraining step of {label}, AdamW, median of {repeats} steps", file=out)
        base = rows[0][2]
        print(f"{'':32s} {'first s':>8s} {'ms/step':>9s}  {'vs tp eager':>11s}", file=out)
        for name, first_s, ms in rows:
            print(f"{name:32s} {first_s:8.2f} {ms:9.2f}  {base / ms:10.2f}x", file=out)
        print(f"first-step losses {', '.join(f'{v:.6f}' for v in first_losses)}: {'OK' if good else 'MISMATCH'}"
              + (f"; {saved}" if saved else ""), file=out)
    return ok


#: the word_language_model example's model at emsize = nhid = 256: a 10000-token vocabulary,
#: a 2-layer LSTM, 35 steps (bptt) of a batch of 16, sequence first; no dropout (the same
#: computation in both libraries)
LSTM_LM = dict(ntoken=10000, emsize=256, nhid=256, nlayers=2, bptt=35, batch=16)


def _lstm_lm(lib: Any, decoder: bool = True):
    """The language model (embedding, LSTM, decoder to logits) or, with ``decoder=False``, its
    embedding and LSTM only; called as ``model(tokens, h, c) -> (output, h, c)``."""
    nn = lib.nn
    ntoken, emsize, nhid, nlayers = (LSTM_LM[k] for k in ("ntoken", "emsize", "nhid", "nlayers"))

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(ntoken, emsize)
            self.rnn = nn.LSTM(emsize, nhid, nlayers)
            if decoder:
                self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, tokens, h, c):
            output, (h, c) = self.rnn(self.encoder(tokens), (h, c))
            if decoder:
                output = self.decoder(output).view(-1, ntoken)
            return output, h, c

    lib.manual_seed(0)
    return RNNModel()


def _lstm_batch() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input tokens (bptt, batch), next-token targets (bptt * batch,), the zero initial state."""
    tokens = np.random.default_rng(15).integers(0, LSTM_LM["ntoken"], (LSTM_LM["bptt"] + 1, LSTM_LM["batch"]))
    state = np.zeros((LSTM_LM["nlayers"], LSTM_LM["batch"], LSTM_LM["nhid"]), np.float32)
    return tokens[:-1], tokens[1:].reshape(-1), state


def _read_all(outputs: Any) -> list[np.ndarray]:
    """Every output of a call as numpy (each library's result read back)."""
    return [_to_numpy(o) for o in outputs]


def _max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def run_lstm(backend: str, repeats: int, use_torch: bool, out=sys.stdout, options: dict | None = None) -> bool:
    """The LSTM language model: its forward (logits and final state), the same without the
    decoder (embedding and LSTM: the recurrent loop's own time) and a whole training step
    (forward, cross_entropy, backward, clip_grad_norm_(0.25), SGD step, zero_grad), in
    tensorplay eager, compiled (default options; the forward also with ``dynamic=True``, one
    program for every length and batch), PyTorch eager (a fused native LSTM kernel) and
    torch.compile, from the same weights and batch. Each compiled forward is checked against
    tensorplay eager; the largest difference from PyTorch eager is printed. The training
    step's first loss and gradient norm must agree in every setup."""
    torch = None
    if use_torch and importlib.util.find_spec("torch") is not None:
        import torch
    tokens, targets, state = _lstm_batch()
    ok = True
    fwd_rows = []
    for label, decoder in (("forward, logits and (h, c)", True), ("forward, LSTM only (no decoder)", False)):
        model = _lstm_lm(tp, decoder).eval()
        args = (tp.tensor(tokens), tp.tensor(state), tp.tensor(state))
        row: dict[str, Any] = {"label": label}
        with tp.no_grad():
            eager = _read_all(model(*args))
            row["tp eager"] = median_ms(lambda: _read_all(model(*args)), max(3, repeats // 10))
            outputs = {}
            for key, dynamic in (("tp comp.", None), ("tp dyn.", True)):
                # (a cache of its own: wrappers of one module share entries, and the static entry
                # would serve the dynamic wrapper's calls)
                compiled = tp.compile(model, backend=backend, options=options, dynamic=dynamic,
                                      isolate_recompiles=True)
                first_s, got = _first_call_s(lambda: _read_all(compiled(*args)))
                _warm(lambda: compiled(*args))
                good = all(np.allclose(g, e, rtol=1e-4, atol=1e-5) for g, e in zip(got, eager))
                ok &= good
                row[key] = median_ms(lambda: _read_all(compiled(*args)), repeats)
                row[key + " first"] = first_s
                row[key + " check"] = (good, _max_diff(got, eager))
                outputs[key] = got
                if dynamic is None:
                    row["dispatches"] = _dispatches(compiled, backend, options)
        if torch is not None:
            tmodel = _lstm_lm(torch, decoder).eval()
            _share_weights(torch, model, tmodel)
            targs = (torch.tensor(tokens), torch.tensor(state), torch.tensor(state))
            with torch.no_grad():
                theirs = _read_all(tmodel(*targs))
                row["PT eager"] = median_ms(lambda: _read_all(tmodel(*targs)), repeats)
                tcompiled = torch.compile(tmodel)
                row["t.comp. first"], tgot = _first_call_s(lambda: _read_all(tcompiled(*targs)))
                _warm(lambda: tcompiled(*targs))
                row["t.comp."] = median_ms(lambda: _read_all(tcompiled(*targs)), repeats)
            row["diff PT"] = _max_diff(outputs["tp comp."], theirs)
            row["diff t.comp."] = _max_diff(tgot, theirs)
        fwd_rows.append(row)

    def ms(v: float | None) -> str:
        return f"{v:9.2f}" if v is not None else f"{'-':>9s}"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:8.2f}x" if a is not None and b is not None else f"{'-':>9s}"

    cfg = LSTM_LM
    print(f"\nLSTM language model: vocabulary {cfg['ntoken']}, embedding {cfg['emsize']}, {cfg['nlayers']}-layer "
          f"LSTM of {cfg['nhid']}, {cfg['bptt']} steps x batch {cfg['batch']} (sequence first); backend {backend}, "
          f"options {options or 'default'}; median of {repeats} calls (tp eager {max(3, repeats // 10)}), "
          f"outputs read to numpy, ms", file=out)
    head = (f"{'':32s} {'tp eager':>9s} {'tp comp.':>9s} {'tp dyn.':>9s} {'PT eager':>9s} {'t.comp.':>9s} "
            f"{'tp/t.comp':>9s} {'tp/PT':>9s} {'|tp-PT|':>8s} {'dispatches':>10s}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in fwd_rows:
        diff = f"{r['diff PT']:.1e}" if "diff PT" in r else "-"
        tc, pt = r.get("t.comp."), r.get("PT eager")
        print(f"{r['label']:32s} {ms(r['tp eager'])} {ms(r['tp comp.'])} {ms(r['tp dyn.'])} {ms(pt)} {ms(tc)} "
              f"{ratio(r['tp comp.'], tc)} {ratio(r['tp comp.'], pt)} {diff:>8s} {r['dispatches']:>10s}", file=out)
    for r in fwd_rows:
        checks = "; ".join(f"{k} vs tp eager {'OK' if r[k + ' check'][0] else 'FAIL'} (max |diff| "
                           f"{r[k + ' check'][1]:.1e}, first call {r[k + ' first']:.2f} s)"
                           for k in ("tp comp.", "tp dyn."))
        extra = (f"; torch.compile vs PyTorch eager max |diff| {r['diff t.comp.']:.1e} (first call "
                 f"{r['t.comp. first']:.2f} s)" if "diff t.comp." in r else "")
        print(f"  {r['label']}: {checks}{extra}", file=out)
    print("tp comp.: tp.compile(model), default options; tp dyn.: the same with dynamic=True (every size "
          "symbolic); PT eager: PyTorch eager; t.comp.: torch.compile (inductor); tp/t.comp and tp/PT: tp comp. "
          "over theirs (below 1: tensorplay is faster); |tp-PT|: largest difference of tp comp.'s outputs from "
          "PyTorch eager's; dispatches: IREE kernels per graph (a loop's body counted once)", file=out)
    ok &= _run_lstm_train(torch, backend, repeats, out, options)
    return ok


def _run_lstm_train(torch: Any, backend: str, repeats: int, out: Any, options: dict | None) -> bool:
    """The training step of the LSTM language model in each setup, from the same weights."""
    tokens, targets, state = _lstm_batch()
    reference = _lstm_lm(tp)
    weights = {k: v.numpy().copy() for k, v in reference.state_dict().items()}
    setups = [("tensorplay eager", tp, None), ("tensorplay compiled fw+bw", tp, "model"),
              ("tensorplay compiled step", tp, "step")]
    if torch is not None:
        setups += [("PyTorch eager", torch, None), ("torch.compile fw+bw", torch, "model")]
    rows = []
    for name, lib, mode in setups:
        net = _lstm_lm(lib)
        if lib is tp:
            net.load_state_dict(weights)
        else:
            net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
        x, y, h, c = (lib.tensor(a) for a in (tokens, targets, state, state))
        opt = lib.optim.SGD(net.parameters(), lr=20.0)  # the example's learning rate
        forward = lib.compile(net, **({"backend": backend, "options": options} if lib is tp else {})) \
            if mode == "model" else net

        def train_step(x, y, h, c, lib=lib, net=net, forward=forward, opt=opt):
            logits, _, _ = forward(x, h, c)
            loss = lib.nn.functional.cross_entropy(logits, y)
            loss.backward()
            norm = lib.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
            opt.step()
            opt.zero_grad()
            return loss, norm

        step_fn = tp.compile(train_step, backend=backend, options=options) if mode == "step" else train_step
        firsts: list[tuple[float, float]] = []

        def step(step_fn=step_fn, x=x, y=y, h=h, c=c, firsts=firsts):
            loss, norm = step_fn(x, y, h, c)
            firsts.append((float(loss.item()), float(norm.item())))

        first_s, _ = _first_call_s(step)
        if lib is tp and mode is not None:
            _warm(step)  # (the calls of the CPU driver trial)
        n = max(3, repeats // 10) if lib is tp and mode is None else max(3, repeats // 4)
        rows.append((name, first_s, median_ms(step, n), firsts[0], n))
    by_name = {r[0]: r for r in rows}
    reference_name = "PyTorch eager" if torch is not None else "tensorplay eager"
    loss0, norm0 = by_name[reference_name][3]
    good = all(abs(l - loss0) <= 1e-5 * abs(loss0) and abs(g - norm0) <= 1e-4 * abs(norm0)
               for _, _, _, (l, g), _ in rows)
    step_ms = by_name["tensorplay compiled step"][2]
    print(f"\ntraining step of the LSTM language model (forward, cross_entropy, backward, clip_grad_norm_ 0.25, "
          f"SGD lr 20, zero_grad), ms per step, each step's loss and norm read", file=out)
    print(f"{'':30s} {'first s':>8s} {'ms/step':>9s} {'steps':>6s} {'tp step/this':>12s} {'first loss':>11s} "
          f"{'grad norm':>10s}", file=out)
    for name, first_s, ms, (loss, norm), n in rows:
        print(f"{name:30s} {first_s:8.2f} {ms:9.2f} {n:6d} {step_ms / ms:11.2f}x {loss:11.6f} {norm:10.6f}", file=out)
    print(f"first-step losses and gradient norms {'agree' if good else 'DIFFER'} (loss to 1e-5, norm to 1e-4 "
          f"relative to {reference_name}'s); tp step/this: the compiled step's time over this row's (below 1: the "
          f"compiled step is faster)", file=out)
    return good


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="iree-cpu")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--device", default="auto",
                        help="where the model and inputs live: auto (a GPU backend's device, else cpu) or cpu")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch columns")
    parser.add_argument("--sweep", action="store_true", help="also run the shape sweep (compiles and total time)")
    parser.add_argument("--sweep-child", metavar="BACKEND", help=argparse.SUPPRESS)  # the sweep's 2nd process
    parser.add_argument("--symbolic", nargs="?", const="all", default=None, metavar="CASES",
                        help="also time these cases (default: all) with every argument size symbolic "
                             "(dynamic=True) vs static")
    parser.add_argument("--train", action="store_true",
                        help="also time a training step: eager, compiled fw+bw, compiled whole step, PyTorch")
    parser.add_argument("--lstm", action="store_true",
                        help="also time the LSTM language model: forward with and without its decoder, and a "
                             "training step (SGD, gradient clipping)")
    parser.add_argument("--options", default=None,
                        help="compile options as JSON, e.g. '{\"opt_level\": \"O3\"}' (default: the backend's)")
    args = parser.parse_args(argv)
    if args.sweep_child:
        print(json.dumps(_tp_sweep(args.sweep_child)))
        return 0
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    options = json.loads(args.options) if args.options else None
    ok = run(cases, args.backend, args.repeats, not args.no_torch, device=args.device, options=options) \
        if cases else True
    if args.symbolic:
        chosen = list(CASES) if args.symbolic == "all" else [c.strip() for c in args.symbolic.split(",") if c.strip()]
        bad = [c for c in chosen if c not in CASES]
        if bad:
            parser.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
        ok &= run_symbolic(chosen, args.backend, args.repeats)
    if args.sweep:
        ok &= run_sweep(args.backend, not args.no_torch)
    if args.train:
        ok &= run_train(not args.no_torch, max(3, args.repeats // 2))
    if args.lstm:
        ok &= run_lstm(args.backend, args.repeats, not args.no_torch, options=options)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
