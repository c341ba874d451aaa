"""Capturing the entry points of an export: each method runs once with its example
arguments under an exporting capture session (full graph), and the captured graph is put
in the form export compiles: the call's tensor arguments first, then the tensors the method
read (parameters, buffers, closure tensors, arrays fixed at capture), which become module
globals shared by every entry point.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._tensor import Tensor
from ..compiler.capture import pytree
from ..compiler.capture.bindings import ArgInput, ArrayInput, AttachedInput, Binding, RandomInput, ReadInput
from ..compiler.capture.guards import free_objects, is_module
from ..compiler.capture.session import Capture, CaptureConfig, TraceResult, exporting
from ..dialects.tp.graph import Graph, Value
from ..dialects.tp.types import TensorType, type_of_array
from ..runtime.signature import TensorSpec
from .. import _views

__all__ = ["Weight", "WeightTable", "TracedEntry", "capture_entry", "module_state_names", "arg_paths", "impl_name"]

#: IREE's VM and MLIR symbol names allow letters, digits, ``_``, ``$`` and ``.``
_SYMBOL = re.compile(r"[^A-Za-z0-9_$.]")


@dataclass
class Weight:
    """A tensor an entry point reads that is not one of its arguments: a module global.

    ``key`` names it in the parameter archive (the module's state name, e.g.
    ``transformer.h.0.attn.c_attn.weight``); ``constant`` globals (arrays fixed at capture)
    always stay in the vmfb."""

    key: str
    array: np.ndarray
    kind: str  # "parameter", "buffer", "tensor", "state" (an optimizer's) or "constant"
    #: updated by an entry point (a training step): a mutable global that entry stores to
    mutable: bool = False

    @property
    def constant(self) -> bool:
        return self.kind == "constant"

    @property
    def symbol(self) -> str:
        return ("__const." if self.constant else "__weight.") + _SYMBOL.sub("_", self.key)


@dataclass
class WeightTable:
    """Weights of all entry points, each once, in order of first use."""

    names: dict[int, tuple[str, str]] = field(default_factory=dict)  # id(tensor) -> (state name, kind)
    weights: list[Weight] = field(default_factory=list)
    _by_id: dict[int, Weight] = field(default_factory=dict)
    _keep: list[Any] = field(default_factory=list)

    def for_binding(self, binding: Binding, entry: str) -> Weight:
        if isinstance(binding, AttachedInput):
            tensor = binding.tensor if binding.tensor is not None else binding.target()
            hit = self._by_id.get(id(tensor))
            if hit is None:
                name, kind = self.names.get(id(tensor), (None, "tensor"))
                if name is None:
                    name = f"tensor_{sum(w.kind == 'tensor' for w in self.weights)}"
                hit = self._add(id(tensor), Weight(name, np.array(_views.array(tensor)), kind))
                self._keep.append(tensor)  # ids stay unique while the table lives
            return hit
        if isinstance(binding, ArrayInput):
            n = sum(w.constant for w in self.weights)
            return self._add(id(binding), Weight(f"{entry}.constant_{n}", np.array(binding.first), "constant"))
        raise AssertionError(type(binding).__name__)

    def _add(self, key: int, weight: Weight) -> Weight:
        self._by_id[key] = weight
        self.weights.append(weight)
        return weight


def module_state_names(module: Any) -> dict[int, tuple[str, str]]:
    """id(tensor) -> (state name, "parameter" | "buffer") for a module's parameters and buffers."""
    names: dict[int, tuple[str, str]] = {}
    if module is None:
        return names
    for name, p in module.named_parameters():
        names.setdefault(id(p), (name, "parameter"))
    for name, b in module.named_buffers():
        names.setdefault(id(b), (name, "buffer"))
    return names


