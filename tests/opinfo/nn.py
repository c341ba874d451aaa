"""``nn.functional`` cases: linear, embedding, one_hot, dropout, scaled dot-product
attention, losses, normalization layers and the composed activations."""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tests.opinfo import ErrorCase, OpInfo, Sample, make_arg

_erf = np.vectorize(math.erf, otypes=[np.float64])

#: looser bounds for ops that chain several roundings in half precision
def _f(a):
    return np.asarray(a, dtype=np.float64)


def _softmax(x, axis=-1):
    x = _f(x)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    x = _f(x)
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def F(lib):
    return lib.nn.functional


# --- linear, embedding, one_hot -----------------------------------------------------------------

def _linear_samples(rng, d):
    return [
        Sample((make_arg(rng, (2, 3, 4), d), make_arg(rng, (5, 4), d), make_arg(rng, (5,), d)),
               desc="3-d input with bias"),
        Sample((make_arg(rng, (6, 4), d), make_arg(rng, (3, 4), d), None), desc="no bias"),
        Sample((make_arg(rng, (4,), d), make_arg(rng, (2, 4), d), make_arg(rng, (2,), d)),
               desc="1-d input"),
        Sample((make_arg(rng, (0, 4), d), make_arg(rng, (3, 4), d), make_arg(rng, (3,), d)),
               desc="empty batch"),
    ]


def _linear_ref(x, w, b):
    out = _f(x) @ _f(w).T
    return out if b is None else out + _f(b)


def _embedding_samples(rng, d):
    idx64 = rng.integers(0, 7, size=(2, 3)).astype(np.int64)
    idx32 = rng.integers(0, 7, size=(5,)).astype(np.int32)
    return [
        Sample((idx64, make_arg(rng, (7, 4), d)), desc="int64 indices"),
        Sample((idx32, make_arg(rng, (7, 4), d)), desc="int32 indices"),
        Sample((np.array(3, np.int64), make_arg(rng, (7, 4), d)), desc="0-d index"),
        Sample((idx64, make_arg(rng, (7, 4), d)), {"padding_idx": 2}, desc="padding_idx"),
        Sample((idx64, make_arg(rng, (7, 4), d)), {"padding_idx": -1}, desc="negative padding_idx"),
    ]


def _embedding_ref(idx, w, padding_idx=None):
    return _f(w)[np.asarray(idx, np.int64)]


def _one_hot_samples(rng, d):
    return [
        Sample((rng.integers(0, 5, size=(2, 3)).astype(np.int64),), {"num_classes": 5},
               desc="explicit classes"),
        Sample((np.array([0, 3, 1], np.int64),), desc="inferred classes"),
        Sample((np.array(2, np.int64),), {"num_classes": 4}, desc="0-d"),
    ]


def _one_hot_ref(x, num_classes=-1):
    x = np.asarray(x)
    n = int(x.max()) + 1 if num_classes == -1 else num_classes
    return (x[..., None] == np.arange(n)).astype(np.int64)


# --- dropout ----------------------------------------------------------------------------------

def _dropout_samples(rng, d):
    x = make_arg(rng, (4, 5), d)
    return [
        Sample((x,), {"p": 0.3, "training": False}, desc="eval is identity"),
        Sample((x,), {"p": 0.0, "training": True}, desc="p=0 is identity"),
        Sample((x,), {"p": 1.0, "training": True}, desc="p=1 zeros"),
    ]


def _dropout_kept_or_zero(lib, x, p):
    """Each element of a training-mode dropout is 0 or ``x / (1 - p)``."""
    out = F(lib).dropout(x, p, training=True)
    scaled = x / (1 - p)
    return ((out == 0) | ((out - scaled).abs() <= 1e-2 * scaled.abs() + 1e-3)).all()


# --- attention ----------------------------------------------------------------------------------

