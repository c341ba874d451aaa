"""Eager vs compiled timings of tensorplay, next to PyTorch eager and torch.compile.

    python benchmarks/bench.py [--backend iree-cpu] [--device auto] [--repeats 50] [--cases chain,mlp,block,gpt]
                               [--inputs aligned,from_numpy] [--sweep]

The run first prints the machine it ran on (CPU model and the vector extensions that matter,
cores, threads, the CPU IREE compiles for, library versions and BLAS, load average): a figure
is quoted with its machine. Every case is written once against the PyTorch API and built for
both libraries with the same weights; each compiled result is checked against eager before it
is timed. Inputs come in two styles (``--inputs``, default both, one table each): ``aligned``,
made with each library's ``tensor()`` (a copy into memory the library allocates, 64-byte
aligned in both), and ``from_numpy``, each library's ``from_numpy()`` of a fresh numpy array
(numpy's own memory, which starts 16 bytes off that alignment and is copied by tensorplay's
CPU programs on every call; see docs/performance.md). Steady-state times are medians over
``--repeats`` calls after a warm-up (the large models: a quarter of them, at least 3);
compile time is the first call's wall time (capture + lowering + IREE compile, or a
disk-cache load: the "new" column counts the programs IREE compiled in that call). Each table
has tensorplay eager next to PyTorch eager and their ratio. One run, all ratios from it.

``--cases all`` adds the large models to the default list: ResNet-18 (torchvision's
architecture, batch 8 at 64x64 and at 224x224) and GPT-2 small (12 layers, 768 wide, 1x128
tokens), whose compile column is the time to compile a model of that size.

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
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
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
    large: bool = False  # slow in eager: a quarter of the repeats (at least 3), not in the default list


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


def _gpt_forward(lib: Any, cfg: GPTConfig, seed: int, tokens: tuple[int, int]):
    """The logits of ``cfg``'s GPT (seeded weights, eval mode) for random token ids of shape ``tokens``."""
    lib.manual_seed(0)
    model = build_gpt(lib, cfg).eval()
    idx = lib.tensor(np.random.default_rng(seed).integers(0, cfg.vocab_size, tokens))
    return (lambda i: model(i)[0]), (idx,), model


def _gpt(lib: Any):
    return _gpt_forward(lib, _GPT, seed=4, tokens=(4, 64))


def _cnn(lib: Any):
    lib.manual_seed(0)
    return build_cnn(lib).eval(), (lib.tensor(_rng(10, 32, 1, 12, 12)),)


def _tiny(lib: Any):
    return (lambda a: a + 1), (lib.tensor(np.arange(4, dtype=np.float32)),)


