"""The optimizer base: parameter groups, ``zero_grad``, ``state_dict`` in PyTorch's layout."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from typing import Any

from .._capture_hooks import guard_by_identity
from .._grad_mode import no_grad
from .._tensor import Tensor
from .. import _views
from ..profiler._state import state as _prof_state

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required: Any = _Required()


@guard_by_identity  # (a traced function that reads one guards it by identity)
class Optimizer:
    """Base of the optimizers: ``params`` is an iterable of tensors or of dicts (parameter
    groups with their own options); ``defaults`` holds the options groups do not set.

    Updates run as tp ops under ``no_grad`` on each parameter's device; per-parameter state
    (momentum buffers, moments) lives in ``state[param]`` on the same device."""

    #: 0-d state entries besides ``step`` that stay float32 whatever the parameter's dtype
    _scalars: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = defaults
        self.state: dict[Tensor, dict[str, Any]] = _IdentityDict()
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (the defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (to None by default, as PyTorch)."""
        from ..autograd.engine import zero_grads

        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    #: eager steps before the update runs as one compiled program (:meth:`step`): a short run
    #: (a test, a notebook cell) never waits for the compile
    EAGER_STEPS = 2

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient (``closure`` re-evaluates the loss
        first and its value is returned).

        After :attr:`EAGER_STEPS` eager steps, the update of all parameters runs as one cached
        program (``tp.compile`` of the per-parameter update, with the learning rate and the
        gradients as inputs, so a schedule never recompiles) while the parameters live on the
        host and no group sets ``foreach=False`` or ``differentiable=True``: PyTorch's
        multi-tensor (foreach) update without a kernel per parameter and op."""
        if _prof_state.active and not _prof_state.hooks.in_step(self):  # tensorplay.profiler records
            return _prof_state.hooks.optimizer_step(self, closure)
        loss = None
        if closure is not None:
            from .._grad_mode import enable_grad

            with enable_grad():
                loss = closure()
        program = self._step_program()
        if program is None:
            self._step_eagerly()
        else:
            program()
        return loss

    def _step_eagerly(self) -> None:
        """The update, parameter by parameter (traced when a compiled step or program runs it)."""
        with no_grad():
            run = StepValues(self)
            for group in self.param_groups:
                self._update(group, run)

    def _step_program(self) -> Any:
        """The compiled update :meth:`step` calls, or None to update eagerly: while a compiled
        function traces this step (its graph takes the update), for the first
        :attr:`EAGER_STEPS` steps, and where a parameter or option rules the program out."""
        from .. import _dispatch

        if _dispatch.current_handler() is not None:
            return None
        taken = self.__dict__.get("_eager_steps", 0)
        if taken < self.EAGER_STEPS:
            self._eager_steps = taken + 1
            return None
        for group in self.param_groups:
            if group.get("foreach") is False or group.get("differentiable"):
                return None
            for p in group["params"]:
                if _views.is_device(p) or (p.grad is not None and _views.is_device(p.grad)):
                    return None  # (each op on a device tensor runs there already)
        program = self.__dict__.get("_program")
        if program is None:
            from .. import compile as compile_fn  # (tp.compile: loads the compiler on first use)

            program = self._program = compile_fn(self._step_eagerly, name=f"{type(self).__name__}_step",
                                                 dynamic=False)
        return program

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_program", None)  # (compiled again after a copy or unpickling)
        return state

    def _update(self, group: dict[str, Any], run: StepValues) -> None:
        raise NotImplementedError(f"{type(self).__name__} defines its update")  # every optimizer here does

    def _init_state(self, group: dict[str, Any], p: Tensor, state: dict[str, Any]) -> None:
        """Fill a parameter's empty state (its step count and buffers, zeros on its device)."""

    # -- state_dict ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``, the
        parameters numbered in group order, as PyTorch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            numbered = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                numbered.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": numbered})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and per-parameter state saved by :meth:`state_dict` (from this
        library or PyTorch's layout), moved to each parameter's device and dtype."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        by_index = {i: p for mine, saved in zip(self.param_groups, groups) for i, p in zip(saved["params"], mine["params"])}
        self.state = _IdentityDict()
        for i, entries in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: _placed(v, p, k, self._scalars) for k, v in entries.items()}
        for mine, saved in zip(self.param_groups, groups):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)