def _sdpa_ref(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = _f(q), _f(k), _f(v)
    if enable_gqa and q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    length, source = q.shape[-2], k.shape[-2]
    s = (1 / math.sqrt(q.shape[-1])) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * s
    if is_causal:
        scores = np.where(np.tril(np.ones((length, source), bool)), scores, -np.inf)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        scores = np.where(m, scores, -np.inf) if m.dtype == np.bool_ else scores + _f(m)
    w = _softmax(scores)
    w = np.where(np.isneginf(scores).all(axis=-1, keepdims=True), 0.0, w)
    return w @ v


def _sdpa_samples(rng, d):
    b, h, lq, lk, e = 2, 3, 4, 5, 8
    q = make_arg(rng, (b, h, lq, e), d)
    k = make_arg(rng, (b, h, lk, e), d)
    v = make_arg(rng, (b, h, lk, 6), d)
    bool_mask = rng.random((lq, lk)) < 0.7
    bool_mask[:, 0] = True
    dead = bool_mask.copy()
    dead[1] = False
    float_mask = make_arg(rng, (b, 1, lq, lk), d)
    qs = make_arg(rng, (b, h, lk, e), d)
    return [
        Sample((q, k, v), desc="plain"),
        Sample((q, k, v, bool_mask), desc="bool mask (True attends)"),
        Sample((q, k, v, dead), desc="fully masked row gives zeros"),
        Sample((q, k, v, float_mask), desc="float mask added"),
        Sample((qs, k, v), {"is_causal": True}, desc="causal"),
        Sample((q, k, v), {"is_causal": True}, desc="causal, fewer queries than keys"),
        Sample((q, k, v), {"scale": 0.3}, desc="explicit scale"),
        Sample((make_arg(rng, (b, 6, lq, e), d), k, v), {"enable_gqa": True}, desc="grouped query"),
        Sample((make_arg(rng, (3, lq, e), d), make_arg(rng, (3, lk, e), d),
                make_arg(rng, (3, lk, e), d)), {"is_causal": True}, desc="3-d inputs"),
    ]


# --- losses --------------------------------------------------------------------------------------

def _ce_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    x = _f(x)
    cdim = 0 if x.ndim == 1 else 1
    c = x.shape[cdim]
    logp = _log_softmax(x, cdim)
    w = np.ones(c) if weight is None else _f(weight)
    wshape = [1] * x.ndim
    wshape[cdim] = c
    if np.asarray(t).dtype.kind not in "iu":
        t = _f(t) * (1 - label_smoothing) + label_smoothing / c
        loss = -(logp * t * w.reshape(wshape)).sum(axis=cdim)
        return loss.sum() / (x.size // c) if reduction == "mean" else _reduce(loss, reduction)
    t = np.asarray(t, np.int64)
    ignored = t == ignore_index
    safe = np.where(ignored, 0, t)
    picked = np.take_along_axis(logp, np.expand_dims(safe, cdim), cdim).squeeze(cdim)
    tw = np.where(ignored, 0.0, w[safe])
    nll = -picked * tw
    smooth = np.where(ignored, 0.0, -(logp * w.reshape(wshape)).sum(axis=cdim))
    if reduction == "mean":
        nll, smooth = nll.sum() / tw.sum(), smooth.sum() / tw.sum()
    elif reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    return (1 - label_smoothing) * nll + label_smoothing / c * smooth


def _ce_samples(rng, d):
    n, c = 6, 5
    x = make_arg(rng, (n, c), d)
    t = rng.integers(0, c, size=(n,)).astype(np.int64)
    t_ign = t.copy()
    t_ign[[1, 4]] = -100
    w = make_arg(rng, (c,), d, low=0.5, high=2)
    probs = _softmax(rng.standard_normal((n, c))).astype(d.np_dtype)
    return [
        Sample((x, t), desc="mean"),
        Sample((x, t), {"reduction": "sum"}, desc="sum"),
        Sample((x, t_ign), {"reduction": "none"}, desc="none, ignore_index"),
        Sample((x, t_ign), desc="mean over non-ignored"),
        Sample((x, t), {"ignore_index": 2}, desc="custom ignore_index"),
        Sample((x, t_ign, w), desc="class weights"),
        Sample((x, t_ign), {"label_smoothing": 0.2}, desc="label smoothing"),
        Sample((x, t_ign, w), {"label_smoothing": 0.1, "reduction": "sum"}, desc="smoothing, weights"),
        Sample((make_arg(rng, (2, c, 3, 2), d), rng.integers(0, c, size=(2, 3, 2)).astype(np.int64)),
               desc="K-dim targets"),
        Sample((make_arg(rng, (c,), d), np.array(3, np.int64)), desc="unbatched"),
        Sample((x, probs), desc="class probabilities"),
        Sample((x, probs, w), {"label_smoothing": 0.3}, desc="probabilities, weights, smoothing"),
    ]


def _nll_ref(x, t, weight=None, ignore_index=-100, reduction="mean"):
    x = _f(x)
    cdim = 0 if x.ndim == 1 else 1
    t = np.asarray(t, np.int64)
    w = np.ones(x.shape[cdim]) if weight is None else _f(weight)
    ignored = t == ignore_index
    safe = np.where(ignored, 0, t)
    picked = np.take_along_axis(x, np.expand_dims(safe, cdim), cdim).squeeze(cdim)
    tw = np.where(ignored, 0.0, w[safe])
    loss = -picked * tw
    if reduction == "mean":
        return loss.sum() / tw.sum()
    return _reduce(loss, reduction)


def _nll_samples(rng, d):
    n, c = 5, 4
    x = make_arg(rng, (n, c), d)
    t = rng.integers(0, c, size=(n,)).astype(np.int64)
    t[2] = -100
    return [
        Sample((x, t), desc="mean"),
        Sample((x, t), {"reduction": "none"}, desc="none"),
        Sample((x, t, make_arg(rng, (c,), d, low=0.5, high=2)), {"reduction": "sum"}, desc="weights"),
        Sample((make_arg(rng, (2, c, 3), d), rng.integers(0, c, size=(2, 3)).astype(np.int64)),
               desc="K-dim"),
    ]


def _pair_samples(low=None, high=None, target_low=None, target_high=None, kwargs=({},)):
    def samples(rng, d):
        out = []
        for kw in kwargs:
            for reduction in ("mean", "sum", "none"):
                x = make_arg(rng, (3, 4), d, low=low, high=high)
                y = make_arg(rng, (3, 4), d, low=target_low, high=target_high)
                out.append(Sample((x, y), dict(kw, reduction=reduction), desc=f"{reduction} {kw}"))
        return out

    return samples


def _smooth_l1_ref(x, y, reduction="mean", beta=1.0):
    d = np.abs(_f(x) - _f(y))
    loss = np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta) if beta > 0 else d
    return _reduce(loss, reduction)


def _huber_ref(x, y, reduction="mean", delta=1.0):
    d = np.abs(_f(x) - _f(y))
    return _reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def _bce_ref(p, t, reduction="mean"):
    p, t = _f(p), _f(t)
    return _reduce(-(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log1p(-p), -100)),
                   reduction)


def _bce_logits_ref(x, t, reduction="mean", pos_weight=None):
    x, t = _f(x), _f(t)
    log_sig = -np.logaddexp(0, -x)
    log_one_minus = -np.logaddexp(0, x)
    pw = 1.0 if pos_weight is None else _f(pos_weight)
    return _reduce(-(pw * t * log_sig + (1 - t) * log_one_minus), reduction)


def _kl_ref(x, t, reduction="mean", log_target=False):
    x, t = _f(x), _f(t)
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        loss = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0.0)
    if reduction == "batchmean":
        return loss.sum() / x.shape[0]
    return _reduce(loss, reduction)


