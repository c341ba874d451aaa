"""``compile`` and the objects it returns: :class:`CompiledFunction` (options, the call: a
cache hit runs its entry, a miss captures) and :class:`CompiledModule`, the module wrapper.

The rest of a compiled call lives by concern: the cache of entries, their lookup and
``reset`` in :mod:`.entries`; what a miss does (guards, the capture session, installing the
entry, segmented reruns) in :mod:`.specialize`; how compiled graphs join autograd in
:mod:`.training`; which dims a capture makes symbolic in :mod:`.dynamic_policy`. ``explain``
is in :mod:`.explanation`, the ``dynamic_shapes`` spec checks in :mod:`.dynamic_shapes`.

docs/compiler.md describes the behaviour in users' terms (capture and guards, graph breaks,
every keyword of ``compile``).
"""

from __future__ import annotations

import functools
import inspect
import keyword
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..runtime.program import BACKEND_OF_DRIVER
from ..runtime.storage import device_name, driver_of_arrays
from ..dialects.tp.graph import Graph
from ..nn.modules.module import Module
from ..profiler._state import state as _prof_state
from . import dynamic_policy, specialize, tracedir
from ._logging import get_logger
from .capture import pytree
from .capture.guards import CallKey, call_key, mask_key
from .capture.programs import ConfiguredBackend
from .capture.session import current_capture, exporting, is_compiling, is_exporting
from .dynamic_shapes import normalize_dynamic_shapes
from .entries import GRAPH, SEGMENTED, Entry, group_for, lookup, register_reset_hook, reset
from .entries import passthrough as _passthrough  # noqa: F401  (imported from here by explanation)
from .training import differentiator

__all__ = ["compile", "reset", "is_compiling", "is_exporting", "exporting", "CompiledFunction",
           "CompiledModule", "register_reset_hook", "DEFAULT_RECOMPILE_LIMIT"]

DEFAULT_RECOMPILE_LIMIT = 8

_log_perf = get_logger("perf")


# -- compile -----------------------------------------------------------------------------------

def _default_name(fn: Any) -> str:
    target = getattr(fn, "__func__", fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or type(target).__name__
    name = name.rsplit("<locals>.", 1)[-1]
    name = re.sub(r"\W+", "_", name).strip("_") or "main"
    if name[0].isdigit():
        name = "_" + name
    return name


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"compile(name={name!r}): the name must be a Python identifier; it names "
                         f"the compiled module, its artifacts and its log lines")
    return name


def _backend_label(backend: Any) -> str:
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__name__", type(backend).__name__)


