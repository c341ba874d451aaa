"""``tensorplay.nn.functional``: activations, normalization, linear, convolution,
pooling, embedding, dropout, attention, losses and padding, with PyTorch's signatures.

Every function composes the frontend ops (or applies a tp op), so models written with
them run eagerly and can be captured into graphs alike.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ..amp import autocast_mode as _amp
from .._dispatch import apply, current_handler
from .._grad_mode import no_grad
from .._tensor import Tensor
from ..dialects.tp import dtypes as dt
from ..dialects.tp.errors import DTypeError, OpError, ShapeError
from ..ops import conv
from ..ops import creation
from ..ops import elementwise
from ..ops import indexing
from ..ops import linalg
from ..ops import random
from ..ops import reduction as reduction_ops
from ..ops import shape as shape_ops
from ..ops import _public
from ..ops._helpers import as_tensor_arg, sqrt_zero_grad, tracking
from .. import _views

__all__ = [
    # activations
    "relu", "relu_", "relu6", "gelu", "silu", "leaky_relu", "sigmoid", "tanh", "elu", "selu",
    "celu", "softplus", "softsign", "logsigmoid", "hardtanh", "hardsigmoid", "hardswish", "mish",
    "tanhshrink", "threshold", "glu", "softmax", "log_softmax", "softmin",
    "threshold_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_", "hardshrink", "softshrink",
    "prelu", "rrelu", "rrelu_", "gumbel_softmax",
    # normalization
    "group_norm", "batch_norm", "rms_norm", "normalize",
    # linear, embedding, dropout, attention
    "linear", "bilinear", "embedding", "embedding_bag", "one_hot", "dropout", "scaled_dot_product_attention",
    "multi_head_attention_forward",
    # (and the frontend functions declared functional=True: added at "the conv family" below)
    # losses
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "soft_margin_loss", "multilabel_soft_margin_loss", "cosine_embedding_loss", "multi_margin_loss",
    "multilabel_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss",
]


def _t(value: Any, op: str, name: str = "input") -> Tensor:
    return as_tensor_arg(value, op, name)


def _inplace(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input._assign(out) if inplace else out


def _operand(input: Tensor, op: str, inplace: bool) -> Tensor:
    """The tensor an activation composed of several ops computes from: for an in-place call on
    a tensor autograd tracks, a clone, so the inner ops' saved operands are not the tensor the
    result is written into (PyTorch's single-kernel ``elu_`` has no such inner ops, and its
    gradient works; without the clone the rules of the inner ops would see it changed)."""
    x = _t(input, op)
    return elementwise.clone(x) if inplace and tracking(x) else x


def _opmath(x: Tensor) -> Tensor:
    """``x`` in the dtype its arithmetic runs in (``DType.computes_in``: float32 for half
    types, rounded once at the end, as PyTorch's CPU kernels do)."""
    work = x.dtype.computes_in
    return elementwise.cast(x, work) if work is not x.dtype else x


# --- activations -----------------------------------------------------------------------------

def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, elementwise.relu(input), inplace)


def relu_(input: Tensor) -> Tensor:
    return relu(input, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (``approximate='none'``) or with the tanh approximation."""
    return apply("tp.gelu", _t(input, "gelu"), approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, apply("tp.silu", _t(input, "silu")), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    out = apply("tp.leaky_relu", _t(input, "leaky_relu"), negative_slope=negative_slope)
    return _inplace(input, out, inplace)


def sigmoid(input: Tensor) -> Tensor:
    return elementwise.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return elementwise.tanh(input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    out = elementwise.clamp(input, min_val, max_val)
    if tracking(input):  # PyTorch's gradient: zero at the bounds too (clamp's passes there)
        inside = elementwise.logical_and(elementwise.gt(input, min_val), elementwise.lt(input, max_val))
        out = elementwise.where(inside, input, out.detach())
    return _inplace(input, out, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def _rounded(input: Tensor, out: Tensor) -> Tensor:
    """``out`` (computed in float32 for half inputs) back in the input's dtype."""
    return elementwise.cast(out, input.dtype) if out.dtype is not input.dtype else out


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""
    x = _operand(input, "elu", inplace)
    y = _opmath(x)
    out = elementwise.where(elementwise.gt(y, 0), y, elementwise.mul(elementwise.expm1(elementwise.clamp(y, None, 0.0)), alpha))
    return _inplace(input, _rounded(x, out), inplace)


@_public.public
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    x = _operand(input, "celu", inplace)
    y = _opmath(x)
    neg = elementwise.mul(elementwise.expm1(elementwise.div(elementwise.clamp(y, None, 0.0), alpha)), alpha)
    return _inplace(input, _rounded(x, elementwise.where(elementwise.gt(y, 0), y, neg)), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_public.public
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    x = _operand(input, "selu", inplace)
    out = _rounded(x, elementwise.mul(elu(_opmath(x), _SELU_ALPHA), _SELU_SCALE))
    return _inplace(input, out, inplace)


@_amp.policy("fp32", cpu=False)
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    x = _t(input, "softplus")
    y = _opmath(x)
    by = elementwise.mul(y, beta)
    smooth = elementwise.div(elementwise.log1p(elementwise.exp(elementwise.minimum(by, threshold))), beta)
    return _rounded(x, elementwise.where(elementwise.gt(by, threshold), y, smooth))


def softsign(input: Tensor) -> Tensor:
    return elementwise.div(input, elementwise.add(elementwise.abs(input), 1))


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))`` computed without overflow: ``min(x, 0) - log1p(exp(-|x|))``."""
    x = _t(input, "logsigmoid")
    y = _opmath(x)
    return _rounded(x, elementwise.sub(elementwise.minimum(y, 0), elementwise.log1p(elementwise.exp(elementwise.neg(elementwise.abs(y))))))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, elementwise.div(elementwise.clamp(elementwise.add(input, 3), 0, 6), 6), inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, elementwise.mul(input, elementwise.div(elementwise.clamp(elementwise.add(input, 3), 0, 6), 6)), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    x = _t(input, "mish")
    y = _opmath(x)
    return _inplace(input, _rounded(x, elementwise.mul(y, elementwise.tanh(softplus(y)))), inplace)


def tanhshrink(input: Tensor) -> Tensor:
    return elementwise.sub(input, elementwise.tanh(input))


@_public.public
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    x = _t(input, "threshold")
    return _inplace(input, elementwise.where(elementwise.gt(x, threshold), x, creation.full_like(x, value)), inplace)


_threshold = threshold


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return _threshold(input, threshold, value, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


@_public.public
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    x = _t(input, "hardshrink")
    keep = elementwise.logical_or(elementwise.gt(x, lambd), elementwise.lt(x, -lambd))
    return elementwise.where(keep, x, creation.zeros((), dtype=x.dtype))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    x = _t(input, "softshrink")
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be greater or equal to 0, but got {lambd}")
    zero = creation.zeros((), dtype=x.dtype)
    return elementwise.where(elementwise.gt(x, lambd), elementwise.sub(x, lambd), elementwise.where(elementwise.lt(x, -lambd), elementwise.add(x, lambd), zero))


@_public.public
@_amp.policy("lower")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` for positive inputs, ``weight * x`` otherwise; ``weight`` has one element or
    one per channel (dim 1 of the input)."""
    x, w = _t(input, "prelu"), _t(weight, "prelu", "weight")
    if x.dtype is not w.dtype:
        raise DTypeError(f"prelu: input and weight must have the same dtype, got {x.dtype.name} "
                         f"and {w.dtype.name}")
    if w.ndim > 1:
        raise ShapeError(f"prelu: expected weight to be a scalar or 1-D tensor, got {w.ndim}-D")
    if w.numel() != 1:
        if x.ndim == 0:
            raise ShapeError(f"prelu: a 0-d input takes a weight of one element, got "
                             f"{w.numel()} elements")
        channels = x.shape[1] if x.ndim > 1 else 1
        if w.numel() != channels:
            raise ShapeError(f"prelu: the weight has {w.numel()} elements but the input has "
                             f"{channels} channels (dim 1 of input of size {list(x.shape)})")
        if x.ndim > 1:
            w = shape_ops.reshape(w, _channel_shape(x))
    else:
        w = shape_ops.reshape(w, ())
    return elementwise.where(elementwise.gt(x, 0), x, elementwise.mul(w, x))


