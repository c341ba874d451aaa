"""``tp.export(model, args, ...)``: capture a model's entry points for deployment."""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Mapping
from typing import Any

from ..nn.modules.module import Module
from ._capture import TracedEntry, WeightTable, capture_entry
from .program import ExportedProgram, _check_backend

__all__ = ["export", "Args"]


class Args:
    """Example arguments of one entry point with keywords: ``Args(x, mask=m)``.

    A plain tuple gives positional arguments only; a single tensor is one argument."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"Args({', '.join(parts)})"


def export(model_or_fn: Any, args: Any = None, kwargs: Mapping[str, Any] | None = None, *,
           method_args: Mapping[str, Any] | None = None, backend: str = "iree-cpu",
           options: Mapping[str, Any] | None = None, external_weights: bool = False,
           parameter_scope: str = "model", name: str | None = None,
           dynamic_shapes: Any = None, method_dynamic_shapes: Mapping[str, Any] | None = None) -> ExportedProgram:
    """Capture ``model_or_fn`` for deployment as one IREE module.

    ``args``/``kwargs`` are example arguments of ``forward`` (of a function: of the call;
    ``args=None`` exports no ``forward``); ``method_args`` gives them for every method
    marked ``@tp.compiler.export`` (``{"encode": (x,)}``, ``Args(...)`` for keywords, a
    list with one entry per declaration for ``@overload_method`` methods, which become
    ``encode$0``, ``encode$1``...). Every entry point is captured as one whole graph with
    ``is_exporting()`` true; a graph break is a GraphCaptureError with the user's
    ``file:line``. Shapes and non-tensor arguments are fixed to the examples'.

    ``backend`` is one of the IREE backends (``iree-cpu``, ``iree-vulkan``,
    ``iree-cuda``, ``iree-rocm``, ``iree-vmvx``); compiling needs no such device.
    ``options`` are compile options (tensorplay.compiler.list_mode_options): export picks
    portable targets (x86-64-v2 CPUs, sm_80, gfx942) unless ``target_cpu``,
    ``cuda_target``, ``rocm_target`` or ``vulkan_target`` say otherwise.
    ``external_weights=True`` keeps weights out of the vmfb, in an IREE parameter archive
    (keys: the module's state names, in ``parameter_scope``).
    ``dynamic_shapes`` names dynamic dimensions of ``forward``'s arguments, as in
    ``compile``: ``{"idx": {1: Dim("seq", min=1, max=512)}}`` (a dict by argument name, or
    a tuple in argument order; equal names share one size; ints restate static sizes).
    Those dims are symbolic in the exported function, so one vmfb runs every size in range;
    the signature shows them by name and the runtime checks calls against the bounds and
    relations the capture recorded (e.g. two inputs that must share a dim). A named dim
    the program pins to a constant is a ValueError with the reason.
    ``method_dynamic_shapes`` gives such a spec for exported methods (``{"encode": {"idx":
    {1: Dim("seq")}}}``).
    """
    from ..compiler.api import CompiledFunction, CompiledModule
    from ..compiler.backends.modes import validate_options

    _check_backend(backend)
    options = validate_options(options or {})
    if not isinstance(external_weights, bool):
        raise TypeError(f"export(external_weights=...) expects a bool, got {external_weights!r}")
    if not isinstance(parameter_scope, str) or not parameter_scope:
        raise ValueError(f"export(parameter_scope=...) expects a non-empty string, got {parameter_scope!r}")
    if isinstance(model_or_fn, CompiledModule):
        model_or_fn = model_or_fn._orig_mod
    elif isinstance(model_or_fn, CompiledFunction):
        model_or_fn = model_or_fn._module if model_or_fn._module is not None else model_or_fn._fn
    if not callable(model_or_fn):
        raise TypeError(f"export() expects a tensorplay.nn.Module or a function, got "
                        f"{type(model_or_fn).__name__}")
    module = model_or_fn if isinstance(model_or_fn, Module) else None
    plan = _plan(model_or_fn, module, args, kwargs, method_args)
    specs = dict(method_dynamic_shapes or {}) if method_dynamic_shapes is not None else {}
    if not isinstance(specs, dict):
        raise TypeError("export(method_dynamic_shapes=...) expects a dict of method name -> dynamic_shapes")
    if "forward" in specs:
        raise ValueError("give forward's spec as export(dynamic_shapes=...), not in method_dynamic_shapes")
    if dynamic_shapes is not None:
        specs["forward"] = dynamic_shapes
    dynamic = {method: _dynamic_dims_of(method, spec, plan) for method, spec in specs.items()
               if spec is not None}
    label = _module_name(name, model_or_fn)
    table = WeightTable()
    regions: dict = {}
    entries: list[TracedEntry] = []
    for entry, method, overload, fn, a, kw in plan:
        spec, dims = dynamic.get(method, (None, None))
        entries.append(capture_entry(fn, a, kw, entry=entry, method=method, overload=overload, root=module,
                                     table=table, regions=regions, dynamic_dims=dims, dynamic_spec=spec))
    return ExportedProgram(label, entries, backend, options, external_weights=external_weights,
                           parameter_scope=parameter_scope)


# -- which entry points, with which examples ---------------------------------------------------

Plan = list[tuple[str, str, "int | None", Any, tuple, dict]]


def _plan(target: Any, module: Module | None, args: Any, kwargs: Mapping[str, Any] | None,
          method_args: Mapping[str, Any] | None) -> Plan:
    from ..compiler.markers import exported_methods, is_unused, overloads_of

    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"export(kwargs=...) expects a dict, got {type(kwargs).__name__}")
    if method_args is not None and not isinstance(method_args, Mapping):
        raise TypeError(f"export(method_args=...) expects a dict of method name -> example arguments, "
                        f"got {type(method_args).__name__}")
    if module is None:
        if method_args:
            raise ValueError("export(method_args=...) is for the methods of a tensorplay.nn.Module; "
                             "a function has one entry point, forward")
        if args is None and not kwargs:
            raise ValueError("export(fn, args): example arguments are needed to capture the function")
        a, kw = _example(args, kwargs, "args")
        return [("forward", "forward", None, target, a, kw)]
    examples: dict[str, Any] = dict(method_args or {})
    if "forward" in examples:
        raise ValueError("give forward's example arguments as export(model, args, kwargs), not in "
                         "method_args")
    cls = type(module)
    marked = exported_methods(module)
    for m in examples:
        if m in marked:
            continue
        attr = inspect.getattr_static(module, m, None)
        if attr is None:
            raise ValueError(f"method_args names {m!r}, which is not a method of {cls.__name__}")
        if is_unused(attr):
            raise ValueError(f"method_args names {cls.__name__}.{m}, which is marked "
                             f"@tp.compiler.unused (eager-only) and cannot be exported")
        raise ValueError(f"method_args names {cls.__name__}.{m}, which is not marked "
                         f"@tp.compiler.export; mark it to make it an entry point")
    missing = [m for m in marked if m not in examples]
    if missing:
        raise ValueError(f"{cls.__name__} marks {', '.join(missing)} with @tp.compiler.export; give "
                         f"example arguments: export(model, args, method_args={{{missing[0]!r}: (...)}})")
    plan: Plan = []
    if args is not None or kwargs:
        if getattr(cls, "forward") is Module.forward:
            raise ValueError(f"{cls.__name__} has no forward(); export only its @export methods "
                             f"(args=None, method_args=...)")
        overloads = overloads_of(cls, "forward")
        if overloads and isinstance(args, list) and not kwargs:
            example: Any = args
        else:
            a, kw = _example(args, kwargs, "args")
            example = Args(*a, **kw)
        plan += _method_entries(module, "forward", example, overloads)
    for m in marked:
        plan += _method_entries(module, m, examples[m], overloads_of(cls, m))
    if not plan:
        raise ValueError(f"nothing to export from {cls.__name__}: give forward's example arguments "
                         f"(args) or mark methods with @tp.compiler.export")
    return plan


def _method_entries(module: Module, method: str, example: Any, overloads: list) -> Plan:
    fn = module if method == "forward" else getattr(module, method)
    cls = type(module).__name__
    if not overloads:
        if isinstance(example, list):
            raise TypeError(f"example arguments of {cls}.{method}: a list is for methods with "
                            f"@overload_method declarations (one entry per declaration); give a tuple "
                            f"or Args(...)")
        a, kw = _example(example, None, f"method_args[{method!r}]")
        return [(method, method, None, fn, a, kw)]
    if not isinstance(example, list) or len(example) != len(overloads):
        got = f"a list of {len(example)}" if isinstance(example, list) else type(example).__name__
        raise ValueError(f"{cls}.{method} has {len(overloads)} @overload_method declarations, so it exports "
                         f"{', '.join(f'{method}${i}' for i in range(len(overloads)))}: give a list with "
                         f"example arguments for each declaration, in order (got {got})")
    entries: Plan = []
    for i, (decl, ex) in enumerate(zip(overloads, example)):
        a, kw = _example(ex, None, f"method_args[{method!r}][{i}]")
        try:
            inspect.signature(decl).bind(module, *a, **kw)
        except TypeError as exc:
            raise TypeError(f"example arguments {i} of {cls}.{method} do not fit overload {i} "
                            f"{method}{inspect.signature(decl)}: {exc}") from None
        entries.append((f"{method}${i}", method, i, fn, a, kw))
    return entries


def _example(example: Any, kwargs: Mapping[str, Any] | None, where: str) -> tuple[tuple, dict]:
    kw = dict(kwargs or {})
    if isinstance(example, Args):
        return tuple(example.args), {**example.kwargs, **kw}
    if example is None:
        return (), kw
    if isinstance(example, tuple):
        return example, kw
    return (example,), kw  # one argument (a tensor, or a structure of tensors)


def _module_name(name: str | None, target: Any) -> str:
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"export(name={name!r}): the name must be a Python identifier; it names the "
                             f"IREE module and its files")
        return name
    raw = type(target).__name__ if isinstance(target, Module) else getattr(target, "__name__", "program")
    label = re.sub(r"\W+", "_", raw).strip("_") or "program"
    return "_" + label if label[0].isdigit() else label


def _dynamic_dims_of(method: str, spec: Any, plan: Plan) -> tuple[dict, dict[int, dict[int, Any]]]:
    """A method's dynamic_shapes matched against its example: ``({path: {dim: label}},
    {leaf index: {dim: name | Dim}})``, the second holding the dynamic (named) dims only."""
    from ..compiler.dynamic_shapes import check_dynamic_shapes, normalize_dynamic_shapes
    from ..compiler.capture import pytree
    from ._capture import arg_paths

    where = "dynamic_shapes" if method == "forward" else f"method_dynamic_shapes[{method!r}]"
    found = [p for p in plan if p[1] == method]
    if not found:
        what = "no forward is exported" if method == "forward" else f"{method!r} is not an exported method"
        raise ValueError(f"export({where}=...) describes {method}'s arguments, but {what}")
    if len(found) > 1:
        raise ValueError(f"export({where}=...) describes one signature, but {method} has {len(found)} "
                         f"@overload_method declarations; export them without dynamic shapes or as "
                         f"separate programs")
    _, _, _, fn, a, kw = found[0]
    try:
        target = fn.forward if isinstance(fn, Module) else fn
        params = [p.name for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = None
    spec = normalize_dynamic_shapes(spec, None, params)
    leaves, treedef = pytree.flatten((a, kw))
    paths = arg_paths(fn, treedef)
    resolved = check_dynamic_shapes(spec, params, leaves, paths)
    dims: dict[int, dict[int, Any]] = {}
    for path, by_dim in resolved.items():
        named = {d: label for d, label in by_dim.items() if not isinstance(label, int)}
        if named:
            dims[paths.index(path)] = named
    return resolved, dims
