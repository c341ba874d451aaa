"""Markers that change what capture runs for a call: a graph-time substitute
(``substitute_in_graph``), a value computed once (``assume_constant_result``), an opaque traced
unit with structured arguments (``nonstrict_trace``)."""

from __future__ import annotations

import copy
import functools
import inspect
import threading
import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .._logging import get_logger
from ..capture.pytree import check_pytree, is_constant, leaves
from . import _session
from ._redirect import route, unroute
from ._session import current_capture, defined_at, describe, is_capture_tensor

__all__ = ["substitute_in_graph", "substitute_for", "assume_constant_result", "nonstrict_trace"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_log = get_logger("guards")


def _guard_mutable_constants(cap: Any, what: str, args: tuple, kwargs: dict) -> None:
    """Guard constants read through lists, dicts and mutable dataclasses by value: they are
    re-read on later calls, so a mutation recompiles instead of reusing a stale graph."""
    for leaf in list(leaves(args, "args")) + list(leaves(kwargs, "kwargs")):
        if leaf.container is None or not is_constant(leaf.value):
            continue
        container, key, value = leaf.container, leaf.key, copy.copy(leaf.value)

        def check(container=container, key=key, value=value) -> bool:
            try:
                now = container[key] if isinstance(container, (list, dict)) \
                    else getattr(container, key)
            except (KeyError, IndexError, AttributeError):
                return False
            return type(now) is type(value) and now == value

        cap.add_guard(f"{what}: {leaf.path} == {value!r}", check)


# -- substitute_in_graph ---------------------------------------------------------------------

_substitutes: dict[int, tuple[Any, Any, bool]] = {}  # id(original) -> (original, substitute, fold)
_WILDCARD = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _signature_ident(sig: inspect.Signature) -> tuple:
    """Parameter names, kinds and defaults (annotations and the names of *args/**kwargs aside)."""
    return tuple((None if p.kind in _WILDCARD else p.name, p.kind, p.default)
                 for p in sig.parameters.values())


def _check_signatures(original_fn: Any, substitute: Any) -> None:
    try:
        original_sig = inspect.signature(original_fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: nothing to compare against
    substitute_sig = inspect.signature(substitute)
    wildcard = _signature_ident(inspect.signature(lambda *args, **kwargs: None))
    a, b = _signature_ident(original_sig), _signature_ident(substitute_sig)
    if a != b and wildcard not in (a, b):
        raise TypeError(
            f"substitute_in_graph: the signature of {describe(substitute)}{substitute_sig} does not "
            f"match that of {describe(original_fn)}{original_sig}: parameter names, kinds and "
            f"defaults must be equal (or one side (*args, **kwargs)); pass "
            f"skip_signature_check=True to register it anyway")


def substitute_for(fn: Any) -> Callable[..., Any] | None:
    """The graph-time implementation registered for ``fn``, or None."""
    hit = _substitutes.get(id(fn))
    return hit[1] if hit is not None and hit[0] is fn else None


_inside = threading.local()  # ids of originals whose substitute this thread is running


def substitute_in_graph(original_fn: Callable[_P, _R], *, can_constant_fold_through: bool = False,
                        skip_signature_check: bool = False
                        ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Register a graph-time implementation for a callable.

    ``@substitute_in_graph(original)`` over ``def substitute(...)``: under capture, calls of
    ``original`` (and of the returned callable) trace ``substitute``; eager calls run
    ``original``. With ``can_constant_fold_through`` a call whose arguments hold no captured
    tensor runs ``original`` at capture time and bakes its result into the graph.
    """
    if not callable(original_fn):
        raise TypeError(f"substitute_in_graph() expects a callable, got "
                        f"{type(original_fn).__qualname__}")

    def register(substitute: Callable[_P, _R]) -> Callable[_P, _R]:
        if not callable(substitute):
            raise TypeError(f"@substitute_in_graph({describe(original_fn)}) expects a function, "
                            f"got {type(substitute).__qualname__}")
        if not skip_signature_check:
            _check_signatures(original_fn, substitute)
        existing = _substitutes.get(id(original_fn))
        if existing is not None and existing[0] is original_fn:
            raise ValueError(
                f"substitute_in_graph: {describe(original_fn)} already has a graph substitute, "
                f"{describe(existing[1])} ({defined_at(existing[1])}); a callable takes one")
        _substitutes[id(original_fn)] = (original_fn, substitute, can_constant_fold_through)
        what = f"substitute_in_graph({describe(original_fn)})"
        key = id(original_fn)

        def handler(call: Callable[..., Any]) -> Callable[..., Any]:
            """What a call does under capture; ``call`` runs the original unredirected."""

            def handle(cap: Any, args: tuple, kwargs: dict) -> Any:
                running = _inside.__dict__.setdefault("ids", set())
                if key in running:  # the substitute calls the original: that call is traced
                    return call(*args, **kwargs)
                if can_constant_fold_through and not _holds_capture_tensor(args, kwargs):
                    with _session.at_capture_time():
                        result = call(*args, **kwargs)
                    _guard_mutable_constants(cap, what, args, kwargs)
                    _log.info("%s folded at capture time to %r", what, result)
                    return result
                running.add(key)
                try:
                    return substitute(*args, **kwargs)
                finally:
                    running.discard(key)

            return handle

        handle = handler(original_fn)
        route(original_fn, "substitute_in_graph", handler)

        @functools.wraps(substitute)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cap = current_capture()
            if cap is None:
                return original_fn(*args, **kwargs)
            return handle(cap, args, kwargs)

        wrapper._tp_marker = "substitute_in_graph"
        wrapper._tp_original = original_fn
        wrapper._tp_substitute = substitute
        return wrapper

    return register


def _unregister(original_fn: Any) -> None:
    """Forget the substitute of ``original_fn`` and stop redirecting its calls (for tests)."""
    hit = _substitutes.get(id(original_fn))
    if hit is not None and hit[0] is original_fn:
        del _substitutes[id(original_fn)]
        unroute(original_fn)


def _holds_capture_tensor(args: tuple, kwargs: dict) -> bool:
    return any(is_capture_tensor(leaf.value)
               for leaf in list(leaves(args, "args")) + list(leaves(kwargs, "kwargs")))


# -- assume_constant_result ------------------------------------------------------------------

_constant_caches: "weakref.WeakSet[_ConstantCache]" = weakref.WeakSet()


class _ConstantCache:
    """Results of one assume_constant_result callable, keyed by its (constant) arguments."""

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}


@_session.on_reset
def _clear_constants() -> None:
    for cache in list(_constant_caches):
        cache.values.clear()


def assume_constant_result(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that a callable returns one stable value across captures.

    Under capture the first call (per distinct constant arguments) runs ``fn`` and later
    captures reuse that value without calling it, until ``tensorplay.compiler.reset()``; this
    holds for calls of ``fn`` itself and of the returned wrapper. Eager calls always run ``fn``.
    """
    if not callable(fn):
        raise TypeError(f"assume_constant_result() expects a callable, got {type(fn).__qualname__}")
    cache = _ConstantCache()
    _constant_caches.add(cache)
    what = f"assume_constant_result function {describe(fn)}"

    def handler(call: Callable[..., Any]) -> Callable[..., Any]:
        """What a call does under capture; ``call`` runs ``fn`` unredirected."""

        def handle(cap: Any, args: tuple, kwargs: dict) -> Any:
            for leaf in list(leaves(args, "args")) + list(leaves(kwargs, "kwargs")):
                if is_capture_tensor(leaf.value):
                    raise TypeError(f"{what}: {leaf.path} is a tensor being captured; its result can "
                                    f"only be assumed constant when its arguments are constants")
            try:
                key = (args, tuple(sorted(kwargs.items())))
                hash(key)
            except TypeError:
                raise TypeError(f"{what}: arguments must be hashable constants to key the assumed "
                                f"result") from None
            if key in cache.values:
                return cache.values[key]
            with _session.at_capture_time():
                value = call(*args, **kwargs)
            cache.values[key] = value
            _log.info("%s: assumed constant %r until tensorplay.compiler.reset()", what, value)
            return value

        return handle

    handle = handler(fn)
    route(fn, "assume_constant_result", handler)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return fn(*args, **kwargs)
        return handle(cap, args, kwargs)

    wrapper._tp_marker = "assume_constant_result"
    wrapper._tp_constant_cache = cache
    return wrapper


# -- nonstrict_trace ---------------------------------------------------------------------------

def nonstrict_trace(traceable_fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Capture a callable as an opaque operation with structured arguments.

    Arguments and results are tuples, lists, dicts and dataclasses of tensors and constants;
    under capture the body is traced as one unit (reading a tensor's value inside raises
    GraphCaptureError) and constants held in mutable containers are guarded by value.
    """
    if not callable(traceable_fn):
        raise TypeError(f"nonstrict_trace() expects a callable, got "
                        f"{type(traceable_fn).__qualname__}")
    name = f"nonstrict_trace function {describe(traceable_fn)}"

    @functools.wraps(traceable_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return traceable_fn(*args, **kwargs)
        check_pytree(name, args, "args")
        check_pytree(name, kwargs, "kwargs")
        _guard_mutable_constants(cap, name, args, kwargs)
        result = cap.call_atomic(traceable_fn, args, kwargs, name)
        check_pytree(name, result, "result")
        return result

    wrapper._tp_marker = "nonstrict_trace"
    return wrapper
