"""``tensorplay.nn``: modules, parameters, functional ops and initializers with
PyTorch's names and behaviour."""

from . import functional, init, modules, parallel, parameter, utils
from .modules import (
    CELU, ELU, GELU, GLU, SELU, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss,
    Bilinear, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GroupNorm, Hardsigmoid,
    Hardswish, Hardtanh, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear,
    LogSigmoid, LogSoftmax, MaxPool2d, Mish, Module, ModuleDict, ModuleList, MSELoss,
    MultiheadAttention, NLLLoss, ParameterDict, ParameterList, ReLU, ReLU6, RMSNorm, Sequential,
    SiLU, Sigmoid, SmoothL1Loss, Softmax, Softmin, Softplus, Softsign, Tanh, Tanhshrink,
    Threshold, Unflatten,
)
from .modules import (
    EmbeddingBag, Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer,
)
from .modules import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    Conv1d, ConvTranspose1d, ConvTranspose2d, CosineSimilarity, Dropout1d, Dropout2d,
    InstanceNorm1d, InstanceNorm2d, MaxPool1d, PairwiseDistance, PixelShuffle, PixelUnshuffle,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from .modules import (
    CosineEmbeddingLoss, CTCLoss, GaussianNLLLoss, Hardshrink, HingeEmbeddingLoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss2d, PoissonNLLLoss,
    PReLU, RReLU, Softmax2d, Softshrink, SoftMarginLoss, TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .modules import (
    AdaptiveAvgPool3d, AvgPool3d, BatchNorm3d, Conv3d, ConvTranspose3d, Dropout3d, InstanceNorm3d,
    MaxPool3d,
)
from .modules import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .parameter import Buffer, Parameter

__all__ = ["functional", "init", "modules", "parameter", "utils", "Parameter", "Buffer"] + modules.__all__
