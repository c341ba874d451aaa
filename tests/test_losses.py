"""The shrinkage activations, PReLU, RReLU, Softmax2d, gumbel_softmax, the in-place
activation forms and the margin, likelihood, embedding, triplet and CTC losses against
PyTorch: values and input gradients for every reduction in float64 and float32, the modules
with their constructor arguments, the legacy ``size_average``/``reduce`` arguments, input
errors, the random forms' statistics, and compiled forward and backward passes on iree-cpu."""

from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

torch = pytest.importorskip("torch")

#: (rtol, atol): float64 differences measured below 1e-12 relative (the Gaussian loss's
#: gradients, divided by small variances, reach 1e-12 absolute); float32 rounds each op
TOL = {np.float64: (1e-10, 1e-12), np.float32: (2e-5, 2e-6)}


def _signs(rng, shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def _ctc_args(rng, concatenated=False):
    targets = rng.integers(1, 5, size=(3, 3))
    targets[0, 1] = targets[0, 0]  # a repeated label: the alignment needs a blank between
    lengths = np.array([3, 0, 2])
    if concatenated:
        targets = np.concatenate([targets[n, :lengths[n]] for n in range(3)])
    return [rng.standard_normal((6, 3, 5)), targets, np.array([6, 4, 5]), lengths]


#: name -> (call over (F, *tensors, **kw), arguments from a generator (float arrays take
#: the dtype under test and are differentiated when listed in ``grads``), grads, reductions)
CASES = {
    "hardshrink": (lambda f, x: f.hardshrink(x, 0.7), lambda r: [r.standard_normal((4, 5))], (0,), False),
    "softshrink": (lambda f, x: f.softshrink(x, 0.7), lambda r: [r.standard_normal((4, 5))], (0,), False),
    "prelu_channels": (lambda f, x, w: f.prelu(x, w),
                       lambda r: [r.standard_normal((2, 3, 4)), r.random(3)], (0, 1), False),
    "prelu_shared": (lambda f, x, w: f.prelu(x, w), lambda r: [r.standard_normal((5,)), r.random(1)],
                     (0, 1), False),
    "rrelu_eval": (lambda f, x: f.rrelu(x, 0.1, 0.4), lambda r: [r.standard_normal((4, 5))], (0,), False),
    "inplace_forms": (lambda f, x: (f.elu_(x * 1, 0.5) + f.celu_(x * 1, 2.0) + f.selu_(x * 1)
                                    + f.leaky_relu_(x * 1, 0.2) + f.hardtanh_(x * 1, -0.5, 0.5)
                                    + f.threshold_(x * 1, 0.1, -2.0) + f.rrelu_(x * 1)),
                      lambda r: [r.standard_normal((4, 5))], (0,), False),
    "poisson_nll": (lambda f, x, t, **k: f.poisson_nll_loss(x, t, **k),
                    lambda r: [r.standard_normal((3, 4)), r.poisson(2.0, (3, 4)).astype(float)], (0,), True),
    "poisson_nll_rate_full": (lambda f, x, t, **k: f.poisson_nll_loss(x, t, log_input=False, full=True,
                                                                   eps=1e-3, **k),
                              lambda r: [r.random((3, 4)) + 0.1, r.poisson(2.0, (3, 4)).astype(float)],
                              (0,), True),
    "gaussian_nll": (lambda f, x, t, v, **k: f.gaussian_nll_loss(x, t, v, **k),
                     lambda r: [r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.random((3, 4))],
                     (0, 1, 2), True),
    "gaussian_nll_shared_var_full": (lambda f, x, t, v, **k: f.gaussian_nll_loss(x, t, v, full=True,
                                                                                  eps=0.3, **k),
                                     lambda r: [r.standard_normal((2, 3, 4)), r.standard_normal((2, 3, 4)),
                                                r.random((2, 1, 4))], (0, 1, 2), True),
    "gaussian_nll_var_one_dim_short": (lambda f, x, t, v, **k: f.gaussian_nll_loss(x, t, v, **k),
                                       lambda r: [r.standard_normal((3, 4)), r.standard_normal((3, 4)),
                                                  r.random(3) + 0.1], (0, 2), True),
    "gaussian_nll_float_var": (lambda f, x, t, **k: f.gaussian_nll_loss(x, t, 0.5, **k),
                               lambda r: [r.standard_normal((3, 4)), r.standard_normal((3, 4))], (0, 1), True),
    "margin_ranking": (lambda f, a, b, y, **k: f.margin_ranking_loss(a, b, y, margin=0.3, **k),
                       lambda r: [r.standard_normal(6), r.standard_normal(6), _signs(r, 6)], (0, 1), True),
    "margin_ranking_broadcast": (lambda f, a, b, y, **k: f.margin_ranking_loss(a, b, y, **k),
                                 lambda r: [r.standard_normal((2, 3)), r.standard_normal((1, 3)),
                                            _signs(r, (2, 1))], (0, 1), True),
    "hinge_embedding": (lambda f, x, y, **k: f.hinge_embedding_loss(x, y, margin=0.8, **k),
                        lambda r: [r.standard_normal((3, 4)), _signs(r, (3, 4))], (0,), True),
    "soft_margin": (lambda f, x, y, **k: f.soft_margin_loss(x, y, **k),
                    lambda r: [3 * r.standard_normal((3, 4)), _signs(r, (3, 4))], (0,), True),
    "multilabel_soft_margin": (lambda f, x, y, w, **k: f.multilabel_soft_margin_loss(x, y, w, **k),
                               lambda r: [r.standard_normal((3, 4)), (r.random((3, 4)) < 0.5) * 1.0,
                                          r.random(4)], (0,), True),
    "multilabel_soft_margin_3d": (lambda f, x, y, **k: f.multilabel_soft_margin_loss(x, y, **k),
                                  lambda r: [r.standard_normal((2, 3, 4)), r.random((2, 3, 4))], (0,), True),
    "cosine_embedding": (lambda f, a, b, y, **k: f.cosine_embedding_loss(a, b, y, margin=0.1, **k),
                         lambda r: [r.standard_normal((5, 4)), r.standard_normal((5, 4)), _signs(r, 5)],
                         (0, 1), True),
    "cosine_embedding_unbatched": (lambda f, a, b, y, **k: f.cosine_embedding_loss(a, b, y, **k),
                                   lambda r: [r.standard_normal(4), r.standard_normal(4), np.array(-1.0)],
                                   (0, 1), True),
    "multi_margin": (lambda f, x, y, **k: f.multi_margin_loss(x, y, **k),
                     lambda r: [r.standard_normal((5, 4)), r.integers(0, 4, 5)], (0,), True),
    "multi_margin_p2_weight": (lambda f, x, y, w, **k: f.multi_margin_loss(x, y, p=2, margin=0.7, weight=w, **k),
                               lambda r: [r.standard_normal((5, 4)), r.integers(0, 4, 5), r.random(4)],
                               (0,), True),
    "multi_margin_unbatched": (lambda f, x, y, **k: f.multi_margin_loss(x, y, **k),
                               lambda r: [r.standard_normal(4), np.array(2)], (0,), True),
    "multilabel_margin": (lambda f, x, y, **k: f.multilabel_margin_loss(x, y, **k),
                          lambda r: [r.standard_normal((3, 4)),
                                     np.array([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]])], (0,), True),
    "multilabel_margin_repeated_label": (lambda f, x, y, **k: f.multilabel_margin_loss(x, y, **k),
                                         lambda r: [r.standard_normal(4), np.array([2, 2, 0, -1])], (0,), True),
    "triplet_margin": (lambda f, a, p, n, **k: f.triplet_margin_loss(a, p, n, **k),
                       lambda r: [r.standard_normal((5, 4)) for _ in range(3)], (0, 1, 2), True),
    "triplet_margin_p1_swap": (lambda f, a, p, n, **k: f.triplet_margin_loss(a, p, n, margin=2.0, p=1,
                                                                          swap=True, **k),
                               lambda r: [r.standard_normal((5, 4)) for _ in range(3)], (0, 1, 2), True),
    "triplet_margin_unbatched": (lambda f, a, p, n, **k: f.triplet_margin_loss(a, p, n, p=3, eps=1e-3, **k),
                                 lambda r: [r.standard_normal(4) for _ in range(3)], (0, 1, 2), True),
    "triplet_distance_default_swap": (lambda f, a, p, n, **k: f.triplet_margin_with_distance_loss(
        a, p, n, swap=True, **k), lambda r: [r.standard_normal((5, 4)) for _ in range(3)], (0, 1, 2), True),
    "triplet_distance_cosine": (lambda f, a, p, n, **k: f.triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda u, v: 1 - f.cosine_similarity(u, v), margin=0.5, **k),
        lambda r: [r.standard_normal((5, 4)) for _ in range(3)], (0, 1, 2), True),
    # through log_softmax: PyTorch's ctc_loss returns the logits' gradient as that of log_probs
    "ctc_padded": (lambda f, x, t, il, tl, **k: f.ctc_loss(x.log_softmax(2), t, il, tl, **k),
                   _ctc_args, (0,), True),
    "ctc_concatenated_blank_last": (lambda f, x, t, il, tl, **k: f.ctc_loss(
        x.log_softmax(2), t - 1, il, tl, blank=4, **k), lambda r: _ctc_args(r, True), (0,), True),
}


