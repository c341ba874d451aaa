"""Instance normalization layers."""

from __future__ import annotations

import warnings
from typing import Any

from ...ops import shape as shape_ops
from .. import functional as F
from .batchnorm import _BatchNorm

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_BatchNorm):
    """Normalization of each channel of each sample over its spatial positions; optional
    per-channel ``weight``/``bias`` (``affine``) and running statistics
    (``track_running_stats``: updated in training, used in eval mode)."""

    _spatial = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def _check_input_dim(self, input: Any) -> None:
        wanted = (self._spatial + 1, self._spatial + 2)
        if input.ndim not in wanted:
            raise ValueError(f"expected {wanted[0]}D or {wanted[1]}D input (got {input.ndim}D input)")

    def forward(self, input: Any) -> Any:
        self._check_input_dim(input)
        unbatched = input.ndim == self._spatial + 1
        channels = input.shape[0 if unbatched else 1]
        if channels != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={0 if unbatched else 1} to match "
                                 f"num_features ({self.num_features}), but got: {channels}.")
            warnings.warn(f"input's size at dim={0 if unbatched else 1} does not match "
                          f"num_features. You can silence this warning by not passing in "
                          f"num_features, which is not used because affine=False", stacklevel=2)
        x = shape_ops.unsqueeze(input, 0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return shape_ops.squeeze(out, 0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over ``(N, C, L)`` or ``(C, L)`` inputs."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _spatial = 3
