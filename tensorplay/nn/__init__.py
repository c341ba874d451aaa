"""``tensorplay.nn``: modules, parameters, functional ops and initializers with
PyTorch's names and behaviour."""

from . import functional, init, modules, parameter, utils
from .modules import (
    CELU, ELU, GELU, GLU, SELU, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss,
    Bilinear, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GroupNorm, Hardsigmoid,
    Hardswish, Hardtanh, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear,
    LogSigmoid, LogSoftmax, MaxPool2d, Mish, Module, ModuleDict, ModuleList, MSELoss,
    MultiheadAttention, NLLLoss, ParameterDict, ParameterList, ReLU, ReLU6, RMSNorm, Sequential,
    SiLU, Sigmoid, SmoothL1Loss, Softmax, Softmin, Softplus, Softsign, Tanh, Tanhshrink,
    Threshold, Unflatten,
)
from .parameter import Buffer, Parameter

__all__ = ["functional", "init", "modules", "parameter", "utils", "Parameter", "Buffer"] + modules.__all__