class StepValues:
    """What one ``step()`` reads from the optimizer's own state.

    Eagerly: the learning rate as the group's Python number, each gradient as ``p.grad``,
    state made on first use. Under a compiled capture (``tp.compile(opt.step)`` or a whole
    training step) the values that change from step to step become graph inputs read afresh
    on every call: the learning rate (so a schedule never recompiles) and the gradients
    (``p.grad`` is a new tensor each step); state is made concretely before the update is
    traced, the step count and buffers are updated in place, and a guard keeps the rest
    (groups, options other than lr, which parameters have gradients, the state tensors)."""

    def __init__(self, opt: Optimizer):
        from .._capture_hooks import active_handler

        handler = active_handler()
        self.opt = opt
        self.capture = handler if handler.captures_program else None
        self._lr: dict[tuple, Any] = {}
        if self.capture is not None:
            self._prepare()

    @property
    def traced(self) -> bool:
        return self.capture is not None

    def _prepare(self) -> None:
        opt = self.opt
        for group in opt.param_groups:
            for p in group["params"]:  # (which have gradients: the guard below keeps it)
                self.capture.note_grad_read(p, guarded=True)
        with self.capture.eagerly():  # real tensors: state that every later call reads and updates
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.grad is not None and not opt.state.get(p):
                        state: dict[str, Any] = {}
                        opt._init_state(group, p, state)
                        if not state:  # (an update without state leaves none, as eagerly: plain SGD)
                            continue
                        opt.state[p] = state
                        if "step" in state and state["step"].device != p.device:
                            # the compiled step updates it where the parameters live (eager keeps
                            # it on the host, as PyTorch does unless capturable)
                            state["step"] = state["step"].to(p.device)
        # gradients a backward() in the same trace made are the graph's own (their guard is
        # that backward's): left out of the signature
        made = frozenset(id(p) for g in opt.param_groups for p in g["params"]
                         if p.grad is not None and not _views.has_memory(p.grad))
        first = _signature(opt, made)
        self.capture.add_guard(f"{type(opt).__name__}: its parameter groups, options other than lr, which "
                               f"parameters have gradients (shape, dtype, device) and its state tensors unchanged",
                               lambda: _signature(opt, made) == first)

    def state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        state = self.opt.state.setdefault(p, {})
        if not state:
            self.opt._init_state(group, p, state)
        return state

    def lr(self, group: dict[str, Any], p: Tensor) -> Any:
        """The group's learning rate: a number, or a 0-d input in ``p``'s dtype when traced."""
        if self.capture is None:
            return group["lr"]
        key = (id(group), p.dtype)
        if key not in self._lr:
            i = next(k for k, g in enumerate(self.opt.param_groups) if g is group)
            self._lr[key] = self.capture.input_from(lambda: group["lr"], f"param_groups[{i}]['lr']", p.dtype,
                                                        scheduled=True)
        return self._lr[key]

    def grad(self, p: Tensor, maximize: bool) -> Tensor:
        g = p.grad
        if self.capture is not None and _views.has_memory(g):  # (a gradient the trace made is used as it is)
            g = self.capture.input_from(lambda: p.grad, "a parameter's .grad")
        return -g if maximize else g

    def each(self, group: dict[str, Any]) -> Any:
        """``(p, gradient, state, step, lr)`` for each parameter of ``group`` that has a
        gradient: the gradient negated under ``maximize``, the state made on first use, the
        step count advanced (:meth:`count`) and the learning rate (:meth:`lr`)."""
        for p in group["params"]:
            if p.grad is None:
                continue
            g = self.grad(p, group["maximize"])
            state = self.state(group, p)
            step = self.count(state, p)
            yield p, g, state, step, self.lr(group, p)

    @staticmethod
    def weight_decay(p: Tensor, g: Any, lr: Any, wd: float, decoupled: bool) -> Any:
        """The gradient with L2 decay added, or (``decoupled``) unchanged with ``p`` shrunk by
        ``lr * wd`` first, as AdamW does."""
        if wd == 0:
            return g
        if decoupled:
            p.mul_(1 - lr * wd)
            return g
        return g + p * wd

    def count(self, state: dict[str, Any], p: Tensor) -> Any:
        """Advance the step count (a 0-d float32 tensor, as PyTorch keeps it) in place and
        return it: a float eagerly, a tensor of ``p``'s dtype when traced."""
        step = state["step"]
        step.add_(1.0)
        if self.capture is None:
            return float(step.item())
        return step.to(p.dtype)

    @staticmethod
    def sqrt(x: Any) -> Any:
        return x.sqrt() if isinstance(x, Tensor) else math.sqrt(x)

    @staticmethod
    def add_scaled(p: Tensor, x: Tensor, scale: Any) -> None:
        """``p += x * scale`` (``alpha`` for a number, as PyTorch's eager update rounds)."""
        if isinstance(scale, Tensor):
            p.add_(x * scale)
        else:
            p.add_(x, alpha=scale)