def _lib_args(lib, arrays, dtype, grads):
    out = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = a.astype(dtype)
            t = tp.tensor(a, requires_grad=i in grads) if lib is tp else \
                torch.tensor(a, requires_grad=i in grads)
        else:
            t = tp.tensor(a.astype(np.int64)) if lib is tp else torch.tensor(a.astype(np.int64))
        out.append(t)
    return out


def _run(lib, name, dtype, reduction):
    call, make, grads, _ = CASES[name]
    arrays = make(np.random.default_rng(zlib.crc32(name.encode())))
    args = _lib_args(lib, arrays, dtype, grads)
    kw = {} if reduction is None else {"reduction": reduction}
    out = call(lib.nn.functional, *args, **kw)
    weights = np.random.default_rng(7).uniform(0.5, 1.5, tuple(out.shape)).astype(dtype)
    (out * (tp.tensor(weights) if lib is tp else torch.tensor(weights))).sum().backward()
    return out.detach().numpy(), [args[i].grad.numpy() for i in grads]


def _cases():
    for name, (_, _, _, reduces) in CASES.items():
        for reduction in (("none", "mean", "sum") if reduces else (None,)):
            yield pytest.param(name, reduction, id=f"{name}-{reduction}" if reduction else name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name, reduction", list(_cases()))
def test_matches_pytorch_values_and_input_gradients(name, reduction, dtype):
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, want_grads = _run(torch, name, dtype, reduction)
        got, got_grads = _run(tp, name, dtype, reduction)
    rtol, atol = TOL[dtype]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"gradient of argument {i}")


