"""``tp.amp.GradScaler``: loss scaling for float16 training, with PyTorch's update rule.

``scaler.scale(loss).backward()`` multiplies the loss (and so every gradient) by the scale;
``scaler.step(opt)`` divides the gradients back (``unscale_``), skips the step when any of
them is inf or NaN, and ``scaler.update()`` halves the scale after such a step and doubles it
after ``growth_interval`` steps without one.
"""

from __future__ import annotations

import warnings
from typing import Any

from .autocast_mode import DEVICE_TYPES

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = 0, 1, 2


def _available(device: str) -> bool:
    if device == "cpu":
        return True
    from ..accelerator import _CANDIDATES
    from ..compiler.backends import probe

    return bool(probe.capabilities(dict(_CANDIDATES)[device]).available)


class GradScaler:
    """Scales losses and unscales gradients (see the module docstring)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if device not in DEVICE_TYPES:
            raise ValueError(f"GradScaler: unsupported device {device!r}; expected one of "
                             f"{', '.join(DEVICE_TYPES)}")
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: the growth factor must be > 1.0, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: the backoff factor must be < 1.0 and > 0, got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self._device = device
        if enabled and not _available(device):
            warnings.warn(f"GradScaler is enabled, but no {device!r} device is available. Disabling.",
                          stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict[int, list] = {}  # id(opt) -> [stage, found_inf]

    # --- the training-loop calls ----------------------------------------------------------

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor or nested lists/tuples of tensors) times the scale."""
        if not self._enabled:
            return outputs
        from .._tensor import Tensor

        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, "
                         f"got {type(outputs).__name__}")

    def _record(self, optimizer: Any) -> list:
        return self._per_optimizer.setdefault(id(optimizer), [_READY, False])

    def unscale_(self, optimizer: Any) -> None:
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place, and note
        whether any is inf or NaN."""
        if not self._enabled:
            return
        rec = self._record(optimizer)
        if rec[0] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if rec[0] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = 1.0 / self._scale
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                g.mul_(inv)
                if not found and not bool(g.isfinite().all()):
                    found = True
        rec[0], rec[1] = _UNSCALED, found

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not done yet) and take ``optimizer.step(*args, **kwargs)`` unless a
        gradient is inf or NaN; returns what the step returns (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        rec = self._record(optimizer)
        if rec[0] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if rec[0] == _READY:
            self.unscale_(optimizer)
        result = None if rec[1] else optimizer.step(*args, **kwargs)
        rec[0] = _STEPPED
        return result

    def update(self, new_scale: float | Any = None) -> None:
        """Adjust the scale after this iteration's steps (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            from .._tensor import Tensor

            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale should be a 1-element tensor")
                new_scale = new_scale.item()
            self._scale = float(new_scale)
        else:
            if not self._per_optimizer:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(found for _, found in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # --- accessors and state ---------------------------------------------------------------

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict:
        """PyTorch's layout: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
