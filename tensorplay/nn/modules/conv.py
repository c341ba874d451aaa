"""Convolution layers."""

from __future__ import annotations

import math
from typing import Any

from ...ops import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value: Any, n: int, name: str = "value") -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) != n:
            raise ValueError(f"expected {name} to be an int or a tuple of {n} ints, got {value!r}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def _pair(value: Any) -> tuple[int, int]:
    return _tuple(value, 2)  # type: ignore[return-value]


class _ConvNd(Module):
    """Shared by the convolutions: checks, the weight ``(C_out, C_in / groups, *kernel)``
    (``(C_in, C_out / groups, *kernel)`` when transposed) and bias, initialized like PyTorch
    (uniform in ±1/sqrt(fan_in))."""

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any,
                 padding: Any, dilation: Any, transposed: bool, output_padding: Any, groups: int,
                 bias: bool, padding_mode: str, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        n = self._dims
        name = type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        if transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if transposed:
                raise ValueError(f"{name}: padding must be an int or a tuple of {n} ints, got "
                                 f"{padding!r}")
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _tuple(padding, n, "padding")
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.transposed = transposed
        self.groups = groups
        self.padding_mode = padding_mode
        # the last dim first, each amount twice: F.pad's amounts when padding_mode is not 'zeros'
        if isinstance(self.padding, str):
            pads: list[int] = []
            if self.padding == "same":
                for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                    total = d * (k - 1)
                    pads += [total // 2, total - total // 2]
            else:
                pads = [0, 0] * n
            self._reversed_padding_repeated_twice = pads
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in (0, 1)]
        kw = {"dtype": dtype, "device": device}
        shape = ((in_channels, out_channels // groups) if transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(creation.empty(shape, **kw))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._dims
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class _Conv(_ConvNd):
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False,
                         0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input: Any, weight: Any, bias: Any) -> Any:
        conv = type(self)._fn
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Any) -> Any:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)`` or ``(C_in, L)`` with weight
    ``(C_out, C_in / groups, k)``. ``padding`` may be ``'same'`` or ``'valid'``; non-zero
    ``padding_mode``s pad the input first."""

    _dims = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)`` with weight ``(C_out, C_in / groups, kH, kW)``,
    initialized like PyTorch (uniform in ±1/sqrt(fan_in)). ``padding`` may be ``'same'`` or
    ``'valid'``; non-zero ``padding_mode``s pad the input first."""

    _dims = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)`` with weight
    ``(C_out, C_in / groups, kD, kH, kW)``, initialized like PyTorch (uniform in
    ±1/sqrt(fan_in)). ``padding`` may be ``'same'`` or ``'valid'``; non-zero
    ``padding_mode``s pad the input first."""

    _dims = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Any, output_size: Any) -> tuple[int, ...]:
        """The output padding that gives ``output_size`` (its last ``dims`` entries)."""
        n = self._dims
        if output_size is None:
            return self.output_padding
        sizes = [int(s) for s in output_size]
        if len(sizes) == n + 2 or (len(sizes) == n + 1 and input.ndim == n + 1):
            sizes = sizes[-n:]
        if len(sizes) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have "
                             f"{n} or {n + 2} elements (got {len(output_size)})")
        pads = []
        for d in range(n):
            size = input.shape[input.ndim - n + d]
            smallest = ((size - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= sizes[d] <= largest:
                raise ValueError(f"requested an output size of {sizes}, but valid sizes range "
                                 f"from {smallest} to {largest} (for an input of "
                                 f"{list(input.shape[input.ndim - n:])})")
            pads.append(sizes[d] - smallest)
        return tuple(pads)

    def forward(self, input: Any, output_size: Any = None) -> Any:
        output_padding = self._output_padding(input, output_size)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding,
                              output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, C_in, L)`` or ``(C_in, L)`` with weight
    ``(C_in, C_out / groups, k)``: the gradient of a ``Conv1d`` with respect to its input.
    ``forward(input, output_size)`` picks the output padding that gives ``output_size``."""

    _dims = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)`` with weight
    ``(C_in, C_out / groups, kH, kW)``: the gradient of a ``Conv2d`` with respect to its input.
    ``forward(input, output_size)`` picks the output padding that gives ``output_size``."""

    _dims = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)`` with
    weight ``(C_in, C_out / groups, kD, kH, kW)``: the gradient of a ``Conv3d`` with respect to
    its input. ``forward(input, output_size)`` picks the output padding that gives
    ``output_size``."""

    _dims = 3
    _fn = staticmethod(F.conv_transpose3d)