class CompiledFunction:
    """A callable compiled by :func:`compile`: it captures on a cache miss, reuses guarded
    graphs on a hit, and runs functions with graph breaks in segments."""

    def __init__(self, fn: Callable[..., Any], *, fullgraph: bool = False, dynamic: bool | None = None,
                 backend: str | Callable[..., Any] | None = None, mode: str | None = None,
                 options: dict[str, Any] | None = None, name: str | None = None, disable: bool = False,
                 recompile_limit: int | None = None, isolate_recompiles: bool = False,
                 strict_native: bool = False, dynamic_shapes: Any = None,
                 _module: Module | None = None):
        if not callable(fn):
            raise TypeError(f"compile() expects a callable or a tensorplay.nn.Module, got "
                            f"{type(fn).__name__}")
        for label, value in (("fullgraph", fullgraph), ("disable", disable),
                             ("isolate_recompiles", isolate_recompiles), ("strict_native", strict_native)):
            if not isinstance(value, bool):
                raise TypeError(f"compile({label}=...) expects a bool, got {value!r}")
        if dynamic is not None and not isinstance(dynamic, bool):
            raise TypeError(f"compile(dynamic=...) expects True, False or None, got {dynamic!r}")
        if recompile_limit is not None and (isinstance(recompile_limit, bool)
                                            or not isinstance(recompile_limit, int) or recompile_limit < 1):
            raise ValueError(f"compile(recompile_limit={recompile_limit!r}): expected a positive int")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"compile(options=...) expects a dict, got {type(options).__name__}")
        self._fn = fn
        self._options = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                             name=name, disable=disable, recompile_limit=recompile_limit,
                             isolate_recompiles=isolate_recompiles, strict_native=strict_native,
                             dynamic_shapes=dynamic_shapes, _module=_module)
        self.__wrapped__ = fn
        functools.update_wrapper(self, getattr(fn, "__func__", fn) if _module is None else type(_module),
                                 assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=())
        self.fullgraph = fullgraph or strict_native
        self.dynamic = dynamic
        self.mode = mode
        self.disabled = disable
        self.recompile_limit = recompile_limit if recompile_limit is not None else DEFAULT_RECOMPILE_LIMIT
        self.isolate_recompiles = isolate_recompiles
        self.strict_native = strict_native
        if _module is None and inspect.ismethod(fn) and fn.__func__ is Module._call_impl:
            default = type(fn.__self__).__name__  # Module.compile(): named after the model
        else:
            default = _default_name(fn if _module is None else type(_module))
        self.name = _check_name(name) if name is not None else default
        self._module = _module
        owner = _module if _module is not None else (
            fn.__self__ if inspect.ismethod(fn) and fn.__func__ is Module._call_impl else None)
        # a module's calls are named after forward's parameters (guards, logs, dynamic_shapes)
        self._signature = _signature(owner.forward if owner is not None else fn)
        self.dynamic_shapes = normalize_dynamic_shapes(dynamic_shapes, dynamic, self._signature)
        from .backends import DEFAULT_BACKEND, get_default_backend, lookup_backend, resolve_options

        chosen = backend if backend is not None else get_default_backend()
        self.options = resolve_options(mode, options)
        self.backend = chosen
        if not disable:
            self._backend = ConfiguredBackend(lookup_backend(chosen), self.options, _backend_label(chosen))
            if strict_native:
                _check_native_backend(chosen)
        else:
            self._backend = None
        # no backend named and the default is the CPU's: tensors on a GPU device are compiled for
        # that device's backend (as torch.compile follows the tensors' device)
        self._follow_device = backend is None and chosen == DEFAULT_BACKEND
        self._device_backends: dict[str, ConfiguredBackend] = {}
        # (the dynamic policy too: a dynamic=True wrapper of a callable whose static wrapper ran
        # first gets the program for every size, not the static entry)
        self._config = (id(self._backend.fn) if self._backend else None,
                        tuple(sorted((k, repr(v)) for k, v in self.options.items())), strict_native,
                        self._follow_device, dynamic)
        self._group = group_for(fn, self.name, isolate_recompiles)
        self._group_anchor = fn  # keeps the group key's objects alive as long as the group

    # -- introspection ----------------------------------------------------------------------
    @property
    def original(self) -> Callable[..., Any]:
        """The callable that was compiled."""
        return self._fn

    @property
    def compile_count(self) -> int:
        """Programs this wrapper's backend compiled (whole graphs and segments)."""
        compiles = self._backend.compiles if self._backend is not None else 0
        return compiles + sum(b.compiles for b in self._device_backends.values())

    def _backend_for(self, arrays: Sequence[Any]) -> ConfiguredBackend:
        """The backend a graph reading ``arrays`` compiles with: the device backend of the GPU
        tensors among them when no backend was named, else the one chosen."""
        if not self._follow_device:
            return self._backend
        driver = driver_of_arrays(arrays)
        if driver is None:
            return self._backend
        backend = self._device_backends.get(driver)
        if backend is None:
            from .backends import lookup_backend

            name = BACKEND_OF_DRIVER[driver]
            backend = self._device_backends[driver] = ConfiguredBackend(lookup_backend(name), self.options, name)
            _log_perf.info("%s: tensors on %s, compiled with %s (no backend was named)", self.name,
                           device_name(driver), name)
        return backend

    def cache_info(self) -> dict[str, Any]:
        """Entries (graph and segmented), distinct segment programs and the budget."""
        g = self._group
        return {"entries": g.count, "graph_entries": sum(e.kind == GRAPH for e in g.order),
                "segmented_entries": sum(e.kind == SEGMENTED for e in g.order),
                "segment_programs": len(g.segments), "regions": len(g.regions),
                "recompile_limit": self.recompile_limit, "limit_reached": g.warned}

    @property
    def graphs(self) -> list[Graph]:
        """The whole graphs of this callable's entries, oldest first."""
        return [e.graph for e in self._group.order if e.graph is not None]

    def __repr__(self) -> str:
        state = "disabled" if self.disabled else f"backend={_backend_label(self.backend)!r}"
        return f"<CompiledFunction {self.name} ({state})>"

    def __reduce__(self) -> tuple:
        # Copies and pickles compile the same callable afresh (caches are not copied), so a
        # deep-copied module gets a compiled call of its own.
        return (_rebuild, (self._fn, self._options))

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self, instance)

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.disabled or current_capture() is not None or _compile_disabled():
            return self._fn(*args, **kwargs)
        since = _prof_state.active and time.perf_counter_ns()  # (the profiler's guard phase starts here)
        leaves, treedef = pytree.flatten_call(args, kwargs)
        key = call_key(treedef, leaves)
        with self._group.lock:
            entry = self._lookup(key, leaves)
            if entry is None and self._group.masks:
                for mask in self._group.masks:
                    masked = mask_key(key, mask)
                    if masked is not None:
                        entry = self._lookup(masked, leaves)
                        if entry is not None:
                            break
            if entry is not None:
                entry.hits += 1
                if _prof_state.active:  # tensorplay.profiler records the call and its phases
                    return _prof_state.hooks.compiled_call(self.name, entry.kind, since, self._run_entry, args,
                                                           kwargs, leaves, entry)
                return self._run_entry(args, kwargs, leaves, entry)
            if _prof_state.active:
                return _prof_state.hooks.span(f"tp.compile capture: {self.name}", "compile", self._capture, args,
                                              kwargs, leaves, treedef, key)
            return self._capture(args, kwargs, leaves, treedef, key)

    def _run_entry(self, args: tuple, kwargs: dict, leaves: list[Any], entry: Entry) -> Any:
        if entry.kind == GRAPH:
            return entry.run(leaves)
        if entry.trace_scope is not None:
            with tracedir.active(entry.trace_scope):
                return specialize.run_segmented(self, args, kwargs, leaves, entry)
        return specialize.run_segmented(self, args, kwargs, leaves, entry)

    def _lookup(self, key: CallKey, leaves: list[Any]) -> Entry | None:
        entry, failed = lookup(self._group, key, leaves, self._config, self.fullgraph, self.name)
        if failed is not None:
            self._last_failure = failed  # (the reason of the miss, if no entry serves the call)
        return entry

    def _capture(self, args: tuple, kwargs: dict, leaves: list[Any], treedef: pytree.TreeDef,
                 key: CallKey) -> Any:
        return specialize.capture(self, args, kwargs, leaves, treedef, key)

    # -- what capture and explain ask of the compiled callable ----------------------------------
    def _source_fn(self) -> Any:
        """The function whose code the user wrote: a module's ``forward`` for a compiled module."""
        fn = self._fn
        owner = self._module if self._module is not None else (
            fn.__self__ if inspect.ismethod(fn) and fn.__func__ is Module._call_impl else None)
        return type(owner).forward if owner is not None else fn

    def _differentiator(self, leaves: list[Any] | None, name: str, *, log: bool = True) -> Callable[..., Any]:
        return differentiator(leaves, name, self.options.get("partitioner", "min_cut"), log=log)

    def _paths(self, treedef: pytree.TreeDef) -> list[str]:
        return specialize.arg_paths(self, treedef)

    def _check_dynamic(self, leaves: list[Any], paths: list[str]) -> dict:
        return dynamic_policy.check_dynamic(self.dynamic_shapes, self._signature, leaves, paths)

    def _dynamic_dims(self, leaves: list[Any], paths: list[str], spec: dict) -> dict[int, dict[int, Any]]:
        return dynamic_policy.dynamic_dims(self.dynamic, self._group, leaves, paths, spec)


