"""Batch normalization layers."""

from __future__ import annotations

from typing import Any

from ..._grad_mode import no_grad
from ...dialects.tp import dtypes as dt
from ...ops import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _BatchNorm(Module):
    """Per-channel normalization with batch statistics in training and running statistics
    (``running_mean``, ``running_var``, ``num_batches_tracked`` buffers) in eval mode."""

    _expected_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        kw = {"dtype": dtype, "device": device}
        if affine:
            self.weight = Parameter(creation.empty(num_features, **kw))
            if bias:
                self.bias = Parameter(creation.empty(num_features, **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, **kw))
            self.register_buffer("running_var", creation.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Any) -> None:
        if input.ndim not in self._expected_dims:
            wanted = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"expected {wanted} input (got {input.ndim}D input)")

    def forward(self, input: Any) -> Any:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over ``(N, C)`` or ``(N, C, L)`` inputs."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over ``(N, C, H, W)`` inputs."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization over ``(N, C, D, H, W)`` inputs."""

    _expected_dims = (5,)
