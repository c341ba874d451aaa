"""How each ResNet-18 convolution runs compiled for the CPU: as ``linalg.conv_2d_nchw_fchw``
or by columns (im2col: gathered windows times the filter matrix), against PyTorch eager.

    python benchmarks/conv_layouts.py [--size 64,224] [--repeat 15] [--only stem,s2]

For every distinct convolution of torchvision's ResNet-18 at batch 8 (input 64x64 and
224x224) it compiles ``F.conv2d`` twice through tensorplay's own lowering, once with every
convolution lowered as IREE's convolution op and once by columns, with the options
``iree-cpu`` compiles that graph with (data tiling where the convolution has at least
``DATA_TILING_MIN_WORK`` multiply-adds). It prints the median time of ``--repeat`` calls,
GFLOP/s, which form the lowering picks by default (``passes/lowering/conv.py: _by_columns``)
and PyTorch eager's time. Times include a compiled call's overhead (about 20 us here).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from contextlib import contextmanager

import numpy as np

os.environ.setdefault("TENSORPLAY_CACHE", "0")  # every compile measured as built now

import tensorplay as tp  # noqa: E402
import tensorplay.nn.functional as F  # noqa: E402
from tensorplay.passes.lowering import conv as conv_lowering  # noqa: E402

#: (label, in channels, out channels, kernel, stride, padding, input size at 224) of ResNet-18
LAYERS = [
    ("stem 7x7/2", 3, 64, 7, 2, 3, 224),
    ("layer1 3x3", 64, 64, 3, 1, 1, 56),
    ("layer2 3x3/2", 64, 128, 3, 2, 1, 56),
    ("layer2 1x1/2", 64, 128, 1, 2, 0, 56),
    ("layer2 3x3", 128, 128, 3, 1, 1, 28),
    ("layer3 3x3/2", 128, 256, 3, 2, 1, 28),
    ("layer3 1x1/2", 128, 256, 1, 2, 0, 28),
    ("layer3 3x3", 256, 256, 3, 1, 1, 14),
    ("layer4 3x3/2", 256, 512, 3, 2, 1, 14),
    ("layer4 1x1/2", 256, 512, 1, 2, 0, 14),
    ("layer4 3x3", 512, 512, 3, 1, 1, 7),
]


@contextmanager
def _columns(choice: bool | None):
    """Lower every one-group convolution by columns (True), as the convolution op (False), or
    as the lowering chooses (None)."""
    original = conv_lowering._by_columns
    if choice is not None:
        conv_lowering._by_columns = lambda sizes, stride: choice and all(isinstance(s, int) for s in sizes)
    try:
        yield
    finally:
        conv_lowering._by_columns = original


def _time(fn, args, repeat: int) -> float:
    fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        getattr(out, "numpy", lambda: None)()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="64,224", help="input sizes (comma list)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="", help="comma list of label substrings")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as TF
    except ImportError:
        torch = None
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; batch 8; median of "
          f"{args.repeat} calls")
    print(f"| {'convolution':<14} | {'input':>14} | {'conv op ms':>10} | {'columns ms':>10} | {'GFLOP/s':>13} | "
          f"{'default':>8} | {'PyTorch ms':>10} |")
    print("|" + "|".join("-" * w for w in (16, 16, 12, 12, 15, 10, 12)) + "|")
    rng = np.random.default_rng(0)
    for size in (int(s) for s in args.size.split(",")):
        for label, cin, cout, k, stride, pad, at224 in LAYERS:
            if args.only and not any(o in label for o in args.only.split(",")):
                continue
            hw = at224 * size // 224
            x = rng.standard_normal((8, cin, hw, hw)).astype(np.float32)
            w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
            tx, tw = tp.tensor(x), tp.tensor(w)
            out_hw = (hw + 2 * pad - k) // stride + 1
            flops = 2 * 8 * cout * out_hw * out_hw * cin * k * k
            times = {}
            for name, choice in (("conv", False), ("columns", True)):
                with _columns(choice):
                    fn = tp.compile(lambda a, b: F.conv2d(a, b, stride=stride, padding=pad), fullgraph=True)
                    times[name] = _time(fn, (tx, tw), args.repeat)
            picks = "columns" if conv_lowering._by_columns([8, cin, cout, k, k, out_hw, out_hw], (stride, stride)) \
                else "conv"
            torch_ms = "-"
            if torch is not None:
                px, pw = torch.from_numpy(x), torch.from_numpy(w)
                torch_ms = f"{1e3 * _time(lambda a, b: TF.conv2d(a, b, stride=stride, padding=pad), (px, pw), args.repeat):.2f}"
            gf = f"{flops / times['conv'] / 1e9:.0f} / {flops / times['columns'] / 1e9:.0f}"
            print(f"| {label:<14} | {f'8x{cin}x{hw}x{hw}':>14} | {1e3 * times['conv']:>10.2f} | "
                  f"{1e3 * times['columns']:>10.2f} | {gf:>13} | {picks:>8} | {torch_ms:>10} |", flush=True)


if __name__ == "__main__":
    main()