@dataclass
class TracedEntry:
    """One entry point: its graph (``n_args`` argument inputs, then one input per weight in
    ``weights``), argument specs and the JSON structure of its results."""

    name: str
    method: str
    overload: int | None
    graph: Graph
    inputs: list[TensorSpec]
    weights: list[Weight]
    tree: Any
    #: size checks of the dynamic dims (``ShapeGuard.portable`` over argument numbers), or None
    dims: dict[str, Any] | None = None
    #: each result's shape as the signature shows it (dynamic sizes as text over dim names)
    out_shapes: list[tuple[int | str, ...]] = field(default_factory=list)
    #: (weight, graph output index): the new value of each weight the entry updates in place,
    #: stored to its global after the call (outputs past ``n_results`` are these)
    stores: list[tuple[Weight, int]] = field(default_factory=list)

    @property
    def n_results(self) -> int:
        return len(self.graph.outputs) - len(self.stores)

    @property
    def n_args(self) -> int:
        return len(self.inputs)

    @property
    def impl_name(self) -> str:
        return impl_name(self.name)


def impl_name(entry: str) -> str:
    """The private function holding an entry point's body (the entry itself loads the weights)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", entry) + "_impl"


def capture_entry(fn: Any, args: tuple, kwargs: dict, *, entry: str, method: str, overload: int | None,
                  root: Any, table: WeightTable, regions: dict,
                  dynamic_dims: dict[int, dict[int, Any]] | None = None,
                  dynamic_spec: dict | None = None) -> TracedEntry:
    """Trace one call of ``fn`` as a whole graph in exporting mode and shape it for export.

    ``dynamic_dims`` (flattened leaf index -> {dim: name | Dim}) makes those argument dims
    symbolic; ``dynamic_spec`` is the resolved dynamic_shapes they came from."""
    leaves, treedef = pytree.flatten((args, kwargs))
    paths = arg_paths(fn, treedef)
    modules: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def add(prefix: str, m: Any) -> None:
        if id(m) not in seen:
            seen.add(id(m))
            modules.append((prefix, m))
            for tid, (name, kind) in module_state_names(m).items():
                table.names.setdefault(tid, (prefix + name, kind))

    if root is not None:
        add("", root)
    for path, leaf in zip(paths, leaves):
        if is_module(leaf):
            add(f"{path}.", leaf)
    for label, obj, _ in free_objects(fn):
        if is_module(obj):
            add(f"{_quoted_name(label)}.", obj)
    config = CaptureConfig(name=_SYMBOL.sub("_", entry).replace("$", "_"), fullgraph=True, exporting=True,
                           regions=regions, dynamic_dims=dynamic_dims or None)
    with exporting():
        trace = Capture(config).run_trace(fn, args, kwargs, leaves, paths, modules)
    if trace is None:  # cannot happen under fullgraph; kept as a clear failure
        raise RuntimeError(f"export of {entry}: the capture did not produce one graph")
    if dynamic_spec and trace.shape_env is not None:
        from ..compiler.dynamic_shapes import check_named_dims

        check_named_dims(trace.shape_env, dynamic_spec)
    _name_optimizer_state(fn, modules, leaves, table)
    return _shape(trace, entry, method, overload, leaves, paths, table)


def _name_optimizer_state(fn: Any, modules: list[tuple[str, Any]], leaves: list[Any], table: WeightTable) -> None:
    """Archive names for the state of the optimizers the entry reached (an attribute of a
    module it uses, a global or closure variable, an argument): ``<optimizer>.<parameter>.<entry>``."""
    from ..optim.optimizer import Optimizer

    found: list[tuple[str, Any]] = []
    for prefix, m in modules:
        found += [(f"{prefix}{k}.", v) for k, v in vars(m).items() if isinstance(v, Optimizer)]
    found += [(f"{_quoted_name(label)}.", obj) for label, obj, _ in free_objects(fn) if isinstance(obj, Optimizer)]
    found += [(f"optimizer{i}.", leaf) for i, leaf in enumerate(leaves) if isinstance(leaf, Optimizer)]
    for prefix, opt in found:
        for group in opt.param_groups:
            for p in group["params"]:
                pname = table.names.get(id(p), (f"param_{id(p)}", ""))[0]
                for key, value in (opt.state.get(p) or {}).items():
                    if isinstance(value, Tensor):
                        table.names.setdefault(id(value), (f"{prefix}{pname}.{key}", "state"))



def arg_paths(fn: Any, treedef: pytree.TreeDef) -> list[str]:
    """Readable argument names per leaf (``idx``, ``batch['x']``), like compile's guards."""
    target = fn.forward if is_module(fn) else fn
    try:
        params = [p.name for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    out = []
    for p in pytree.leaf_paths(treedef):
        m = re.match(r"\[0\]\[(\d+)\](.*)", p)
        if m:
            i = int(m.group(1))
            out.append((params[i] if i < len(params) else f"arg{i}") + m.group(2))
            continue
        m = re.match(r"\[1\]\['([^']*)'\](.*)", p)
        out.append(m.group(1) + m.group(2) if m else p)
    return out


def _shape(trace: TraceResult, entry: str, method: str, overload: int | None, leaves: list[Any],
           paths: list[str], table: WeightTable) -> TracedEntry:
    graph = trace.graph
    where = f"export of {entry}"
    for target, k in trace.grad_writebacks:
        if k is not None:
            raise ValueError(f"{where}: the step leaves gradients in the parameters' .grad; call "
                             f"optimizer.zero_grad() at its end to export it (an exported step keeps no "
                             f".grad)")
    updated: list[tuple[Binding, int]] = []
    for target, k in trace.writebacks:
        if isinstance(target, AttachedInput) and table.names.get(id(target.tensor), ("", ""))[1] in (
                "parameter", "state"):
            updated.append((target, k))  # a training step: the weight becomes a mutable global
            continue
        what = target.describe() if isinstance(target, Binding) else "a tensor made during the call"
        raise ValueError(f"{where}: the method updates {what} in place; an exported entry point must be "
                         f"a pure function of its arguments and weights, or a training step that updates "
                         f"parameters and optimizer state (for BatchNorm and similar layers call "
                         f"model.eval() before exporting)")
    for b in trace.bindings:
        if isinstance(b, RandomInput):
            raise ValueError(f"{where}: the method draws random numbers ({b.describe()}); exported "
                             f"programs are deterministic. Call model.eval() (dropout) or pass the "
                             f"random values as arguments")
    by_binding = dict(zip(map(id, trace.bindings), graph.inputs))
    # arguments: every tensor leaf of the call, in order, used or not
    arg_values: list[Value] = []
    specs: list[TensorSpec] = []
    arg_of_leaf: dict[int, Value] = {}
    arg_number: dict[int, int] = {}  # leaf index -> position among the entry's tensor arguments
    bound = {b.index: v for b, v in zip(trace.bindings, graph.inputs) if isinstance(b, ArgInput)}
    dim_text = _dim_names(trace)
    for i, (leaf, path) in enumerate(zip(leaves, paths)):
        if not isinstance(leaf, Tensor):
            continue
        v = bound.get(i)
        ttype = v.type if v is not None else _type_of(leaf)
        v = v or Value(ttype)
        arg_number[i] = len(arg_values)
        arg_values.append(v)
        arg_of_leaf[i] = v
        specs.append(TensorSpec(_spec_name(path, len(specs)), dim_text(ttype.shape), ttype.dtype.name))
    weights: list[Weight] = []
    weight_values: list[Value] = []
    weight_of: dict[int, Value] = {}

    def weight_input(binding: Binding, value: Value | None) -> Value:
        w = table.for_binding(binding, entry)
        hit = weight_of.get(id(w))
        if hit is not None:
            return hit
        if value is None:
            value = Value(type_of_array(w.array))
        weights.append(w)
        weight_values.append(value)
        weight_of[id(w)] = value
        return value

    for b, v in zip(trace.bindings, graph.inputs):
        if isinstance(b, ReadInput):  # an optimizer's learning rate: a trailing argument
            name = _read_input_name(b, [s.name for s in specs])
            arg_values.append(v)
            specs.append(TensorSpec(name, dim_text(v.type.shape), v.type.dtype.name))
            continue
        if not isinstance(b, ArgInput):
            weight_input(b, v)
    # results: the tensors of the returned structure, each once
    outputs: list[Value] = []
    out_index: dict[int, int] = {}
    leaf_nodes: list[dict[str, Any]] = []

    def result(v: Value) -> dict[str, Any]:
        k = out_index.get(id(v))
        if k is None:
            k = out_index[id(v)] = len(outputs)
            outputs.append(v)
        return {"t": "out", "i": k}

    for item in trace.out_spec:
        kind = item[0]
        if kind == "new":
            leaf_nodes.append(result(graph.outputs[item[1]]))
        elif kind == "object":
            b = item[1]
            if isinstance(b, ArgInput):
                leaf_nodes.append(result(arg_of_leaf[b.index]))
            else:
                leaf_nodes.append(result(weight_input(b, by_binding.get(id(b)))))
        elif kind == "size":  # a size the program computes: the runtime returns its int
            leaf_nodes.append({**result(graph.outputs[item[1]]), "t": "size"})
        else:
            leaf_nodes.append({"t": "const", "v": _json_constant(item[1], where)})
    stores: list[tuple[Weight, int]] = []
    shapes = [dim_text(v.type.shape) for v in outputs]
    for b, k in updated:
        w = table.for_binding(b, entry)
        w.mutable = True
        if id(w) not in weight_of:
            weight_input(b, None)
        stores.append((w, len(outputs)))
        outputs.append(graph.outputs[k])
    graph.inputs = arg_values + weight_values
    for i, v in enumerate(graph.inputs):
        v.index = i
    graph.outputs = outputs
    graph.name = impl_name(entry)
    tree = _tree(trace.out_tree, iter(leaf_nodes), where)
    dims = trace.shape_guard.portable(arg_number) if trace.shape_guard is not None else None
    return TracedEntry(entry, method, overload, graph, specs, weights, tree, dims, shapes, stores)


def _read_input_name(b: ReadInput, taken: list[str]) -> str:
    """``lr`` for ``param_groups[0]['lr']`` (``lr_1``... for the next groups)."""
    m = re.match(r"param_groups\[(\d+)\]\['(\w+)'\]", b.what)
    base = (m.group(2) if m.group(1) == "0" else f"{m.group(2)}_{m.group(1)}") if m else "value"
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _dim_names(trace: TraceResult) -> Any:
    """Sizes as a signature shows them: ints, and symbolic sizes as text over the
    dynamic_shapes names (``seq``, ``2 * seq``)."""
    from ..dialects.tp import symbolic as sym

    env = trace.shape_env
    names = {s: info.name or (str(s) if info.unbacked else info.source)
             for s, info in env.infos.items()} if env is not None else {}

    def text(shape: tuple) -> tuple[int | str, ...]:
        out: list[int | str] = []
        for d in shape:
            d = env.simplify(d) if env is not None else d
            if isinstance(d, int) or (hasattr(d, "is_Integer") and d.is_Integer):
                out.append(int(d))
            elif d is None:
                out.append("?")
            else:
                out.append(_unwrap(sym.size_description(d, names)))
        return tuple(out)

    return text


def _unwrap(text: str) -> str:
    """``(n // 2)`` -> ``n // 2`` (only when the first parenthesis closes at the end)."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, c in enumerate(text):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1]
    return text


def _quoted_name(label: str) -> str:
    """``closure variable 'net'`` -> ``net``."""
    m = re.search(r"'([^']*)'", label)
    return m.group(1) if m else label


def _type_of(t: Tensor) -> TensorType:
    return t._tensor_type()


def _spec_name(path: str, i: int) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", path).strip("_")
    return name or f"input{i}"


def _json_constant(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{where}: the method returns {type(value).__name__} {value!r} next to its tensors; "
                    f"exported results may hold tensors, None, bool, int, float and str only")


def _tree(td: pytree.TreeDef, leaves: Any, where: str) -> Any:
    if td is pytree.LEAF:
        return next(leaves)
    kind, t, keys, children = td
    nodes = [_tree(c, leaves, where) for c in children]
    if kind in ("tuple", "list"):
        return {"t": kind, "c": nodes}
    if kind == "dict":
        if not all(isinstance(k, str) for k in keys):
            raise TypeError(f"{where}: returned dict keys must be strings to be exported, got {list(keys)!r}")
        return {"t": "dict", "k": list(keys), "c": nodes}
    if kind == "namedtuple":
        return {"t": "namedtuple", "n": t.__name__, "k": list(t._fields), "c": nodes}
    return {"t": "dict", "k": list(keys), "c": nodes}  # a dataclass comes back as a dict of its fields