@_public.public
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is drawn from U(``lower``, ``upper``) for each element
    while ``training`` (from tensorplay's generator), and is ``(lower + upper) / 2`` otherwise."""
    x = _operand(input, "rrelu", inplace)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"rrelu: expected a floating point input, got {x.dtype.name}")
    if lower > upper:
        raise ValueError(f"rrelu: lower bound must be less than or equal to upper bound, got "
                         f"lower={lower} and upper={upper}")
    if not training:
        out = elementwise.where(elementwise.gt(x, 0), x, elementwise.mul(x, (lower + upper) / 2))
        return _inplace(input, out, inplace)
    u = random.rand(tuple(x.shape), dtype=x.dtype.computes_in, device=creation._device_like(x, None))
    slope = elementwise.cast(elementwise.add(elementwise.mul(u, upper - lower), lower), x.dtype)
    return _inplace(input, elementwise.where(elementwise.gt(x, 0), x, elementwise.mul(x, slope)), inplace)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """Softmax of ``(logits + g) / tau`` along ``dim`` with Gumbel(0, 1) noise ``g`` from
    tensorplay's generator; ``hard`` gives the one-hot of its maximum in the forward pass and
    the soft gradient (straight-through). ``eps`` has no effect, as in PyTorch."""
    x = _t(logits, "gumbel_softmax")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"gumbel_softmax: expected floating point logits, got {x.dtype.name}")
    if eps != 1e-10:
        warnings.warn("gumbel_softmax: `eps` parameter is deprecated and has no effect.", stacklevel=2)
    u = random.rand(tuple(x.shape), dtype=x.dtype.computes_in, device=creation._device_like(x, None))
    exponential = elementwise.clamp(elementwise.neg(elementwise.log1p(elementwise.neg(u))), min=1e-30)  # Exp(1), never 0
    gumbels = elementwise.cast(elementwise.neg(elementwise.log(exponential)), x.dtype)
    y = reduction_ops.softmax(elementwise.div(elementwise.add(x, gumbels), tau), dim)
    if not hard:
        return y
    one_hot_max = indexing.scatter(creation.zeros_like(y), dim, reduction_ops.argmax(y, dim, keepdim=True), value=1.0)
    return elementwise.add(elementwise.sub(one_hot_max, y.detach()), y)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second."""
    x = _t(input, "glu")
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if x.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % x.ndim} is size "
                           f"{x.shape[dim]}")
    a, b = shape_ops.chunk(x, 2, dim)
    return elementwise.mul(a, elementwise.sigmoid(b))


def _softmax_dim(name: str, ndim: int, dim: int | None) -> int:
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  f"include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    x = _t(input, "softmax")
    return reduction_ops.softmax(x, _softmax_dim("softmax", x.ndim, dim), dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    x = _t(input, "log_softmax")
    return reduction_ops.log_softmax(x, _softmax_dim("log_softmax", x.ndim, dim), dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    x = _t(input, "softmin")
    if dtype is not None:
        x = elementwise.cast(x, dtype)
    return reduction_ops.softmax(elementwise.neg(x), _softmax_dim("softmin", x.ndim, dim))


# --- normalization ---------------------------------------------------------------------------

def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x²) + eps)`` over the trailing ``normalized_shape`` dims, times
    ``weight``; ``eps`` defaults to the dtype's machine epsilon."""
    x = _t(input, "rms_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise RuntimeError(f"rms_norm: Given normalized_shape={list(shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                           f"{list(x.shape)}")
    if eps is None:
        import ml_dtypes

        eps = float(ml_dtypes.finfo(x.dtype.np_dtype).eps)
    y = _opmath(x)
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    out = elementwise.mul(y, elementwise.rsqrt(elementwise.add(reduction_ops.mean(elementwise.mul(y, y), dims, keepdim=True), eps)))
    if weight is not None:
        out = elementwise.mul(out, _opmath(weight))
    return elementwise.cast(out, x.dtype)


def _channel_shape(x: Tensor) -> tuple[int, ...]:
    """Shape that broadcasts a per-channel (dim 1) vector against ``x``."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


@_amp.policy("fp32", cpu=False)
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize each group of ``C / num_groups`` channels over those channels and all
    spatial positions, then apply the per-channel ``weight`` and ``bias``."""
    x = _t(input, "group_norm")
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.ndim}")
    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(x.shape)} and num_groups={num_groups}")
    y = shape_ops.reshape(_opmath(x), (n, num_groups, -1))
    mean = reduction_ops.mean(y, -1, keepdim=True)
    centered = elementwise.sub(y, mean)
    var = reduction_ops.mean(elementwise.mul(centered, centered), -1, keepdim=True)
    out = shape_ops.reshape(elementwise.mul(centered, elementwise.rsqrt(elementwise.add(var, eps))), tuple(x.shape))
    if weight is not None:
        out = elementwise.mul(out, shape_ops.reshape(_opmath(weight), _channel_shape(x)))
    if bias is not None:
        out = elementwise.add(out, shape_ops.reshape(_opmath(bias), _channel_shape(x)))
    return elementwise.cast(out, x.dtype)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) by batch statistics (``training``, which also updates
    the running ones in place) or by the running statistics."""
    x = _t(input, "batch_norm")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input, got {x.ndim}-D")
    dims = (0,) + tuple(range(2, x.ndim))
    cshape = _channel_shape(x)
    y = _opmath(x)
    if training:
        count = x.numel() // max(x.shape[1], 1)
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {x.shape}")
        mean = reduction_ops.mean(y, dims, keepdim=True)
        centered = elementwise.sub(y, mean)
        var = reduction_ops.mean(elementwise.mul(centered, centered), dims, keepdim=True)
        if running_mean is not None:
            with no_grad():
                new = elementwise.add(elementwise.mul(running_mean, 1 - momentum), elementwise.mul(shape_ops.reshape(mean, (-1,)), momentum))
                running_mean._assign(new)
        if running_var is not None:
            with no_grad():
                unbiased = elementwise.mul(shape_ops.reshape(var, (-1,)), count / (count - 1))
                running_var._assign(elementwise.add(elementwise.mul(running_var, 1 - momentum), elementwise.mul(unbiased, momentum)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be given when not "
                               "training")
        mean = shape_ops.reshape(_opmath(running_mean), cshape)
        var = shape_ops.reshape(_opmath(running_var), cshape)
        centered = elementwise.sub(y, mean)
    out = elementwise.mul(centered, elementwise.rsqrt(elementwise.add(var, eps)))
    if weight is not None:
        out = elementwise.mul(out, shape_ops.reshape(_opmath(weight), cshape))
    if bias is not None:
        out = elementwise.add(out, shape_ops.reshape(_opmath(bias), cshape))
    return elementwise.cast(out, x.dtype)


def _p_norm(x: Tensor, p: float, dim: Any, keepdim: bool) -> Tensor:
    if p == math.inf:
        return reduction_ops.amax(elementwise.abs(x), dim, keepdim)
    if p == -math.inf:
        return reduction_ops.amin(elementwise.abs(x), dim, keepdim)
    if p == 2:
        return sqrt_zero_grad(reduction_ops.sum(elementwise.mul(x, x), dim, keepdim))
    if p == 1:
        return reduction_ops.sum(elementwise.abs(x), dim, keepdim)
    return elementwise.pow(reduction_ops.sum(elementwise.pow(elementwise.abs(x), p), dim, keepdim), 1.0 / p)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    x = _t(input, "normalize")
    result = elementwise.div(x, elementwise.clamp(_p_norm(x, p, dim, True), min=eps))
    if out is not None:
        return out.copy_(result)
    return result


# --- linear, embedding, dropout ----------------------------------------------------------------

@_amp.policy("lower")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` over any leading dims of ``input``."""
    x = _t(input, "linear")
    w = _t(weight, "linear", "weight")
    wt = shape_ops.t(w) if w.ndim == 2 else w
    if bias is not None and x.dtype == w.dtype == bias.dtype and x.dtype.computes_in != x.dtype:
        # half types: the product and the bias add in float32, rounded once (PyTorch's addmm)
        wide = x.dtype.computes_in
        return elementwise.add(linalg.matmul(x.to(wide), wt.to(wide)), bias.to(wide)).to(x.dtype)
    out = linalg.matmul(x, wt)
    if bias is not None:
        out = elementwise.add(out, bias)
    return out


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y_k = x1 @ weight[k] @ x2 + bias_k`` for weight of shape (out, in1, in2)."""
    a, b = _t(input1, "bilinear"), _t(input2, "bilinear", "input2")
    lead = tuple(a.shape[:-1])
    a2 = shape_ops.reshape(a, (-1, 1, 1, a.shape[-1]))  # (N, 1, 1, in1)
    b2 = shape_ops.reshape(b, (-1, 1, b.shape[-1], 1))  # (N, 1, in2, 1)
    out = shape_ops.reshape(linalg.matmul(linalg.matmul(a2, shape_ops.unsqueeze(weight, 0)), b2), lead + (weight.shape[0],))
    if bias is not None:
        out = elementwise.add(out, bias)
    return out


def _check_index_dtype(x: Tensor, op: str, arg: str) -> None:
    if x.dtype not in (dt.int64, dt.int32):
        raise DTypeError(f"Expected tensor for argument #1 '{arg}' to have one of the following "
                         f"scalar types: Long, Int; but got {x.type()} instead (while checking "
                         f"arguments for {op})")


def _is_concrete(*tensors: Tensor | None) -> bool:
    """Whether values can be inspected for input checks: not while a graph is captured, and
    not between the segments of a function with graph breaks either (there the check's own ops
    would be recorded and its ``bool`` would break the graph once more on every call), so a
    compiled call checks exactly what its whole-graph form checks."""
    return current_handler() is None and all(t is None or _views.has_memory(t) for t in tensors)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input``: the result has shape
    ``input.shape + (embedding_dim,)``. ``max_norm`` renormalizes the rows used, in place."""
    idx = _t(input, "embedding")
    _check_index_dtype(idx, "embedding", "indices")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got a {weight.ndim}-D tensor")
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
    flat = shape_ops.reshape(idx, (-1,))
    if _is_concrete(idx) and flat.numel() and bool(reduction_ops.any(elementwise.logical_or(elementwise.lt(flat, 0), elementwise.ge(flat, num)))):
        raise IndexError("embedding: index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, flat, max_norm, norm_type)
    rows = indexing.index_select(weight, 0, flat)
    if padding_idx is not None and tracking(weight):  # the padding row gets no gradient, as PyTorch
        pad = padding_idx % num
        rows = elementwise.where(shape_ops.unsqueeze(elementwise.eq(flat, pad), 1), rows.detach(), rows)
    return shape_ops.reshape(rows, tuple(idx.shape) + (weight.shape[1],))


def _embedding_renorm_(weight: Tensor, flat: Tensor, max_norm: float, norm_type: float) -> None:
    with no_grad():
        used = elementwise.gt(reduction_ops.sum(one_hot(elementwise.cast(flat, dt.int64), weight.shape[0]), 0), 0)
        norms = _p_norm(_opmath(weight), norm_type, 1, True)
        scale = elementwise.div(max_norm, elementwise.add(norms, 1e-7))
        shrink = elementwise.logical_and(shape_ops.unsqueeze(used, 1), elementwise.gt(norms, max_norm))
        weight._assign(elementwise.where(shrink, elementwise.mul(weight, scale), weight))


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of ``weight`` rows: a 2-D ``input`` (B, N) is B bags of
    N indices; a 1-D ``input`` is cut into bags at ``offsets`` (bag b starts at
    ``offsets[b]``; with ``include_last_offset`` the last offset ends the last bag). Indices
    equal to ``padding_idx`` are left out, empty bags give zeros, and ``per_sample_weights``
    (``mode='sum'`` only) scales each row. The result is (B, embedding_dim)."""
    op = "embedding_bag"
    idx = _t(input, op)
    _check_index_dtype(idx, op, "indices")
    if weight.ndim != 2:
        raise ShapeError(f"embedding_bag: 'weight' must be 2-D, got a {weight.ndim}-D tensor")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise ValueError(f"embedding_bag: per_sample_weights is only supported for mode='sum' "
                         f"(got mode={mode!r})")
    num, dim = weight.shape
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding_bag: padding_idx must be within the number of embeddings "
                             f"({num}), got {padding_idx}")
        padding_idx %= num
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input "
                             "is treated as a mini-batch of fixed length sequences; got offsets of "
                             f"type {type(offsets).__name__}")
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        offsets = _t(offsets, op, "offsets")
        _check_index_dtype(offsets, op, "offsets")
        if offsets.ndim != 1:
            raise ValueError(f"embedding_bag: offsets has to be a 1D Tensor, got a {offsets.ndim}-D "
                             f"tensor")
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of "
                         f"dimension {idx.ndim}")
    psw = None
    if per_sample_weights is not None:
        psw = _t(per_sample_weights, op, "per_sample_weights")
        if tuple(psw.shape) != tuple(idx.shape):
            raise ShapeError(f"embedding_bag: per_sample_weights must have the shape of input "
                             f"{tuple(idx.shape)}, got {tuple(psw.shape)}")
    flat = shape_ops.reshape(idx, (-1,))
    if _is_concrete(idx) and flat.numel() and bool(reduction_ops.any(elementwise.logical_or(elementwise.lt(flat, 0), elementwise.ge(flat, num)))):
        raise IndexError("embedding_bag: index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, flat, max_norm, norm_type)
    work = weight.dtype.computes_in
    rows = _opmath(indexing.index_select(weight, 0, flat))  # (n, D)
    keep = None if padding_idx is None else elementwise.ne(flat, padding_idx)
    scale = None if keep is None else elementwise.cast(keep, work)
    if psw is not None:
        w = elementwise.cast(shape_ops.reshape(psw, (-1,)), work)
        scale = w if scale is None else elementwise.mul(scale, w)
    if idx.ndim == 2:
        bags, length = idx.shape
        out = _fixed_bags(rows, keep, scale, mode, bags, length, dim, work)
    else:
        out = _offset_bags(rows, keep, scale, mode, flat, offsets, include_last_offset, dim, work)
    return elementwise.cast(out, weight.dtype)


def _fixed_bags(rows: Tensor, keep: Tensor | None, scale: Tensor | None, mode: str, bags: Any,
                length: Any, dim: int, work: dt.DType) -> Tensor:
    """embedding_bag of B bags of N indices each: reductions over dim 1 of (B, N, D)."""
    if length == 0:
        return creation.zeros((bags, dim), dtype=work, device=creation._device_like(rows, None))
    rows = shape_ops.reshape(rows, (bags, length, dim))
    if mode == "max":
        if keep is None:
            return reduction_ops.amax(rows, 1)
        keep = shape_ops.reshape(keep, (bags, length, 1))
        best = reduction_ops.amax(indexing.masked_fill(rows, elementwise.logical_not(keep), -math.inf), 1)
        return elementwise.where(reduction_ops.any(keep, 1), best, creation.zeros((), dtype=work))
    if scale is not None:
        rows = elementwise.mul(rows, shape_ops.reshape(scale, (bags, length, 1)))
    total = reduction_ops.sum(rows, 1)
    if mode == "sum":
        return total
    if keep is None:
        return elementwise.div(total, length)
    count = reduction_ops.sum(elementwise.cast(shape_ops.reshape(keep, (bags, length, 1)), work), 1)
    return elementwise.div(total, elementwise.clamp(count, 1.0))


def _offset_bags(rows: Tensor, keep: Tensor | None, scale: Tensor | None, mode: str, flat: Tensor,
                 offsets: Tensor, include_last_offset: bool, dim: int, work: dt.DType) -> Tensor:
    """embedding_bag of a 1-D input cut at ``offsets``: each index's bag number, then a
    scatter-add (sum, mean) or a masked maximum over a (B, n, D) view (max)."""
    n = flat.shape[0]
    bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    if bags < 0:
        raise ValueError("embedding_bag: offsets must have at least one element with "
                         "include_last_offset=True")
    if _is_concrete(offsets) and offsets.shape[0] and int(offsets[0]) != 0:
        raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the "
                         f"mini-batch has to start from position 0; got {int(offsets[0])}")
    device = creation._device_like(rows, None)
    if bags == 0 or n == 0:
        return creation.zeros((bags, dim), dtype=work, device=device)
    offsets = elementwise.cast(offsets, dt.int64)
    starts = shape_ops.narrow(offsets, 0, 0, bags)
    pos = creation.arange(n, device=device)
    bag = elementwise.sub(reduction_ops.sum(elementwise.cast(elementwise.le(shape_ops.unsqueeze(starts, 0), shape_ops.unsqueeze(pos, 1)), dt.int64), 1), 1)
    inside = None
    if include_last_offset:  # indices at or past the last offset belong to no bag
        inside = elementwise.lt(pos, shape_ops.narrow(offsets, 0, bags, 1))
        keep = inside if keep is None else elementwise.logical_and(keep, inside)
        scale = elementwise.cast(inside, work) if scale is None else elementwise.mul(scale, elementwise.cast(inside, work))
    bag = elementwise.clamp(bag, 0, bags - 1)
    if mode == "max":
        member = elementwise.eq(shape_ops.unsqueeze(bag, 0), shape_ops.unsqueeze(creation.arange(bags, device=device), 1))  # (B, n)
        if keep is not None:
            member = elementwise.logical_and(member, shape_ops.unsqueeze(keep, 0))
        member = shape_ops.unsqueeze(member, -1)
        best = reduction_ops.amax(indexing.masked_fill(shape_ops.expand(shape_ops.unsqueeze(rows, 0), (bags, n, dim)),
                                    elementwise.logical_not(member), -math.inf), 1)
        return elementwise.where(reduction_ops.any(member, 1), best, creation.zeros((), dtype=work))
    if scale is not None:
        rows = elementwise.mul(rows, shape_ops.unsqueeze(scale, 1))
    index = shape_ops.expand(shape_ops.unsqueeze(bag, 1), (n, dim))
    total = indexing.scatter_add(creation.zeros((bags, dim), dtype=work, device=device), 0, index, rows)
    if mode == "sum":
        return total
    ones = creation.ones((n,), dtype=work, device=device) if keep is None else elementwise.cast(keep, work)
    count = indexing.scatter_add(creation.zeros((bags,), dtype=work, device=device), 0, bag, ones)
    return elementwise.div(total, shape_ops.unsqueeze(elementwise.clamp(count, 1.0), 1))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of the class indices in ``tensor`` along a new last dim."""
    x = _t(tensor, "one_hot")
    if x.dtype is not dt.int64:
        raise DTypeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if x.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(reduction_ops.amax(x)) + 1
    if _is_concrete(x) and x.numel():
        if bool(reduction_ops.any(elementwise.lt(x, 0))):
            raise RuntimeError("Class values must be non-negative.")
        if bool(reduction_ops.any(elementwise.ge(x, num_classes))):
            raise RuntimeError("Class values must be smaller than num_classes.")
    return elementwise.cast(elementwise.eq(shape_ops.unsqueeze(x, -1), creation.arange(num_classes)), dt.int64)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    during training; the identity otherwise."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = _t(input, "dropout")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        out = elementwise.mul(x, creation.zeros((), dtype=x.dtype))
    else:
        keep = elementwise.lt(random.rand(tuple(x.shape), dtype=dt.float32, device=creation._device_like(x, None)), 1.0 - p)
        out = elementwise.mul(x, elementwise.div(elementwise.cast(keep, x.dtype), 1.0 - p))
    return _inplace(input, out, inplace)


# --- attention --------------------------------------------------------------------------------

def _additive_mask(mask: Tensor, dtype: dt.DType) -> Tensor:
    """A mask as a float bias: bool ``True`` keeps (0), ``False`` masks (-inf)."""
    if mask.dtype.is_bool:
        return indexing.masked_fill(creation.zeros(tuple(mask.shape), dtype=dtype), elementwise.logical_not(mask), -math.inf)
    return mask


@_amp.policy("lower")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` over the last two dims.

    A bool ``attn_mask`` marks the positions that may be attended (True); a float one is
    added to the scores. ``is_causal`` masks the future (the upper triangle, aligned top-left)
    and excludes ``attn_mask``. Rows with nothing to attend give zeros. ``enable_gqa`` lets key and
    value have fewer heads (dim -3) than the query, each serving a group of query heads.
    """
    op = "scaled_dot_product_attention"
    q, k, v = _t(query, op, "query"), _t(key, op, "key"), _t(value, op, "value")
    if not (q.dtype is k.dtype is v.dtype):
        raise DTypeError(f"Expected query, key, and value to have the same dtype, but got "
                         f"query.dtype: {q.dtype.name} key.dtype: {k.dtype.name} and value.dtype: "
                         f"{v.dtype.name} instead.")
    if not q.dtype.is_floating_point:
        raise DTypeError(f"scaled_dot_product_attention: expected floating point query, key and "
                         f"value, got {q.dtype.name}")
    if attn_mask is not None:
        attn_mask = _t(attn_mask, op, "attn_mask")
        if not (attn_mask.dtype.is_bool or attn_mask.dtype is q.dtype
                or attn_mask.dtype is dt.float32):
            raise DTypeError(f"Expected attn_mask dtype to be bool or float or to match query "
                             f"dtype, but got attn_mask.dtype: {attn_mask.dtype.name} and  "
                             f"query.dtype: {q.dtype.name} instead.")
    if is_causal and attn_mask is not None:
        raise OpError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                      "is_causal=True")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError("scaled_dot_product_attention: query, key and value must have at least "
                         "2 dims (..., L, E)")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"scaled_dot_product_attention: query and key must have the same last "
                         f"dim (embedding size), got {q.shape[-1]} and {k.shape[-1]}")
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
        if hq % hk or hq % hv:
            raise ShapeError(f"scaled_dot_product_attention: number of heads in key/value "
                             f"({hk}/{hv}) must divide the number of heads in query ({hq})")
        k = _repeat_heads(k, hq // hk)
        v = _repeat_heads(v, hq // hv)
    length, source = q.shape[-2], k.shape[-2]
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    qc, kc, vc = _opmath(q), _opmath(k), _opmath(v)
    scores = elementwise.mul(linalg.matmul(qc, shape_ops.transpose(kc, -2, -1)), factor)
    if is_causal:  # every query row keeps at least key 0, so no row is fully masked
        allowed = indexing.tril(creation.ones((length, source), dtype=dt.bool_))
        scores = indexing.masked_fill(scores, elementwise.logical_not(allowed), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype.is_bool:
            scores = indexing.masked_fill(scores, elementwise.logical_not(attn_mask), -math.inf)
        else:
            scores = elementwise.add(scores, _opmath(attn_mask))
    weights = reduction_ops.softmax(scores, -1)
    if attn_mask is not None:  # a row with every score -inf attends to nothing: zeros, not NaN
        dead = elementwise.eq(reduction_ops.amax(scores, -1, keepdim=True), -math.inf)
        weights = elementwise.where(dead, creation.zeros((), dtype=weights.dtype), weights)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return elementwise.cast(linalg.matmul(weights, vc), q.dtype)


def _repeat_heads(x: Tensor, times: int) -> Tensor:
    """Repeat each head (dim -3) ``times`` times in place: h0 h0 h1 h1 ..."""
    if times == 1:
        return x
    shape = tuple(x.shape)
    expanded = shape_ops.expand(shape_ops.unsqueeze(x, -3), shape[:-2] + (times,) + shape[-2:])
    return shape_ops.reshape(expanded, shape[:-3] + (shape[-3] * times,) + shape[-2:])


def _canonical_mask(mask: Tensor | None, name: str, dtype: dt.DType) -> Tensor | None:
    """An MHA mask as a float bias: bool ``True`` means *masked* (-inf) here."""
    if mask is None:
        return None
    mask = _t(mask, "multi_head_attention_forward", name)
    if mask.dtype.is_bool:
        return indexing.masked_fill(creation.zeros(tuple(mask.shape), dtype=dtype), mask, -math.inf)
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"only bool and floating types of {name} are supported")
    return mask


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True, key_padding_mask: Tensor | None = None,
        need_weights: bool = True, attn_mask: Tensor | None = None,
        use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
        k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None,
        static_k: Tensor | None = None, static_v: Tensor | None = None,
        average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on sequence-first inputs ``(L, N, E)`` (or unbatched ``(L, E)``).

    Masks: a bool ``key_padding_mask`` (N, S) or ``attn_mask`` (L, S) / (N*H, L, S) marks
    positions that may NOT be attended with True; float masks are added to the scores.
    Returns the output and, with ``need_weights``, the attention weights (averaged over
    heads when ``average_attn_weights``).
    """
    batched = query.ndim == 3
    if query.ndim not in (2, 3):
        raise ShapeError(f"query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.ndim}-D query tensor")
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"key and value should have the same rank as query ({query.ndim}-D), got "
                         f"{key.ndim}-D and {value.ndim}-D")
    if not batched:
        query, key, value = shape_ops.unsqueeze(query, 1), shape_ops.unsqueeze(key, 1), shape_ops.unsqueeze(value, 1)
        if key_padding_mask is not None:
            key_padding_mask = shape_ops.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise ShapeError(f"was expecting embedding dimension of {embed_dim_to_check}, but got "
                         f"{embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise ShapeError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise ShapeError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match "
                         f"value's {tuple(value.shape[:2])}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to create "
                           "this mask.")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)

    # input projections
    if use_separate_proj_weight:
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = shape_ops.chunk(in_proj_bias, 3)
        q = linear(query, q_proj_weight, bq)
        k = linear(key, k_proj_weight, bk)
        v = linear(value, v_proj_weight, bv)
    else:
        wq, wk, wv = shape_ops.chunk(in_proj_weight, 3)
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = shape_ops.chunk(in_proj_bias, 3)
        q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)

    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise ShapeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should "
                                 f"be {(tgt_len, src_len)}.")
            attn_mask = shape_ops.unsqueeze(attn_mask, 0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise ShapeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should "
                                 f"be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise ShapeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    if bias_k is not None and bias_v is not None:
        k = shape_ops.cat([k, shape_ops.expand(bias_k, (1, bsz, embed_dim))])
        v = shape_ops.cat([v, shape_ops.expand(bias_v, (1, bsz, embed_dim))])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    # (L, N, E) -> (N*H, L, head_dim)
    q = shape_ops.transpose(shape_ops.reshape(q, (tgt_len, bsz * num_heads, head_dim)), 0, 1)
    k = shape_ops.transpose(shape_ops.reshape(k, (k.shape[0], bsz * num_heads, head_dim)), 0, 1) \
        if static_k is None else static_k
    v = shape_ops.transpose(shape_ops.reshape(v, (v.shape[0], bsz * num_heads, head_dim)), 0, 1) \
        if static_v is None else static_v

    if add_zero_attn:
        zeros = creation.zeros((bsz * num_heads, 1, head_dim), dtype=q.dtype)
        k = shape_ops.cat([k, zeros], 1)
        v = shape_ops.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                             f"{tuple(key_padding_mask.shape)}")
        kpm = shape_ops.reshape(shape_ops.expand(shape_ops.reshape(key_padding_mask, (bsz, 1, 1, src_len)),
                                 (bsz, num_heads, 1, src_len)), (bsz * num_heads, 1, src_len))
        attn_mask = kpm if attn_mask is None else elementwise.add(attn_mask, kpm)

    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = linalg.matmul(elementwise.mul(q, 1.0 / math.sqrt(head_dim)), shape_ops.transpose(k, -2, -1))
        if attn_mask is not None:
            scores = elementwise.add(scores, attn_mask)
        weights = reduction_ops.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = linalg.matmul(weights, v)  # (N*H, L, head_dim)
        out = shape_ops.reshape(shape_ops.transpose(out, 0, 1), (tgt_len * bsz, embed_dim))
        out = shape_ops.reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed_dim))
        weights = shape_ops.reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = reduction_ops.mean(weights, 1)
        if not batched:
            out, weights = shape_ops.squeeze(out, 1), shape_ops.squeeze(weights, 0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = shape_ops.unsqueeze(attn_mask, 0)
        else:
            attn_mask = shape_ops.reshape(attn_mask, (bsz, num_heads, -1, src_len))
    q4 = shape_ops.reshape(q, (bsz, num_heads, tgt_len, head_dim))
    k4 = shape_ops.reshape(k, (bsz, num_heads, src_len, head_dim))
    v4 = shape_ops.reshape(v, (bsz, num_heads, src_len, head_dim))
    out = scaled_dot_product_attention(q4, k4, v4, attn_mask, dropout_p)
    out = shape_ops.reshape(shape_ops.permute(out, (2, 0, 1, 3)), (bsz * tgt_len, embed_dim))
    out = shape_ops.reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed_dim))
    if not batched:
        out = shape_ops.squeeze(out, 1)
    return out, None


# --- the frontend functions declared @public(functional=True): the conv family (convolution,
# pooling, padding, interpolation, dropout1d/2d/3d, instance_norm) and layer_norm -----------------

_FROM_OPS = _public.functional()
globals().update(_FROM_OPS)
__all__ += list(_FROM_OPS)
del _FROM_OPS


# --- losses -------------------------------------------------------------------------------------

def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction instead.",
                  stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return reduction_ops.mean(loss)
    if reduction == "sum":
        return reduction_ops.sum(loss)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


_SCALAR_NAMES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
}


def _class_targets(op: str, input: Tensor, target: Tensor) -> None:
    if target.dtype not in (dt.int64, dt.uint8):
        raise DTypeError(f"expected target dtype to be Long or Byte, but got "
                         f"{_SCALAR_NAMES[target.dtype.name]}")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ShapeError(f"{op}: for 1-D (unbatched) input, 0-D target is expected, but got "
                             f"target of size {list(target.shape)}")
        return
    if input.ndim < 1 or target.ndim != input.ndim - 1:
        raise ShapeError(f"{op}: expected target of {input.ndim - 1} dims for input of size "
                         f"{list(input.shape)}, got target of size {list(target.shape)}")
    if input.shape[0] != target.shape[0]:
        raise ShapeError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0]}).")
    if tuple(input.shape[2:]) != tuple(target.shape[1:]):
        raise ShapeError(f"{op}: expected target size {[input.shape[0]] + list(input.shape[2:])}, "
                         f"got {list(target.shape)}")


@_amp.policy("fp32")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
             reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class-index targets given log-probabilities ``input``
    (classes along dim 1, or dim 0 when unbatched); ``mean`` divides by the total weight."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x = _t(input, "nll_loss")
    tgt = _t(target, "nll_loss", "target")
    _class_targets("nll_loss", x, tgt)
    class_dim = 0 if x.ndim == 1 else 1
    n_classes = x.shape[class_dim]
    tgt = elementwise.cast(tgt, dt.int64)
    if _is_concrete(tgt) and tgt.numel():
        # eager: the targets are checked on the host, and without ignored targets or weights the
        # loss is the picked values alone (7 ops rather than 22, the same values and gradients)
        values = tgt._concrete("nll_loss")
        skipped = values == ignore_index
        bad = ~skipped & ((values < 0) | (values >= n_classes))
        if bad.any():
            raise IndexError(f"Target {int(values[bad][0])} is out of bounds.")
        if weight is None and not skipped.any():
            loss = elementwise.neg(shape_ops.squeeze(indexing.gather(x, class_dim, shape_ops.unsqueeze(tgt, class_dim)), class_dim))
            if reduction == "none":
                return loss
            return reduction_ops.sum(loss) if reduction == "sum" else elementwise.div(reduction_ops.sum(loss), float(values.size))
    ignored = elementwise.eq(tgt, ignore_index)
    safe = elementwise.where(ignored, creation.zeros((), dtype=dt.int64), tgt)
    picked = shape_ops.squeeze(indexing.gather(x, class_dim, shape_ops.unsqueeze(safe, class_dim)), class_dim)
    if weight is not None:
        w = indexing.index_select(_t(weight, "nll_loss", "weight"), 0, shape_ops.reshape(safe, (-1,)))
        w = shape_ops.reshape(elementwise.cast(w, x.dtype), tuple(safe.shape))
    else:
        w = creation.ones(tuple(safe.shape), dtype=x.dtype, device=x.device)
    w = elementwise.where(ignored, creation.zeros((), dtype=x.dtype), w)
    loss = elementwise.neg(elementwise.mul(picked, w))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return reduction_ops.sum(loss)
    return elementwise.div(reduction_ops.sum(loss), reduction_ops.sum(w))


@_amp.policy("fp32")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits ``input`` (classes along dim 1, or dim 0 when unbatched)
    and class-index targets or class probabilities (same shape as ``input``)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    x = _t(input, "cross_entropy")
    tgt = _t(target, "cross_entropy", "target")
    class_dim = 0 if x.ndim == 1 else 1
    n_classes = x.shape[class_dim]
    logp = reduction_ops.log_softmax(x, class_dim)
    w = None if weight is None else _t(weight, "cross_entropy", "weight")
    w_shape = tuple(n_classes if d == class_dim else 1 for d in range(x.ndim))

    if tgt.dtype.is_floating_point:  # class probabilities
        if tuple(tgt.shape) != tuple(x.shape):
            raise ShapeError(f"cross_entropy: expected probability targets of the input's shape "
                             f"{list(x.shape)}, got {list(tgt.shape)}")
        if label_smoothing > 0:
            tgt = elementwise.add(elementwise.mul(tgt, 1.0 - label_smoothing), label_smoothing / n_classes)
        terms = elementwise.mul(logp, tgt)
        if w is not None:
            terms = elementwise.mul(terms, shape_ops.reshape(w, w_shape))
        loss = elementwise.neg(reduction_ops.sum(terms, class_dim))
        if reduction == "mean":
            batch = x.numel() // max(n_classes, 1)
            return elementwise.div(reduction_ops.sum(loss), batch)
        return _reduce(loss, reduction)

    nll = nll_loss(logp, tgt, w, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0.0:
        return nll
    tgt = elementwise.cast(tgt, dt.int64)
    ignored = elementwise.eq(tgt, ignore_index)
    weighted = logp if w is None else elementwise.mul(logp, shape_ops.reshape(w, w_shape))
    smooth = elementwise.neg(reduction_ops.sum(weighted, class_dim))
    smooth = elementwise.where(ignored, creation.zeros((), dtype=smooth.dtype), smooth)
    if reduction == "mean":
        if w is None:
            denom = reduction_ops.sum(elementwise.logical_not(ignored))
        else:
            safe = elementwise.where(ignored, creation.zeros((), dtype=dt.int64), tgt)
            tw = shape_ops.reshape(indexing.index_select(w, 0, shape_ops.reshape(safe, (-1,))), tuple(safe.shape))
            denom = reduction_ops.sum(elementwise.where(ignored, creation.zeros((), dtype=tw.dtype), tw))
        smooth = elementwise.div(reduction_ops.sum(smooth), denom)
    elif reduction == "sum":
        smooth = reduction_ops.sum(smooth)
    return elementwise.add(elementwise.mul(nll, 1.0 - label_smoothing), elementwise.mul(smooth, label_smoothing / n_classes))


def _pointwise_loss(op: str, input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    x, y = _t(input, op), _t(target, op, "target")
    if tuple(x.shape) != tuple(y.shape):
        warnings.warn(f"Using a target size ({y.shape}) that is different to the input size "
                      f"({x.shape}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=3)
    return x, y


def _weighted(loss: Tensor, weight: Tensor | None) -> Tensor:
    return loss if weight is None else elementwise.mul(loss, weight)


@_amp.policy("fp32")
def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Squared error ``(input - target)²``, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _pointwise_loss("mse_loss", input, target)
    d = elementwise.sub(x, y)
    return _reduce(_weighted(elementwise.mul(d, d), weight), reduction)


@_amp.policy("fp32")
def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Absolute error ``|input - target|``, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _pointwise_loss("l1_loss", input, target)
    return _reduce(_weighted(elementwise.abs(elementwise.sub(x, y)), weight), reduction)


@_amp.policy("fp32")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Quadratic below ``beta`` (``0.5 d² / beta``), linear above (``|d| - beta / 2``)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    x, y = _pointwise_loss("smooth_l1_loss", input, target)
    d = elementwise.abs(elementwise.sub(x, y))
    if beta == 0:
        return _reduce(d, reduction)
    loss = elementwise.where(elementwise.lt(d, beta), elementwise.div(elementwise.mul(elementwise.mul(d, d), 0.5), beta), elementwise.sub(d, 0.5 * beta))
    return _reduce(loss, reduction)


@_amp.policy("fp32")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Quadratic below ``delta`` (``0.5 d²``), linear above (``delta * (|d| - delta / 2)``)."""
    _check_reduction(reduction)
    x, y = _pointwise_loss("huber_loss", input, target)
    d = elementwise.abs(elementwise.sub(x, y))
    loss = elementwise.where(elementwise.lt(d, delta), elementwise.mul(elementwise.mul(d, d), 0.5), elementwise.mul(elementwise.sub(d, 0.5 * delta), delta))
    return _reduce(_weighted(loss, weight), reduction)


@_amp.policy("fp32")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-(t log p + (1 - t) log(1 - p))`` with the logs clamped at -100, as PyTorch does."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    p, t = _t(input, "binary_cross_entropy"), _t(target, "binary_cross_entropy", "target")
    if tuple(p.shape) != tuple(t.shape):
        raise ValueError(f"Using a target size ({t.shape}) that is different to the input size "
                         f"({p.shape}) is deprecated. Please ensure they have the same size.")
    if _is_concrete(p) and p.numel() and bool(reduction_ops.any(elementwise.logical_or(elementwise.lt(p, 0), elementwise.gt(p, 1)))):
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_p = elementwise.clamp(elementwise.log(p), min=-100)
    log_q = elementwise.clamp(elementwise.log(elementwise.sub(1, p)), min=-100)
    loss = elementwise.neg(elementwise.add(elementwise.mul(t, log_p), elementwise.mul(elementwise.sub(1, t), log_q)))
    return _reduce(_weighted(loss, weight), reduction)


@_amp.policy("fp32")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x = _t(input, "binary_cross_entropy_with_logits")
    t = _t(target, "binary_cross_entropy_with_logits", "target")
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Target size ({t.shape}) must be the same as input size ({x.shape})")
    # -log(sigmoid(x)) = softplus(-x); -log(1 - sigmoid(x)) = softplus(x) = x + softplus(-x)
    log_sig_neg = elementwise.neg(logsigmoid(x))  # -log sigmoid(x)
    if pos_weight is not None:
        coef = elementwise.add(elementwise.mul(elementwise.sub(pos_weight, 1), t), 1)
        loss = elementwise.add(elementwise.mul(elementwise.sub(1, t), x), elementwise.mul(coef, log_sig_neg))
    else:
        loss = elementwise.add(elementwise.mul(elementwise.sub(1, t), x), log_sig_neg)
    return _reduce(_weighted(loss, weight), reduction)


@_amp.policy("fp32")
def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """``target * (log target - input)`` for log-probabilities ``input``; ``batchmean``
    divides the sum by the batch size."""
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x, t = _t(input, "kl_div"), _t(target, "kl_div", "target")
    if log_target:
        loss = elementwise.mul(elementwise.exp(t), elementwise.sub(t, x))
    else:
        # PyTorch's xlogy(target, target) - target * input: 0 where the target is 0 (its gradient
        # there is NaN, as PyTorch's), NaN for negative targets
        xlogx = elementwise.where(elementwise.eq(t, 0), creation.zeros((), dtype=t.dtype), elementwise.mul(t, elementwise.log(t)))
        loss = elementwise.sub(xlogx, elementwise.mul(t, x))
    if reduction == "batchmean":
        return elementwise.div(reduction_ops.sum(loss), x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction)


def _same_ndim(op: str, **tensors: Tensor) -> None:
    if len({t.ndim for t in tensors.values()}) > 1:
        sizes = ", ".join(f"{name}: {list(t.shape)}" for name, t in tensors.items())
        raise ShapeError(f"{op}: all input tensors should have the same number of dims, but got "
                         f"sizes {sizes}")


@_amp.policy("fp32")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of a Poisson ``target`` with rate ``exp(input)``
    (``log_input``) or ``input``; ``full`` adds Stirling's approximation of ``log(target!)``
    where the target is above 1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, t = _t(input, "poisson_nll_loss"), _t(target, "poisson_nll_loss", "target")
    if log_input:
        loss = elementwise.sub(elementwise.exp(x), elementwise.mul(t, x))
    else:
        loss = elementwise.sub(x, elementwise.mul(t, elementwise.log(elementwise.add(x, eps))))
    if full:
        # computed for every target and masked, as PyTorch's: the target's gradient is NaN at 0
        stirling = elementwise.add(elementwise.sub(elementwise.mul(t, elementwise.log(t)), t), elementwise.mul(elementwise.log(elementwise.mul(t, 2 * math.pi)), 0.5))
        loss = elementwise.add(loss, elementwise.where(elementwise.gt(t, 1), stirling, creation.zeros((), dtype=stirling.dtype)))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of ``target`` under a Gaussian of mean ``input`` and variance
    ``var`` (one per element, or one short of the input's dims or with a single size-1 dim for
    a shared variance). ``var`` is clamped at ``eps`` for the value; its gradient passes
    through the clamp, as PyTorch's does."""
    op = "gaussian_nll_loss"
    x, t = _t(input, op), _t(target, op, "target")
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries")
        v = elementwise.mul(creation.ones_like(x), float(var))
    else:
        v = _t(var, op, "var")
        if _is_concrete(v) and v.numel() and bool(reduction_ops.any(elementwise.lt(v, 0))):
            raise ValueError(f"{op}: var has negative entry/entries")
    if tuple(v.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(v.shape):
            v = shape_ops.unsqueeze(v, -1)
        elif not (x.ndim == v.ndim
                  and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1):
            raise ValueError(f"{op}: var is of incorrect size: {list(v.shape)} for input of size "
                             f"{list(x.shape)} (expected the input's size, the input's size without "
                             f"its last dim, or one size-1 dim in place of the input's)")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    v = elementwise.add(v, elementwise.sub(elementwise.clamp(v, min=eps), v).detach())  # clamped value, identity gradient
    d = elementwise.sub(x, t)
    loss = elementwise.mul(elementwise.add(elementwise.log(v), elementwise.div(elementwise.mul(d, d), v)), 0.5)
    if full:
        loss = elementwise.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


@_amp.policy("fp32")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)`` for targets of 1 or -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "margin_ranking_loss"
    a, b, y = _t(input1, op, "input1"), _t(input2, op, "input2"), _t(target, op, "target")
    _same_ndim(op, input1=a, input2=b, target=y)
    loss = elementwise.relu(elementwise.add(elementwise.mul(elementwise.neg(y), elementwise.sub(a, b)), margin))
    return _reduce(loss, reduction)


@_amp.policy("fp32")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``input`` where the target is 1, ``max(0, margin - input)`` where it is -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _t(input, "hinge_embedding_loss"), _t(target, "hinge_embedding_loss", "target")
    zero = creation.zeros((), dtype=x.dtype)
    below = elementwise.where(elementwise.ne(y, 1), elementwise.relu(elementwise.sub(margin, x)), zero)
    above = elementwise.where(elementwise.ne(y, -1), x, zero)
    return _reduce(elementwise.add(below, above), reduction)


@_amp.policy("fp32")
def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))`` for targets of 1 or -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _t(input, "soft_margin_loss"), _t(target, "soft_margin_loss", "target")
    return _reduce(elementwise.neg(logsigmoid(elementwise.mul(y, x))), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Binary cross entropy of ``sigmoid(input)`` against 0/1 ``target``, averaged over the
    classes (the last dim), optionally weighted per class."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "multilabel_soft_margin_loss"
    x, y = _t(input, op), _t(target, op, "target")
    if x.ndim == 0:
        raise ShapeError(f"{op}: expected an input with a class dim (1-D or more), got a 0-d input")
    loss = elementwise.neg(elementwise.add(elementwise.mul(y, logsigmoid(x)), elementwise.mul(elementwise.sub(1, y), logsigmoid(elementwise.neg(x)))))
    if weight is not None:
        loss = elementwise.mul(loss, _t(weight, op, "weight"))
    loss = elementwise.div(reduction_ops.sum(loss, x.ndim - 1), x.shape[-1])
    return _reduce(loss, reduction)


_COSINE_EPS = 1e-12


@_amp.policy("fp32")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(input1, input2)`` where the target is 1, ``max(0, cos - margin)`` where it is
    -1; the cosine is taken along the last dim of 1-D (unbatched) or 2-D inputs."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "cosine_embedding_loss"
    a, b, y = _t(input1, op, "input1"), _t(input2, op, "input2"), _t(target, op, "target")
    if y.ndim > 1:
        raise ShapeError(f"{op}: 0-D or 1-D target tensor expected, multi-target not supported; "
                         f"got target of size {list(y.shape)}")
    if a.ndim != b.ndim or a.ndim != y.ndim + 1:
        raise ShapeError(f"{op}: expected 1-D inputs with a 0-D target or 2-D inputs with a 1-D "
                         f"target, got input1 {list(a.shape)}, input2 {list(b.shape)} and target "
                         f"{list(y.shape)}")
    dim = a.ndim - 1
    prod = reduction_ops.sum(elementwise.mul(a, b), dim)
    mag = elementwise.mul(elementwise.add(reduction_ops.sum(elementwise.mul(a, a), dim), _COSINE_EPS), elementwise.add(reduction_ops.sum(elementwise.mul(b, b), dim), _COSINE_EPS))
    cos = elementwise.div(prod, elementwise.sqrt(mag))
    zero = creation.zeros((), dtype=cos.dtype)
    pos = elementwise.where(elementwise.eq(y, 1), elementwise.sub(1, cos), zero)
    neg = elementwise.where(elementwise.eq(y, -1), elementwise.relu(elementwise.sub(cos, margin)), zero)
    return _reduce(elementwise.add(pos, neg), reduction)


def _margin_inputs(op: str, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, bool]:
    """The (N, C) input and its int64 target of a multi-class margin loss, and whether the
    input was unbatched (0-d or 1-D)."""
    if x.ndim > 2 or (x.ndim == 2 and x.shape[1] == 0) or (x.ndim == 1 and x.shape[0] == 0):
        raise ShapeError(f"{op}: expected a non-empty vector or matrix with optional 0-dim batch "
                         f"size, but got input of size {list(x.shape)}")
    if y.dtype is not dt.int64:
        raise DTypeError(f"{op}: expected an int64 (Long) target, got {y.dtype.name}")
    unbatched = x.ndim < 2
    x2 = shape_ops.reshape(x, (1, -1)) if unbatched else x
    return x2, y, unbatched


@_amp.policy("fp32")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` per sample
    (``p`` 1 or 2), times ``weight[y]`` when given."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "multi_margin_loss"
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got p={p}")
    x, y = _t(input, op), _t(target, op, "target")
    x2, y, unbatched = _margin_inputs(op, x, y)
    n, c = x2.shape
    expected = [] if unbatched else [n]
    if (unbatched and y.numel() != 1) or (not unbatched and list(y.shape) != expected):
        raise ShapeError(f"{op}: target tensor should be 1-D with size equal to the number of input "
                         f"samples (batch size). Expected target size {expected}, but got "
                         f"{list(y.shape)}. Input has shape {list(x.shape)}.")
    y1 = shape_ops.reshape(y, (n,))
    if _is_concrete(y1) and y1.numel() and bool(reduction_ops.any(elementwise.logical_or(elementwise.lt(y1, 0), elementwise.ge(y1, c)))):
        raise IndexError(f"{op}: target out of range (expected class indices in [0, {c}))")
    picked = indexing.gather(x2, 1, shape_ops.unsqueeze(y1, 1))  # (N, 1)
    terms = elementwise.relu(elementwise.add(elementwise.sub(x2, picked), margin))
    if p == 2:
        terms = elementwise.mul(terms, terms)
    if weight is not None:
        w = _t(weight, op, "weight")
        if w.ndim != 1 or w.shape[0] != c:
            raise ShapeError(f"{op}: inconsistent weight size, expected {c} but got {list(w.shape)}")
        terms = elementwise.mul(terms, shape_ops.unsqueeze(indexing.index_select(w, 0, y1), 1))
    own = elementwise.eq(shape_ops.unsqueeze(creation.arange(c, device=creation._device_like(x2, None)), 0), shape_ops.unsqueeze(y1, 1))
    terms = elementwise.where(own, creation.zeros((), dtype=terms.dtype), terms)
    loss = elementwise.div(reduction_ops.sum(terms, 1), c)
    if unbatched:
        loss = shape_ops.reshape(loss, ())
    return _reduce(loss, reduction)


@_amp.policy("fp32")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``target`` lists each sample's classes, ended by the first -1;
    ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C`` per sample."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "multilabel_margin_loss"
    x, y = _t(input, op), _t(target, op, "target")
    x2, y, unbatched = _margin_inputs(op, x, y)
    n, c = x2.shape
    if (y.numel() != 1 or y.ndim > 1) if x.ndim == 0 else tuple(y.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: inconsistent target size: {list(y.shape)} for input of size: "
                         f"{list(x.shape)}")
    y2 = shape_ops.reshape(y, (n, c))
    # the labels before the first -1 count
    valid = elementwise.eq(reduction_ops.cumsum(elementwise.cast(elementwise.eq(y2, -1), dt.int64), 1), 0)
    if _is_concrete(y2) and y2.numel():
        bad = elementwise.logical_and(valid, elementwise.logical_or(elementwise.lt(y2, 0), elementwise.ge(y2, c)))
        if bool(reduction_ops.any(bad)):
            raise IndexError(f"{op}: target is out of range (expected class indices in [0, {c}) "
                             f"or -1)")
    safe = elementwise.where(valid, y2, creation.zeros((), dtype=dt.int64))
    classes = creation.arange(c, device=creation._device_like(x2, None))
    # is_target[n, i]: class i is one of sample n's labels
    listed = elementwise.logical_and(shape_ops.unsqueeze(valid, 2), elementwise.eq(shape_ops.unsqueeze(safe, 2), classes))  # (N, K, C)
    is_target = reduction_ops.any(listed, 1)  # (N, C)
    picked = indexing.gather(x2, 1, safe)  # (N, K): x[y_k]
    hinge = elementwise.relu(elementwise.sub(1, elementwise.sub(shape_ops.unsqueeze(picked, 2), shape_ops.unsqueeze(x2, 1))))  # (N, K, C)
    keep = elementwise.logical_and(shape_ops.unsqueeze(valid, 2), shape_ops.unsqueeze(elementwise.logical_not(is_target), 1))
    hinge = elementwise.where(keep, hinge, creation.zeros((), dtype=hinge.dtype))
    loss = elementwise.div(reduction_ops.sum(hinge, (1, 2)), c)
    if unbatched:
        loss = shape_ops.reshape(loss, ())
    return _reduce(loss, reduction)


@_amp.policy("fp32")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``p``-norm pairwise distance (``eps`` added to the difference); ``swap`` uses
    ``min(d(a, n), d(p, n))`` as the negative distance."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "triplet_margin_loss"
    a, pos, neg = _t(anchor, op, "anchor"), _t(positive, op, "positive"), _t(negative, op, "negative")
    _triplet_dims(op, a, pos, neg)

    def distance(u: Tensor, v: Tensor) -> Tensor:
        return pairwise_distance(u, v, p, eps)

    return _triplet(distance, a, pos, neg, margin, swap, reduction)


def _triplet_dims(op: str, a: Tensor, p: Tensor, n: Tensor) -> None:
    if not a.ndim == p.ndim == n.ndim:
        raise ShapeError(f"{op}: the anchor, positive, and negative tensors are expected to have "
                         f"the same number of dimensions, but got: anchor {a.ndim}D, positive "
                         f"{p.ndim}D, and negative {n.ndim}D inputs")


def _triplet(distance: Any, a: Tensor, p: Tensor, n: Tensor, margin: float, swap: bool,
             reduction: str) -> Tensor:
    d_pos, d_neg = distance(a, p), distance(a, n)
    if swap:
        d_neg = elementwise.minimum(d_neg, distance(p, n))
    return _reduce(elementwise.relu(elementwise.sub(elementwise.add(d_pos, margin), d_neg)), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function(x1, x2)`` (default
    :func:`pairwise_distance`); ``margin`` must be positive."""
    op = "triplet_margin_with_distance_loss"
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    a, pos, neg = _t(anchor, op, "anchor"), _t(positive, op, "positive"), _t(negative, op, "negative")
    _triplet_dims(op, a, pos, neg)
    return _triplet(distance_function or pairwise_distance, a, pos, neg, margin, swap, reduction)


#: stands for log(0) in the CTC recursion: finite, so no inf - inf = NaN reaches a gradient
_CTC_NEG = -1e30


def _lengths(op: str, value: Any, name: str, batch: int, device: Any) -> Tensor:
    lengths = value if isinstance(value, Tensor) else creation.tensor(value, dtype=dt.int64)
    if lengths.dtype.is_floating_point or lengths.dtype.is_bool:
        raise DTypeError(f"{op}: {name} must be integers, got {lengths.dtype.name}")
    lengths = shape_ops.reshape(elementwise.cast(lengths, dt.int64), (-1,))
    if lengths.shape[0] != batch:
        raise ShapeError(f"{op}: expected {name} to have {batch} values (one per batch element), "
                         f"got {lengths.shape[0]}")
    return lengths


@_amp.policy("fp32")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: ``-log`` of the total probability of the
    alignments of each target with its input, from ``log_probs`` (T, N, C) or unbatched (T, C).
    ``targets`` are padded (N, S) or concatenated (sum of ``target_lengths``); ``mean`` divides
    each loss by its target length, then averages. The forward recursion runs as tensor ops,
    one step per time step."""
    op = "ctc_loss"
    _check_reduction(reduction)
    lp = _t(log_probs, op, "log_probs")
    if lp.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"{op}: expected float32 or float64 log_probs, got {lp.dtype.name}")
    tgt = _t(targets, op, "targets")
    if tgt.dtype.is_floating_point or tgt.dtype.is_bool:
        raise DTypeError(f"{op}: targets must be class indices (integers), got {tgt.dtype.name}")
    unbatched = lp.ndim == 2
    if lp.ndim not in (2, 3):
        raise ShapeError(f"{op}: expected log_probs of shape (T, N, C) or (T, C), got "
                         f"{list(lp.shape)}")
    if unbatched:
        lp = shape_ops.unsqueeze(lp, 1)
        if tgt.ndim != 1:
            raise ShapeError(f"{op}: unbatched log_probs (T, C) take 1-D targets, got "
                             f"{list(tgt.shape)}")
        tgt = shape_ops.unsqueeze(tgt, 0)
    steps, batch, classes = lp.shape
    if not 0 <= blank < classes:
        raise ValueError(f"{op}: blank must be in label range [0, {classes}), got {blank}")
    device = creation._device_like(lp, None)
    in_len = _lengths(op, input_lengths, "input_lengths", batch, device)
    tgt_len = _lengths(op, target_lengths, "target_lengths", batch, device)
    tgt = elementwise.cast(tgt, dt.int64)
    if tgt.ndim == 2:
        if tgt.shape[0] != batch:
            raise ShapeError(f"{op}: expected targets of {batch} rows, got {list(tgt.shape)}")
        padded = tgt
    elif tgt.ndim == 1:  # concatenated: row n starts at the sum of the earlier lengths
        width = tgt.shape[0]
        pos = creation.arange(width, device=device)
        start = elementwise.sub(reduction_ops.cumsum(tgt_len, 0), tgt_len)
        index = elementwise.add(shape_ops.unsqueeze(start, 1), shape_ops.unsqueeze(pos, 0))
        inside = elementwise.lt(shape_ops.unsqueeze(pos, 0), shape_ops.unsqueeze(tgt_len, 1))
        index = elementwise.where(inside, elementwise.clamp(index, 0, max(width - 1, 0)), creation.zeros((), dtype=dt.int64))
        padded = indexing.gather(shape_ops.expand(shape_ops.unsqueeze(tgt, 0), (batch, width)), 1, index) if width else \
            creation.zeros((batch, 0), dtype=dt.int64, device=device)
    else:
        raise ShapeError(f"{op}: expected padded (N, S) or concatenated 1-D targets, got "
                         f"{list(tgt.shape)}")
    width = padded.shape[1]
    if _is_concrete(in_len, tgt_len, padded):
        if bool(reduction_ops.any(elementwise.gt(in_len, steps))) or bool(reduction_ops.any(elementwise.lt(in_len, 0))):
            raise ValueError(f"{op}: expected input_lengths in [0, {steps}], got "
                             f"{in_len.tolist()}")
        if bool(reduction_ops.any(elementwise.gt(tgt_len, width))) or bool(reduction_ops.any(elementwise.lt(tgt_len, 0))):
            raise ValueError(f"{op}: expected target_lengths in [0, {width}] (the targets' "
                             f"length), got {tgt_len.tolist()}")
        used = elementwise.lt(shape_ops.unsqueeze(creation.arange(width), 0), shape_ops.unsqueeze(tgt_len, 1))
        labels = indexing.masked_select(padded, used)
        if labels.numel() and bool(reduction_ops.any(elementwise.logical_or(elementwise.lt(labels, 0), elementwise.ge(labels, classes)))):
            raise IndexError(f"{op}: target labels must be in [0, {classes})")
    # the extended target: blank, y1, blank, y2, ..., blank (length 2S + 1)
    blanks = creation.full((batch, width), blank, dtype=dt.int64, device=device)
    ext = shape_ops.reshape(shape_ops.stack([blanks, padded], 2), (batch, 2 * width))
    ext = shape_ops.cat([ext, creation.full((batch, 1), blank, dtype=dt.int64, device=device)], 1)
    length = 2 * width + 1
    ext_before = shape_ops.cat([creation.full((batch, 2), -1, dtype=dt.int64, device=device),
                        shape_ops.narrow(ext, 1, 0, length - 2)], 1)
    skip = elementwise.logical_and(elementwise.ne(ext, blank), elementwise.ne(ext, ext_before))  # s - 2 -> s allowed
    work = lp.dtype
    neg = creation.full((), _CTC_NEG, dtype=work, device=device)
    # log-probabilities of each extended label at each step: (T, N, 2S + 1)
    emit = indexing.gather(lp, 2, shape_ops.expand(shape_ops.unsqueeze(ext, 0), (steps, batch, length)))
    emit = elementwise.maximum(emit, neg)
    pos = shape_ops.unsqueeze(creation.arange(length, device=device), 0)
    if steps:
        alpha = elementwise.where(elementwise.lt(pos, 2), shape_ops.select(emit, 0, 0), neg)
    else:
        alpha = elementwise.where(elementwise.eq(pos, 0), creation.zeros((), dtype=work), neg)
    pad1 = creation.full((batch, 1), _CTC_NEG, dtype=work, device=device)
    pad2 = creation.full((batch, 2), _CTC_NEG, dtype=work, device=device)
    for t in range(1, steps):
        one = shape_ops.cat([pad1, shape_ops.narrow(alpha, 1, 0, length - 1)], 1)
        two = elementwise.where(skip, shape_ops.cat([pad2, shape_ops.narrow(alpha, 1, 0, length - 2)], 1), neg) \
            if length > 2 else creation.full((batch, length), _CTC_NEG, dtype=work, device=device)
        step = elementwise.add(reduction_ops.logsumexp(shape_ops.stack([alpha, one, two]), 0), shape_ops.select(emit, 0, t))
        alpha = elementwise.where(shape_ops.unsqueeze(elementwise.gt(in_len, t), 1), step, alpha)
    last = elementwise.mul(tgt_len, 2)  # the final blank; the final label is one before it
    end_blank = shape_ops.squeeze(indexing.gather(alpha, 1, shape_ops.unsqueeze(last, 1)), 1)
    end_label = shape_ops.squeeze(indexing.gather(alpha, 1, shape_ops.unsqueeze(elementwise.clamp(elementwise.sub(last, 1), 0), 1)), 1)
    end_label = elementwise.where(elementwise.gt(tgt_len, 0), end_label, neg)
    nll = elementwise.neg(reduction_ops.logsumexp(shape_ops.stack([end_blank, end_label]), 0))
    if steps:  # no input steps: only the empty target is possible
        nll = elementwise.where(elementwise.eq(in_len, 0), elementwise.where(elementwise.eq(tgt_len, 0), creation.zeros((), dtype=work), -neg), nll)
    impossible = elementwise.ge(nll, -0.5 * _CTC_NEG)
    inf = creation.full((), math.inf, dtype=work, device=device)
    nll = elementwise.where(impossible, creation.zeros((), dtype=work) if zero_infinity else inf, nll)
    if reduction == "mean":
        return reduction_ops.mean(elementwise.div(nll, elementwise.cast(elementwise.clamp(tgt_len, 1), work)))
    if reduction == "sum":
        return reduction_ops.sum(nll)
    return shape_ops.reshape(nll, ()) if unbatched else nll

