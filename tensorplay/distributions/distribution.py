"""The ``Distribution`` base class: shapes, argument validation, sampling entry points."""

from __future__ import annotations

from typing import Any, ClassVar

from .._grad_mode import no_grad
from .._tensor import Size, Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(value: Any, what: str, where: str) -> Size:
    if isinstance(value, Tensor) or not isinstance(value, (tuple, list, Size)):
        raise TypeError(f"{where}: {what} must be a tuple of ints (or tensorplay.Size), got {type(value).__name__}")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        raise TypeError(f"{where}: {what} must hold ints, got {tuple(value)!r}")
    return Size(tuple(value))


class Distribution:
    """A probability distribution over tensors, with PyTorch's ``torch.distributions`` API.

    ``batch_shape`` is the shape of independent parameter sets, ``event_shape`` the shape of
    one draw; ``sample(sample_shape)`` returns ``sample_shape + batch_shape + event_shape``.
    With ``validate_args`` on (the default, as ``Distribution.set_default_validate_args``
    leaves it), parameters are checked against ``arg_constraints`` when the distribution is
    built and values against ``support`` in ``log_prob``.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: ClassVar[dict] = {}
    support: Any = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions built without ``validate_args``."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (), validate_args: bool | None = None):
        name = type(self).__name__
        self._batch_shape = _size(batch_shape, "batch_shape", name)
        self._event_shape = _size(event_shape, "event_shape", name)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # a parameter computed from the one given (probs from logits)
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                        f"invalid values:\n{value}")

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """This distribution with its parameters expanded (not copied) to ``batch_shape``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement expand()")

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: the square root of ``variance``."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not support rsample (has_rsample is False); "
                                  "use sample()")

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        """``exp(entropy())``."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        if not isinstance(sample_shape, Size):
            sample_shape = _size(sample_shape, "sample_shape", f"{type(self).__name__}.sample")
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Any) -> None:
        if not isinstance(value, Tensor):
            raise ValueError(  # noqa: TRY004  (PyTorch's exception type)
                f"The value argument to log_prob must be a Tensor, got {type(value).__name__}")
        shape = tuple(value.shape)
        event = tuple(self._event_shape)
        start = len(shape) - len(event)
        if shape[start:] != event:
            raise ValueError(f"The right-most size of value must match event_shape: {Size(shape)} vs "
                             f"{self._event_shape}.")
        expected = tuple(self._batch_shape) + event
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(shape)} vs "
                                 f"{Size(expected)}.")
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {shape}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n"
                             f"{value}")

    def _checked_instance(self, cls: type, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ is not cls.__init__:
            raise TypeError(f"Subclass {type(self).__name__} of {cls.__name__} that defines its own __init__ "
                            "must also define its own expand()")
        return type(self).__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        parts = []
        for p in self.arg_constraints:
            if p in self.__dict__:
                v = self.__dict__[p]
                parts.append(f"{p}: {v if v.numel() == 1 else v.shape}")
        return f"{type(self).__name__}({', '.join(parts)})"
