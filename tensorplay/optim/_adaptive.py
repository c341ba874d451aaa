"""Adadelta, Adagrad, Adamax, NAdam, RAdam, ASGD and Rprop with PyTorch's update rules (its
single-tensor forms), as tp ops that run eagerly or inside a compiled step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import elementwise
from ..ops.creation import full_like, ones_like, tensor
from ._algorithms import _check, _zeros
from .optimizer import Optimizer, StepValues

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "Rprop"]


def _check_betas(betas: tuple[float, float]) -> None:
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def _scalar_state(value: float, p: Any) -> Any:
    """A 0-d float32 state entry on ``p``'s device (PyTorch keeps these in float32)."""
    from .. import float32

    return tensor(value, dtype=float32, device=p.device)


class Adadelta(Optimizer):
    """Adadelta (Zeiler): steps scaled by the ratio of running RMS of updates and of gradients."""

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        _check("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["square_avg"], state["acc_delta"] = _zeros(p), _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, False)
            sq, acc = state["square_avg"], state["acc_delta"]
            sq.copy_(sq * rho + g * g * (1 - rho))
            delta = (acc + eps).sqrt() / (sq + eps).sqrt() * g
            acc.copy_(acc * rho + delta * delta * (1 - rho))
            run.add_scaled(p, delta, -lr)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): per-element steps scaled by the root of the summed squared
    gradients, with optional learning-rate decay. Its state exists from construction on."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(group, p, self.state.setdefault(p, {}))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        lr_decay, eps, wd = group["lr_decay"], group["eps"], group["weight_decay"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, False)
            clr = lr / ((step - 1) * lr_decay + 1)
            total = state["sum"]
            total.copy_(total + g * g)
            run.add_scaled(p, g / (total.sqrt() + eps), -clr)


class Adamax(Optimizer):
    """Adamax (Kingma & Ba): Adam with the infinity norm in place of the second moment."""

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["exp_avg"], state["exp_inf"] = _zeros(p), _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, False)
            m, inf = state["exp_avg"], state["exp_inf"]
            m.copy_(elementwise.lerp(m, g, 1 - beta1))
            inf.copy_(elementwise.maximum(inf * beta2, g.abs() + eps))
            run.add_scaled(p, m / inf, -lr / (1 - beta1 ** step))


class NAdam(Optimizer):
    """NAdam (Dozat): Adam with Nesterov momentum and a momentum schedule (``momentum_decay``);
    ``decoupled_weight_decay=True`` shrinks the parameters as AdamW does."""

    _scalars = ("mu_product",)

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        _check("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["mu_product"] = _scalar_state(1.0, p)
        state["exp_avg"], state["exp_avg_sq"] = _zeros(p), _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        decay = group["momentum_decay"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
            mu = (1.0 - 0.5 * 0.96 ** (step * decay)) * beta1
            mu_next = (1.0 - 0.5 * 0.96 ** ((step + 1) * decay)) * beta1
            product = state["mu_product"]
            product.copy_(product * mu)
            if run.traced:
                product_now = product.to(p.dtype)
            else:
                product_now = float(product.item())
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.copy_(elementwise.lerp(m, g, 1 - beta1))
            v.copy_(v * beta2 + g * g * (1 - beta2))
            denom = (v / (1 - beta2 ** step)).sqrt() + eps
            run.add_scaled(p, g / denom, -lr * (1.0 - mu) / (1.0 - product_now))
            run.add_scaled(p, m / denom, -lr * mu_next / (1.0 - product_now * mu_next))


class RAdam(Optimizer):
    """RAdam (Liu et al.): Adam whose adaptive step is rectified by the variance of its
    estimate (plain momentum steps while that is not yet tractable)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["exp_avg"], state["exp_avg_sq"] = _zeros(p), _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.copy_(elementwise.lerp(m, g, 1 - beta1))
            v.copy_(v * beta2 + g * g * (1 - beta2))
            bias2 = 1 - beta2 ** step
            corrected = m / (1 - beta1 ** step)
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias2
            rect_sq = (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            if run.traced:  # both branches, selected by the step count's value
                adaptive = run.sqrt(bias2) / (v.sqrt() + eps)
                p.sub_(corrected * lr * elementwise.where(rho_t > 5.0, adaptive * run.sqrt(rect_sq), 1.0))
            elif rho_t > 5.0:
                adaptive = bias2 ** 0.5 / (v.sqrt() + eps)
                p.sub_(corrected * lr * adaptive * rect_sq ** 0.5)
            else:
                p.sub_(corrected * lr)


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky): SGD with a decaying step size ``eta`` and a running
    average ``ax`` of the parameters from step ``t0`` on."""

    _scalars = ("eta", "mu")

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0.0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        _check("learning rate", lr)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["eta"] = _scalar_state(group["lr"], p)
        state["mu"] = _scalar_state(1.0, p)
        state["ax"] = _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        lambd, alpha, t0, wd = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, False)
            eta, mu, ax = state["eta"], state["mu"], state["ax"]
            if run.traced:
                eta_now = eta.to(p.dtype)
                p.mul_(1 - eta_now * lambd)
                p.sub_(g * eta_now)
                ax.copy_(ax + (p - ax) * mu.to(p.dtype))
                eta.copy_(lr / (lr * step * lambd + 1) ** alpha)
                mu.copy_((step - t0).clamp(min=1.0).reciprocal())
            else:
                eta_now = float(eta.item())
                p.mul_(1 - lambd * eta_now)
                p.add_(g, alpha=-eta_now)
                if float(mu.item()) != 1:
                    ax.add_((p - ax) * mu)
                else:
                    ax.copy_(p)
                eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                mu.copy_(tensor(1 / max(1, step - t0)))


class Rprop(Optimizer):
    """Rprop (Riedmiller & Braun): per-element step sizes grown by ``etas[1]`` while the
    gradient keeps its sign and shrunk by ``etas[0]`` when it flips, within ``step_sizes``;
    the learning rate is the initial step size (later changes of it have no effect, as in
    PyTorch)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False):
        _check("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["prev"] = _zeros(p)
        state["step_size"] = full_like(p, group["lr"])

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        (minus, plus), (low, high) = group["etas"], group["step_sizes"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = run.grad(p, group["maximize"])
            state = run.state(group, p)
            run.count(state, p)
            prev, size = state["prev"], state["step_size"]
            agree = (g * prev).sign()
            flipped = agree < 0
            # (in p's dtype)
            factor = elementwise.where(agree > 0, plus, elementwise.where(flipped, minus, ones_like(agree)))
            size.copy_((size * factor).clamp(low, high))
            g = elementwise.where(flipped, 0.0, g)
            p.sub_(g.sign() * size)
            prev.copy_(g)

