"""``dynamic_shapes``: the spec of which argument dims are symbolic from the first call.

:func:`normalize_dynamic_shapes` checks a spec's own structure when ``compile()`` (or
``export()``) is called; :func:`check_dynamic_shapes` matches it against one call's flattened
arguments, and :func:`check_named_dims` checks after the capture that the named dims stayed
symbolic. docs/dynamic.md describes the spec.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor

__all__ = ["normalize_dynamic_shapes", "check_dynamic_shapes", "check_named_dims"]


def normalize_dynamic_shapes(spec: Any, dynamic: bool | None, params: list[str] | None) -> Any:
    """Check the spec's own structure at compile() time (argument names, dim entries)."""
    if spec is None:
        return None
    if dynamic is False:
        raise ValueError("compile(dynamic=False, dynamic_shapes=...): a dynamic_shapes spec needs "
                         "dynamic=None or dynamic=True")
    if isinstance(spec, dict):
        if params is not None:
            unknown = [k for k in spec if k not in params]
            if unknown:
                raise ValueError(f"dynamic_shapes names {', '.join(map(repr, unknown))}, which "
                                 f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} "
                                 f"of the function (parameters: {', '.join(params) or 'none'})")
        for k, v in spec.items():
            _check_spec_entry(v, k)
        return dict(spec)
    if isinstance(spec, (tuple, list)):
        for i, v in enumerate(spec):
            _check_spec_entry(v, f"[{i}]")
        return tuple(spec)
    raise TypeError(f"dynamic_shapes must be a dict keyed by argument name or a tuple/list with one "
                    f"entry per positional argument, got {type(spec).__name__}")


def _is_dim(v: Any) -> bool:
    return v is None or isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) \
        or hasattr(v, "__name__") and hasattr(v, "min")


def _check_spec_entry(v: Any, where: str) -> None:
    if v is None or _is_dim_map(v):
        return
    if isinstance(v, (tuple, list)):
        if all(_is_dim(d) for d in v):
            return
        for i, sub in enumerate(v):
            _check_spec_entry(sub, f"{where}[{i}]")
        return
    if isinstance(v, dict):
        for k, sub in v.items():
            _check_spec_entry(sub, f"{where}[{k!r}]")
        return
    raise TypeError(f"dynamic_shapes{'' if where.startswith('[') else '.'}{where}: expected None, a "
                    f"{{dim: name}} dict, a per-dim tuple of names/None, or a nested structure of "
                    f"those, got {v!r}")


def _is_dim_map(v: Any) -> bool:
    return isinstance(v, dict) and bool(v) and all(isinstance(k, int) and not isinstance(k, bool)
                                                   for k in v) and all(_is_dim(d) for d in v.values())


def _dim_name(d: Any) -> Any:
    return d.__name__ if hasattr(d, "__name__") and not isinstance(d, (str, int)) else d


def _dim_label(d: Any) -> Any:
    """A spec entry as recorded: an int (static size), a name, or a Dim (name with bounds)."""
    from .symbolic.dims import Dim

    if isinstance(d, (str, int, Dim)):
        return d
    return Dim(d.__name__, min=getattr(d, "min", None), max=getattr(d, "max", None))


