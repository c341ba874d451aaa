"""The backend registry: names -> backend callables, with tags and capabilities.

A backend is a callable ``backend(graph, example_inputs[, options=...]) -> run`` where
``run(*arrays) -> list[np.ndarray]`` (docs/backends.md). Built-ins are registered here and
imported on first use; third-party backends register with :func:`register_backend` or
through the ``tensorplay.backends`` entry-point group, read on the first lookup or listing.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._logging import get_logger
from ..errors import InvalidBackend
from .base import BackendCapabilities, BackendCompileError, BackendUnavailable
from .modes import list_mode_options, resolve_options
from .targets import TARGETS

__all__ = ["register_backend", "register_debug_backend", "register_experimental_backend", "unregister_backend",
           "lookup_backend", "list_backends", "get_backend_capabilities", "set_default_backend",
           "get_default_backend", "list_mode_options", "resolve_options", "BackendCapabilities",
           "BackendUnavailable", "BackendCompileError", "ENTRY_POINT_GROUP", "DEFAULT_BACKEND"]

ENTRY_POINT_GROUP = "tensorplay.backends"
DEFAULT_BACKEND = "iree-cpu"

_log = get_logger()
_lock = threading.RLock()


@dataclass
class _Entry:
    """One registered name. ``fn`` is filled on first use when ``loader`` is set (a
    ``module:attribute`` string or an entry point)."""

    name: str
    fn: Callable[..., Any] | None
    tags: tuple[str, ...] = ()
    capabilities: Any = None            # BackendCapabilities, a zero-argument probe, or None
    loader: Any = None
    origin: str = "registered"
    _caps: BackendCapabilities | None = field(default=None, repr=False)

    def load(self) -> Callable[..., Any]:
        if self.fn is None:
            self._load()
        assert self.fn is not None
        return self.fn

    def _load(self) -> None:
        loader = self.loader
        if isinstance(loader, str):
            module, _, attr = loader.partition(":")
            self.fn = getattr(importlib.import_module(module), attr)
            return
        try:
            obj = loader.load()
        except Exception as exc:
            raise BackendUnavailable(self.name, f"its entry point {loader.value!r} failed to load "
                                                f"({type(exc).__name__}: {exc})",
                                     "reinstall the package providing it") from exc
        if not callable(obj):
            raise BackendUnavailable(self.name, f"its entry point {loader.value!r} is not callable")
        self.fn = obj
        self.tags = self.tags or _tags(getattr(obj, "tags", ()))
        if self.capabilities is None:
            self.capabilities = getattr(obj, "capabilities", None)

    def caps(self) -> BackendCapabilities:
        if self._caps is None:
            declared = self.capabilities
            if declared is None and self.fn is None and self.loader is not None and not isinstance(self.loader, str):
                try:
                    self.load()
                except BackendUnavailable as exc:
                    self._caps = BackendCapabilities(name=self.name, available=False, reason=exc.reason,
                                                     install_hint=exc.install_hint)
                    return self._caps
                declared = self.capabilities
            self._caps = _as_capabilities(self.name, declared)
        return self._caps


_registry: dict[str, _Entry] = {}
_discovered = False
_removed: set[str] = set()
_default: str | Callable[..., Any] = DEFAULT_BACKEND


def _tags(tags: Any) -> tuple[str, ...]:
    if isinstance(tags, str):
        tags = (tags,)
    tags = tuple(tags or ())
    if not all(isinstance(t, str) for t in tags):
        raise TypeError(f"backend tags must be strings, got {tags!r}")
    return tags


def _as_capabilities(name: str, declared: Any) -> BackendCapabilities:
    if callable(declared) and not isinstance(declared, BackendCapabilities):
        declared = declared()
    if declared is None:
        return BackendCapabilities(name=name, description="(no capabilities declared)")
    if isinstance(declared, Mapping):
        declared = BackendCapabilities(**{"name": name, **declared})
    if not isinstance(declared, BackendCapabilities):
        raise TypeError(f"backend {name!r}: capabilities must be a BackendCapabilities, a dict of its "
                        f"fields, or a callable returning one; got {type(declared).__name__}")
    return declared if declared.name == name else declared.with_name(name)


# --- built-ins -------------------------------------------------------------------------------

def _builtin_caps(name: str) -> Callable[[], BackendCapabilities]:
    def probed() -> BackendCapabilities:
        from . import probe

        return probe.capabilities(name)

    return probed


def _eager_caps() -> BackendCapabilities:
    from .eager import CAPABILITIES

    return CAPABILITIES


def _register_builtins() -> None:
    """The IREE backends from their target records (each the ``iree`` module's attribute of
    its name without ``iree-``), then ``eager``; each imported on first use."""
    for t in TARGETS.values():
        _registry[t.name] = _Entry(t.name, None, t.tags, _builtin_caps(t.name),
                                   f"{__name__}.iree:{t.name.removeprefix('iree-')}", "builtin")
    _registry["eager"] = _Entry("eager", None, ("debug",), _eager_caps, f"{__name__}.eager:eager_backend", "builtin")


_register_builtins()


# --- entry points ----------------------------------------------------------------------------

def _discover() -> None:
    """Add the names of the ``tensorplay.backends`` entry points (once; loaded on use)."""
    global _discovered
    with _lock:
        if _discovered:
            return
        _discovered = True
        from importlib.metadata import entry_points

        try:
            eps = entry_points(group=ENTRY_POINT_GROUP)
        except Exception as exc:  # a broken installed distribution must not break compile()
            _log.warning("cannot read the %s entry points: %s", ENTRY_POINT_GROUP, exc)
            return
        for ep in eps:
            if ep.name in _removed:
                continue
            if ep.name in _registry:
                _log.warning("entry point %s = %s ignored: backend %r is already registered",
                             ep.name, ep.value, ep.name)
                continue
            _registry[ep.name] = _Entry(ep.name, None, loader=ep, origin=f"entry point {ep.value}")


# --- registration ----------------------------------------------------------------------------

def _register(fn: Callable[..., Any], name: str | None, tags: Any, capabilities: Any, replace: bool) -> None:
    if not callable(fn):
        raise TypeError(f"register_backend: a backend must be callable, got {type(fn).__name__}")
    name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name:
        raise TypeError("register_backend: pass name=... for a callable without a __name__")
    if capabilities is None:
        capabilities = getattr(fn, "capabilities", None)
    entry = _Entry(name, fn, _tags(tags), capabilities)
    if capabilities is not None and not callable(capabilities):
        entry._caps = _as_capabilities(name, capabilities)  # check it now, not at first use
    with _lock:
        _discover()
        old = _registry.get(name)
        if old is not None and not replace:
            raise ValueError(f"backend {name!r} is already registered ({old.origin}); pass replace=True "
                             f"to replace it or choose another name")
        _registry[name] = entry
        _removed.discard(name)


def register_backend(*args: Any, **kwargs: Any) -> Any:
    """Register a backend in the TensorPlay compiler registry.

    Forms: ``@register_backend``, ``@register_backend(name=..., tags=..., capabilities=...)``
    and ``register_backend(fn, name=...)``; each returns ``fn``. ``replace=True`` replaces an
    existing name (otherwise a duplicate is a ValueError).
    """
    return _registration(args, kwargs, ())


def register_debug_backend(*args: Any, **kwargs: Any) -> Any:
    """Register a backend tagged for diagnostics (``tags`` gains ``"debug"``)."""
    return _registration(args, kwargs, ("debug",))


def register_experimental_backend(*args: Any, **kwargs: Any) -> Any:
    """Register a backend tagged for experimental use (``tags`` gains ``"experimental"``)."""
    return _registration(args, kwargs, ("experimental",))


_KWARGS = ("compiler_fn", "name", "tags", "capabilities", "replace")


def _registration(args: tuple, kwargs: dict, extra_tags: tuple[str, ...]) -> Any:
    unknown = sorted(set(kwargs) - set(_KWARGS))
    if unknown:
        raise TypeError(f"register_backend: unexpected keyword(s) {', '.join(unknown)}; "
                        f"accepted: {', '.join(_KWARGS)}")
    if len(args) > 2:
        raise TypeError("register_backend takes at most (compiler_fn, name) positionally")
    if args and isinstance(args[0], str):  # @register_backend("name", ...)
        if "name" in kwargs:
            raise TypeError("register_backend: name given twice")
        kwargs["name"], args = args[0], args[1:]
    fn = args[0] if args else kwargs.pop("compiler_fn", None)
    if len(args) == 2:
        if "name" in kwargs:
            raise TypeError("register_backend: name given twice")
        kwargs["name"] = args[1]
    tags = _tags(kwargs.get("tags", ()))
    tags = tags + tuple(t for t in extra_tags if t not in tags)
    name, capabilities, replace = kwargs.get("name"), kwargs.get("capabilities"), bool(kwargs.get("replace", False))

    if fn is None:
        def decorator(compiler_fn: Callable[..., Any]) -> Callable[..., Any]:
            _register(compiler_fn, name, tags, capabilities, replace)
            return compiler_fn

        return decorator
    _register(fn, name, tags, capabilities, replace)
    return fn


def unregister_backend(name: str) -> None:
    """Remove a named backend from the compiler registry (the default falls back to
    ``iree-cpu`` if it was this one)."""
    global _default
    with _lock:
        _discover()
        if name not in _registry:
            raise _unknown(name)
        del _registry[name]
        _removed.add(name)
        if _default == name:
            _default = DEFAULT_BACKEND


# --- lookup ----------------------------------------------------------------------------------

def _unknown(name: str) -> InvalidBackend:
    names = list(_registry)
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower().replace("_", "-"), list(lowered), n=3, cutoff=0.6)
    return InvalidBackend(name, [lowered[c] for c in close])


def _entry(name: str) -> _Entry:
    with _lock:
        _discover()
        entry = _registry.get(name)
        if entry is None:
            raise _unknown(name)
        return entry


def _check_callable(fn: Any) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"a backend must be a registered name or a callable, got {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return fn
    try:
        signature.bind(object(), [])
    except TypeError:
        raise TypeError(f"backend {getattr(fn, '__name__', fn)!r} must accept (graph, example_inputs) "
                        f"positionally (and options=... when given); its signature is {signature}") from None
    return fn


def lookup_backend(backend: str | Callable[..., Any]) -> Callable[..., Any]:
    """Resolve a backend name or validate a backend callable.

    Unknown names raise :class:`InvalidBackend` with close-match suggestions; a registered
    backend that cannot run here raises :class:`BackendUnavailable` saying what is missing.
    """
    if not isinstance(backend, str):
        return _check_callable(backend)
    entry = _entry(backend)
    caps = entry.caps()
    if not caps.available:
        raise BackendUnavailable(backend, caps.reason, caps.install_hint)
    return entry.load()


def list_backends(exclude_tags: tuple[str, ...] | list[str] | None = ("debug", "experimental"), *,
                  include_unavailable: bool = False) -> list[str]:
    """Return registered backend names accepted by ``compile()``.

    Backends carrying any of ``exclude_tags`` are left out (``None`` excludes nothing);
    backends whose dependencies or device are missing are hidden unless
    ``include_unavailable`` is set.
    """
    excluded = set(_tags(exclude_tags or ()))
    with _lock:
        _discover()
        entries = list(_registry.values())
    names = []
    for entry in entries:
        if excluded and entry.loader is not None and not isinstance(entry.loader, str) and entry.fn is None:
            try:
                entry.load()  # an entry point's tags are known once it is imported
            except BackendUnavailable:
                if not include_unavailable:
                    continue
        if excluded & set(entry.tags):
            continue
        if not include_unavailable and not entry.caps().available:
            continue
        names.append(entry.name)
    return sorted(names)


def get_backend_capabilities(backend: str | Callable[..., Any]) -> Any:
    """Return the BackendCapabilities a backend declares (availability included; probing a
    built-in's device happens once, on first call)."""
    if isinstance(backend, str):
        return _entry(backend).caps()
    with _lock:
        for entry in _registry.values():
            if entry.fn is backend:
                return entry.caps()
    _check_callable(backend)
    return _as_capabilities(getattr(backend, "__name__", type(backend).__name__),
                            getattr(backend, "capabilities", None))


def set_default_backend(backend: str | Callable[..., Any] | None) -> None:
    """Set the backend used when ``compile()`` receives no backend name (``None`` restores
    ``iree-cpu``). The backend is looked up now, so a typo fails here."""
    global _default
    if backend is None:
        _default = DEFAULT_BACKEND
        return
    lookup_backend(backend)
    _default = backend


def get_default_backend() -> str | Callable[..., Any]:
    """Return the currently selected default backend."""
    return _default