def _resnet18_model(lib: Any):
    """ResNet-18 as torchvision defines it: BasicBlock stages of [2, 2, 2, 2] blocks (64 to 512
    channels), a 1x1 convolution and batch norm on each downsampling shortcut, 1000 classes."""
    nn = lib.nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            shortcut = x if self.downsample is None else self.downsample(x)
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + shortcut)

    class ResNet18(nn.Module):
        def __init__(self, classes: int = 1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            stages, cin = [], 64
            for i, cout in enumerate((64, 128, 256, 512)):
                stride = 1 if i == 0 else 2
                stages.append(nn.Sequential(Basic(cin, cout, stride), Basic(cout, cout, 1)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, classes)
            for m in self.modules():  # torchvision's initialization
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    lib.manual_seed(0)
    return ResNet18().eval()


def _resnet(size: int):
    def build(lib: Any):
        return _resnet18_model(lib), (lib.tensor(_rng(12, 8, 3, size, size)),)

    return build


#: GPT-2 small: 12 layers, 12 heads, 768 wide, GPT-2's vocabulary and context (about 124M parameters)
_GPT2 = GPTConfig(block_size=1024, vocab_size=50257, n_layer=12, n_head=12, n_embd=768)


def _gpt2(lib: Any):
    return _gpt_forward(lib, _GPT2, seed=13, tokens=(1, 128))


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
    "resnet64": Case("ResNet-18 forward (8x3x64x64)", _resnet(64), rtol=1e-3, atol=1e-3, large=True),
    "resnet224": Case("ResNet-18 forward (8x3x224x224)", _resnet(224), rtol=1e-3, atol=1e-3, large=True),
    "gpt2": Case("GPT-2 small forward (1x128 tokens)", _gpt2, rtol=1e-3, atol=1e-4, large=True),
}

#: what a plain run times (about 4 minutes on 2 cores); ``--cases all`` adds the large models
DEFAULT_CASES = [k for k, c in CASES.items() if not c.large]

#: the input styles: each library's tensor() (its own 64-byte aligned copy) or its from_numpy()
#: of a fresh numpy array (numpy's memory, 16 bytes off that alignment)
INPUT_STYLES = ("aligned", "from_numpy")


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


#: CPU flags worth naming (as /proc/cpuinfo spells them): x86 vector and matrix extensions, Arm's
#: NEON (asimd) and SVE and its dot-product / bfloat16 / int8 matrix ones
_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
              "amx_tile", "amx_bf16", "amx_int8", "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo, plus the count of distinct physical cores
    ("cores"; absent where the file does not say)."""
    fields: dict[str, str] = {}
    cores: set[tuple[str, str]] = set()
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return fields
    for block in text.split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            entry[key.strip()] = value.strip()
        if "core id" in entry:
            cores.add((entry.get("physical id", "0"), entry["core id"]))
        for key, value in entry.items():
            fields.setdefault(key, value)
    if cores:
        fields["cores"] = str(len(cores))
    return fields


def _lscpu_model() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"^Model name:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else ""


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _numpy_blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except Exception:  # noqa: BLE001 - older numpy: no dict form
        return "BLAS unknown"
    config = blas.get("openblas configuration", "")
    built_for = re.search(r"DYNAMIC_ARCH.*?\s([A-Za-z0-9]+)\s+MAX_THREADS", config)
    return (f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
            + (f" (DYNAMIC_ARCH, base {built_for.group(1)})" if built_for else ""))


def machine_lines(backend: str, options: dict | None, torch: Any) -> list[str]:
    """A few lines naming the machine a run's figures belong to."""
    info = _cpuinfo()
    model = info.get("model name") or _lscpu_model() or platform.processor() or "unknown CPU"
    ident = ""
    if "cpu family" in info:
        ident = f" (family {info['cpu family']}, model {info.get('model', '?')}, {info.get('vendor_id', '')})"
    elif "CPU implementer" in info:
        ident = f" (implementer {info['CPU implementer']}, part {info.get('CPU part', '?')})"
    flags = set((info.get("flags") or info.get("Features") or "").split())
    have = [f for f in _CPU_FLAGS if f in flags]
    logical = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    cores = info.get("cores", "?")
    hypervisor = ", virtual machine" if "hypervisor" in flags else ""
    lines = [f"machine: {model}{ident}, {platform.machine()}{hypervisor}",
             f"  CPU flags: {' '.join(have) or 'none of ' + ', '.join(_CPU_FLAGS[:3])}; {cores} cores, "
             f"{logical} threads ({usable} usable); load average {os.getloadavg()[0]:.2f}"
             + (f"; torch threads {torch.get_num_threads()}" if torch is not None else "")]
    target = "-"
    if backend.startswith("iree-"):
        try:
            from tensorplay.compiler.backends.iree import get_iree_backend

            flags_ = get_iree_backend(backend).flags(options)
            target = " ".join(f for f in flags_ if "target-cpu" in f or "target-backends" in f
                              or "target-device" in f or "vulkan-target" in f)
            if "--iree-llvmcpu-target-cpu=host" in flags_:
                target += " (LLVM's name for this CPU, with every feature it reports)"
        except Exception as exc:  # noqa: BLE001 - the header names what it can
            target = f"({type(exc).__name__})"
    lines.append(f"  IREE target: {target}")
    lines.append(f"  tensorplay {tp.__version__}, iree-base-compiler {_version('iree-base-compiler')}, "
                 f"iree-base-runtime {_version('iree-base-runtime')}, numpy {np.__version__} with {_numpy_blas()}, "
                 f"torch {torch.__version__ if torch is not None else 'not used'}"
                 + (f" ({torch.backends.cpu.get_cpu_capability()} kernels)" if torch is not None else ""))
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TENSORPLAY_CPU_THREADS",
                                           "OPENBLAS_CORETYPE") if k in os.environ}
    if threads:
        lines.append("  environment: " + ", ".join(f"{k}={v}" for k, v in threads.items()))
    return lines