def check_dynamic_shapes(spec: Any, params: list[str] | None, leaves: list[Any], paths: list[str]) -> dict:
    """Match ``spec`` against one call's arguments; returns {path: {dim: name}} or raises
    ValueError naming the argument whose spec does not fit."""
    if isinstance(spec, dict):
        by_name = dict(spec)
    else:
        if params is None:
            raise ValueError("dynamic_shapes given as a tuple, but the callable's signature is unknown; "
                             "use a dict keyed by argument name")
        if len(spec) > len(params):
            raise ValueError(f"dynamic_shapes has {len(spec)} entries but the function takes "
                             f"{len(params)} positional argument(s)")
        by_name = dict(zip(params, spec))
    resolved: dict[str, dict[int, Any]] = {}
    sizes: dict[Any, tuple[int, str]] = {}
    for name, entry in by_name.items():
        matched = [(p, leaf) for p, leaf in zip(paths, leaves) if p == name or p.startswith(name + "[")
                   or p.startswith(name + ".")]
        if not matched:
            if entry is None:
                continue
            raise ValueError(f"dynamic_shapes[{name!r}]: no argument {name!r} in this call")
        _match(entry, name, dict(matched), resolved)
    for path, dims in resolved.items():
        leaf = leaves[paths.index(path)]
        static = getattr(leaf, "_static_dims", None) or ()
        for d, label in dims.items():
            size = leaf.shape[d]
            if isinstance(label, int):
                if size != label:
                    raise ValueError(f"dynamic_shapes: {path} dim {d} is specified as {label} but has "
                                     f"size {size}")
                continue
            name = _dim_name(label)
            if static is True or (isinstance(static, (set, frozenset, tuple, list)) and d in static):
                raise ValueError(f"dynamic_shapes: {path} dim {d} is named {name!r} (dynamic) but was "
                                 f"marked static with mark_static")
            lo, hi = getattr(label, "min", None), getattr(label, "max", None)
            if (lo is not None and size < lo) or (hi is not None and size > hi):
                raise ValueError(f"dynamic_shapes: {path} dim {d} ({name!r}) has size {size}, outside "
                                 f"{label!r}'s range [{lo if lo is not None else 0}, "
                                 f"{hi if hi is not None else 'inf'}]")
            prev = sizes.setdefault(name, (size, f"{path} dim {d}", label))
            if prev[0] != size:
                raise ValueError(f"dynamic_shapes: dimension {name!r} has size {prev[0]} at {prev[1]} "
                                 f"but {size} at {path} dim {d}; dims with one name must agree")
            if not isinstance(label, str) and isinstance(prev[2], type(label)) and prev[2] != label:
                raise ValueError(f"dynamic_shapes: dimension {name!r} is given as {prev[2]!r} at {prev[1]} "
                                 f"and as {label!r} at {path} dim {d}; one name has one range")
    return resolved


def _match(entry: Any, path: str, leaves: dict[str, Any], out: dict) -> None:
    if entry is None:
        return
    leaf = leaves.get(path)
    if leaf is not None and not isinstance(leaf, Tensor) and path in leaves and (
            _is_dim_map(entry) or (isinstance(entry, (tuple, list)) and all(_is_dim(d) for d in entry))):
        raise ValueError(f"dynamic_shapes: {path} is a {type(leaf).__name__}, not a tensor; its spec "
                         f"must be None")
    if isinstance(leaf, Tensor):
        if _is_dim_map(entry):
            dims = dict(entry)
        elif isinstance(entry, (tuple, list)) and all(_is_dim(d) for d in entry):
            if len(entry) != leaf.ndim:
                raise ValueError(f"dynamic_shapes: {path} has {leaf.ndim} dims but its spec lists "
                                 f"{len(entry)}")
            dims = {i: d for i, d in enumerate(entry) if d is not None}
        else:
            raise ValueError(f"dynamic_shapes: {path} is a tensor; its spec must be a {{dim: name}} dict "
                             f"or a tuple with one entry per dim, got {entry!r}")
        for d in dims:
            if not -leaf.ndim <= d < leaf.ndim:
                raise ValueError(f"dynamic_shapes: {path} has {leaf.ndim} dims; dim {d} is out of range")
        out[path] = {d % leaf.ndim: _dim_label(v) for d, v in dims.items()}
        return
    if isinstance(entry, dict) and not _is_dim_map(entry):
        for k, sub in entry.items():
            _match(sub, f"{path}[{k!r}]" if f"{path}[{k!r}]" in leaves or any(
                p.startswith(f"{path}[{k!r}]") for p in leaves) else f"{path}.{k}", leaves, out)
        return
    if isinstance(entry, (tuple, list)):
        for i, sub in enumerate(entry):
            _match(sub, f"{path}[{i}]", leaves, out)
        return
    raise ValueError(f"dynamic_shapes: the spec for {path} does not match the argument's structure")


def check_named_dims(env: Any, spec: dict) -> None:
    """A dimension named in dynamic_shapes must stay symbolic: a ValueError when the capture
    made it a constant, or equal to a dimension of another name."""
    from .symbolic.shape_env import ShapeEnv

    assert isinstance(env, ShapeEnv)
    for s, info in env.infos.items():
        if info.name is None:
            continue
        value = env.replacements.get(s)
        if value is None:
            continue
        other = env.infos.get(value) if hasattr(value, "is_Symbol") and value.is_Symbol else None
        if other is not None and (other.name is None or other.name == info.name):
            continue
        why = next((sp for sp in env.specializations if sp.source == info.source), None)
        reason = f": {why.why}" + (f" at {why.loc}" if why is not None and why.loc is not None else "") \
            if why is not None else ""
        what = f"equal to {other.source} (dimension {other.name!r})" if other is not None else \
            f"the constant {value}"
        raise ValueError(f"dynamic_shapes: {info.source} is named {info.name!r} (dynamic), but the "
                         f"program requires it to be {what}{reason}. Remove the name from "
                         f"dynamic_shapes (or give both dimensions one name)")