# --- modules ---------------------------------------------------------------------------------

#: (module factory over the library, the forward's arguments from a generator)
MODULES = {
    "PoissonNLLLoss": (lambda lib: lib.nn.PoissonNLLLoss(log_input=False, full=True, eps=1e-4, reduction="sum"),
                       lambda r: [r.random((3, 4)) + 0.1, r.poisson(3.0, (3, 4)).astype(float)]),
    "GaussianNLLLoss": (lambda lib: lib.nn.GaussianNLLLoss(full=True, eps=0.01, reduction="none"),
                        lambda r: [r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.random(3)]),
    "MarginRankingLoss": (lambda lib: lib.nn.MarginRankingLoss(margin=0.4),
                          lambda r: [r.standard_normal(5), r.standard_normal(5), _signs(r, 5)]),
    "HingeEmbeddingLoss": (lambda lib: lib.nn.HingeEmbeddingLoss(margin=2.0, reduction="sum"),
                           lambda r: [r.standard_normal((3, 4)), _signs(r, (3, 4))]),
    "SoftMarginLoss": (lambda lib: lib.nn.SoftMarginLoss(reduction="none"),
                       lambda r: [r.standard_normal((3, 4)), _signs(r, (3, 4))]),
    "MultiLabelSoftMarginLoss": (lambda lib: lib.nn.MultiLabelSoftMarginLoss(
        weight=lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64)),
        lambda r: [r.standard_normal((4, 3)), (r.random((4, 3)) < 0.5) * 1.0]),
    "CosineEmbeddingLoss": (lambda lib: lib.nn.CosineEmbeddingLoss(margin=-0.2, reduction="sum"),
                            lambda r: [r.standard_normal((4, 3)), r.standard_normal((4, 3)), _signs(r, 4)]),
    "MultiMarginLoss": (lambda lib: lib.nn.MultiMarginLoss(p=2, margin=0.5,
                                                           weight=lib.tensor([1.0, 2.0, 0.5], dtype=lib.float64)),
                        lambda r: [r.standard_normal((4, 3)), r.integers(0, 3, 4)]),
    "MultiLabelMarginLoss": (lambda lib: lib.nn.MultiLabelMarginLoss(reduction="none"),
                             lambda r: [r.standard_normal((2, 3)), np.array([[2, -1, 0], [0, 1, 2]])]),
    "TripletMarginLoss": (lambda lib: lib.nn.TripletMarginLoss(margin=0.5, p=1.5, swap=True),
                          lambda r: [r.standard_normal((4, 3)) for _ in range(3)]),
    "TripletMarginWithDistanceLoss": (lambda lib: lib.nn.TripletMarginWithDistanceLoss(
        distance_function=lib.nn.PairwiseDistance(p=1.0), margin=0.5, reduction="sum"),
        lambda r: [r.standard_normal((4, 3)) for _ in range(3)]),
    "CTCLoss": (lambda lib: lib.nn.CTCLoss(blank=1, reduction="sum", zero_infinity=True),
                lambda r: [np.log(r.dirichlet(np.ones(4), (5, 2))), np.array([[0, 2, 3], [3, 3, 0]]),
                           np.array([5, 2]), np.array([3, 2])]),  # the second is impossible: 0
    "NLLLoss2d": (lambda lib: lib.nn.NLLLoss2d(ignore_index=1),
                  lambda r: [r.standard_normal((2, 3, 2, 2)), r.integers(0, 3, (2, 2, 2))]),
    "Hardshrink": (lambda lib: lib.nn.Hardshrink(0.3), lambda r: [r.standard_normal((3, 4))]),
    "Softshrink": (lambda lib: lib.nn.Softshrink(0.3), lambda r: [r.standard_normal((3, 4))]),
    "RReLU_eval": (lambda lib: lib.nn.RReLU(0.2, 0.5).eval(), lambda r: [r.standard_normal((3, 4))]),
    "Softmax2d": (lambda lib: lib.nn.Softmax2d(), lambda r: [r.standard_normal((2, 3, 2, 2))]),
    "Softmax2d_unbatched": (lambda lib: lib.nn.Softmax2d(), lambda r: [r.standard_normal((3, 2, 2))]),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_module_matches_pytorch(name):
    factory, make = MODULES[name]
    arrays = make(np.random.default_rng(zlib.crc32(name.encode())))
    results = []
    for lib in (torch, tp):
        args = _lib_args(lib, arrays, np.float64, (0,))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # NLLLoss2d's deprecation
            module = factory(lib)
        out = module(*args)
        out.sum().backward()
        results.append((out.detach().numpy(), args[0].grad.numpy(), repr(module)))
    (want, want_grad, want_repr), (got, got_grad, got_repr) = results
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if name != "CTCLoss":  # its log_probs gradient differs by design: the test below
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-10, atol=1e-12)
    if "weight" not in want_repr and "distance" not in want_repr.lower():
        assert got_repr == want_repr


