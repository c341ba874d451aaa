"""Nested compile regions: a function traced once per signature into its own callee graph,
then called (``func.call``) from every site that matches.

The callee's inputs are the tensor arguments, then every other tensor the body read: a
parameter or buffer of a module argument is found again by its name at the next site (so
layer 2 of a transformer calls the callee traced for layer 1 with its own weights), any
other tensor (a closure) is the same object at every site, and a random draw is redrawn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..._tensor import Tensor
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Graph, Value
from ..errors import GraphCaptureError
from . import pytree
from .graphs import substitute_sizes
from .records import _Ref
from .region_compilers import _REGION_BACKWARD, _REGION_COMPILERS
from .session import Capture
from .user_frames import user_loc

__all__ = ["Region", "call_region", "call_scan"]


@dataclass
class Region:
    """A traced region: the callee graph and how a site supplies and receives values."""

    callee: Graph
    locators: list[tuple]  # per callee input: ("arg", i) | ("module", i, name) | ("object", t) | ("random", fn, a, kw)
    out_tree: pytree.TreeDef
    out_spec: list[tuple]  # ("tensor", output index) | ("const", value)
    mutations: list[tuple[int, int]] = field(default_factory=list)  # (input index, output index)
    compiler: Any = None
    sites: int = 0


def _is_module(x: Any) -> bool:
    from ...nn.modules.module import Module

    return isinstance(x, Module)


def _leaf_signature(leaf: Any, session: Capture | None = None) -> Any:
    if isinstance(leaf, Tensor):
        t = leaf._tensor_type()
        if session is not None and not t.has_static_shape:
            t = t.with_shape(tuple(sym.as_size(session.shape_env.simplify(d)) for d in t.shape))
        return ("tensor", t, leaf.requires_grad)
    if isinstance(leaf, sym.SymInt):
        return ("size", leaf.env.simplify(leaf.node))
    if _is_module(leaf):
        state = tuple((n, t._tensor_type()) for n, t in leaf.named_parameters())
        state += tuple((n, t._tensor_type()) for n, t in leaf.named_buffers())
        return ("module", type(leaf), leaf.training, state)
    try:
        hash(leaf)
        return ("value", type(leaf), leaf)
    except TypeError:
        return ("object", id(leaf))


def call_region(session: Capture, fn: Callable[..., Any], args: tuple, kwargs: dict, key: Any,
                compiler: Any, bw_compiler: Any = None) -> Any:
    leaves, treedef = pytree.flatten((args, kwargs))

    def signature() -> tuple:
        sig = (key, treedef, tuple(_leaf_signature(x, session) for x in leaves))
        if any(isinstance(x, sym.SymInt) or (isinstance(x, Tensor) and not x._tensor_type().has_static_shape)
               for x in leaves):
            # symbolic sizes mean something only in their capture (whose guards the trace recorded)
            sig += (session.shape_env.serial,)
        return sig

    cache = session.config.regions
    before = signature()
    region = cache.get(before)
    if region is None:
        region = _trace(session, fn, leaves, treedef, compiler, len(cache), bw_compiler)
        cache[before] = region
        # what the trace decided about the sizes (a size made a constant) keys it too
        cache.setdefault(signature(), region)
    return _call_site(session, region, leaves)


def _callee_name(session: Capture, fn: Callable[..., Any], n: int) -> str:
    base = getattr(fn, "__name__", None) or "region"
    base = re.sub(r"\W+", "_", base).strip("_") or "region"
    return f"{session.config.name}_{base}_{n}"


class _RegionFrame:
    """The state of one region being traced: its graph and where its inputs come from."""

    def __init__(self, session: Capture, graph: Graph, name: str, leaves: list[Any]):
        self.session = session
        self.graph = graph
        self.name = name
        self.locators: list[tuple] = []
        self.input_of: dict[int, int] = {}  # id(tensor) -> callee input index
        self.current: dict[int, tuple[Tensor, Value]] = {}  # outer tensors read in the body
        self.owners: dict[int, tuple] = {}
        for i, leaf in enumerate(leaves):
            if _is_module(leaf):
                for n, t in leaf.named_parameters():
                    self.owners.setdefault(id(t), ("module", i, n))
                for n, t in leaf.named_buffers():
                    self.owners.setdefault(id(t), ("module", i, n))

    def add_input(self, t: Tensor, locator: tuple) -> Value:
        v = self.graph.add_input(t._tensor_type())
        self.locators.append(locator)
        self.input_of[id(t)] = v.index
        return v

    def value_of(self, t: Tensor) -> Value:
        ref = t._capture
        if isinstance(ref, _Ref) and ref.session is self.session and ref.graph is self.graph:
            return ref.value
        hit = self.current.get(id(t))
        if hit is not None:
            return hit[1]
        locator = self.owners.get(id(t), ("object", t))
        v = self.add_input(t, locator)
        self.current[id(t)] = (t, v)
        return v

    def rebind(self, tensor: Tensor, new: Value) -> None:
        ref = tensor._capture
        if isinstance(ref, _Ref) and ref.session is self.session and ref.graph is self.graph:
            ref.value = new
            return
        self.value_of(tensor)
        self.current[id(tensor)] = (tensor, new)

    def random_input(self, fn: Callable[..., Any], args: tuple, kwargs: dict, out: Tensor,
                     ttype: Any = None) -> Tensor:
        """A draw inside the region: an input each site draws for (``ttype``: its symbolic
        type, when ``args`` hold the sizes as SymInts)."""
        v = self.graph.add_input(ttype if ttype is not None else out._tensor_type())
        self.locators.append(("random", fn, args, kwargs))
        return Tensor._from_type(v.type, _Ref(self.session, self.graph, v))


def _trace(session: Capture, fn: Callable[..., Any], leaves: list[Any], treedef: pytree.TreeDef,
           compiler: Any, n: int, bw_compiler: Any = None) -> Region:
    name = _callee_name(session, fn, n)
    callee = Graph(name=name)
    label = f"nested_compile_region {getattr(fn, '__qualname__', name)}"
    frame = _RegionFrame(session, callee, label, leaves)
    inner = list(leaves)
    arg_tensors: list[tuple[Tensor, int]] = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            v = frame.add_input(leaf, ("arg", i))
            t = Tensor._from_type(v.type, _Ref(session, callee, v))
            t.requires_grad = leaf.requires_grad
            frame.input_of[id(t)] = v.index
            inner[i] = t
            arg_tensors.append((t, v.index))
    args, kwargs = pytree.unflatten(treedef, inner)
    session._regions.append(frame)
    try:
        result = fn(*args, **kwargs)
        out_leaves, out_tree = pytree.flatten(result)
        outputs: list[Value] = []
        spec: list[tuple] = []
        for leaf in out_leaves:
            if isinstance(leaf, Tensor):
                spec.append(("tensor", len(outputs)))
                outputs.append(frame.value_of(leaf))
            else:
                spec.append(("const", leaf))
        mutations: list[tuple[int, int]] = []
        for t, index in arg_tensors:
            if t._capture.value is not callee.inputs[index]:
                mutations.append((index, len(outputs)))
                outputs.append(t._capture.value)
        for tid, (t, v) in frame.current.items():
            index = frame.input_of[tid]
            if v is not callee.inputs[index]:
                mutations.append((index, len(outputs)))
                outputs.append(v)
    finally:
        session._regions.pop()
    callee.set_outputs(outputs)
    if compiler is not None:
        _REGION_COMPILERS[callee] = compiler
    if bw_compiler is not None or compiler is not None:
        _REGION_BACKWARD[callee] = bw_compiler if bw_compiler is not None else compiler
    return Region(callee, frame.locators, out_tree, spec, mutations, compiler)


def _locate(session: Capture, locator: tuple, leaves: list[Any]) -> Tensor:
    kind = locator[0]
    if kind == "arg":
        return leaves[locator[1]]
    if kind == "module":
        target: Any = leaves[locator[1]]
        for part in locator[2].split("."):
            target = getattr(target, part)
        return target
    if kind == "object":
        return locator[1]
    return session.random_call(locator[1], locator[2], locator[3])


def _call_site(session: Capture, region: Region, leaves: list[Any]) -> Any:
    sources = [_locate(session, loc, leaves) for loc in region.locators]
    for t in sources:
        if not isinstance(t, Tensor):
            raise GraphCaptureError(f"nested compile region @{region.callee.name}: expected a tensor "
                                    f"input, found {type(t).__name__}")
    values = [session.value_of(t) for t in sources]
    graph = session.current_graph()
    if any(not v.type.has_static_shape for v in [*values, *region.callee.inputs]):
        # symbolic sizes: compare what the capture knows now (a size the body made a constant
        # is that constant at every site)
        simplify = session.shape_env.simplify
        substitute_sizes(region.callee, simplify)
        for v in values:
            if not v.type.has_static_shape:
                v.type = v.type.with_shape(tuple(sym.as_size(simplify(d)) for d in v.type.shape))
    results = graph.add_call(region.callee, values, user_loc(2))
    region.sites += 1
    tensors = session.wrap_values(results, graph)
    for index, out in region.mutations:
        session.rebind(sources[index], tensors[out])
    out_leaves = [tensors[item[1]] if item[0] == "tensor" else item[1] for item in region.out_spec]
    return pytree.unflatten(region.out_tree, out_leaves)


# --- loops -------------------------------------------------------------------------------------

class _ScanFrame(_RegionFrame):
    """The body of a ``tp.scan`` being traced: a region whose other tensors are loop invariants."""

    def rebind(self, tensor: Tensor, new: Value) -> None:
        ref = tensor._capture
        if isinstance(ref, _Ref) and ref.session is self.session and ref.graph is self.graph:
            ref.value = new
            return
        raise GraphCaptureError(f"{self.name}: the loop body writes in place into a tensor it did not make "
                                f"(a closure or a module's state); return the new value in the carry instead")

    def random_input(self, fn: Callable[..., Any], args: tuple, kwargs: dict, out: Tensor,
                     ttype: Any = None) -> Tensor:
        raise GraphCaptureError(f"{self.name}: the loop body draws random numbers "
                                f"({getattr(fn, '__name__', fn)}); draw them for every step before the loop "
                                f"and pass them in xs")


def _step_type(leaf: Tensor, session: Capture) -> Any:
    t = leaf._tensor_type()
    if not t.has_static_shape:
        t = t.with_shape(tuple(sym.as_size(session.shape_env.simplify(d)) for d in t.shape))
    return t


def call_scan(session: Capture, fn: Callable[..., Any], init: Any, xs: Any, reverse: bool) -> Any:
    """``tensorplay.func.scan`` inside a capture: ``fn`` traced once into a body graph, one
    ``tp.scan`` node in the current graph; returns (carry, ys) as capture tensors."""
    from ...dialects.tp.registry import lookup
    from ...dialects.tp.types import TensorType

    carry_leaves, carry_tree = pytree.flatten(init)
    x_leaves, x_tree = pytree.flatten(xs)
    count = getattr(session, "_scan_count", 0)
    session._scan_count = count + 1
    base = re.sub(r"\W+", "_", getattr(fn, "__name__", "") or "body").strip("_") or "body"
    body = Graph(name=f"{session.config.name}_scan_{base}_{count}")
    label = f"scan body {getattr(fn, '__qualname__', base)}"
    frame = _ScanFrame(session, body, label, [])
    inner_carry, inner_x = [], []
    for i, leaf in enumerate(carry_leaves):
        v = frame.add_input(leaf, ("arg", i))
        v.type = _step_type(leaf, session)
        t = Tensor._from_type(v.type, _Ref(session, body, v))
        frame.input_of[id(t)] = v.index
        inner_carry.append(t)
    for i, leaf in enumerate(x_leaves):
        full = _step_type(leaf, session)
        v = frame.add_input(leaf, ("arg", len(carry_leaves) + i))
        v.type = TensorType(tuple(full.shape[1:]), full.dtype)
        t = Tensor._from_type(v.type, _Ref(session, body, v))
        frame.input_of[id(t)] = v.index
        inner_x.append(t)
    nc, nx = len(carry_leaves), len(x_leaves)
    session._regions.append(frame)
    try:
        result = fn(pytree.unflatten(carry_tree, inner_carry), pytree.unflatten(x_tree, inner_x))
        if not isinstance(result, tuple) or len(result) != 2:
            raise GraphCaptureError(f"{label}: fn must return a pair (carry, y), got {type(result).__name__}")
        new_carry, y = result
        new_leaves, new_tree = pytree.flatten(new_carry)
        if new_tree != carry_tree:
            raise GraphCaptureError(f"{label}: fn returned a carry of another structure than init")
        y_leaves, y_tree = pytree.flatten(y)
        outputs: list[Value] = []
        for k, leaf in enumerate(new_leaves + y_leaves):
            if not isinstance(leaf, Tensor):
                what = f"carry leaf {k}" if k < nc else f"y leaf {k - nc}"
                raise GraphCaptureError(f"{label}: {what} is a {type(leaf).__name__}, not a tensor")
            outputs.append(frame.value_of(leaf))
    finally:
        session._regions.pop()
    for k in range(nc):
        want, got = body.inputs[k].type, outputs[k].type
        if want.dtype is not got.dtype or want.rank != got.rank:
            raise GraphCaptureError(f"{label}: carry leaf {k} enters the loop as {want} and leaves the body as "
                                    f"{got}; a carried value keeps its shape and dtype")
    body.set_outputs(outputs)
    invariants = [loc[1] for loc in frame.locators[nc + nx:]]
    body, invariants = _hoist_invariants(session, body, nc + nx, invariants)
    user_results = len(outputs)
    if nc and _may_need_grad(session, carry_leaves + x_leaves + invariants):
        # the loop also stacks the carry entering each step, which its gradient reads
        from ..autodiff.scan import saving_body

        body = saving_body(body, nc)
    length = x_leaves[0].shape[0]
    attrs = {"body": body, "num_carries": nc, "num_xs": nx,
             "length": length.node if isinstance(length, sym.SymInt) else int(length), "reverse": bool(reverse)}
    op = lookup("tp.scan")
    attrs = op.normalize_attrs(attrs)
    values = tuple(session.value_of(t) for t in carry_leaves + x_leaves + invariants)
    types = op.verify([v.type for v in values], attrs)
    results = session._emit(op.name, values, attrs, types)
    results = (results if isinstance(results, tuple) else (results,))[:user_results]
    return pytree.unflatten(carry_tree, list(results[:nc])), pytree.unflatten(y_tree, list(results[nc:]))


def _hoist_invariants(session: Capture, body: Graph, first: int, invariants: list[Tensor]) -> tuple[Graph, list[Tensor]]:
    """Loop-invariant code motion: the body's ops that read only invariants (and each other)
    move before the loop, into the graph being captured, and their results become invariants
    (``F.linear``'s transpose of a recurrent weight is computed once, not once per step).
    ``first``: the position of the body's first invariant input. Returns the body and the
    invariant tensors the loop takes."""
    from ...dialects.tp.graph import bodies_of, copy_nodes

    outer: dict[Value, Tensor] = dict(zip(body.inputs[first:], invariants))
    moved: set[int] = set()
    for n, node in enumerate(body.nodes):
        if (node.callee is not None or bodies_of(node) or node.opdef.data_dependent
                or not all(v is None or v in outer for v in node.inputs)):
            continue
        inputs = tuple(None if v is None else session.value_of(outer[v]) for v in node.inputs)
        made = session._emit(node.op, inputs, dict(node.attrs), [r.type for r in node.results])
        made = made if isinstance(made, tuple) else (made,)
        outer.update(zip(node.results, made))
        moved.add(n)
    if not moved:
        return body, invariants
    new = Graph(name=body.name)
    mapping: dict[Value, Value] = {v: new.add_input(v.type) for v in body.inputs[:first]}
    taken: list[Tensor] = []
    kept = [node for n, node in enumerate(body.nodes) if n not in moved]
    used = {v for node in kept for v in node.inputs if v is not None} | set(body.outputs)
    for v, t in outer.items():  # the invariants still read, old and new, as inputs
        if v in used:
            mapping[v] = new.add_input(v.type)
            taken.append(t)
    copy_nodes(new, kept, mapping)
    new.set_outputs([mapping[v] for v in body.outputs])
    return new, taken


def _may_need_grad(session: Capture, tensors: list[Tensor]) -> bool:
    """Whether a gradient may flow through a loop over ``tensors``: grad mode is on and one of
    them requires grad, or one is a value of this capture while one of its inputs does."""
    from ..._grad_mode import is_grad_enabled

    if not is_grad_enabled():
        return False
    if any(t.requires_grad for t in tensors):
        return True
    return any(isinstance(t._capture, _Ref) for t in tensors) and any(
        t._requires_grad for t in session._input_tensors().values())