def _kl_samples(rng, d):
    x = np.log(_softmax(rng.standard_normal((3, 4)))).astype(d.np_dtype)
    t = _softmax(rng.standard_normal((3, 4)))
    t[0, 1] = 0.0
    return [Sample((x, t.astype(d.np_dtype)), {"reduction": r}, desc=r)
            for r in ("batchmean", "sum", "none", "mean")] + [
        Sample((x, np.log(_softmax(rng.standard_normal((3, 4)))).astype(d.np_dtype)),
               {"reduction": "batchmean", "log_target": True}, desc="log_target")]


# --- normalization ------------------------------------------------------------------------------

def _group_norm_ref(x, num_groups, weight=None, bias=None, eps=1e-5):
    x = _f(x)
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * _f(weight).reshape(shape)
    if bias is not None:
        y = y + _f(bias).reshape(shape)
    return y


def _group_norm_samples(rng, d):
    return [
        Sample((make_arg(rng, (2, 6, 3, 2), d), 3, make_arg(rng, (6,), d), make_arg(rng, (6,), d)),
               desc="affine"),
        Sample((make_arg(rng, (2, 4, 5), d), 2), desc="no affine"),
        Sample((make_arg(rng, (3, 4), d), 4), {"eps": 1e-3}, desc="one channel per group"),
    ]


def _batch_norm_ref(x, mean, var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    x = _f(x)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        m, v = x.mean(dims, keepdims=True), x.var(dims, keepdims=True)
    else:
        m, v = _f(mean).reshape(shape), _f(var).reshape(shape)
    y = (x - m) / np.sqrt(v + eps)
    if weight is not None:
        y = y * _f(weight).reshape(shape)
    if bias is not None:
        y = y + _f(bias).reshape(shape)
    return y


def _batch_norm_samples(rng, d):
    return [
        Sample((make_arg(rng, (2, 3, 4, 4), d), make_arg(rng, (3,), d),
                make_arg(rng, (3,), d, low=0.5, high=2), make_arg(rng, (3,), d), make_arg(rng, (3,), d)),
               desc="eval, running stats"),
        Sample((make_arg(rng, (4, 3), d), None, None), {"training": True}, desc="training, 2-d"),
        Sample((make_arg(rng, (2, 3, 5), d), None, None, make_arg(rng, (3,), d)),
               {"training": True, "eps": 1e-3}, desc="training, weight only"),
    ]


def _batch_norm_updates_running_stats(lib, x, mean, var):
    F(lib).batch_norm(x, mean, var, training=True, momentum=0.2)
    return mean, var


def _batch_norm_stats_ref(x, mean, var):
    x = _f(x)
    dims = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    return (0.8 * _f(mean) + 0.2 * x.mean(dims), 0.8 * _f(var) + 0.2 * x.var(dims) * n / (n - 1))


def _rms_norm_ref(x, shape, weight=None, eps=None):
    x = _f(x)
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    y = x / np.sqrt((x * x).mean(dims, keepdims=True) + (eps if eps is not None else 0))
    return y if weight is None else y * _f(weight)


def _normalize_ref(x, p=2.0, dim=1, eps=1e-12):
    eps = float(np.asarray(eps, x.dtype))  # underflows to 0 in float16, as in PyTorch
    x = _f(x)
    if p == math.inf:
        n = np.abs(x).max(axis=dim, keepdims=True)
    else:
        n = (np.abs(x) ** p).sum(axis=dim, keepdims=True) ** (1 / p)
    return x / np.maximum(n, eps)


# --- activations -----------------------------------------------------------------------------

def _act_samples(rng, d):
    return [Sample((make_arg(rng, (4, 6), d, low=-4, high=4),), desc="4x6"),
            Sample((make_arg(rng, (), d),), desc="0-d"),
            Sample((np.array([-30.0, -1.0, 0.0, 0.5, 25.0], d.np_dtype),), desc="edges")]


def _act(name, fn, ref, **kw):
    return OpInfo(name, fn, ref, kw.pop("samples", _act_samples), **kw)


_SELU_A, _SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _elu_ref(x, alpha=1.0):
    x = _f(x)
    return np.where(x > 0, x, alpha * np.expm1(x))


# --- instance normalization, distances ------------------------------------------------------

def _instance_norm_ref(x, running_mean=None, running_var=None, weight=None, bias=None, eps=1e-5):
    x = _f(x)
    axes = tuple(range(2, x.ndim))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * _f(weight).reshape(shape)
    if bias is not None:
        out = out + _f(bias).reshape(shape)
    return out


def _instance_norm_samples(rng, d):
    return [Sample((make_arg(rng, (2, 3, 7), d),), desc="1-d"),
            Sample((make_arg(rng, (2, 3, 4, 5), d), None, None, make_arg(rng, (3,), d), make_arg(rng, (3,), d)),
                   {"eps": 1e-3}, desc="2-d affine")]


def _cosine_ref(x1, x2, dim=1, eps=1e-8):
    a, b = np.broadcast_arrays(_f(x1), _f(x2))
    na = np.maximum(np.sqrt((a * a).sum(axis=dim, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis=dim, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis=dim)


def _pairwise_ref(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    diff = np.abs(_f(x1) - _f(x2) + eps)
    if p == math.inf:
        return diff.max(axis=-1, keepdims=keepdim)
    return (diff ** p).sum(axis=-1, keepdims=keepdim) ** (1 / p)


def _distance_samples(rng, d):
    return [Sample((make_arg(rng, (4, 5), d), make_arg(rng, (4, 5), d)), desc="same shapes"),
            Sample((make_arg(rng, (3, 5), d), make_arg(rng, (1, 5), d)), {"dim": -1}, desc="broadcast")]


def _pairwise_samples(rng, d):
    return [Sample((make_arg(rng, (4, 5), d), make_arg(rng, (4, 5), d)), desc="p=2"),
            Sample((make_arg(rng, (3, 5), d), make_arg(rng, (1, 5), d)), {"p": 1.0, "keepdim": True},
                   desc="p=1 broadcast keepdim"),
            Sample((make_arg(rng, (2, 3, 4), d), make_arg(rng, (2, 3, 4), d)), {"p": math.inf}, desc="inf")]


def _channel_dropout_kept_or_zero(lib, x, p, fn):
    """Whether every channel of a channel-wise dropout is zeroed whole or kept scaled by 1 / (1 - p)."""
    y = getattr(lib.nn.functional, fn)(x, p=p, training=True)
    ratio = y / x
    flat = ratio.reshape(x.shape[0] * x.shape[1], -1)
    kept = (flat - 1 / (1 - p)).abs() < 1e-2
    zero = flat == 0
    return (kept.all(dim=1) | zero.all(dim=1)).all()


# --- shrinkage activations, PReLU, RReLU, the margin and likelihood losses, CTC ----------------

def _shrink_samples(rng, d):
    return [Sample((make_arg(rng, (4, 6), d),), {"lambd": 0.7}, desc="lambd 0.7"),
            Sample((np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 2.0], d.np_dtype),), desc="edges")]


def _prelu_samples(rng, d):
    return [Sample((make_arg(rng, (2, 3, 4), d), make_arg(rng, (3,), d, low=0, high=1)),
                   desc="per channel"),
            Sample((make_arg(rng, (5,), d), make_arg(rng, (1,), d, low=0, high=1)), desc="shared")]


def _prelu_ref(x, w):
    x, w = _f(x), _f(w)
    shape = (1, -1) + (1,) * (x.ndim - 2) if x.ndim > 1 and w.size > 1 else ()
    return np.where(x > 0, x, w.reshape(shape) * x)


def _loss_samples(make, kwargs=({},)):
    """One sample per reduction for each keyword set; ``make(rng, d)`` gives the arguments."""
    def samples(rng, d):
        return [Sample(make(rng, d), dict(kw, reduction=r), desc=f"{r} {kw}")
                for kw in kwargs for r in ("none", "mean", "sum")]

    return samples


def _signs(rng, shape, d):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(d.np_dtype)


def _poisson_ref(x, t, log_input=True, full=False, eps=1e-8, reduction="mean"):
    x, t = _f(x), _f(t)
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        safe = np.where(t > 1, t, 1.0)
        loss = loss + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0.0)
    return _reduce(loss, reduction)


def _gaussian_ref(x, t, var, full=False, eps=1e-6, reduction="mean"):
    x, t, var = _f(x), _f(t), np.maximum(_f(var), eps)
    if var.shape == x.shape[:-1]:
        var = var[..., None]
    loss = 0.5 * (np.log(var) + (x - t) ** 2 / var) + (0.5 * np.log(2 * np.pi) if full else 0.0)
    return _reduce(loss, reduction)


def _cosine_embedding_ref(a, b, y, margin=0.0, reduction="mean"):
    a, b, y = _f(a), _f(b), _f(y)
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    loss = np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(cos - margin, 0), 0.0)
    return _reduce(loss, reduction)


