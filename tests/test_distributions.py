"""tp.distributions against torch.distributions on the same parameters: log_prob, entropy,
mean, mode, variance, stddev, cdf, shapes, normalized probs/logits, kl_divergence, and the
gradients of each through the parameters; rsample as the reparameterization of tensorplay's
own noise; sampling statistics (seeded); argument validation; a REINFORCE loss compiled."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

# float64: the same formulas in the same order, so a few ulps (exp/log differ by one ulp);
# float32: one ulp of the results' size (entropies and log-probs near 1 .. 10)
TOL = {"float64": {"rtol": 1e-12, "atol": 1e-12}, "float32": {"rtol": 2e-6, "atol": 2e-6}}

rng = np.random.default_rng(0)
_LOC = rng.normal(size=(2, 3))
_SCALE = rng.uniform(0.5, 2.0, size=(2, 3))
_LOW = rng.normal(size=(2, 3))
_HIGH = _LOW + rng.uniform(0.5, 2.0, size=(2, 3))
_RATE = rng.uniform(0.5, 2.0, size=(2, 3))
_PROBS = rng.uniform(0.05, 0.95, size=(2, 3))
_LOGITS = rng.normal(size=(2, 3)) * 2
_WEIGHTS = rng.uniform(0.1, 1.0, size=(2, 4))   # unnormalized, as Categorical allows
_CLOGITS = rng.normal(size=(2, 4)) * 2

# name -> (class name, {param: array}, value array or callable of the torch distribution, has cdf)
CASES = {
    "Normal": ("Normal", {"loc": _LOC, "scale": _SCALE}, rng.normal(size=(4, 2, 3)), True),
    "LogNormal": ("LogNormal", {"loc": _LOC, "scale": _SCALE}, rng.uniform(0.1, 3, size=(4, 2, 3)), False),
    "Uniform": ("Uniform", {"low": _LOW, "high": _HIGH},
                _LOW + (_HIGH - _LOW) * rng.uniform(0, 1, size=(4, 2, 3)), True),
    "Exponential": ("Exponential", {"rate": _RATE}, rng.uniform(0, 3, size=(4, 2, 3)), True),
    "Gumbel": ("Gumbel", {"loc": _LOC, "scale": _SCALE}, rng.normal(size=(4, 2, 3)), False),
    "Bernoulli-probs": ("Bernoulli", {"probs": _PROBS}, rng.integers(0, 2, size=(4, 2, 3)).astype(float), False),
    "Bernoulli-logits": ("Bernoulli", {"logits": _LOGITS}, rng.integers(0, 2, size=(4, 2, 3)).astype(float),
                         False),
    "Categorical-probs": ("Categorical", {"probs": _WEIGHTS}, rng.integers(0, 4, size=(5, 2)), False),
    "Categorical-logits": ("Categorical", {"logits": _CLOGITS}, rng.integers(0, 4, size=(5, 1)), False),
    "OneHotCategorical": ("OneHotCategorical", {"logits": _CLOGITS}, np.eye(4)[rng.integers(0, 4, size=(5, 2))],
                          False),
}
_INT_VALUES = {"Categorical"}


def _make(lib, cls_name, params, dtype_name, grad=True):
    dtype = getattr(lib, dtype_name)
    tensors = {k: lib.tensor(v, dtype=dtype, requires_grad=grad) for k, v in params.items()}
    mod = D if lib is tp else TD
    return getattr(mod, cls_name)(**tensors), tensors


def _close(actual, expected, tol, what):
    a = np.asarray(actual.detach().numpy() if isinstance(actual, tp.Tensor) else actual, np.float64)
    e = expected.detach().double().numpy()
    assert a.shape == e.shape, f"{what}: shape {a.shape} vs {e.shape}"
    np.testing.assert_allclose(a, e, **tol, err_msg=what)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, dtype):
    cls_name, params, value, has_cdf = CASES[case]
    tol = TOL[dtype]
    d, tp_params = _make(tp, cls_name, params, dtype)
    e, t_params = _make(torch, cls_name, params, dtype)
    assert tuple(d.batch_shape) == tuple(e.batch_shape) and tuple(d.event_shape) == tuple(e.event_shape)
    if cls_name in _INT_VALUES:
        v, tv = tp.tensor(value), torch.tensor(value)
    else:
        v, tv = tp.tensor(value, dtype=getattr(tp, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
    lp, tlp = d.log_prob(v), e.log_prob(tv)
    assert lp.dtype.name == str(tlp.dtype).split(".")[-1]
    _close(lp, tlp, tol, "log_prob")
    _close(d.entropy(), e.entropy(), tol, "entropy")
    for prop in ("mean", "mode", "variance", "stddev"):
        _close(getattr(d, prop), getattr(e, prop), tol, prop)
    if has_cdf:
        _close(d.cdf(v), e.cdf(tv), tol, "cdf")
    for name in ("probs", "logits"):
        if cls_name in ("Bernoulli", "Categorical", "OneHotCategorical"):  # both, normalized as torch does
            _close(getattr(d, name), getattr(e, name), tol, name)
    # gradients of log_prob and entropy through the parameters
    (lp.sum() + d.entropy().sum()).backward()
    (tlp.sum() + e.entropy().sum()).backward()
    for k in params:
        _close(tp_params[k].grad, t_params[k].grad, tol, f"grad of {k}")
    # shapes of samples, as torch has them
    for shape in [(), (5,), (2, 1)]:
        assert tuple(d.sample(shape).shape) == tuple(e.sample(shape).shape)
    if d.has_rsample:
        assert tuple(d.rsample((3,)).shape) == tuple(e.rsample((3,)).shape)
    if d.has_enumerate_support:
        _close(d.enumerate_support(), e.enumerate_support(), tol, "enumerate_support")
        assert tuple(d.enumerate_support(False).shape) == tuple(e.enumerate_support(False).shape)
    big = d.expand((3,) + tuple(d.batch_shape))
    assert tuple(big.batch_shape) == (3,) + tuple(e.batch_shape)
    drawn = big.sample((2,))
    assert tuple(drawn.shape) == (2, 3) + tuple(d.batch_shape) + tuple(d.event_shape)
    _close(big.log_prob(drawn), e.expand((3,) + tuple(e.batch_shape)).log_prob(torch.tensor(drawn.numpy())), tol,
           "log_prob after expand")


def test_independent_matches_torch():
    d = D.Independent(D.Normal(tp.tensor(_LOC), tp.tensor(_SCALE)), 1)
    e = TD.Independent(TD.Normal(torch.tensor(_LOC), torch.tensor(_SCALE)), 1)
    assert (tuple(d.batch_shape), tuple(d.event_shape)) == ((2,), (3,)) == (tuple(e.batch_shape),
                                                                               tuple(e.event_shape))
    value = rng.normal(size=(4, 2, 3))
    _close(d.log_prob(tp.tensor(value)), e.log_prob(torch.tensor(value)), TOL["float64"], "log_prob")
    _close(d.entropy(), e.entropy(), TOL["float64"], "entropy")
    assert tuple(d.sample((5,)).shape) == (5, 2, 3) and d.has_rsample
    assert tuple(d.expand((7, 2)).batch_shape) == (7, 2)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims <= len"):
        D.Independent(D.Normal(tp.zeros(3), tp.ones(3)), 2)


def _pair(lib, kind, dtype):
    mod = D if lib is tp else TD
    t = lambda a: lib.tensor(a, dtype=dtype, requires_grad=True)
    r = np.random.default_rng(1)
    if kind == "Normal":
        return mod.Normal(t(_LOC), t(_SCALE)), mod.Normal(t(r.normal(size=3)), t(r.uniform(0.5, 2, 3)))
    if kind == "LogNormal":
        return mod.LogNormal(t(_LOC), t(_SCALE)), mod.LogNormal(t(r.normal(size=3)), t(r.uniform(0.5, 2, 3)))
    if kind == "Uniform":  # the second row of q does not cover p: inf
        ql = np.stack([_LOW[0] - 1, _LOW[1] + 0.1])
        return mod.Uniform(t(_LOW), t(_HIGH)), mod.Uniform(t(ql), t(_HIGH + 0.5))
    if kind == "Exponential":
        return mod.Exponential(t(_RATE)), mod.Exponential(t(r.uniform(0.5, 2, 3)))
    if kind == "Bernoulli":  # 0 and 1 in p and q: the zero and infinite terms
        return (mod.Bernoulli(probs=t([[0.0, 0.3, 1.0], [0.2, 0.5, 0.7]])),
                mod.Bernoulli(probs=t([[0.4, 0.3, 0.6], [0.0, 0.5, 1.0]])))
    if kind == "Categorical":
        return mod.Categorical(probs=t(_WEIGHTS)), mod.Categorical(logits=t(_CLOGITS))
    if kind == "OneHotCategorical":
        return mod.OneHotCategorical(logits=t(_CLOGITS[::-1].copy())), mod.OneHotCategorical(probs=t(_WEIGHTS))
    if kind == "Uniform-Normal":
        return mod.Uniform(t(_LOW), t(_HIGH)), mod.Normal(t(_LOC), t(_SCALE))
    if kind == "Normal-Gumbel":
        return mod.Normal(t(_LOC), t(_SCALE)), mod.Gumbel(t(r.normal(size=3)), t(r.uniform(0.5, 2, 3)))
    if kind == "Independent":
        p, q = _pair(lib, "Normal", dtype)
        return mod.Independent(p, 1), mod.Independent(q.expand((2, 3)), 1)
    raise AssertionError(kind)


KL_PAIRS = ["Normal", "LogNormal", "Uniform", "Exponential", "Bernoulli", "Categorical", "OneHotCategorical",
            "Uniform-Normal", "Normal-Gumbel", "Independent"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", KL_PAIRS)
def test_kl_divergence_matches_torch(kind, dtype):
    p, q = _pair(tp, kind, getattr(tp, dtype))
    tp_, tq = _pair(torch, kind, getattr(torch, dtype))
    kl, tkl = D.kl_divergence(p, q), TD.kl_divergence(tp_, tq)
    _close(kl, tkl, TOL[dtype], "kl")
    finite, tfinite = kl.detach().isfinite(), tkl.detach().isfinite()
    assert np.array_equal(finite.numpy(), tfinite.numpy())
    leaves = [v for v in (list(vars(p).values()) + list(vars(q).values())) if isinstance(v, tp.Tensor)]
    tleaves = [v for v in (list(vars(tp_).values()) + list(vars(tq).values())) if isinstance(v, torch.Tensor)]
    if kind in ("LogNormal", "OneHotCategorical", "Independent"):
        return  # parameters held one level down; the base pairs check their gradients
    # gradient of the finite entries
    tp.where(finite, kl, 0.0).sum().backward()
    torch.where(tfinite, tkl, 0.0).sum().backward()
    for a, b in zip(leaves, tleaves):
        if a.requires_grad and a.is_leaf:
            _close(a.grad, b.grad, TOL[dtype], "kl gradient")


def test_kl_divergence_unknown_pair_and_register_kl():
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Exponential(1.0), D.Normal(0.0, 1.0))

    class MyNormal(D.Normal):
        pass

    # a subclass uses its parent's registration until it has its own
    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0))) == 0.0

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return tp.tensor(7.0)

    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0))) == 7.0
    with pytest.raises(TypeError, match="register_kl"):
        D.register_kl(int, D.Normal)


RSAMPLE = {  # class, params, the reparameterization of tensorplay's noise (drawn as rand or randn)
    "Normal": ("Normal", {"loc": _LOC, "scale": _SCALE}, "randn", lambda p, n: p["loc"] + n * p["scale"]),
    "LogNormal": ("LogNormal", {"loc": _LOC, "scale": _SCALE}, "randn",
                  lambda p, n: (p["loc"] + n * p["scale"]).exp()),
    "Uniform": ("Uniform", {"low": _LOW, "high": _HIGH}, "rand",
                lambda p, n: p["low"] + n * (p["high"] - p["low"])),
    "Exponential": ("Exponential", {"rate": _RATE}, "rand", lambda p, n: -torch.log1p(-n) / p["rate"]),
    "Gumbel": ("Gumbel", {"loc": _LOC, "scale": _SCALE}, "rand",
               lambda p, n: p["loc"] - p["scale"] * torch.log(-torch.log(
                   np.finfo(np.float64).tiny + n * (1 - np.finfo(np.float64).eps - np.finfo(np.float64).tiny)))),
}


@pytest.mark.parametrize("case", list(RSAMPLE))
def test_rsample_is_the_reparameterized_noise(case):
    cls_name, params, noise, expected_fn = RSAMPLE[case]
    d, tp_params = _make(tp, cls_name, params, "float64")
    tp.manual_seed(3)
    x = d.rsample((5,))
    tp.manual_seed(3)
    eps = getattr(tp, noise)((5, 2, 3), dtype=tp.float64)
    t_params = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    expected = expected_fn(t_params, torch.tensor(eps.numpy()))
    _close(x, expected, TOL["float64"], "rsample")
    weights = np.random.default_rng(2).normal(size=(5, 2, 3))
    (x * tp.tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    for k in params:
        _close(tp_params[k].grad, t_params[k].grad, TOL["float64"], f"grad of {k}")
    assert not d.sample((5,)).requires_grad


def _mean_within(samples, mean, var, what, k=4.0):
    """The sample mean within k standard errors of the distribution's mean."""
    n = samples.shape[0]
    err = np.abs(samples.mean(0) - mean) / np.sqrt(var / n)
    assert np.all(err < k), f"{what}: sample means {err.max():.2f} standard errors away"


