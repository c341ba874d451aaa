"""Loss modules: thin wrappers over the functional losses."""

from __future__ import annotations

import warnings
from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss2d", "PoissonNLLLoss",
           "GaussianNLLLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MultiMarginLoss",
           "MultiLabelMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"]


class _Loss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """``F.cross_entropy`` as a module."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """``F.nll_loss`` as a module."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    def forward(self, input: Any, target: Any) -> Any:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Any:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class NLLLoss2d(NLLLoss):
    """The former name of :class:`NLLLoss` for image-shaped inputs; the same loss (deprecated,
    with a ``FutureWarning``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        warnings.warn("NLLLoss2d has been deprecated. Please use NLLLoss instead as a drop-in "
                      "replacement.", FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class PoissonNLLLoss(_Loss):
    """``F.poisson_nll_loss`` as a module."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average: Any = None,
                 eps: float = 1e-8, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Any, target: Any) -> Any:
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``F.gaussian_nll_loss`` as a module: ``forward(input, target, var)``."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Any, target: Any, var: Any) -> Any:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class _MarginLoss(_Loss):
    def __init__(self, margin: float, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class MarginRankingLoss(_MarginLoss):
    """``F.margin_ranking_loss`` as a module: ``forward(input1, input2, target)``."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """``F.hinge_embedding_loss`` as a module."""

    def __init__(self, margin: float = 1.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input: Any, target: Any) -> Any:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``F.soft_margin_loss`` as a module."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``F.multilabel_soft_margin_loss`` as a module."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """``F.cosine_embedding_loss`` as a module: ``forward(input1, input2, target)``."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """``F.multi_margin_loss`` as a module."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Any = None, size_average: Any = None,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got p={p}")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.ndim}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Any, target: Any) -> Any:
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """``F.multilabel_margin_loss`` as a module."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    """``F.triplet_margin_loss`` as a module: ``forward(anchor, positive, negative)``."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``F.triplet_margin_with_distance_loss`` as a module; ``distance_function`` defaults
    to :func:`tensorplay.nn.functional.pairwise_distance`."""

    def __init__(self, *, distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                             f"got {margin} instead")
        self.distance_function = distance_function if distance_function is not None else \
            F.pairwise_distance
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap,
                                                   reduction=self.reduction)


class CTCLoss(_Loss):
    """``F.ctc_loss`` as a module: ``forward(log_probs, targets, input_lengths, target_lengths)``."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