def _multi_margin_ref(x, y, p=1, margin=1.0, weight=None, reduction="mean"):
    x = np.atleast_2d(_f(x))
    y = np.asarray(y).reshape(-1)
    picked = x[np.arange(len(y)), y][:, None]
    terms = np.maximum(margin - picked + x, 0) ** p
    if weight is not None:
        terms = terms * _f(weight)[y][:, None]
    terms[np.arange(len(y)), y] = 0
    return _reduce(terms.sum(1) / x.shape[1], reduction)


def _multilabel_margin_ref(x, y, reduction="mean"):
    x2, y2 = np.atleast_2d(_f(x)), np.atleast_2d(np.asarray(y))
    out = []
    for row, labels in zip(x2, y2):
        stop = list(labels).index(-1) if -1 in list(labels) else len(labels)
        labels = labels[:stop]
        others = [i for i in range(len(row)) if i not in set(labels)]
        out.append(sum(max(0.0, 1 - (row[j] - row[i])) for j in labels for i in others) / len(row))
    loss = np.array(out)
    return _reduce(loss if np.ndim(x) == 2 else loss[0], reduction)


def _triplet_ref(a, p, n, margin=1.0, p_norm=2.0, eps=1e-6, swap=False, reduction="mean"):
    def dist(u, v):
        return (np.abs(_f(u) - _f(v) + eps) ** p_norm).sum(-1) ** (1 / p_norm)

    d_neg = dist(a, n)
    if swap:
        d_neg = np.minimum(d_neg, dist(p, n))
    return _reduce(np.maximum(margin + dist(a, p) - d_neg, 0), reduction)


def _ctc_ref(logits, targets, input_lengths, target_lengths, blank=0, reduction="mean"):
    lp = _log_softmax(logits, 2)
    losses = []
    for n in range(lp.shape[1]):
        labels = np.asarray(targets)[n, :target_lengths[n]]
        ext = [blank]
        for c in labels:
            ext += [int(c), blank]
        alpha = np.full(len(ext), -np.inf)
        alpha[0] = lp[0, n, ext[0]]
        if len(ext) > 1:
            alpha[1] = lp[0, n, ext[1]]
        for t in range(1, input_lengths[n]):
            new = np.full(len(ext), -np.inf)
            for s in range(len(ext)):
                terms = [alpha[s]] + ([alpha[s - 1]] if s >= 1 else [])
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    terms.append(alpha[s - 2])
                new[s] = np.logaddexp.reduce(terms) + lp[t, n, ext[s]]
            alpha = new
        losses.append(-np.logaddexp.reduce(alpha[-2:] if len(ext) > 1 else alpha[-1:]))
    loss = np.array(losses)
    if reduction == "mean":
        return np.mean(loss / np.maximum(np.asarray(target_lengths), 1))
    return _reduce(loss, reduction)


