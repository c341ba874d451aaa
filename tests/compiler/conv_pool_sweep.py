"""A sweep of the conv and pooling lowerings over small spatial inputs: inputs smaller than,
equal to and one larger than the kernel, strides 1-3, paddings 0-2 and dilations 1-2, each
compiled forward and backward and compared with eager tensorplay and with PyTorch
(``torch.nn.functional``).

A case is one call: ``conv2d`` on each lowering path (one group, one input channel, depthwise,
grouped, grouped with one input channel), ``conv1d``, ``max_pool2d`` and its ``return_indices``
form (floor and ceil mode), ``avg_pool2d`` (floor and ceil mode, with and without
``count_include_pad``, some with ``divisor_override``) and ``adaptive_avg_pool2d``. Height and
width take two different geometries of the sweep, so every geometry is checked along each
axis. Geometries PyTorch rejects (an output size below 1, pooling padding over half the
kernel) are error cases: eager and compiled tensorplay must raise what PyTorch raises.

Cases are compiled many at a time: one function returns every case's results, and its
backward gives every input's gradient; a batch that fails is run again case by case, so each
failure names one case. ``python -m tests.compiler.conv_pool_sweep --backend iree-cpu [--full]``
runs it from the command line and prints the counts.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.dialects.tp.ops.conv import pool_output_size, windows_may_miss_input

try:
    import torch
except ImportError:  # the comparison with PyTorch is skipped
    torch = None

__all__ = ["Dim", "Case", "cases", "error_cases", "sample", "run_batch", "run", "check_error", "Report"]

#: (in channels, out channels, groups) of each conv2d lowering path
CONV_PATHS = {
    "dense": (2, 3, 1),          # linalg.conv_2d_nchw_fchw
    "one_channel": (1, 2, 1),    # one input channel: a sum over the kernel taps
    "depthwise": (2, 2, 2),      # taps at unit stride; strided: linalg.depthwise_conv_2d_nchw_chw (Vulkan: grouped)
    "grouped": (4, 6, 2),        # linalg.conv_2d_ngchw_gfchw
    "grouped_taps": (2, 4, 2),   # one input channel per group, two filters each
}
#: the batch of every case
BATCH = 2
#: float32 results are sums of at most 4 * 9 products of N(0, 1) values
RTOL, ATOL = 1e-4, 1e-4
#: cases compiled as one function
BATCH_CASES = 24


@dataclass(frozen=True)
class Dim:
    """The geometry along one spatial axis."""

    size: int
    kernel: int
    stride: int
    padding: int
    dilation: int = 1

    def relation(self) -> str:
        """How the input compares with the kernel: ``<``, ``=`` or ``>``."""
        return "<" if self.size < self.kernel else "=" if self.size == self.kernel else ">"


def _dims(dilations: tuple[int, ...]) -> list[Dim]:
    """Every geometry of the sweep along one axis: kernels 1-3, inputs one smaller than (where
    that is at least 1), equal to and one larger than the kernel, strides 1-3, paddings 0-2."""
    return [Dim(size, k, s, p, d) for k in (1, 2, 3) for size in (k - 1, k, k + 1) if size >= 1
            for s in (1, 2, 3) for p in (0, 1, 2) for d in dilations]


def _conv_valid(d: Dim) -> bool:
    return d.size + 2 * d.padding >= d.dilation * (d.kernel - 1) + 1


def _pool_valid(d: Dim, ceil_mode: bool) -> bool:
    return (2 * d.padding <= d.kernel
            and pool_output_size(d.size, d.kernel, d.stride, d.padding, d.dilation, ceil_mode) >= 1)


def _pairs(valid: list[Dim], salt: int) -> list[tuple[Dim, Dim]]:
    """Each geometry as the height of one case, with the widths a fixed permutation of the
    same geometries: every geometry is swept along both axes."""
    order = np.random.default_rng([7, salt, len(valid)]).permutation(len(valid))
    return [(h, valid[j]) for h, j in zip(valid, order)]


@dataclass(frozen=True)
class Case:
    """One call: ``op`` (a variant name) on an input of ``shape`` with ``kwargs``."""

    op: str
    shape: tuple[int, ...]
    kwargs: tuple[tuple[str, Any], ...]
    weight: tuple[int, ...] | None = None
    bias: bool = False
    dims: tuple[Dim, ...] = ()

    @property
    def kw(self) -> dict[str, Any]:
        return dict(self.kwargs)

    def __str__(self) -> str:
        w = "" if self.weight is None else f" * {list(self.weight)}{' + bias' if self.bias else ''}"
        return f"{self.op} {list(self.shape)}{w} {self.kw}"

    @property
    def seed(self) -> int:
        """The seed of the case's inputs and gradients: the same wherever it runs."""
        return zlib.crc32(str(self).encode())

    def inputs(self) -> list[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        shapes = [self.shape] + ([] if self.weight is None else [self.weight])
        if self.bias:
            shapes.append((self.weight[0],))
        return [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def call(self, lib: Any, args: list[Any]) -> tuple[Any, ...]:
        """The case's results with ``lib`` (tensorplay or torch)."""
        F = lib.nn.functional
        kw = self.kw
        if self.op.startswith("conv2d"):
            return (F.conv2d(*args, **kw),)
        if self.op == "conv1d":
            return (F.conv1d(*args, **kw),)
        if self.op.startswith("max_pool2d_indices"):
            return tuple(F.max_pool2d(*args, return_indices=True, **kw))
        if self.op.startswith("max_pool2d"):
            return (F.max_pool2d(*args, **kw),)
        if self.op.startswith("avg_pool2d"):
            return (F.avg_pool2d(*args, **kw),)
        if self.op == "adaptive_avg_pool2d":
            return (F.adaptive_avg_pool2d(*args, **kw),)
        raise ValueError(self.op)

    def may_miss_input(self) -> bool:
        """Whether a max pool window of the case may hold no input element, where PyTorch's
        index (and the gradient it sends there) points outside the window (tensorplay: -1, no
        gradient): values are compared with PyTorch there, indices and gradients are not."""
        return self.op.startswith("max_pool2d") and windows_may_miss_input(self.shape[2:], self.kw)


def _conv_case(op: str, path: str, h: Dim, w: Dim | None, bias: bool) -> Case:
    c, o, groups = CONV_PATHS[path]
    if w is None:  # conv1d: the sweep's geometry along the length
        kw = dict(stride=h.stride, padding=h.padding, dilation=h.dilation, groups=groups)
        return Case(op, (BATCH, c, h.size), tuple(kw.items()), (o, c // groups, h.kernel), bias, (h,))
    kw = dict(stride=(h.stride, w.stride), padding=(h.padding, w.padding), dilation=(h.dilation, w.dilation),
              groups=groups)
    return Case(op, (BATCH, c, h.size, w.size), tuple(kw.items()), (o, c // groups, h.kernel, w.kernel), bias,
                (h, w))


def _pool_case(op: str, h: Dim, w: Dim, **extra: Any) -> Case:
    kw = dict(kernel_size=(h.kernel, w.kernel), stride=(h.stride, w.stride), padding=(h.padding, w.padding))
    if op.startswith("max"):
        kw["dilation"] = (h.dilation, w.dilation)
    kw.update(extra)
    return Case(op, (BATCH, 2, h.size, w.size), tuple(kw.items()), dims=(h, w))


def _adaptive() -> list[Case]:
    """``adaptive_avg_pool2d`` of inputs 1-3 wide to outputs 1-4 wide (windows overlap where
    the output is larger)."""
    sizes = [(h, oh) for h in (1, 2, 3) for oh in (1, 2, 3, 4)]
    widths = [sizes[j] for j in np.random.default_rng([7, 9]).permutation(len(sizes))]
    return [Case("adaptive_avg_pool2d", (BATCH, 2, h, w), (("output_size", (oh, ow)),))
            for (h, oh), (w, ow) in zip(sizes, widths)]


def cases() -> list[Case]:
    """Every case of the full sweep, variant by variant, in a fixed order."""
    conv = [d for d in _dims((1, 2)) if _conv_valid(d)]
    out = [_conv_case(f"conv2d_{path}", path, h, w, bias=i % 2 == 0)
           for path in CONV_PATHS for i, (h, w) in enumerate(_pairs(conv, 1))]
    out += [_conv_case("conv1d", "dense", d, None, bias=i % 2 == 0) for i, d in enumerate(conv)]
    for ceil in (False, True):
        tag = "_ceil" if ceil else ""
        dilated = [d for d in _dims((1, 2)) if _pool_valid(d, ceil)]
        for op in ("max_pool2d", "max_pool2d_indices"):
            out += [_pool_case(op + tag, h, w, ceil_mode=ceil) for h, w in _pairs(dilated, 2 + ceil)]
        plain = [d for d in _dims((1,)) if _pool_valid(d, ceil)]
        for include in (True, False):
            name = f"avg_pool2d{tag}{'' if include else '_exclude_pad'}"
            out += [_pool_case(name, h, w, ceil_mode=ceil, count_include_pad=include,
                               divisor_override=3 if i % 5 == 4 else None)
                    for i, (h, w) in enumerate(_pairs(plain, 4 + 2 * ceil + include))]
    return out + _adaptive()


def _features(case: Case) -> set[tuple]:
    """What a case covers, for the sample: per axis, its input size against the kernel with
    the stride, the padding, and the dilation; and in all, whether some output is one wide."""
    out = set()
    for d in case.dims:
        out |= {("size", d.relation(), d.stride), ("padding", d.padding), ("dilation", d.dilation),
                ("kernel", d.kernel)}
    return out


def sample() -> list[Case]:
    """The default suite's cases: for each variant, cases chosen greedily until they cover
    every feature (:func:`_features`) of the variant's full sweep (a third of the adaptive
    pooling cases, which have no window geometry)."""
    by_variant: dict[str, list[Case]] = {}
    for c in cases():
        by_variant.setdefault(c.op, []).append(c)
    chosen = []
    for group in by_variant.values():
        wanted = set().union(*(_features(c) for c in group))
        picked: list[Case] = [] if wanted else group[::3]  # (adaptive pooling: no window geometry)
        while wanted:
            best = max(group, key=lambda c: len(_features(c) & wanted))
            picked.append(best)
            wanted -= _features(best)
        chosen += [c for c in group if c in picked]
    return chosen


# --- errors -------------------------------------------------------------------------------

def error_cases() -> list[Case]:
    """A case for every geometry of the sweep PyTorch rejects, along the height (the width
    takes a valid one): conv2d and conv1d whose kernel reaches past the padded input, pools
    with an output size below 1 or padding over half the kernel."""
    out = []
    conv = _dims((1, 2))
    valid_conv = [d for d in conv if _conv_valid(d)]
    for i, h in enumerate(d for d in conv if not _conv_valid(d)):
        w = valid_conv[i % len(valid_conv)]
        out.append(_conv_case("conv2d_dense", "dense", h, w, bias=True))
        out.append(_conv_case("conv1d", "dense", h, None, bias=False))
    for ceil in (False, True):
        dims = _dims((1, 2))
        valid = [d for d in dims if _pool_valid(d, ceil)]
        for i, h in enumerate(d for d in dims if not _pool_valid(d, ceil)):
            w = valid[i % len(valid)]
            out.append(_pool_case("max_pool2d", h, w, ceil_mode=ceil))
            if h.dilation == 1 and w.dilation == 1:
                out.append(_pool_case("avg_pool2d", h, w, ceil_mode=ceil))
    return out


def _message(e: BaseException) -> str:
    """The first line of an error's message without the name of the op or function raising it."""
    return re.sub(r"^(tp\.)?\w+: ", "", str(e).splitlines()[0]) if str(e) else type(e).__name__


#: the kinds of rejected geometry: where an output size is below 1 tensorplay's message is
#: PyTorch's, word for word; of pooling padding over half the kernel both say "pad should
#: be" (PyTorch words the rest per op and names the sizes per dim)
_REASONS = {"Kernel size can't be greater than actual input size": True, "Output size is too small": True,
            "pad should be": False}


def check_error(case: Case, backend: str) -> list[str]:
    """Why tensorplay (eager, then compiled with ``backend``) does not raise what PyTorch
    raises for ``case``: the same exception class (tensorplay's are subclasses of PyTorch's)
    and the same reason; an empty list if it does."""
    arrays = case.inputs()
    want = None
    if torch is not None:
        try:
            case.call(torch, [torch.tensor(a) for a in arrays])
            return [f"{case}: PyTorch accepts it"]
        except Exception as e:  # noqa: BLE001 - compared below
            want = e
    problems = []
    for mode in ("eager", backend):
        fn = (lambda *a: case.call(tp, list(a))) if mode == "eager" else tp.compile(
            lambda *a: case.call(tp, list(a)), backend=backend, fullgraph=True)
        try:
            fn(*[tp.tensor(a) for a in arrays])
        except Exception as e:  # noqa: BLE001 - compared below
            got = _message(e)
            reason = [r for r in _REASONS if r in got]
            if not reason:
                problems.append(f"{case} ({mode}): unexpected error {type(e).__name__}: {got}")
            elif want is not None and (not isinstance(e, type(want)) or reason[0] not in str(want)
                                       or (_REASONS[reason[0]] and got != _message(want))):
                problems.append(f"{case} ({mode}): {type(e).__name__}: {got}; PyTorch: "
                                f"{type(want).__name__}: {_message(want)}")
            continue
        problems.append(f"{case} ({mode}): no error; PyTorch: {want}")
    return problems


# --- running ------------------------------------------------------------------------------

def _cotangents(case: Case, outs: list[np.ndarray]) -> list[np.ndarray]:
    """A gradient for each float result of ``case``: normal values, 0 at infinite results (a
    max pool window without input elements), whose products with the gradient would be NaN."""
    rng = np.random.default_rng([case.seed, 1])
    return [np.where(np.isfinite(o), rng.standard_normal(o.shape).astype(np.float32), np.float32(0))
            for o in outs if o.dtype.kind == "f"]


@dataclass
class Results:
    """Each case's results and its inputs' gradients, as numpy arrays."""

    outputs: list[list[np.ndarray]]
    grads: list[list[np.ndarray | None]]


def _run_tp(batch: list[Case], backend: str | None, cotangents: list[list[np.ndarray]] | None) -> Results:
    """The batch run by eager tensorplay (``backend`` None) or compiled as one function; the
    gradients are those of the results times ``cotangents`` (made from these results when
    None)."""
    arrays = [case.inputs() for case in batch]
    counts = [len(a) for a in arrays]

    def program(*flat):
        outs, at = [], 0
        for case, n in zip(batch, counts):
            outs.append(case.call(tp, list(flat[at:at + n])))
            at += n
        return tuple(outs)

    flat = [tp.tensor(a, requires_grad=True) for group in arrays for a in group]
    fn = program if backend is None else tp.compile(program, backend=backend, fullgraph=True)
    outs = fn(*flat)
    outputs = [[o.detach().cpu().numpy() for o in group] for group in outs]
    if cotangents is None:
        cotangents = [_cotangents(case, group) for case, group in zip(batch, outputs)]
    roots = [o for group in outs for o in group if o.dtype.is_floating_point]
    tp.autograd.backward(roots, [tp.tensor(g) for group in cotangents for g in group])
    grads, at = [], 0
    for n in counts:
        grads.append([None if t.grad is None else t.grad.cpu().numpy() for t in flat[at:at + n]])
        at += n
    return Results(outputs, grads)


def _run_torch(case: Case, cotangents: list[np.ndarray]) -> tuple[list, list]:
    ts = [torch.tensor(a, requires_grad=True) for a in case.inputs()]
    outs = case.call(torch, ts)
    roots = [o for o in outs if o.dtype.is_floating_point]
    torch.autograd.backward(roots, [torch.tensor(g) for g in cotangents])
    return [o.detach().numpy() for o in outs], [None if t.grad is None else t.grad.numpy() for t in ts]


def _differ(name: str, got: Any, want: Any) -> str | None:
    if (got is None) != (want is None):
        return f"{name}: {'none' if got is None else 'a gradient'} vs {'none' if want is None else 'a gradient'}"
    if got is None:
        return None
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    if got.dtype.kind != "f":
        bad = got != want
    else:
        with np.errstate(invalid="ignore"):
            bad = ~np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{name}: {int(bad.sum())} of {bad.size} elements differ, first at {at}: {got[at]} vs {want[at]}"


def _compare(case: Case, got: tuple[list, list], want: tuple[list, list], what: str,
             values_only: bool = False) -> list[str]:
    out = []
    outs = [(f"result {i}", g, w) for i, (g, w) in enumerate(zip(got[0], want[0]))]
    grads = [(f"gradient of input {i}", g, w) for i, (g, w) in enumerate(zip(got[1], want[1]))]
    if values_only:
        outs, grads = outs[:1], []
    for name, g, w in outs + grads:
        msg = _differ(name, g, w)
        if msg:
            out.append(f"{case}: {what}: {msg}")
    return out


@dataclass
class Report:
    """What a run checked and what failed."""

    cases: int = 0
    compiles: int = 0
    torch_compared: int = 0
    failures: list[str] = field(default_factory=list)


def run_batch(batch: list[Case], backend: str, report: Report | None = None) -> Report:
    """Compile the batch as one function on ``backend``, run it forward and backward, and
    compare every case with eager tensorplay and with PyTorch; a batch that fails to compile
    or run is run again case by case."""
    report = Report() if report is None else report
    eager = _run_tp(batch, None, None)
    cotangents = [_cotangents(case, outs) for case, outs in zip(batch, eager.outputs)]
    report.compiles += 1
    try:
        got = _run_tp(batch, backend, cotangents)
    except Exception as e:  # noqa: BLE001 - reported per case
        if len(batch) > 1:
            for case in batch:
                run_batch([case], backend, report)
            return report
        report.cases += 1
        report.failures.append(f"{batch[0]}: {backend}: {type(e).__name__}: {str(e)[:2000]}")
        return report
    report.cases += len(batch)
    for i, case in enumerate(batch):
        mine = (eager.outputs[i], eager.grads[i])
        report.failures += _compare(case, (got.outputs[i], got.grads[i]), mine, f"{backend} vs eager")
        if torch is not None:
            report.torch_compared += 1
            theirs = _run_torch(case, cotangents[i])
            report.failures += _compare(case, mine, theirs, "eager vs PyTorch", case.may_miss_input())
    return report


def run(all_cases: list[Case], backend: str, batch_cases: int = BATCH_CASES, progress: bool = False) -> Report:
    """Every case in batches of ``batch_cases``."""
    report = Report()
    start = time.time()
    for at in range(0, len(all_cases), batch_cases):
        known = len(report.failures)
        run_batch(all_cases[at:at + batch_cases], backend, report)
        if progress:
            for f in report.failures[known:]:
                print(f, flush=True)
            print(f"  {report.cases}/{len(all_cases)} cases, {report.compiles} compiled functions, "
                  f"{len(report.failures)} failures, {time.time() - start:.0f} s", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="iree-cpu")
    parser.add_argument("--full", action="store_true", help="every case (default: the suite's sample)")
    parser.add_argument("--only", default="", help="run only the variants whose name contains this")
    parser.add_argument("--batch", type=int, default=BATCH_CASES, help="cases compiled as one function")
    args = parser.parse_args(argv)
    chosen = cases() if args.full else sample()
    chosen = [c for c in chosen if args.only in c.op]
    errors = [e for e in error_cases() if args.only in e.op]
    print(f"{len(chosen)} cases ({len(set(c.op for c in chosen))} variants), {len(errors)} error cases, "
          f"on {args.backend}", flush=True)
    start = time.time()
    failures = [p for e in errors for p in check_error(e, args.backend)]
    for f in failures:
        print(f, flush=True)
    report = run(chosen, args.backend, args.batch, progress=True)
    failures += report.failures
    print(f"{report.cases} cases in {report.compiles} compiled functions ({report.torch_compared} compared with "
          f"PyTorch), {len(errors)} error cases: {len(failures)} failures in {time.time() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
