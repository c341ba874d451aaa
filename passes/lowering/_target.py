"""What the target of a lowering can compute: set by ``convert-tp-to-linalg``'s options for
the duration of one run, read by the lowerings that have a portable alternative."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from collections.abc import Iterator


@dataclass(frozen=True)
class TargetTraits:
    #: float64 arithmetic; without it float32 results use no float64 intermediates
    float64: bool = True
    #: 64-bit integer division and remainder; without them (IREE's SPIR-V backend emulates
    #: i64 add, mul and shifts but not division) they are computed by shift-and-subtract
    int64_division: bool = True
    #: a reduction over the innermost dim with a 64-bit accumulator fused with the op that
    #: produces or widens its input, at dynamic sizes (IREE 3.13's CUDA codegen cannot
    #: distribute it); without it the widening is an op of its own, kept apart
    fuse_wide_inner_reductions: bool = True
    #: large float32 sums accumulate in float64 (with ``float64``): the CPU targets, whose code
    #: adds each vector lane's share of the elements one after another; GPU code combines the
    #: threads' partial sums as a tree, whose error grows with the log of the count
    wide_float_sums: bool = True
    #: ``linalg.depthwise_conv_2d_nchw_chw``; without it a depthwise convolution is a grouped one
    #: of one filter per group (IREE 3.13's SPIR-V code computes a strided depthwise one wrongly)
    depthwise_conv: bool = True
    #: strided convolutions and those over few output positions lowered as gathered columns
    #: times the filter matrix (CPU targets, where IREE's convolution code is slow for them)
    conv_by_columns: bool = True


_CURRENT: ContextVar[TargetTraits] = ContextVar("tp_lowering_target", default=TargetTraits())


def target() -> TargetTraits:
    """The traits of the target being lowered for (everything available by default)."""
    return _CURRENT.get()


@contextmanager
def lowering_for(traits: TargetTraits) -> Iterator[None]:
    token = _CURRENT.set(traits)
    try:
        yield
    finally:
        _CURRENT.reset(token)