def _geomean(values: list[float]) -> float | None:
    return float(np.exp(np.mean(np.log(values)))) if values else None


def _styled(lib: Any, args: tuple, style: str) -> tuple:
    """The inputs ``args`` (tensorplay tensors) for ``lib`` in an input style: ``aligned``, a copy
    made by the library's ``tensor()``; ``from_numpy``, the library's view of a fresh numpy array."""
    arrays = [np.array(_to_numpy(a)) for a in args]  # (a new numpy allocation each)
    if style == "from_numpy":
        return tuple(lib.from_numpy(a) for a in arrays)
    return tuple(lib.tensor(a) for a in arrays)


def _offsets(args: tuple) -> set[int]:
    """Where the host inputs of more than 16 KiB start, modulo 64 bytes (smaller ones are
    copied by a call whatever their alignment)."""
    found = set()
    for a in args:
        if isinstance(a, tp.Tensor):
            if a.device.type != "cpu":
                continue
            start, nbytes = np.asarray(a).ctypes.data, a.numel() * a.element_size()
        else:
            start, nbytes = a.data_ptr(), a.numel() * a.element_size()
        if nbytes > 16384:
            found.add(start % 64)
    return found


def run(cases: list[str], backend: str, repeats: int, use_torch: bool, out=sys.stdout, device: str = "auto",
        options: dict | None = None, styles: tuple[str, ...] = INPUT_STYLES) -> bool:
    """Each case in each input style: tensorplay eager, PyTorch eager, tensorplay compiled and
    torch.compile, each compiled result checked against tensorplay eager; one table per style."""
    from tensorplay.compiler.backends import cache

    if device == "auto":
        device = GPU_DEVICES.get(backend, "cpu")
    torch = None
    if use_torch and importlib.util.find_spec("torch") is not None:
        import torch  # type: ignore[no-redef]

        torch.set_num_threads(max(1, torch.get_num_threads()))
    rows: dict[str, list] = {s: [] for s in styles}
    offsets: dict[str, set[int]] = {s: set() for s in styles}
    ok = True
    for key in cases:
        case = CASES[key]
        reps = max(3, repeats // 4) if case.large else repeats
        fn, built_args, model = _built(tp, case)
        tfn = tmodel = None
        if torch is not None:
            tfn, _, tmodel = _built(torch, case)
            _share_weights(torch, model, tmodel)
        with tp.no_grad():
            eager = _to_numpy(fn(*built_args))
        weights = _nbytes(model.parameters()) + _nbytes(model.buffers()) if isinstance(model, tp.nn.Module) else 0
        placed = False
        for style in styles:
            host_args = _styled(tp, built_args, style)
            offsets[style] |= _offsets(host_args)
            with tp.no_grad():
                args = _place(model, host_args, device) if not placed else _place(None, host_args, device)
                placed = True
                eager_ms = median_ms(lambda: _to_numpy(fn(*args)), max(3, reps // 10))
                compiled = tp.compile(fn, backend=backend, options=options)
                before_compiles = cache.cache_stats()["compiles"]
                compile_s, got = _first_call_s(lambda: compiled(*args))
                new = cache.cache_stats()["compiles"] - before_compiles
                _warm(lambda: compiled(*args))
                got = _to_numpy(got)
                good = bool(np.allclose(got, eager, rtol=case.rtol, atol=case.atol))
                err = float(np.max(np.abs(got - eager))) if got.shape == eager.shape else float("nan")
                ok &= good
                calls = [0]

                def call():
                    calls[0] += 1
                    return compiled(*args)

                before = runtime.stats()
                call_ms = median_ms(call, reps)  # the result tensor, not read
                moved = runtime.stats() - before
                compiled_ms = median_ms(lambda: _to_numpy(compiled(*args)), reps)  # read to numpy
                per_call = (moved.upload_bytes + moved.download_bytes) / max(calls[0], 1)
                dispatches = _dispatches(compiled, backend, options)
            numpy_ms = None
            if case.numpy:
                arrays = [np.asarray(a) for a in host_args]
                numpy_ms = median_ms(lambda: np.matmul(*arrays), reps)
            t_eager_ms = t_compiled_ms = t_compile_s = None
            if torch is not None:
                targs = _styled(torch, built_args, style)
                offsets[style] |= _offsets(targs)
                with torch.no_grad():
                    t_eager_ms = median_ms(lambda: _to_numpy(tfn(*targs)), reps)
                    tcompiled = torch.compile(tfn)
                    t_compile_s, _ = _first_call_s(lambda: tcompiled(*targs))
                    _warm(lambda: tcompiled(*targs))
                    t_compiled_ms = median_ms(lambda: tcompiled(*targs).numpy(), reps)
            rows[style].append(dict(name=case.name, good=good, err=err, reps=reps, e=eager_ms, te=t_eager_ms,
                                    cs=compile_s, new=new, call=call_ms, c=compiled_ms, tcs=t_compile_s,
                                    tc=t_compiled_ms, npm=numpy_ms, disp=dispatches, moved=per_call,
                                    weights=weights))

    def ms(v: float | None) -> str:
        return f"{v:9.3f}" if v is not None else f"{'-':>9s}"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:7.2f}x" if a is not None and b is not None else f"{'-':>8s}"

    print(f"tensorplay {tp.__version__}, backend {backend}, options {options or 'default'}, tensors on {device}; "
          f"median of {repeats} calls (large models: {max(3, repeats // 4)}; tp eager: a tenth, at least 3), "
          f"times in ms (compile in s)"
          f"{'' if torch is not None else '; no PyTorch columns (not installed or --no-torch)'}", file=out)
    for style in styles:
        where = ", ".join(str(o) for o in sorted(offsets[style])) or "-"
        how = ("each library's tensor() of the array" if style == "aligned"
               else "each library's from_numpy() of a fresh numpy array")
        print(f"\ninputs {style}: {how}; inputs over 16 KiB start at byte {where} of 64", file=out)
        head = (f"{'case':42s} {'check':5s} {'tp eager':>9s} {'PT eager':>9s} {'tpE/PTE':>8s} {'compile':>8s} "
                f"{'new':>3s} {'tp call':>9s} {'tp comp.':>9s} {'t.compile':>9s} {'t.comp.':>9s} {'numpy':>9s} "
                f"{'t.comp/tp':>9s} {'numpy/tp':>9s} {'dispatches':>10s} {'KiB/call':>9s}")
        print(head, file=out)
        print("-" * len(head), file=out)
        speedups, eager_ratios = [], []
        for r in rows[style]:
            if r["tc"] is not None:
                speedups.append((r["tc"] / r["c"], r["name"]))
            if r["te"] is not None:
                eager_ratios.append((r["e"] / r["te"], r["name"]))
            tcs = f"{r['tcs']:8.2f}s" if r["tcs"] is not None else "-"
            print(f"{r['name']:42s} {'OK' if r['good'] else 'FAIL':5s} {ms(r['e'])} {ms(r['te'])} "
                  f"{ratio(r['e'], r['te'])} {r['cs']:7.2f}s {r['new']:3d} {ms(r['call'])} {ms(r['c'])} {tcs:>9s} "
                  f"{ms(r['tc'])} {ms(r['npm'])} {ratio(r['tc'], r['c']):>9s} {ratio(r['npm'], r['c']):>9s} "
                  f"{r['disp']:>10s} {_kib(r['moved'])}", file=out)
        mean = _geomean([v for v, _ in speedups])
        if mean is not None:
            low = min(speedups)
            print(f"{style}: geometric mean of t.comp/tp over {len(speedups)} cases {mean:.2f} (above 1: tensorplay "
                  f"compiled is faster than torch.compile); lowest {low[0]:.2f} ({low[1]})", file=out)
        if eager_ratios:
            high = max(eager_ratios)
            print(f"{style}: tp eager / PT eager: highest {high[0]:.2f}x ({high[1]}), geometric mean "
                  f"{_geomean([v for v, _ in eager_ratios]):.2f}x", file=out)
        bad = [r for r in rows[style] if not r["good"]]
        for r in bad:
            print(f"{style}: {r['name']}: compiled result differs from eager, max |diff| {r['err']:.3g}", file=out)
    print("tpE/PTE: tensorplay eager over PyTorch eager (above 1: tensorplay eager is slower); compile: "
          "tensorplay's first call (capture, lowering, IREE compile or a disk-cache load; a later style's "
          "wrapper finds the program in memory); new: programs IREE compiled in it; tp call: a compiled call up "
          "to its result tensor (not read); tp comp. and t.comp.: a call with its result read to numpy "
          "(tensorplay, torch.compile inductor); t.comp/tp and numpy/tp: their time over tensorplay's (above 1: "
          "tensorplay is faster); dispatches: IREE kernels per graph; KiB/call: bytes a call copied between "
          "host and IREE buffers (runtime.stats)", file=out)
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
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help=f"comma-separated, of: {', '.join(CASES)}; 'all' for every one (default: all but "
                             f"{', '.join(k for k in CASES if k not in DEFAULT_CASES)})")
    parser.add_argument("--inputs", default=",".join(INPUT_STYLES),
                        help="input styles, comma-separated: aligned (each library's tensor()), from_numpy "
                             "(its from_numpy() of a numpy array); default both")
    parser.add_argument("--device", default="auto",
                        help="where the model and inputs live: auto (a GPU backend's device, else cpu) or cpu")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch columns")
    parser.add_argument("--sweep", action="store_true", help="also run the shape sweep (compiles and total time)")
    parser.add_argument("--sweep-child", metavar="BACKEND", help=argparse.SUPPRESS)  # the sweep's 2nd process
    parser.add_argument("--symbolic", nargs="?", const="all", default=None, metavar="CASES",
                        help="also time these cases (default: the default list) with every argument size symbolic "
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
    if cases == ["all"]:
        cases = list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)} or all")
    styles = tuple(s.strip() for s in args.inputs.split(",") if s.strip())
    if not styles or any(s not in INPUT_STYLES for s in styles):
        parser.error(f"--inputs: comma-separated, of {', '.join(INPUT_STYLES)}")
    options = json.loads(args.options) if args.options else None
    torch = None
    if not args.no_torch and importlib.util.find_spec("torch") is not None:
        import torch
    print("\n".join(machine_lines(args.backend, options, torch)), flush=True)
    ok = run(cases, args.backend, args.repeats, not args.no_torch, device=args.device, options=options,
             styles=styles) if cases else True
    if args.symbolic:
        chosen = (list(DEFAULT_CASES) if args.symbolic == "all"
                  else [c.strip() for c in args.symbolic.split(",") if c.strip()])
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
