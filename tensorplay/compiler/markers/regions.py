"""Nested compile regions: a repeated block (a transformer layer) is captured once per distinct
input signature into its own function, called from every site."""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .._logging import get_logger
from ..capture.pytree import signature_key
from ._session import current_capture, describe, on_reset

__all__ = ["NestedCompileRegionOptions", "nested_compile_region", "region_of"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_log = get_logger("perf")
_tokens = itertools.count()


@dataclass
class NestedCompileRegionOptions:
    """Backend selections for a nested compiler region."""

    fw_compiler: Callable[..., Any] | None = None
    bw_compiler: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        for field in ("fw_compiler", "bw_compiler"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, str) and not callable(value):
                raise TypeError(f"NestedCompileRegionOptions.{field} must be a backend name, a "
                                f"backend callable or None, got {type(value).__qualname__}")


class _Region:
    """Bookkeeping of one marked callable: which signatures each capture made a callee for."""

    def __init__(self, fn: Callable[..., Any], options: NestedCompileRegionOptions | None,
                 max_reuse_entries: int, reuse_hash_fn: Callable[..., Any] | None):
        self.fn = fn
        self.options = options
        self.max_reuse_entries = max_reuse_entries
        self.reuse_hash_fn = reuse_hash_fn
        self.token = (next(_tokens), describe(fn))
        self.keys: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()
        self.overflowed: weakref.WeakSet[Any] = weakref.WeakSet()

    def key(self, args: tuple, kwargs: dict) -> Any:
        if self.reuse_hash_fn is not None:
            key = self.reuse_hash_fn(*args, **kwargs)
            try:
                hash(key)
            except TypeError:
                raise TypeError(f"nested_compile_region({describe(self.fn)}): reuse_hash_fn "
                                f"returned an unhashable {type(key).__qualname__}") from None
            return ("hash", key)
        try:
            return ("signature", signature_key(args), signature_key(kwargs))
        except TypeError as e:
            _log.info("nested_compile_region(%s): inlined, an argument has no signature (%s); "
                      "pass reuse_hash_fn to key it", describe(self.fn), e)
            return None

    def call(self, cap: Any, args: tuple, kwargs: dict) -> Any:
        key = self.key(args, kwargs)
        if key is None:
            return self.fn(*args, **kwargs)
        seen = self.keys.setdefault(cap, set())
        if key not in seen:
            if len(seen) >= self.max_reuse_entries:
                if cap not in self.overflowed:
                    self.overflowed.add(cap)
                    _log.warning("nested_compile_region(%s): more than max_reuse_entries=%d "
                                 "distinct input signatures in one capture; further ones are "
                                 "inlined", describe(self.fn), self.max_reuse_entries)
                return self.fn(*args, **kwargs)
            seen.add(key)
        compiler = self.options.fw_compiler if self.options is not None else None
        bw = self.options.bw_compiler if self.options is not None else None
        return cap.call_region(self.fn, args, kwargs, key=(self.token, key), compiler=compiler, bw_compiler=bw)


_regions: weakref.WeakSet[_Region] = weakref.WeakSet()


@on_reset
def _forget_keys() -> None:
    for region in list(_regions):
        region.keys.clear()
        region.overflowed = weakref.WeakSet()


def nested_compile_region(fn: Callable[_P, _R] | None = None, *, options: Any = None,
                          max_reuse_entries: int = 8,
                          reuse_hash_fn: Callable[..., Any] | None = None) -> Any:
    """Mark a callable as a reusable nested graph region.

    Eager calls run ``fn``. Under capture each distinct input signature (tensor shapes and
    dtypes, constants, module structure; or ``reuse_hash_fn(*args, **kwargs)``) is traced once
    into its own function and every call site calls it; past ``max_reuse_entries`` signatures
    in one capture the body is inlined. ``options.fw_compiler`` compiles the region with that
    backend; ``options.bw_compiler`` (default: ``fw_compiler``) compiles its backward when the
    caller trains.
    """
    if options is not None and not isinstance(options, NestedCompileRegionOptions):
        raise TypeError(f"nested_compile_region(): options must be a NestedCompileRegionOptions, "
                        f"got {type(options).__qualname__}")
    if isinstance(max_reuse_entries, bool) or not isinstance(max_reuse_entries, int) \
            or max_reuse_entries < 0:
        raise ValueError(f"nested_compile_region(): max_reuse_entries must be an int >= 0, got "
                         f"{max_reuse_entries!r}")
    if reuse_hash_fn is not None and not callable(reuse_hash_fn):
        raise TypeError(f"nested_compile_region(): reuse_hash_fn must be callable, got "
                        f"{type(reuse_hash_fn).__qualname__}")
    if fn is None:
        return functools.partial(nested_compile_region, options=options,
                                 max_reuse_entries=max_reuse_entries, reuse_hash_fn=reuse_hash_fn)
    if not callable(fn):
        raise TypeError(f"nested_compile_region() expects a callable, got {type(fn).__qualname__}")
    inner = region_of(fn)
    region = _Region(inner.fn if inner is not None else fn, options, max_reuse_entries,
                     reuse_hash_fn)
    _regions.add(region)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cap = current_capture()
        if cap is None:
            return region.fn(*args, **kwargs)
        return region.call(cap, args, kwargs)

    wrapper._tp_marker = "nested_compile_region"
    wrapper._tp_region = region
    return wrapper


def region_of(fn: Any) -> _Region | None:
    """The region bookkeeping behind a ``nested_compile_region`` wrapper, or None."""
    return getattr(getattr(fn, "__func__", fn), "_tp_region", None)