def _ctc_samples(rng, d):
    targets = rng.integers(1, 5, size=(3, 3)).astype(np.int64)
    targets[0, 1] = targets[0, 0]  # a repeated label needs a blank between
    lengths = (np.array([6, 4, 5], np.int64), np.array([3, 0, 2], np.int64))
    return [Sample((make_arg(rng, (6, 3, 5), d), targets) + lengths, {"reduction": r}, desc=r)
            for r in ("none", "mean", "sum")]

OPS = [
    OpInfo("nn_linear", lambda lib, x, w, b: F(lib).linear(x, w, b), _linear_ref, _linear_samples),
    OpInfo("nn_embedding", lambda lib, i, w, **kw: F(lib).embedding(i, w, **kw), _embedding_ref,
           _embedding_samples),
    OpInfo("nn_one_hot", lambda lib, x, **kw: F(lib).one_hot(x, **kw), _one_hot_ref, _one_hot_samples,
           dtypes=(tp.int64,)),
    OpInfo("nn_dropout_identity", lambda lib, x, **kw: F(lib).dropout(x, **kw),
           lambda x, p, training: _f(x) * (0.0 if training and p == 1 else 1.0), _dropout_samples),
    OpInfo("nn_dropout_training", lambda lib, x: _dropout_kept_or_zero(lib, x, 0.4),
           lambda x: np.bool_(True), lambda rng, d: [Sample((make_arg(rng, (50, 8), d),))]),
    OpInfo("nn_sdpa", lambda lib, q, k, v, *mask, **kw: F(lib).scaled_dot_product_attention(
        q, k, v, *mask, **kw),
           _sdpa_ref, _sdpa_samples),
    # float16: the summed loss is rounded to float16 once; its error against the float64
    # expectation measured 1.033e-3 beyond the default rtol (one ulp of 0.0078 at 2.0)
    OpInfo("nn_cross_entropy", lambda lib, x, t, *w, **kw: F(lib).cross_entropy(x, t, *w, **kw),
           _ce_ref, _ce_samples, tol={tp.float16: (1e-3, 1.1e-3)}),
    OpInfo("nn_nll_loss", lambda lib, x, t, *w, **kw: F(lib).nll_loss(x, t, *w, **kw), _nll_ref,
           _nll_samples),
    OpInfo("nn_mse_loss", lambda lib, x, y, **kw: F(lib).mse_loss(x, y, **kw),
           lambda x, y, reduction: _reduce((_f(x) - _f(y)) ** 2, reduction), _pair_samples()),
    OpInfo("nn_l1_loss", lambda lib, x, y, **kw: F(lib).l1_loss(x, y, **kw),
           lambda x, y, reduction: _reduce(np.abs(_f(x) - _f(y)), reduction), _pair_samples()),
    OpInfo("nn_smooth_l1_loss", lambda lib, x, y, **kw: F(lib).smooth_l1_loss(x, y, **kw),
           _smooth_l1_ref, _pair_samples(kwargs=({}, {"beta": 0.5}))),
    OpInfo("nn_huber_loss", lambda lib, x, y, **kw: F(lib).huber_loss(x, y, **kw), _huber_ref,
           _pair_samples(kwargs=({}, {"delta": 2.0}))),
    OpInfo("nn_binary_cross_entropy", lambda lib, p, t, **kw: F(lib).binary_cross_entropy(p, t, **kw),
           _bce_ref, _pair_samples(low=0.02, high=0.98, target_low=0, target_high=1)),
    OpInfo("nn_bce_with_logits",
           lambda lib, x, t, **kw: F(lib).binary_cross_entropy_with_logits(x, t, **kw),
           _bce_logits_ref, _pair_samples(target_low=0, target_high=1)),
    OpInfo("nn_bce_with_logits_pos_weight",
           lambda lib, x, t, pw: F(lib).binary_cross_entropy_with_logits(x, t, pos_weight=pw),
           lambda x, t, pw: _bce_logits_ref(x, t, pos_weight=pw),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), d), make_arg(rng, (3, 4), d, low=0, high=1),
                                   make_arg(rng, (4,), d, low=0.5, high=3)))]),
    OpInfo("nn_kl_div", lambda lib, x, t, **kw: F(lib).kl_div(x, t, **kw), _kl_ref, _kl_samples),
    OpInfo("nn_group_norm", lambda lib, x, g, *wb, **kw: F(lib).group_norm(x, g, *wb, **kw),
           _group_norm_ref, _group_norm_samples),
    OpInfo("nn_batch_norm", lambda lib, x, m, v, *wb, **kw: F(lib).batch_norm(x, m, v, *wb, **kw),
           _batch_norm_ref, _batch_norm_samples),
    OpInfo("nn_batch_norm_running_stats", _batch_norm_updates_running_stats, _batch_norm_stats_ref,
           lambda rng, d: [Sample((make_arg(rng, (4, 3, 2), d), make_arg(rng, (3,), d),
                                   make_arg(rng, (3,), d, low=0.5, high=2)))],
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_instance_norm", lambda lib, x, *a, **kw: F(lib).instance_norm(x, *a, **kw), _instance_norm_ref,
           _instance_norm_samples),
    OpInfo("nn_cosine_similarity", lambda lib, a, b, **kw: F(lib).cosine_similarity(a, b, **kw), _cosine_ref,
           _distance_samples),
    OpInfo("nn_pairwise_distance", lambda lib, a, b, **kw: F(lib).pairwise_distance(a, b, **kw), _pairwise_ref,
           _pairwise_samples),
    OpInfo("nn_dropout2d_training", lambda lib, x: _channel_dropout_kept_or_zero(lib, x, 0.4, "dropout2d"),
           lambda x: np.bool_(True), lambda rng, d: [Sample((make_arg(rng, (6, 8, 2, 3), d, low=0.5, high=2),))]),
    OpInfo("nn_dropout1d_training", lambda lib, x: _channel_dropout_kept_or_zero(lib, x, 0.4, "dropout1d"),
           lambda x: np.bool_(True), lambda rng, d: [Sample((make_arg(rng, (6, 8, 5), d, low=0.5, high=2),))]),
    OpInfo("nn_rms_norm", lambda lib, x, s, *w, **kw: F(lib).rms_norm(x, s, *w, **kw), _rms_norm_ref,
           lambda rng, d: [Sample((make_arg(rng, (2, 3, 4), d), (4,), make_arg(rng, (4,), d)),
                                  {"eps": 1e-5}, desc="weight"),
                           Sample((make_arg(rng, (2, 3, 4), d), (3, 4)), {"eps": 1e-3}, desc="2 dims")]),
    OpInfo("nn_normalize", lambda lib, x, **kw: F(lib).normalize(x, **kw), _normalize_ref,
           lambda rng, d: [Sample((make_arg(rng, (3, 4), d),), desc="p=2 dim 1"),
                           Sample((make_arg(rng, (3, 4), d),), {"p": 1.0, "dim": 0}, desc="p=1 dim 0"),
                           Sample((make_arg(rng, (2, 3), d),), {"p": math.inf, "dim": -1}, desc="inf"),
                           Sample((np.zeros((2, 3), d.np_dtype),), desc="zeros stay zero")]),
    OpInfo("nn_softmax_implicit_dim", lambda lib, x: F(lib).softmax(x, dim=None),
           lambda x: _softmax(x, 0 if np.ndim(x) in (0, 1, 3) else 1),
           lambda rng, d: [Sample((make_arg(rng, (3, 4), d),), desc="2-d uses dim 1"),
                           Sample((make_arg(rng, (2, 3, 4), d),), desc="3-d uses dim 0")]),
    OpInfo("nn_log_softmax", lambda lib, x: F(lib).log_softmax(x, dim=1),
           lambda x: _log_softmax(x, 1), lambda rng, d: [Sample((make_arg(rng, (3, 4), d),))]),
    _act("nn_elu", lambda lib, x: F(lib).elu(x, alpha=0.7), lambda x: _elu_ref(x, 0.7)),
    _act("nn_selu", lambda lib, x: F(lib).selu(x), lambda x: _SELU_S * _elu_ref(x, _SELU_A)),
    _act("nn_celu", lambda lib, x: F(lib).celu(x, alpha=2.0),
         lambda x: np.where(_f(x) > 0, _f(x), 2.0 * np.expm1(_f(x) / 2.0))),
    _act("nn_softplus", lambda lib, x: F(lib).softplus(x, beta=2.0, threshold=10.0),
         lambda x: np.where(2 * _f(x) > 10, _f(x), np.log1p(np.exp(2 * _f(x))) / 2)),
    _act("nn_softsign", lambda lib, x: F(lib).softsign(x), lambda x: _f(x) / (1 + np.abs(_f(x)))),
    _act("nn_logsigmoid", lambda lib, x: F(lib).logsigmoid(x), lambda x: -np.logaddexp(0, -_f(x))),
    _act("nn_hardtanh", lambda lib, x: F(lib).hardtanh(x, -0.5, 2.0), lambda x: np.clip(_f(x), -0.5, 2)),
    _act("nn_relu6", lambda lib, x: F(lib).relu6(x), lambda x: np.clip(_f(x), 0, 6)),
    _act("nn_hardsigmoid", lambda lib, x: F(lib).hardsigmoid(x), lambda x: np.clip(_f(x) / 6 + 0.5, 0, 1)),
    _act("nn_hardswish", lambda lib, x: F(lib).hardswish(x),
         lambda x: _f(x) * np.clip(_f(x) + 3, 0, 6) / 6),
    _act("nn_mish", lambda lib, x: F(lib).mish(x), lambda x: _f(x) * np.tanh(np.logaddexp(0, _f(x)))),
    _act("nn_tanhshrink", lambda lib, x: F(lib).tanhshrink(x), lambda x: _f(x) - np.tanh(_f(x))),
    _act("nn_threshold", lambda lib, x: F(lib).threshold(x, 0.25, -2.0),
         lambda x: np.where(_f(x) > 0.25, _f(x), -2.0)),
    _act("nn_glu", lambda lib, x: F(lib).glu(x, dim=-1),
         lambda x: _f(x)[..., :3] / (1 + np.exp(-_f(x)[..., 3:])),
         samples=lambda rng, d: [Sample((make_arg(rng, (4, 6), d),))]),
    _act("nn_softmin", lambda lib, x: F(lib).softmin(x, dim=0), lambda x: _softmax(-_f(x), 0),
         samples=lambda rng, d: [Sample((make_arg(rng, (4, 6), d),))]),
    _act("nn_silu_inplace", lambda lib, x: F(lib).silu(x, inplace=True) + 0 * x,
         lambda x: _f(x) / (1 + np.exp(-_f(x)))),
    _act("nn_gelu_module_default", lambda lib, x: lib.nn.GELU()(x),
         lambda x: 0.5 * _f(x) * (1 + _erf(_f(x) / math.sqrt(2)))),
    _act("nn_hardshrink", lambda lib, x, **kw: F(lib).hardshrink(x, **kw),
         lambda x, lambd=0.5: np.where(np.abs(_f(x)) > lambd, _f(x), 0.0), samples=_shrink_samples),
    _act("nn_softshrink", lambda lib, x, **kw: F(lib).softshrink(x, **kw),
         lambda x, lambd=0.5: np.where(_f(x) > lambd, _f(x) - lambd,
                                       np.where(_f(x) < -lambd, _f(x) + lambd, 0.0)),
         samples=_shrink_samples),
    OpInfo("nn_prelu", lambda lib, x, w: F(lib).prelu(x, w), _prelu_ref, _prelu_samples),
    _act("nn_rrelu_eval", lambda lib, x: F(lib).rrelu(x, 0.1, 0.3),
         lambda x: np.where(_f(x) > 0, _f(x), 0.2 * _f(x))),
    OpInfo("nn_poisson_nll_loss", lambda lib, x, t, **kw: F(lib).poisson_nll_loss(x, t, **kw),
           _poisson_ref, _loss_samples(
               lambda rng, d: (make_arg(rng, (3, 4), d, low=0.1, high=2),
                               rng.poisson(2.0, (3, 4)).astype(d.np_dtype)),
               kwargs=({}, {"log_input": False, "full": True})), dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_gaussian_nll_loss", lambda lib, x, t, v, **kw: F(lib).gaussian_nll_loss(x, t, v, **kw),
           _gaussian_ref, lambda rng, d: [
               Sample((make_arg(rng, (3, 4), d), make_arg(rng, (3, 4), d),
                       make_arg(rng, (3, 4), d, low=0.1, high=2)), {"reduction": "none"}, desc="per element"),
               Sample((make_arg(rng, (3, 4), d), make_arg(rng, (3, 4), d),
                       make_arg(rng, (3,), d, low=0.1, high=2)), {"full": True}, desc="shared, full")],
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_margin_ranking_loss",
           lambda lib, a, b, y, **kw: F(lib).margin_ranking_loss(a, b, y, **kw),
           lambda a, b, y, margin=0.0, reduction="mean": _reduce(
               np.maximum(-_f(y) * (_f(a) - _f(b)) + margin, 0), reduction),
           _loss_samples(lambda rng, d: (make_arg(rng, (6,), d), make_arg(rng, (6,), d),
                                         _signs(rng, (6,), d)), kwargs=({"margin": 0.5},)),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_hinge_embedding_loss", lambda lib, x, y, **kw: F(lib).hinge_embedding_loss(x, y, **kw),
           lambda x, y, margin=1.0, reduction="mean": _reduce(
               np.where(_f(y) == 1, _f(x), np.maximum(margin - _f(x), 0)), reduction),
           _loss_samples(lambda rng, d: (make_arg(rng, (3, 4), d), _signs(rng, (3, 4), d))),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_soft_margin_loss", lambda lib, x, y, **kw: F(lib).soft_margin_loss(x, y, **kw),
           lambda x, y, reduction="mean": _reduce(np.logaddexp(0, -_f(y) * _f(x)), reduction),
           _loss_samples(lambda rng, d: (make_arg(rng, (3, 4), d), _signs(rng, (3, 4), d))),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_multilabel_soft_margin_loss",
           lambda lib, x, y, *w, **kw: F(lib).multilabel_soft_margin_loss(x, y, *w, **kw),
           lambda x, y, w=None, reduction="mean": _reduce(
               ((np.logaddexp(0, -_f(x)) * _f(y) + np.logaddexp(0, _f(x)) * (1 - _f(y)))
                * (1.0 if w is None else _f(w))).mean(-1), reduction),
           _loss_samples(lambda rng, d: (make_arg(rng, (3, 4), d), make_arg(rng, (3, 4), d, low=0, high=1),
                                         make_arg(rng, (4,), d, low=0.5, high=2))),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_cosine_embedding_loss",
           lambda lib, a, b, y, **kw: F(lib).cosine_embedding_loss(a, b, y, **kw), _cosine_embedding_ref,
           _loss_samples(lambda rng, d: (make_arg(rng, (5, 4), d), make_arg(rng, (5, 4), d),
                                         _signs(rng, (5,), d)), kwargs=({"margin": 0.2},)),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_multi_margin_loss", lambda lib, x, y, **kw: F(lib).multi_margin_loss(x, y, **kw),
           _multi_margin_ref, _loss_samples(
               lambda rng, d: (make_arg(rng, (5, 4), d), rng.integers(0, 4, size=5).astype(np.int64)),
               kwargs=({}, {"p": 2, "margin": 0.5})), dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_multilabel_margin_loss", lambda lib, x, y, **kw: F(lib).multilabel_margin_loss(x, y, **kw),
           _multilabel_margin_ref, _loss_samples(
               lambda rng, d: (make_arg(rng, (3, 4), d),
                               np.array([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]], np.int64))),
           dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_triplet_margin_loss",
           lambda lib, a, p, n, **kw: F(lib).triplet_margin_loss(a, p, n, **kw),
           lambda a, p, n, margin=1.0, p_norm=2.0, swap=False, reduction="mean": _triplet_ref(
               a, p, n, margin, p_norm, swap=swap, reduction=reduction),
           _loss_samples(lambda rng, d: tuple(make_arg(rng, (5, 4), d) for _ in range(3)),
                         kwargs=({}, {"swap": True, "margin": 2.0})), dtypes=(tp.float32, tp.float64)),
    OpInfo("nn_triplet_margin_with_distance_loss",
           lambda lib, a, p, n, **kw: F(lib).triplet_margin_with_distance_loss(a, p, n, **kw),
           lambda a, p, n, swap=False, reduction="mean": _triplet_ref(a, p, n, swap=swap,
                                                                      reduction=reduction),
           _loss_samples(lambda rng, d: tuple(make_arg(rng, (5, 4), d) for _ in range(3)),
                         kwargs=({"swap": True},)), dtypes=(tp.float32, tp.float64)),
    # through log_softmax: PyTorch's ctc_loss gradient is the gradient of the logits, not of
    # log_probs, so the two agree only for log-probabilities made by log_softmax
    OpInfo("nn_ctc_loss", lambda lib, x, t, il, tl, **kw: F(lib).ctc_loss(x.log_softmax(2), t, il, tl, **kw),
           _ctc_ref, _ctc_samples, dtypes=(tp.float32, tp.float64)),
]

