"""``kl_divergence(p, q)``: the Kullback-Leibler divergence KL(p || q) of two distributions,
found in a registry of implementations by the pair of types (``register_kl``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .._tensor import Tensor
from ..nn import functional as F
from ..ops.elementwise import where
from .continuous import Exponential, Gumbel, LogNormal, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .distribution import Distribution
from .independent import Independent
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict[tuple[type, type], Callable] = {}
_KL_MEMO: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator registering ``fn(p, q)`` as KL(p || q) for ``p``, ``q`` of these types (or
    subclasses, the most specific registration winning)."""
    for t in (type_p, type_q):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"register_kl: expected subclasses of Distribution, got {t!r}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMO.clear()
        return fn

    return decorator


def _dispatch(type_p: type, type_q: type) -> Callable | None:
    best, best_rank = None, None
    for (super_p, super_q), fn in _KL_REGISTRY.items():
        if issubclass(type_p, super_p) and issubclass(type_q, super_q):
            rank = (type_p.__mro__.index(super_p), type_q.__mro__.index(super_q))
            if best_rank is None or sum(rank) < sum(best_rank) or (sum(rank) == sum(best_rank) and rank < best_rank):
                best, best_rank = fn, rank
    return best


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), batched over the two distributions' (broadcast) batch shapes."""
    if not (isinstance(p, Distribution) and isinstance(q, Distribution)):
        raise TypeError(f"kl_divergence: expected two Distributions, got {type(p).__name__} and "
                        f"{type(q).__name__}")
    key = (type(p), type(q))
    if key not in _KL_MEMO:
        _KL_MEMO[key] = _dispatch(*key)
    fn = _KL_MEMO[key]
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p of type {type(p).__name__} and q of type "
                                  f"{type(q).__name__}")
    return fn(p, q)


def _inf_where(mask: Any, value: Tensor) -> Tensor:
    return where(mask, math.inf, value)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    # p log(p/q) + (1-p) log((1-p)/(1-q)), written with log-sigmoids of the logits
    ones = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    ones = where(p.probs == 0, 0.0, _inf_where(q.probs == 0, ones))
    zeros = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    zeros = where(p.probs == 1, 0.0, _inf_where(q.probs == 1, zeros))
    return ones + zeros


@register_kl(Categorical, Categorical)
def _kl_categorical(p: Categorical, q: Categorical) -> Tensor:
    terms = p.probs * (p.logits - q.logits)
    terms = where(p.probs == 0, 0.0, _inf_where(q.probs == 0, terms))
    return terms.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_one_hot_categorical(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical(p._categorical, q._categorical)


@register_kl(Normal, Normal)
def _kl_normal(p: Normal, q: Normal) -> Tensor:
    ratio = (p.scale / q.scale).pow(2)
    shift = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (ratio + shift - 1 - ratio.log())


@register_kl(LogNormal, LogNormal)
def _kl_log_normal(p: LogNormal, q: LogNormal) -> Tensor:
    return _kl_normal(p.base_dist, q.base_dist)  # exp is one-to-one: the divergence is unchanged


@register_kl(Uniform, Uniform)
def _kl_uniform(p: Uniform, q: Uniform) -> Tensor:
    value = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), value)


@register_kl(Exponential, Exponential)
def _kl_exponential(p: Exponential, q: Exponential) -> Tensor:
    ratio = q.rate / p.rate
    return -ratio.log() + ratio - 1


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    # log(sqrt(2 pi) sigma / w) + (w^2 / 12 + (midpoint - mu)^2) / (2 sigma^2), w = high - low
    width = p.high - p.low
    log_term = (math.sqrt(2 * math.pi) * q.scale / width).log()
    spread = width.pow(2) / 12
    offset = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return log_term + 0.5 * (spread + offset) / q.scale.pow(2)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Normal, q: Gumbel) -> Tensor:
    # with a = mu / beta, b = loc / beta, s2 = (sigma / beta)^2:
    # -log(s2) / 2 + (a - b) + exp(b - a + s2 / 2) - (1 + log(2 pi)) / 2
    a = p.loc / q.scale
    b = q.loc / q.scale
    s2 = (p.scale / q.scale).pow(2)
    return -(s2.log() * 0.5) + (a - b) + (-a + 0.5 * s2 + b).exp() - 0.5 * (1 + math.log(2 * math.pi))


@register_kl(Independent, Independent)
def _kl_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise ValueError("kl_divergence: Independent distributions with different reinterpreted_batch_ndims "
                         f"({p.reinterpreted_batch_ndims} and {q.reinterpreted_batch_ndims})")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