def test_prelu_module_weight_and_gradients_match_pytorch():
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    grads = []
    for lib in (torch, tp):
        m = lib.nn.PReLU(3, init=0.1, dtype=lib.float64)
        assert repr(m) == "PReLU(num_parameters=3)"
        assert [n for n, _ in m.named_parameters()] == ["weight"]
        xt = lib.tensor(x, requires_grad=True)
        (m(xt) ** 2).sum().backward()
        grads.append((m.weight.detach().numpy(), m.weight.grad.numpy(), xt.grad.numpy()))
    for g, w in zip(grads[1], grads[0]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert nn.PReLU().weight.shape == (1,) and float(nn.PReLU().weight[0]) == 0.25


def test_ctc_log_probs_gradient_is_the_derivative_of_the_loss():
    """PyTorch's ctc_loss returns, as the gradient of log_probs, the gradient of the logits
    they were made from by log_softmax: the true derivative plus exp(log_probs) at the steps
    each input uses. tensorplay's is the true derivative (through log_softmax both agree)."""
    rng = np.random.default_rng(10)
    lp = np.log(rng.dirichlet(np.ones(4), (5, 2)))
    args = (np.array([[1, 2, 1], [3, 3, 0]]), np.array([5, 3]), np.array([3, 1]))
    grads = []
    for lib in (torch, tp):
        x = lib.tensor(lp, requires_grad=True)
        lib.nn.functional.ctc_loss(x, *(lib.tensor(a) for a in args), reduction="sum").backward()
        grads.append(x.grad.numpy())
    used = (np.arange(5)[:, None] < args[1][None, :])[..., None]
    np.testing.assert_allclose(grads[1], grads[0] - np.where(used, np.exp(lp), 0.0), rtol=1e-10, atol=1e-12)


def test_legacy_size_average_and_reduce():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 4)), _signs(rng, (3, 4))
    for kw in ({"size_average": False}, {"reduce": False}, {"size_average": True, "reduce": True}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.nn.functional.soft_margin_loss(torch.tensor(x), torch.tensor(y), **kw).numpy()
            got = F.soft_margin_loss(tp.tensor(x), tp.tensor(y), **kw).numpy()
            module = nn.HingeEmbeddingLoss(**kw)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert module.reduction == torch.nn.HingeEmbeddingLoss(**kw).reduction


# --- random forms ------------------------------------------------------------------------------

def test_rrelu_training_draws_slopes_in_range_from_the_generator():
    x = tp.tensor(-np.linspace(0.5, 2.0, 400).reshape(20, 20), requires_grad=True)
    tp.manual_seed(3)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slopes = (y / x).detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-12)  # the gradient is the slope drawn
    tp.manual_seed(3)
    np.testing.assert_array_equal(F.rrelu(x.detach(), 0.1, 0.3, training=True).numpy(), y.detach().numpy())
    positive = tp.tensor([0.5, 2.0])
    np.testing.assert_array_equal(nn.RReLU()(positive).numpy(), positive.numpy())
    z = tp.tensor([-1.0, 1.0])
    assert nn.RReLU(inplace=True)(z) is z and -1 / 3 <= float(z[0]) <= -1 / 8