@pytest.mark.parametrize("cls_name, params", [
    ("Normal", {"loc": [0.5, -2.0], "scale": [1.0, 3.0]}),
    ("LogNormal", {"loc": [0.0, 0.5], "scale": [0.25, 0.5]}),
    ("Uniform", {"low": [0.0, -3.0], "high": [1.0, 5.0]}),
    ("Exponential", {"rate": [0.5, 4.0]}),
    ("Gumbel", {"loc": [1.0, -1.0], "scale": [0.5, 2.0]}),
    ("Bernoulli", {"probs": [0.1, 0.7]}),
    ("Categorical", {"probs": [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]}),
    ("OneHotCategorical", {"logits": [[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]}),
])
def test_sample_statistics(cls_name, params):
    d = getattr(D, cls_name)(**{k: tp.tensor(v, dtype=tp.float64) for k, v in params.items()})
    tp.manual_seed(0)
    n = 20000
    s = d.sample((n,)).numpy().astype(np.float64)
    assert s.shape == (n,) + tuple(d.batch_shape) + tuple(d.event_shape)
    if cls_name == "Categorical":  # frequency of each category
        probs = d.probs.numpy()
        for k in range(probs.shape[-1]):
            _mean_within((s == k).astype(float), probs[..., k], probs[..., k] * (1 - probs[..., k]), f"P(X={k})")
        return
    mean, var = d.mean.numpy(), d.variance.numpy()
    _mean_within(s, mean, var, "mean")
    if cls_name not in ("Bernoulli", "OneHotCategorical"):
        # the sample variance within 4 standard errors, se^2 = (m4 - var^2) / n, m4 estimated
        centred = s - s.mean(0)
        m4 = (centred ** 4).mean(0)
        err = np.abs(centred.var(0) - var) / np.sqrt((m4 - centred.var(0) ** 2) / n)
        assert np.all(err < 4), f"variance {err.max():.2f} standard errors away"


def test_sampling_is_seeded():
    d = D.Categorical(logits=tp.tensor([0.0, 1.0, 2.0]))
    tp.manual_seed(5)
    a = d.sample((10,))
    tp.manual_seed(5)
    assert np.array_equal(a.numpy(), d.sample((10,)).numpy())
    assert a.dtype == tp.int64


def test_categorical_normalizes_as_torch():
    w = np.array([[1.0, 2.0, 0.0], [3.0, 3.0, 3.0]])
    d, e = D.Categorical(probs=tp.tensor(w)), TD.Categorical(probs=torch.tensor(w))
    _close(d.probs, e.probs, TOL["float64"], "probs")
    _close(d.logits, e.logits, TOL["float64"], "logits (the zero clamped to eps)")
    _close(d.entropy(), e.entropy(), TOL["float64"], "entropy with a zero probability")
    logits = np.array([[100.0, 0.0, -100.0]])
    d, e = D.Categorical(logits=tp.tensor(logits)), TD.Categorical(logits=torch.tensor(logits))
    _close(d.logits, e.logits, TOL["float64"], "logits")
    _close(d.probs, e.probs, TOL["float64"], "probs")
    d = D.Bernoulli(probs=tp.tensor([0.0, 1.0]))
    _close(d.logits, TD.Bernoulli(probs=torch.tensor([0.0, 1.0])).logits, TOL["float32"], "clamped logits")


def test_argument_validation():
    with pytest.raises(ValueError, match=r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        D.Normal(tp.zeros(2), tp.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="Expected parameter probs .*Interval"):
        D.Bernoulli(probs=tp.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="Expected parameter probs .*Simplex"):
        D.Categorical(probs=tp.tensor([0.5, -0.5]))
    with pytest.raises(ValueError, match="Expected parameter low"):
        D.Uniform(tp.tensor(1.0), tp.tensor(0.0))
    with pytest.raises(ValueError, match="but not both"):
        D.Categorical(probs=tp.tensor([0.5, 0.5]), logits=tp.tensor([0.0, 0.0]))
    with pytest.raises(ValueError, match="but not both"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Categorical(logits=tp.tensor(1.0))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(logits=tp.zeros(3)).log_prob(tp.tensor(3))
    with pytest.raises(ValueError, match="within the support"):
        D.Exponential(tp.tensor(1.0)).log_prob(tp.tensor(-1.0))
    with pytest.raises(ValueError, match="must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="not broadcastable"):
        D.Normal(tp.zeros(3), tp.ones(3)).log_prob(tp.zeros(2))
    with pytest.raises(ValueError, match="event_shape"):
        D.OneHotCategorical(logits=tp.zeros(3)).log_prob(tp.zeros(2))
    with pytest.raises(ValueError, match="Input arguments must all be"):
        D.Normal("0", 1.0)
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Categorical(logits=tp.zeros(3)).rsample()
    # validate_args=False skips the checks, as in PyTorch
    d = D.Normal(tp.zeros(2), tp.tensor([1.0, -1.0]), validate_args=False)
    assert d.log_prob(tp.zeros(2)).shape == (2,)
    outside = D.Exponential(1.0, validate_args=False).log_prob(tp.tensor(-1.0))
    assert float(outside) == float(TD.Exponential(1.0, validate_args=False).log_prob(torch.tensor(-1.0)))


def test_set_default_validate_args():
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(tp.zeros(1), -tp.ones(1))  # not checked
        with pytest.raises(ValueError, match="Expected parameter scale"):
            D.Normal(tp.zeros(1), -tp.ones(1), validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(tp.zeros(1), -tp.ones(1))
    with pytest.raises(ValueError, match="set_default_validate_args"):
        D.Distribution.set_default_validate_args("yes")


def test_repr_and_torch_alias():
    assert repr(D.Normal(tp.zeros(3), tp.ones(3))) == "Normal(loc: tensorplay.Size([3]), scale: tensorplay.Size([3]))"
    assert repr(D.Exponential(2.0)) == "Exponential(rate: tensor(2.))"
    assert isinstance(D.Normal(0.0, 1.0).support, D.constraints.Constraint)
    assert tp.distributions.Categorical is D.Categorical


def _reinforce_loss(validate):
    def loss(logits, actions, rewards, loc, scale, x):
        policy = D.Categorical(logits=logits, validate_args=validate)
        gaussian = D.Normal(loc, scale, validate_args=validate)
        return -(policy.log_prob(actions) * rewards).sum() - gaussian.log_prob(x).sum() + policy.entropy().mean()
    return loss


# validation reads values (graph breaks); without it the loss is one graph
@pytest.mark.iree
@pytest.mark.parametrize("validate, fullgraph", [(None, False), (False, True)])
def test_reinforce_loss_compiled_matches_eager(validate, fullgraph):
    _reinforce = _reinforce_loss(validate)
    r = np.random.default_rng(4)
    inputs = [r.normal(size=(6, 4)), r.integers(0, 4, size=6), r.normal(size=6), r.normal(size=6),
              r.uniform(0.5, 2, size=6), r.normal(size=6)]

    def run(fn):
        args = [tp.tensor(a, dtype=tp.float32 if a.dtype == np.float64 else tp.int64) for a in inputs]
        for i in (0, 3, 4):
            args[i].requires_grad = True
        loss = fn(*args)
        loss.backward()
        return loss, [args[i].grad for i in (0, 3, 4)]

    eager_loss, eager_grads = run(_reinforce)
    compiled_loss, compiled_grads = run(tp.compile(_reinforce, fullgraph=fullgraph))
    # float32 arithmetic fused differently by the compiler: a few ulps
    np.testing.assert_allclose(compiled_loss.detach().numpy(), eager_loss.detach().numpy(), rtol=1e-5)
    for a, b in zip(compiled_grads, eager_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    t = [torch.tensor(a, dtype=torch.float32 if a.dtype == np.float64 else torch.int64) for a in inputs]
    for i in (0, 3, 4):
        t[i].requires_grad = True
    tl = (-(TD.Categorical(logits=t[0]).log_prob(t[1]) * t[2]).sum() - TD.Normal(t[3], t[4]).log_prob(t[5]).sum()
          + TD.Categorical(logits=t[0]).entropy().mean())
    tl.backward()
    np.testing.assert_allclose(eager_loss.detach().numpy(), tl.detach().numpy(), rtol=1e-6)
    for a, i in zip(eager_grads, (0, 3, 4)):
        np.testing.assert_allclose(a.numpy(), t[i].grad.numpy(), rtol=1e-5, atol=1e-6)
