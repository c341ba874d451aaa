"""Built-in modules."""

from .activation import (
    CELU, ELU, GELU, GLU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, MultiheadAttention, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softmin, Softplus,
    Softsign, Tanh, Tanhshrink, Threshold,
)
from .activation import Hardshrink, PReLU, RReLU, Softmax2d, Softshrink
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear
from .loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from .loss import (
    CosineEmbeddingLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss2d, PoissonNLLLoss,
    SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .module import Module
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
)
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .pooling import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, MaxPool1d, MaxPool2d,
)
from .pooling import AdaptiveAvgPool3d, AvgPool3d, MaxPool3d
from .sparse import Embedding, EmbeddingBag
from .transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Identity", "Linear", "Bilinear", "Conv2d", "MaxPool2d", "AvgPool2d", "LayerNorm",
    "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "Embedding", "Dropout", "Flatten",
    "Unflatten", "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SELU",
    "CELU", "Softplus", "Softsign", "LogSigmoid", "Hardtanh", "Hardsigmoid", "Hardswish", "Mish",
    "Tanhshrink", "Threshold", "GLU", "Softmax", "LogSoftmax", "Softmin", "MultiheadAttention",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss",
    "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Upsample",
    "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "Dropout1d",
    "Dropout2d", "InstanceNorm1d", "InstanceNorm2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
    "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
    "CircularPad2d", "CircularPad3d", "CosineSimilarity", "PairwiseDistance",
    "Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "BatchNorm3d",
    "InstanceNorm3d", "Dropout3d",
    "EmbeddingBag", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
    "Hardshrink", "Softshrink", "PReLU", "RReLU", "Softmax2d", "NLLLoss2d", "PoissonNLLLoss",
    "GaussianNLLLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
    "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
    "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
]
