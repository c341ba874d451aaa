"""The capture handler interface: what eager code may ask of the dispatch handler installed.

A capture handler is what ``_dispatch.capture_handler`` installs while ops are recorded
rather than run: a compiled function's capture (``compiler.capture.session.Capture``) or the
tape that gradient rules are traced on (``compiler.autodiff.joint``). Tensor code, autograd,
optimizers and gradient clipping reach it only through this interface, asking
``_capture_hooks.active_handler()``, which gives :data:`NO_CAPTURE` where nothing is installed
(or where a handler does not declare the interface): its hooks say "not captured", so callers
never probe for attributes.

Every hook but ``__call__`` has a default here, which is what a handler that does not take
part in it does. The hooks after :attr:`CaptureHandler.captures_program` exist only on
handlers where that flag is True; callers check the flag first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

__all__ = ["CaptureHandler", "NO_CAPTURE"]


class CaptureHandler(Protocol):
    """A dispatch handler that records ops, with the hooks eager code calls on it."""

    #: True for a compiled function's capture: it can break its graph and run Python eagerly
    #: (:meth:`run_eagerly`, :meth:`run_after_program`, :meth:`graph_break`, :meth:`eagerly`),
    #: keeps guards (:meth:`add_guard`) and reads state afresh as graph inputs
    #: (:meth:`input_from`). False for handlers that only record ops.
    captures_program: ClassVar[bool] = False
    #: the symbolic sizes of the capture (a ``ShapeEnv``), or None
    shape_env: Any = None

    def __call__(self, op: Any, operands: tuple[Any, ...], attrs: dict[str, Any],
                 result_types: tuple[Any, ...]) -> Any:
        """Record ``op`` applied to ``operands``: its results, or NotImplemented to let it run
        eagerly."""
        ...

    # -- what tensor code asks of a tensor without data -----------------------------------
    def concrete_value(self, tensor: Any, why: str) -> Any:
        """Python needs the data of ``tensor`` (``bool(t)``, ``t.item()``): its array."""
        raise RuntimeError(f"{why}: this tensor stands for a value of a captured graph and has no "
                           f"data outside the capture that made it")

    def display_value(self, tensor: Any, why: str) -> None:
        """``tensor`` is about to be printed: the handler may make it concrete first."""

    def symbolic_sizes(self, tensor: Any, shape: tuple) -> tuple:
        """The shape of ``tensor`` as user code sees it (ints and SymInts)."""
        return shape

    def rebind(self, tensor: Any, value: Any) -> None:
        """An in-place update: ``tensor`` now stands for ``value``."""
        raise RuntimeError("in-place update of a captured tensor outside its capture")

    def random_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A draw from a host random generator (see ``_capture_hooks.random_source``)."""
        return fn(*args, **kwargs)

    def in_region(self) -> bool:
        """Whether a nested compile region is being traced."""
        return False

    # -- what library code asks (autograd, optimizers, gradient clipping) -----------------
    def note_grad_read(self, t: Any, guarded: bool = False) -> None:
        """Library code reads ``t.grad`` (whether it is None, its values)."""

    def zero_grad(self, t: Any, set_to_none: bool) -> bool:
        """``zero_grad()`` of ``t``; False: the caller clears it eagerly."""
        return False

    def backward_in_graph(self, outputs: Sequence[Any], grads: Sequence[Any], inputs: Sequence[Any] | None,
                          create_graph: bool) -> bool:
        """``backward()`` of captured tensors built into the graph; False: eager autograd runs."""
        return False

    # -- only where captures_program ------------------------------------------------------
    def run_eagerly(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                    reason: str) -> Any:
        """Break the graph (``reason``), run ``fn`` eagerly and return its results."""
        raise RuntimeError(f"{type(self).__name__} does not run Python eagerly")

    def run_after_program(self, fn: Callable[..., Any], args: Sequence[Any], reason: str) -> Any:
        """Python that changes only state the program reads afresh (a schedule's ``step()``)."""
        return self.run_eagerly(fn, args, {}, reason)

    def graph_break(self, reason: str, loc: Any = None) -> None:
        """Split the graph here (or raise where it must stay whole)."""
        raise RuntimeError(f"{type(self).__name__} does not break graphs")

    def eagerly(self) -> AbstractContextManager[None]:
        """A block that runs eagerly inside the capture: no op recorded, no capture current."""
        raise RuntimeError(f"{type(self).__name__} does not run Python eagerly")

    def add_guard(self, description: str, check: Callable[[], bool]) -> None:
        """A condition the captured program relies on."""
        raise RuntimeError(f"{type(self).__name__} keeps no guards")

    def input_from(self, getter: Callable[[], Any], what: str, dtype: Any = None, scheduled: bool = False) -> Any:
        """A graph input that later calls read through ``getter``."""
        raise RuntimeError(f"{type(self).__name__} takes no inputs from Python state")


class _NoCapture(CaptureHandler):
    """The hooks where nothing is captured: every one takes the eager path."""

    def __call__(self, op: Any, operands: tuple[Any, ...], attrs: dict[str, Any],
                 result_types: tuple[Any, ...]) -> Any:
        return NotImplemented


#: what ``_capture_hooks.active_handler()`` gives where no handler declaring the interface runs
NO_CAPTURE: CaptureHandler = _NoCapture()
