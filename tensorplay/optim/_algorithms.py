"""SGD, Adam, AdamW and RMSprop with PyTorch's update rules (its single-tensor forms), as tp ops."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..ops.creation import tensor, zeros_like
from ..ops import elementwise as E
from .optimizer import Optimizer, required

__all__ = ["SGD", "Adam", "AdamW", "RMSprop"]


def _check(name: str, value: float, low: float = 0.0) -> None:
    if not value >= low:
        raise ValueError(f"Invalid {name}: {value}")


def _grad(p: Any, maximize: bool) -> Any:
    return -p.grad if maximize else p.grad


def _step_count(state: dict) -> float:
    """Advance the parameter's step (a float32 0-d tensor, as PyTorch keeps it) and return it."""
    step = state.get("step")
    state["step"] = tensor(1.0 if step is None else float(step.item()) + 1.0)
    return float(state["step"].item())


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (Nesterov), dampening and weight decay."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None):
        if lr is not required:
            _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, group: dict[str, Any]) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov = group["weight_decay"], group["nesterov"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = _grad(p, group["maximize"])
            if wd != 0:
                g = g + p * wd
            if momentum != 0:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                buf = g.clone() if buf is None else buf * momentum + g * (1 - dampening)
                state["momentum_buffer"] = buf
                g = g + buf * momentum if nesterov else buf
            p.add_(g, alpha=-lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with optional AMSGrad and L2 weight decay added to the gradient."""

    _decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable, fused=fused))

    def _update(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad = group["weight_decay"], group["amsgrad"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = _grad(p, group["maximize"])
            state = self.state.setdefault(p, {})
            if "exp_avg" not in state:
                state["exp_avg"], state["exp_avg_sq"] = zeros_like(p), zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            step = _step_count(state)
            if wd != 0:
                if self._decoupled:
                    p.mul_(1 - lr * wd)
                else:
                    g = g + p * wd
            m = state["exp_avg"] = E.lerp(state["exp_avg"], g, 1 - beta1)
            v = state["exp_avg_sq"] = state["exp_avg_sq"] * beta2 + g * g * (1 - beta2)
            bias1 = 1 - beta1 ** step
            bias2_sqrt = math.sqrt(1 - beta2 ** step)
            if amsgrad:
                v = state["max_exp_avg_sq"] = E.maximum(state["max_exp_avg_sq"], v)
            denom = v.sqrt() / bias2_sqrt + eps
            p.add_(m / denom, alpha=-lr / bias1)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): the parameter shrinks by
    ``lr * weight_decay`` before the Adam step."""

    _decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, **kwargs: Any):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)


class RMSprop(Optimizer):
    """RMSprop (Hinton) with optional momentum, centering and weight decay."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = _grad(p, group["maximize"])
            state = self.state.setdefault(p, {})
            if "square_avg" not in state:
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
            _step_count(state)
            if wd != 0:
                g = g + p * wd
            sq = state["square_avg"] = state["square_avg"] * alpha + g * g * (1 - alpha)
            if centered:
                ga = state["grad_avg"] = E.lerp(state["grad_avg"], g, 1 - alpha)
                avg = (sq - ga * ga).sqrt() + eps
            else:
                avg = sq.sqrt() + eps
            if momentum > 0:
                buf = state["momentum_buffer"] = state["momentum_buffer"] * momentum + g / avg
                p.add_(buf, alpha=-lr)
            else:
                p.add_(g / avg, alpha=-lr)
