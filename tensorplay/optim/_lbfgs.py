"""L-BFGS with PyTorch's algorithm (two-loop recursion, optional strong-Wolfe line search) and
its ``state_dict`` layout. Its loop depends on values (losses, curvature, line-search
comparisons), so it runs eagerly; inside a compiled function its step runs eagerly at a
graph break."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from .._grad_mode import enable_grad, no_grad
from .._tensor import Tensor
from ..ops.creation import zeros
from ..ops.shape import cat
from .optimizer import from_torch as _from_torch
from ._algorithms import _check
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                   bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through two points with their slopes, clipped to ``bounds``
    (the interval's midpoint when the cubic has no minimum)."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (low + high) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        point = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        point = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(point, low), high)


def _strong_wolfe(evaluate: Callable[[float], tuple[float, Tensor]], t: float, d: Tensor, f: float, g: Tensor,
                  gtd: float, c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, Tensor, float, int]:
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (bracketing, then zooming
    with cubic interpolation); returns the loss, flat gradient and step found and the number
    of evaluations."""
    d_norm = float(d.abs().max().item())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d).item())
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, b_f, b_g, b_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        step = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = step
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d).item())
        it += 1
    if it == max_ls:
        bracket, b_f, b_g, b_gtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    slow = False
    low, high = (0, 1) if b_f[0] <= b_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], b_f[0], b_gtd[0], bracket[1], b_f[1], b_gtd[1])
        # keep away from the bracket's ends unless progress stalls twice
        margin = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < margin:
            if slow or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - margin if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + margin
                slow = False
            else:
                slow = True
        else:
            slow = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d).item())
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= b_f[low]:
            bracket[high], b_f[high], b_g[high], b_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if b_f[0] <= b_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], b_f[high], b_g[high], b_gtd[high] = bracket[low], b_f[low], b_g[low], b_gtd[low]
            bracket[low], b_f[low], b_g[low], b_gtd[low] = t, f_new, g_new, gtd_new
    return b_f[low], b_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS (Nocedal): quasi-Newton steps from the last ``history_size`` curvature pairs,
    up to ``max_iter`` iterations (``max_eval`` loss evaluations) per :meth:`step`, with a
    fixed step ``lr`` or ``line_search_fn="strong_wolfe"``. One parameter group only;
    ``step(closure)`` needs the closure that recomputes the loss (and its gradients)."""

    def __init__(self, params: Iterable[Any], lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):
        _check("learning rate", lr)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # -- flat views of the parameters -----------------------------------------------------------
    def _flat_grad(self) -> Tensor:
        return cat([zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None else p.grad.reshape(-1)
                    for p in self._params], 0)

    def _add_to_params(self, step: float, direction: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(p.shape), alpha=step)
            offset += n

    def _evaluate(self, closure: Callable[[], Any]) -> Any:
        with enable_grad():
            return closure()

    # -- the step -------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations on the loss ``closure()`` returns; returns
        the loss of its first evaluation."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step() requires a closure that clears the gradients, computes the loss, "
                            f"calls backward() and returns the loss; got {type(closure).__name__}")
        from .._capture_hooks import active_handler

        handler = active_handler()
        if handler.captures_program:
            return handler.run_eagerly(type(self)._run, (self, closure), {},
                                       "LBFGS.step() (its iterations depend on the loss and gradient values)")
        return self._run(closure)

    def _run(self, closure: Callable[[], Any]) -> Any:
        with no_grad():
            return self._iterate(closure)

    def _iterate(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_loss = self._evaluate(closure)
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max().item()) <= tol_grad:
            return first_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if float(ys.item()) > 1e-10:
                    if len(old_dirs) == history_size:  # forget the oldest pair
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                # two-loop recursion: d = -H g
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-float(al[i].item()))
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=float((al[i] - be_i).item()))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, float((1.0 / flat_grad.abs().sum()).item())) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d).item())
            if gtd > -tol_change:  # not a descent direction
                break

            ls_evals = 0
            if line_search is not None:
                start = [p.clone() for p in self._params]

                def evaluate(step: float, start: list = start, d: Tensor = d) -> tuple[float, Tensor]:
                    self._add_to_params(step, d)
                    value = float(self._evaluate(closure))
                    grad = self._flat_grad()
                    for p, p0 in zip(self._params, start):
                        p.copy_(p0)
                    return value, grad

                loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad, gtd,
                                                             tolerance_change=tol_change, max_ls=max_eval - evals)
                self._add_to_params(t, d)
                converged = float(flat_grad.abs().max().item()) <= tol_grad
            else:
                self._add_to_params(t, d)
                converged = False
                if n_iter != max_iter:
                    loss = float(self._evaluate(closure))
                    flat_grad = self._flat_grad()
                    converged = float(flat_grad.abs().max().item()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if float((d * t).abs().max().item()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return first_loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; the history lists' tensors (from this library
        or PyTorch) are placed on the parameters' device, keeping their dtype."""
        device = self._params[0].device
        state = {i: {k: [_from_torch(x) for x in v] if isinstance(v, list) else _from_torch(v)
                     for k, v in entries.items()}
                 for i, entries in state_dict["state"].items()}
        super().load_state_dict({**state_dict, "state": state})
        for entries in self.state.values():
            for key, value in entries.items():
                if isinstance(value, list):
                    entries[key] = [x.detach().to(device).clone() if isinstance(x, Tensor) else x for x in value]
