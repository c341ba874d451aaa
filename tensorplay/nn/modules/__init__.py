"""Built-in modules."""

from .activation import (
    CELU, ELU, GELU, GLU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, MultiheadAttention, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softmin, Softplus,
    Softsign, Tanh, Tanhshrink, Threshold,
)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear
from .loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .pooling import AvgPool2d, MaxPool2d
from .sparse import Embedding

__all__ = [
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Identity", "Linear", "Bilinear", "Conv2d", "MaxPool2d", "AvgPool2d", "LayerNorm",
    "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "Embedding", "Dropout", "Flatten",
    "Unflatten", "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SELU",
    "CELU", "Softplus", "Softsign", "LogSigmoid", "Hardtanh", "Hardsigmoid", "Hardswish", "Mish",
    "Tanhshrink", "Threshold", "GLU", "Softmax", "LogSoftmax", "Softmin", "MultiheadAttention",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss",
]
