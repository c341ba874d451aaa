"""SGD, Adam, AdamW and RMSprop with PyTorch's update rules (its single-tensor forms), as tp ops."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops.creation import tensor, zeros
from ..ops import elementwise
from .optimizer import Optimizer, StepValues, required

__all__ = ["SGD", "Adam", "AdamW", "RMSprop"]


def _check(name: str, value: float, low: float = 0.0) -> None:
    if not value >= low:
        raise ValueError(f"Invalid {name}: {value}")


def _zeros(p: Any) -> Any:
    """Zeros of ``p``'s shape, dtype and device (made from its type: ``p`` may be traced)."""
    return zeros(*p.shape, dtype=p.dtype, device=p.device)


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

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        # PyTorch's first step copies the gradient into the buffer; from zeros with no
        # dampening the first update gives exactly that (0 * momentum + g)
        if group["momentum"] != 0 and group["dampening"] == 0:
            state["momentum_buffer"] = _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        momentum, dampening = group["momentum"], group["dampening"]
        wd, nesterov = group["weight_decay"], group["nesterov"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = run.grad(p, group["maximize"])
            if wd != 0:
                g = g + p * wd
            if momentum != 0:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = g.clone()
                else:
                    buf.copy_(buf * momentum + g * (1 - dampening))
                g = g + buf * momentum if nesterov else buf
            lr = run.lr(group, p)
            run.add_scaled(p, g, -lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with optional AMSGrad and L2 weight decay added to the gradient
    (``decoupled_weight_decay=True``: AdamW's decay)."""

    _decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=bool(decoupled_weight_decay or self._decoupled)))

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["exp_avg"], state["exp_avg_sq"] = _zeros(p), _zeros(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        (beta1, beta2), eps = group["betas"], group["eps"]
        wd, amsgrad = group["weight_decay"], group["amsgrad"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, group.get("decoupled_weight_decay", self._decoupled))
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.copy_(elementwise.lerp(m, g, 1 - beta1))
            v.copy_(v * beta2 + g * g * (1 - beta2))
            bias1 = 1 - beta1 ** step
            bias2_sqrt = run.sqrt(1 - beta2 ** step)
            if amsgrad:
                top = state["max_exp_avg_sq"]
                top.copy_(elementwise.maximum(top, v))
                v = top
            denom = v.sqrt() / bias2_sqrt + eps
            run.add_scaled(p, m / denom, -lr / bias1)


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

    def _init_state(self, group: dict[str, Any], p: Any, state: dict[str, Any]) -> None:
        state["step"] = tensor(0.0)
        state["square_avg"] = _zeros(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = _zeros(p)
        if group["centered"]:
            state["grad_avg"] = _zeros(p)

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        alpha, eps = group["alpha"], group["eps"]
        wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p, g, state, step, lr in run.each(group):
            g = run.weight_decay(p, g, lr, wd, False)
            sq = state["square_avg"]
            sq.copy_(sq * alpha + g * g * (1 - alpha))
            if centered:
                ga = state["grad_avg"]
                ga.copy_(elementwise.lerp(ga, g, 1 - alpha))
                avg = (sq - ga * ga).sqrt() + eps
            else:
                avg = sq.sqrt() + eps
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.copy_(buf * momentum + g / avg)
                run.add_scaled(p, buf, -lr)
            else:
                run.add_scaled(p, g / avg, -lr)