def _rebuild(fn: Callable[..., Any], options: dict[str, Any]) -> CompiledFunction:
    return CompiledFunction(fn, **options)


def _compile_disabled() -> bool:
    """Inside ``disable(fn)`` and ``disable_capture()`` compiled callables run eagerly."""
    global _compile_disabled
    from .markers._session import compile_disabled

    _compile_disabled = compile_disabled
    return compile_disabled()


def _check_native_backend(backend: Any) -> None:
    from .backends import get_backend_capabilities

    caps = get_backend_capabilities(backend)
    if caps.target is None:
        raise ValueError(f"compile(strict_native=True): backend {_backend_label(backend)!r} declares no "
                         f"native compile target (it runs graphs through the reference implementations); "
                         f"choose a native backend such as 'iree-cpu'")


def _signature(fn: Any) -> list[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return names


# -- the module wrapper ------------------------------------------------------------------------

class CompiledModule(Module):
    """What ``compile(module)`` returns: a Module whose calls run compiled.

    The original is ``_orig_mod`` (a child module, so ``train()``, ``to()`` and
    ``parameters()`` reach it); attributes not found on the wrapper are the original's,
    attribute assignment goes to the original, and ``state_dict()`` /
    ``load_state_dict()`` use the original's keys, so checkpoints move between the two.
    """

    def __init__(self, module: Module, **options: Any):
        Module.__init__(self)
        self._modules["_orig_mod"] = module
        object.__setattr__(self, "_compiled", CompiledFunction(module._call_impl, _module=module, **options))

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        modules = self.__dict__.get("_modules")
        if modules is not None and "_orig_mod" in modules:
            modules["_orig_mod"].training = mode

    @property
    def compiled_function(self) -> CompiledFunction:
        """The compiled call (its cache, counters and graphs)."""
        return self.__dict__["_compiled"]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        if modules is None or "_orig_mod" not in modules:
            raise AttributeError(name)
        return getattr(modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("training", "_compiled") or name in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator:
        return self._orig_mod.named_parameters(*args, **kwargs)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Iterator:
        return self._orig_mod.named_buffers(*args, **kwargs)

    def get_submodule(self, target: str) -> Module:
        return self._orig_mod.get_submodule(target)

    def get_parameter(self, target: str) -> Any:
        return self._orig_mod.get_parameter(target)

    def get_buffer(self, target: str) -> Any:
        return self._orig_mod.get_buffer(target)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))


def compile(model: Callable[..., Any] | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable[..., Any] | None = None, mode: str | None = None,
            options: dict[str, Any] | None = None, name: str | None = None, disable: bool = False,
            recompile_limit: int | None = None, isolate_recompiles: bool = False, strict_native: bool = False,
            dynamic_shapes: Any = None) -> Callable[..., Any]:
    """Compile a callable through the TensorPlay capture and lowering pipeline."""
    opts = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, name=name,
                disable=disable, recompile_limit=recompile_limit, isolate_recompiles=isolate_recompiles,
                strict_native=strict_native, dynamic_shapes=dynamic_shapes)
    if model is None:
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            return compile(fn, **opts)

        return decorate
    if isinstance(model, CompiledModule):
        model = model._orig_mod
    elif isinstance(model, CompiledFunction) and model._module is None:
        model = model._fn
    if isinstance(model, Module):
        return CompiledModule(model, **opts)
    return CompiledFunction(model, **opts)