ERRORS = [
    ErrorCase("nn_embedding_index_out_of_range",
              lambda lib: lib.nn.functional.embedding(lib.tensor([0, 5]), lib.ones(3, 2)), IndexError,
              r"index out of range in self"),
    ErrorCase("nn_embedding_negative_index",
              lambda lib: lib.nn.functional.embedding(lib.tensor([-1]), lib.ones(3, 2)), IndexError,
              r"index out of range in self"),
    ErrorCase("nn_embedding_float_indices",
              lambda lib: lib.nn.functional.embedding(lib.tensor([1.0]), lib.ones(3, 2)), RuntimeError,
              r"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
              r"Long, Int; but got tensorplay.FloatTensor"),
    ErrorCase("nn_embedding_bad_padding_idx",
              lambda lib: lib.nn.functional.embedding(lib.tensor([1]), lib.ones(3, 2), padding_idx=4),
              AssertionError, r"Padding_idx must be within num_embeddings"),
    ErrorCase("nn_cross_entropy_target_out_of_bounds",
              lambda lib: lib.nn.functional.cross_entropy(lib.ones(3, 4), lib.tensor([0, 1, 7])),
              IndexError, r"Target 7 is out of bounds\."),
    ErrorCase("nn_cross_entropy_batch_mismatch",
              lambda lib: lib.nn.functional.cross_entropy(lib.ones(3, 4), lib.tensor([0, 1])),
              ValueError, r"Expected input batch_size \(3\) to match target batch_size \(2\)\."),
    ErrorCase("nn_cross_entropy_float_target_shape",
              lambda lib: lib.nn.functional.cross_entropy(lib.ones(3, 4), lib.ones(3)),
              ValueError, r"cross_entropy: expected probability targets of the input's shape"),
    ErrorCase("nn_nll_loss_float_target",
              lambda lib: lib.nn.functional.nll_loss(lib.ones(3, 4), lib.ones(3)), TypeError,
              r"expected target dtype to be Long or Byte, but got Float"),
    ErrorCase("nn_cross_entropy_int32_target",
              lambda lib: lib.nn.functional.cross_entropy(lib.ones(3, 4), lib.tensor([0, 1, 2],
                                                                                    dtype=lib.int32)),
              TypeError, r"expected target dtype to be Long or Byte, but got Int"),
    ErrorCase("nn_loss_bad_reduction",
              lambda lib: lib.nn.functional.mse_loss(lib.ones(3), lib.ones(3), reduction="avg"),
              ValueError, r"avg is not a valid value for reduction"),
    ErrorCase("nn_label_smoothing_range",
              lambda lib: lib.nn.functional.cross_entropy(lib.ones(2, 3), lib.tensor([0, 1]),
                                                          label_smoothing=1.5),
              ValueError, r"label_smoothing must be between 0.0 and 1.0"),
    ErrorCase("nn_dropout_p_range", lambda lib: lib.nn.functional.dropout(lib.ones(2), 1.5), ValueError,
              r"dropout probability has to be between 0 and 1, but got 1.5"),
    ErrorCase("nn_sdpa_dtype_mismatch",
              lambda lib: lib.nn.functional.scaled_dot_product_attention(
                  lib.ones(1, 2, 4), lib.ones(1, 2, 4, dtype=lib.float64), lib.ones(1, 2, 4)),
              RuntimeError, r"Expected query, key, and value to have the same dtype"),
    ErrorCase("nn_sdpa_mask_and_causal",
              lambda lib: lib.nn.functional.scaled_dot_product_attention(
                  lib.ones(1, 2, 4), lib.ones(1, 2, 4), lib.ones(1, 2, 4),
                  attn_mask=lib.ones(2, 2, dtype=lib.bool), is_causal=True),
              RuntimeError, r"Explicit attn_mask should not be set when is_causal=True"),
    ErrorCase("nn_sdpa_int_mask",
              lambda lib: lib.nn.functional.scaled_dot_product_attention(
                  lib.ones(1, 2, 4), lib.ones(1, 2, 4), lib.ones(1, 2, 4),
                  attn_mask=lib.ones(2, 2, dtype=lib.int64)),
              RuntimeError, r"Expected attn_mask dtype to be bool or float"),
    ErrorCase("nn_one_hot_not_long",
              lambda lib: lib.nn.functional.one_hot(lib.tensor([1.0])), RuntimeError,
              r"one_hot is only applicable to index tensor of type LongTensor\."),
    ErrorCase("nn_one_hot_too_large",
              lambda lib: lib.nn.functional.one_hot(lib.tensor([5]), 3), RuntimeError,
              r"Class values must be smaller than num_classes\."),
    ErrorCase("nn_group_norm_groups",
              lambda lib: lib.nn.functional.group_norm(lib.ones(2, 5, 3), 2), RuntimeError,
              r"Expected number of channels in input to be divisible by num_groups"),
    ErrorCase("nn_linear_shape_mismatch",
              lambda lib: lib.nn.functional.linear(lib.ones(2, 3), lib.ones(4, 5)), RuntimeError,
              r"cannot be multiplied|shape"),
    ErrorCase("nn_batch_norm_single_value",
              lambda lib: lib.nn.functional.batch_norm(lib.ones(1, 3), None, None, training=True),
              ValueError, r"Expected more than 1 value per channel when training"),
]
