"""tensorplay: a PyTorch-style tensor library with an MLIR/IREE compiler.

>>> import tensorplay as tp
>>> (tp.ones(2, 3) * 2).sum()
tensor(12.)
"""

from __future__ import annotations

import builtins

from . import dialects  # noqa: F401  (the op registry; also tensorplay.dialects)
from . import autograd, nn, optim
from . import amp
from .amp import autocast, get_autocast_dtype, is_autocast_enabled, set_autocast_dtype
from . import utils
from . import distributions  # torch.distributions' common part (docs/distributions.md)
from . import accelerator, backends, cuda  # device probes as PyTorch scripts ask them (docs/runner.md)
from . import testing  # assert_close
from . import func  # scan: a loop kept as one op when compiled (docs/recurrent.md)
from . import profiler  # torch.profiler's profile, record_function, key_averages (docs/debugging.md)
from . import safetensors  # save_file/load_file as safetensors.torch has them (docs/training.md)
from .serialization import load, save
from ._device import device
from ._grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ._printing import set_printoptions
from ._tensor import Size, Tensor
from ._tensor import (  # the legacy typed constructors
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .dialects.tp.dtypes import (
    DType as dtype,
    bfloat16,
    bool_ as bool,  # noqa: A001 - PyTorch's name
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from .dialects.tp.errors import DimError, DTypeError, OpError, ShapeError
from .ops.conv import conv1d, conv2d, max_pool2d
# the torch.* forms of functional ops whose signature is nn.functional's
from .nn.functional import (  # noqa: E402
    adaptive_avg_pool1d, avg_pool1d, celu, conv3d, conv_transpose1d, conv_transpose2d,
    conv_transpose3d, cosine_similarity, hardshrink, max_pool1d, max_pool3d, pairwise_distance,
    pixel_shuffle, pixel_unshuffle, prelu, rrelu, selu, threshold,
)
from .ops.indexing import (
    argwhere,
    gather,
    index_put,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
    take_along_dim,
    tril,
    triu,
    unique,
)
from .ops.counting import bincount, histc
from .ops.linalg import bmm, cdist, dot, einsum, ger, inner, matmul, mm, mv, outer
from .ops.creation import (
    arange,
    as_tensor,
    asarray,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    scalar_tensor,
    tensor,
    tril_indices,
    triu_indices,
    zeros,
    zeros_like,
)
from .ops.elementwise import (
    abs,  # noqa: A004
    absolute,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    allclose,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    clone,
    cos,
    cosh,
    div,
    divide,
    eq,
    equal,
    erf,
    erfinv,
    exp,
    exp2,
    expm1,
    fix,
    float_power,
    floor,
    floor_divide,
    fmod,
    ge,
    greater,
    greater_equal,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    lerp,
    less,
    less_equal,
    log,
    log10,
    log1p,
    log2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    multiply,
    nan_to_num,
    ne,
    neg,
    negative,
    not_equal,
    pow,  # noqa: A004
    reciprocal,
    relu,
    remainder,
    round,  # noqa: A004
    rsqrt,
    rsub,
    sigmoid,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    sub,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
    where,
)
from .ops.reduction import (
    all,  # noqa: A004
    amax,
    amin,
    any,  # noqa: A004
    argmax,
    argmin,
    cumprod,
    cumsum,
    logcumsumexp,
    layer_norm,
    log_softmax,
    logsumexp,
    max,  # noqa: A004
    mean,
    min,  # noqa: A004
    norm,
    prod,
    softmax,
    std,
    sum,  # noqa: A004
    var,
)
from .ops.sorting import (
    argsort,
    bucketize,
    kthvalue,
    median,
    msort,
    nanmedian,
    searchsorted,
    sort,
    topk,
)
from .ops.shape import (
    as_strided,
    diag,
    diag_embed,
    diagonal,
    diff,
    meshgrid,
    repeat_interleave,
    roll,
    rot90,
    select,
    broadcast_shapes,
    broadcast_tensors,
    broadcast_to,
    cat,
    chunk,
    concat,
    concatenate,
    flatten,
    flip,
    moveaxis,
    movedim,
    narrow,
    permute,
    ravel,
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    swapdims,
    t,
    tile,
    transpose,
    unbind,
    unflatten,
    unsqueeze,
)
from .ops.random import (
    Generator,
    bernoulli,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    multinomial,
    normal,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    seed,
    set_rng_state,
)

long = int64
int = int32  # noqa: A001
float = float32  # noqa: A001
double = float64
half = float16
short = int16

__version__ = "0.1.0"


def is_tensor(obj: object) -> builtins.bool:
    """True when ``obj`` is a tensorplay Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins.bool:
    return input.dtype.is_floating_point


def numel(input: Tensor) -> builtins.int:
    return input.numel()


_LAZY = ("compiler", "export", "runtime")


def __getattr__(name: str):
    # tp.compiler, tp.export and tp.runtime load on first use: eager code does not pay for the
    # compiler, and a deployment that imports tensorplay.runtime never loads the capture machinery
    import importlib

    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    if name == "compile":  # tp.compile, as torch.compile
        return importlib.import_module(".compiler", __name__).compile
    raise AttributeError(f"module 'tensorplay' has no attribute {name!r}")
