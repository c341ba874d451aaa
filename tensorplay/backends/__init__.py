"""``tp.backends``: the flags PyTorch scripts set for cuDNN, CUDA matmuls and MPS.

tensorplay compiles through IREE and uses neither cuDNN nor Apple's MPS, so the flags are
accepted and kept (scripts can set and read them) but change nothing; ``mps.is_available()``
is False (docs/devices.md).
"""

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