def _signature(opt: Optimizer, made: frozenset = frozenset()) -> tuple:
    out = []
    for group in opt.param_groups:
        options = tuple((k, repr(v)) for k, v in sorted(group.items()) if k not in ("params", "lr"))
        params = []
        for p in group["params"]:
            g = p.grad
            grad = "made" if id(p) in made else None if g is None else (tuple(g.shape), g.dtype, str(g.device))
            state = opt.state.get(p) or {}
            params.append((id(p), grad, tuple((k, id(v)) for k, v in sorted(state.items()))))
        out.append((options, tuple(params)))
    return tuple(out)


def from_torch(value: Any) -> Any:
    """A PyTorch tensor as a tensor of this library with its dtype (bfloat16 through float32,
    which holds it exactly); anything else as it is."""
    if isinstance(value, Tensor) or not (hasattr(value, "detach") and hasattr(value, "cpu")):
        return value
    import numpy as np

    from ..ops.creation import tensor

    value = value.detach().cpu()
    if str(value.dtype) == "torch.bfloat16":
        value = value.float()
    return tensor(np.array(value.numpy()))


def _placed(value: Any, p: Tensor, key: str, scalars: tuple[str, ...]) -> Any:
    """A state entry as a tensor on ``p``'s device, in ``p``'s dtype, except the step count
    and the optimizer's other 0-d ``scalars``, which stay float32 as the optimizer makes them."""
    value = from_torch(value)
    if not isinstance(value, Tensor):
        return value
    from ..dialects.tp.dtypes import float32

    dtype = float32 if key == "step" or key in scalars else p.dtype
    return value.detach().to(p.device).to(dtype).clone()


class _IdentityDict(dict):
    """A dict keyed by tensor identity (tensors compare elementwise, so they do not hash by value)."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[int, Tensor] = {}

    def __getitem__(self, p: Tensor) -> Any:
        return super().__getitem__(id(p))

    def __setitem__(self, p: Tensor, value: Any) -> None:
        self._keys[id(p)] = p
        super().__setitem__(id(p), value)

    def __contains__(self, p: object) -> bool:
        return super().__contains__(id(p))

    def get(self, p: Tensor, default: Any = None) -> Any:
        return super().get(id(p), default)

    def setdefault(self, p: Tensor, default: Any = None) -> Any:
        if p not in self:
            self[p] = default
        return self[p]

    def items(self) -> Any:  # type: ignore[override]
        return [(self._keys[k], v) for k, v in super().items()]

    def keys(self) -> Any:  # type: ignore[override]
        return [self._keys[k] for k in super().keys()]

    def __iter__(self) -> Any:
        return iter(self.keys())