def test_gumbel_softmax_soft_and_hard():
    logits = tp.tensor(np.random.default_rng(4).standard_normal((500, 3)), requires_grad=True)
    tp.manual_seed(5)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.detach().numpy().sum(1), 1.0, rtol=1e-12)
    tp.manual_seed(5)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(1) == 1).all()
    np.testing.assert_array_equal(h.argmax(1), soft.detach().numpy().argmax(1))
    w = tp.tensor(np.random.default_rng(6).standard_normal((500, 3)))
    (soft * w).sum().backward()
    soft_grad = logits.grad.numpy().copy()
    logits.grad = None
    (hard * w).sum().backward()  # straight through: the soft sample's gradient
    np.testing.assert_allclose(logits.grad.numpy(), soft_grad, rtol=1e-12, atol=1e-14)
    # each class wins in proportion to its softmax probability (the Gumbel-max trick)
    probs = tp.tensor([[math.log(0.6), math.log(0.3), math.log(0.1)]] * 4000)
    tp.manual_seed(7)
    freq = F.gumbel_softmax(probs, hard=True).numpy().mean(0)
    np.testing.assert_allclose(freq, [0.6, 0.3, 0.1], atol=0.03)


# --- errors ------------------------------------------------------------------------------------

ERRORS = [
    (lambda: F.prelu(tp.ones(2, 3), tp.ones(2)), ValueError, r"prelu: the weight has 2 elements but the input has 3"),
    (lambda: F.prelu(tp.ones(2, 3), tp.ones(3, 1)), ValueError, r"prelu: expected weight to be a scalar or 1-D"),
    (lambda: F.prelu(tp.ones(3), tp.ones(1, dtype=tp.float64)), TypeError, r"prelu: input and weight must have"),
    (lambda: F.softshrink(tp.ones(3), -1.0), ValueError, r"softshrink: lambd must be greater or equal to 0"),
    (lambda: F.rrelu(tp.ones(3), 0.5, 0.1), ValueError, r"rrelu: lower bound must be less than or equal"),
    (lambda: F.rrelu(tp.ones(3, dtype=tp.int64)), TypeError, r"rrelu: expected a floating point input"),
    (lambda: nn.Softmax2d()(tp.ones(3)), ValueError, r"Softmax2d: expected input to be 3D or 4D, got 1D"),
    (lambda: F.gaussian_nll_loss(tp.ones(2, 3), tp.ones(2, 3), tp.ones(3)), ValueError, r"var is of incorrect size"),
    (lambda: F.gaussian_nll_loss(tp.ones(2, 3), tp.ones(2, 3), tp.tensor([-1.0, 1.0])), ValueError,
     r"var has negative entry"),
    (lambda: F.gaussian_nll_loss(tp.ones(2), tp.ones(2), -1.0), ValueError, r"var has negative entry"),
    (lambda: F.gaussian_nll_loss(tp.ones(2), tp.ones(2), tp.ones(2), reduction="avg"), ValueError, r"avg is not valid"),
    (lambda: F.poisson_nll_loss(tp.ones(2), tp.ones(2), reduction="avg"), ValueError,
     r"avg is not a valid value for reduction"),
    (lambda: F.margin_ranking_loss(tp.ones(3), tp.ones(3), tp.ones(1, 3)), ValueError,
     r"margin_ranking_loss: all input tensors should have the same number of dims"),
    (lambda: F.cosine_embedding_loss(tp.ones(2, 3, 4), tp.ones(2, 3, 4), tp.ones(2, 3)), ValueError,
     r"0-D or 1-D target tensor expected"),
    (lambda: F.cosine_embedding_loss(tp.ones(2, 3), tp.ones(3), tp.ones(2)), ValueError,
     r"cosine_embedding_loss: expected 1-D inputs with a 0-D target"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3), tp.tensor([0, 1]), p=3), ValueError, r"only p == 1 and p == 2"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3), tp.tensor([0, 1, 2])), ValueError,
     r"Expected target size \[2\], but got \[3\]"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3), tp.tensor([0, 5])), IndexError, r"target out of range"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3), tp.tensor([0.0, 1.0])), TypeError, r"expected an int64 \(Long\) target"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3), tp.tensor([0, 1]), weight=tp.ones(2)), ValueError,
     r"inconsistent weight size, expected 3"),
    (lambda: F.multi_margin_loss(tp.ones(2, 3, 4), tp.tensor([0, 1])), ValueError,
     r"expected a non-empty vector or matrix"),
    (lambda: F.multilabel_margin_loss(tp.ones(2, 3), tp.tensor([0, 1, 1])), ValueError,
     r"inconsistent target size: \[3\] for input of size: \[2, 3\]"),
    (lambda: F.multilabel_margin_loss(tp.ones(2, 3), tp.tensor([[0, 5, -1], [0, 1, 2]])), IndexError,
     r"target is out of range"),
    (lambda: F.multilabel_soft_margin_loss(tp.tensor(1.0), tp.tensor(1.0)), ValueError,
     r"expected an input with a class dim"),
    (lambda: F.triplet_margin_loss(tp.ones(2, 3), tp.ones(3), tp.ones(2, 3)), ValueError,
     r"anchor 2D, positive 1D, and negative 2D inputs"),
    (lambda: F.triplet_margin_with_distance_loss(tp.ones(2, 3), tp.ones(2, 3), tp.ones(2, 3), margin=0), ValueError,
     r"margin must be greater than 0, got 0"),
    (lambda: nn.TripletMarginLoss(margin=-1.0), ValueError, r"expected margin to be greater than 0"),
    (lambda: nn.MultiMarginLoss(p=3), ValueError, r"only p == 1 and p == 2 supported"),
    (lambda: nn.MultiMarginLoss(weight=tp.ones(2, 2)), ValueError, r"expected weight to be None or 1D tensor"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.ones(2, 2, dtype=tp.int64), [5, 4], [2, 2]), ValueError,
     r"ctc_loss: expected input_lengths in \[0, 4\]"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.ones(2, 2, dtype=tp.int64), [4, 4], [3, 2]), ValueError,
     r"ctc_loss: expected target_lengths in \[0, 2\]"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.ones(2, 2, dtype=tp.int64), [4, 4], [2]), ValueError,
     r"expected target_lengths to have 2 values"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.ones(2, 2), [4, 4], [2, 2]), TypeError,
     r"targets must be class indices"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.full((2, 2), 3, dtype=tp.int64), [4, 4], [2, 2]), IndexError,
     r"target labels must be in \[0, 3\)"),
    (lambda: F.ctc_loss(tp.zeros(4, 2, 3), tp.ones(2, 2, dtype=tp.int64), [4, 4], [2, 2], blank=3), ValueError,
     r"blank must be in label range \[0, 3\)"),
]


