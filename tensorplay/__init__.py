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
from .ops import _public

# every tp.<op>: the names declared with @public in tensorplay/ops/*.py and nn/functional.py
globals().update(_public.top_level())
del _public

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