@pytest.mark.parametrize("call, exc, match", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_bad_input_is_refused(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- compiled ----------------------------------------------------------------------------------

@pytest.mark.iree
def test_compiled_forward_and_backward_equal_eager():
    """One program with several of the losses and activations, compiled whole on iree-cpu:
    the loss and the input gradients equal eager ones."""
    rng = np.random.default_rng(8)
    x_np, w_np = rng.standard_normal((4, 3)).astype(np.float32), rng.random(3).astype(np.float32)
    y_np = rng.standard_normal((4, 3)).astype(np.float32)
    labels = tp.tensor(rng.integers(0, 3, 4))
    signs = tp.tensor(_signs(rng, 4).astype(np.float32))

    def loss(x, w, y):
        h = F.softshrink(F.prelu(x, w), 0.2) + F.hardshrink(y, 0.3)
        return (F.multi_margin_loss(h, labels, p=2) + F.triplet_margin_loss(h, y, x, swap=True)
                + F.cosine_embedding_loss(h, y, signs, margin=0.1)
                + F.gaussian_nll_loss(h, y, (y * w).abs() + 0.1, reduction="sum")
                + F.multilabel_soft_margin_loss(h, y.sigmoid()))

    def run(compiled):
        x, w, y = (tp.tensor(a, requires_grad=True) for a in (x_np, w_np, y_np))
        out = (tp.compile(loss, backend="iree-cpu", fullgraph=True) if compiled else loss)(x, w, y)
        out.backward()
        return [out.detach().numpy(), x.grad.numpy(), w.grad.numpy(), y.grad.numpy()]

    tp.compiler.reset()
    try:
        want, got = run(False), run(True)
    finally:
        tp.compiler.reset()
    for g, w in zip(got, want):  # float32 kernels that sum in another order
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.iree
def test_compiled_ctc_loss_equals_eager():
    """The CTC recursion (one step per input step) captured into one graph."""
    rng = np.random.default_rng(9)
    logits = tp.tensor(rng.standard_normal((5, 2, 4)).astype(np.float32))
    targets = tp.tensor(np.array([[1, 1, 2], [3, 0, 0]]))
    input_lengths, target_lengths = tp.tensor([5, 3]), tp.tensor([3, 1])

    def loss(x):
        return F.ctc_loss(x.log_softmax(2), targets, input_lengths, target_lengths, reduction="none")

    tp.compiler.reset()
    try:
        want = loss(logits).numpy()
        got = tp.compile(loss, backend="iree-cpu", fullgraph=True)(logits).numpy()
    finally:
        tp.compiler.reset()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    expected = torch.nn.functional.ctc_loss(torch.tensor(logits.numpy()).log_softmax(2), torch.tensor(targets.numpy()),
                                            torch.tensor([5, 3]), torch.tensor([3, 1]), reduction="none")
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)
