"""tp graphs as MLIR and back.

:func:`emit` turns :class:`~.graph.Graph` objects into an MLIR module with one ``func.func``
per graph, tp ops in generic form, typed attributes and the user's source locations.
:func:`parse` reads MLIR text and verifies every tp op through the registry, reporting
problems as MLIR-style diagnostics (``file:line:col: error: ...``); :func:`to_graphs`
turns a parsed module back into graphs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
import re
from typing import Any

import numpy as np

from .. import ir as _ir
from . import dtypes as dt
from . import symbolic as sym
from .errors import OpError
from .graph import CALL, Graph, SourceLoc, Value, data_dependent_symbols
from .registry import Attr, AttrKind, FuncSignature, Op, lookup
from .types import TensorType

ir = _ir.ir
func = _ir.func

__all__ = ["emit", "parse", "to_graphs", "verify_module", "Diagnostic", "DiagnosticError",
           "element_type", "dtype_of", "tensor_type", "tensor_type_of", "print_module",
           "dense_attr", "dense_value", "attr_to_mlir", "verify_op", "loc_text", "SHAPES", "ARG_SHAPES",
           "sizes_attr", "sizes_of_attr", "symbolic_result_types", "symbolic_arg_types", "symbolic_type_of"]

SEGMENTS = "operandSegmentSizes"
#: discardable attributes keeping symbolic sizes (``?`` in the types) as expressions: the
#: shapes of an op's results, and of a function's arguments (their symbols bind there)
SHAPES = "tp.shapes"
ARG_SHAPES = "tp.arg_shapes"
#: (output, input) position pairs of a function whose outputs may be written in place into
#: its inputs' buffers (``Graph.donated``), as a flat i64 array
DONATED = "tp.donated"


# --- types -----------------------------------------------------------------------------------

def element_type(dtype: dt.DType) -> ir.Type:
    """The MLIR element type of a dtype (needs an active context)."""
    if dtype.is_floating_point:
        return {16: ir.BF16Type.get() if dtype is dt.bfloat16 else ir.F16Type.get(),
                32: ir.F32Type.get(), 64: ir.F64Type.get()}[dtype.bits]
    if dtype.is_bool:
        return ir.IntegerType.get_signless(1)
    if not dtype.is_signed:
        return ir.IntegerType.get_unsigned(dtype.bits)
    return ir.IntegerType.get_signless(dtype.bits)


def dtype_of(t: ir.Type) -> dt.DType:
    """The dtype of an MLIR element type; TypeError for types tp has no dtype for."""
    return dt.as_dtype(str(t))


def tensor_type(t: TensorType) -> ir.RankedTensorType:
    dyn = ir.ShapedType.get_dynamic_size()
    dims = [int(d) if isinstance(d, (int, np.integer)) else dyn for d in t.shape]
    return ir.RankedTensorType.get(dims, element_type(t.dtype))


def tensor_type_of(t: ir.Type) -> TensorType:
    if not isinstance(t, ir.RankedTensorType):
        raise TypeError(f"expected a ranked tensor type, got {t}")
    rt = ir.RankedTensorType(t)
    shape = tuple(None if rt.is_dynamic_dim(i) else rt.get_dim_size(i) for i in range(rt.rank))
    return TensorType(shape, dtype_of(rt.element_type))


# --- attributes ------------------------------------------------------------------------------

def dense_attr(value: np.ndarray) -> ir.Attribute:
    dtype = dt.from_numpy_dtype(value.dtype)
    shaped = ir.RankedTensorType.get(list(value.shape), element_type(dtype))
    if dtype is dt.bfloat16:
        raw = np.ascontiguousarray(value).view(np.uint16)
        return ir.DenseElementsAttr.get(raw, type=element_type(dtype), shape=list(value.shape))
    return ir.DenseElementsAttr.get(np.ascontiguousarray(value), type=shaped)


def _size_attr(d: Any) -> ir.Attribute:
    if d is None or sym.is_symbolic(d):
        return ir.StringAttr.get(sym.size_text(d))
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(d))


def sizes_attr(sizes: Sequence[Any]) -> ir.ArrayAttr:
    """Sizes as ``[2, "s0", "s0*4"]``: ints, symbolic ones as their expression."""
    return ir.ArrayAttr.get([_size_attr(d) for d in sizes])


def sizes_of_attr(attr: ir.Attribute) -> tuple[Any, ...]:
    """The inverse of :func:`sizes_attr`."""
    out = []
    for a in ir.ArrayAttr(attr):
        if isinstance(a, ir.StringAttr):
            out.append(sym.parse_size(ir.StringAttr(a).value))
        else:
            out.append(ir.IntegerAttr(a).value)
    return tuple(out)


def _shapes_attr(types: Sequence[TensorType]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([sizes_attr(t.shape) for t in types])


def _shapes_of(attr: ir.Attribute, types: Sequence[TensorType]) -> list[TensorType]:
    shapes = [sizes_of_attr(a) for a in ir.ArrayAttr(attr)]
    if len(shapes) != len(types) or any(len(sh) != t.rank for sh, t in zip(shapes, types)):
        raise OpError(f"'{SHAPES}' {attr} does not match the types {', '.join(map(str, types))}")
    return [t.with_shape(sh) for sh, t in zip(shapes, types)]


def symbolic_result_types(mlir_op: ir.Operation) -> list[TensorType]:
    """The result types of an op with their symbolic sizes (from ``tp.shapes``, when present)."""
    types = [tensor_type_of(r.type) for r in mlir_op.results]
    if SHAPES in mlir_op.attributes:
        return _shapes_of(mlir_op.attributes[SHAPES], types)
    return types


def symbolic_arg_types(fn: ir.Operation) -> list[TensorType] | None:
    """The argument types of a function with their symbolic sizes (``tp.arg_shapes``)."""
    if ARG_SHAPES not in fn.attributes:
        return None
    block = fn.regions[0].blocks[0]
    types = [tensor_type_of(a.type) for a in block.arguments]
    return _shapes_of(fn.attributes[ARG_SHAPES], types)


def symbolic_type_of(value: ir.Value) -> TensorType | None:
    """The type of ``value`` with its symbolic sizes, when its function or op records them."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        fn = parent.operation if hasattr(parent, "operation") else parent
        if fn is None or fn.name != "func.func" or ARG_SHAPES not in fn.attributes:
            return None
        return symbolic_arg_types(fn)[ir.BlockArgument(value).arg_number]
    op = owner.operation if hasattr(owner, "operation") else owner
    if SHAPES not in op.attributes:
        return None
    return symbolic_result_types(op)[ir.OpResult(value).result_number]


def attr_to_mlir(decl: Attr, value: Any) -> ir.Attribute:
    kind = decl.kind
    if decl.symbolic and (sym.is_symbolic(value) or (
            isinstance(value, tuple) and any(sym.is_symbolic(v) for v in value))):
        # symbolic sizes: a string, or an array mixing ints and strings
        return ir.StringAttr.get(sym.size_text(value)) if not isinstance(value, tuple) else sizes_attr(value)
    if kind is AttrKind.INT:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if kind is AttrKind.FLOAT:
        return ir.FloatAttr.get_f64(value)
    if kind is AttrKind.BOOL:
        return ir.BoolAttr.get(value)
    if kind is AttrKind.STR:
        return ir.StringAttr.get(value)
    if kind is AttrKind.INTS:
        return ir.DenseI64ArrayAttr.get(list(value))
    if kind is AttrKind.DTYPE:
        return ir.TypeAttr.get(element_type(value))
    if kind is AttrKind.DENSE:
        return dense_attr(np.asarray(value))
    if kind is AttrKind.FUNC:
        return ir.FlatSymbolRefAttr.get(value.name)
    raise AssertionError(kind)


def _module_of(mlir_op: ir.Operation) -> ir.Operation | None:
    op = mlir_op
    while op is not None and op.name != "builtin.module":
        parent = op.parent
        op = None if parent is None else (parent.operation if hasattr(parent, "operation") else parent)
    return op


def function_signature(mlir_op: ir.Operation, name: str) -> FuncSignature:
    """The signature of function ``@name`` of the module holding ``mlir_op`` (its argument
    types with their symbolic sizes where ``tp.arg_shapes`` records them)."""
    module = _module_of(mlir_op)
    if module is not None:
        for f in module.regions[0].blocks[0].operations:
            f = f.operation
            if f.name == "func.func" and _sym_name(f) == name:
                fn_type = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
                inputs = symbolic_arg_types(f) or [tensor_type_of(t) for t in fn_type.inputs]
                return FuncSignature(name, tuple(inputs), tuple(tensor_type_of(t) for t in fn_type.results))
    raise OpError(f"{mlir_op.name}: no function @{name} in the module")


def _attr_from_mlir(op: Op, decl: Attr, attr: ir.Attribute, mlir_op: ir.Operation | None = None) -> Any:
    kind = decl.kind
    if kind is AttrKind.FUNC:
        if not isinstance(attr, ir.FlatSymbolRefAttr) or mlir_op is None:
            raise OpError(f"{op.name}: attribute '{decl.name}' expects {_mlir_kind(decl)}, got {attr}")
        return function_signature(mlir_op, ir.FlatSymbolRefAttr(attr).value)
    if decl.symbolic:
        try:
            if kind in (AttrKind.INT, AttrKind.FLOAT) and isinstance(attr, ir.StringAttr):
                return sym.parse_size(ir.StringAttr(attr).value)
            if kind is AttrKind.INTS and isinstance(attr, ir.ArrayAttr):
                return sizes_of_attr(attr)
        except (ValueError, TypeError) as exc:
            raise OpError(f"{op.name}: attribute '{decl.name}': {exc}") from None
    try:
        if kind is AttrKind.INT and isinstance(attr, ir.IntegerAttr) and not isinstance(attr, ir.BoolAttr):
            return ir.IntegerAttr(attr).value
        if kind is AttrKind.FLOAT and isinstance(attr, ir.FloatAttr):
            return ir.FloatAttr(attr).value
        if kind is AttrKind.BOOL and isinstance(attr, ir.BoolAttr):
            return ir.BoolAttr(attr).value
        if kind is AttrKind.STR and isinstance(attr, ir.StringAttr):
            return ir.StringAttr(attr).value
        if kind is AttrKind.INTS and isinstance(attr, ir.DenseI64ArrayAttr):
            return tuple(ir.DenseI64ArrayAttr(attr))
        if kind is AttrKind.DTYPE and isinstance(attr, ir.TypeAttr):
            return dtype_of(ir.TypeAttr(attr).value)
        if kind is AttrKind.DENSE and isinstance(attr, ir.DenseElementsAttr):
            return dense_value(ir.DenseElementsAttr(attr))
    except TypeError as exc:
        raise OpError(f"{op.name}: attribute '{decl.name}': {exc}") from None
    raise OpError(f"{op.name}: attribute '{decl.name}' expects {_mlir_kind(decl)}, got {attr}")


def _mlir_kind(decl: Attr) -> str:
    return {AttrKind.INT: "an i64 integer attribute", AttrKind.FLOAT: "an f64 float attribute",
            AttrKind.BOOL: "a bool attribute", AttrKind.STR: "a string attribute",
            AttrKind.INTS: "an array<i64: ...> attribute", AttrKind.DTYPE: "a type attribute",
            AttrKind.DENSE: "a dense elements attribute",
            AttrKind.FUNC: "a function symbol (@name)"}[decl.kind]


def dense_value(attr: ir.DenseElementsAttr) -> np.ndarray:
    shaped = ir.RankedTensorType(attr.type)
    dtype = dtype_of(shaped.element_type)
    shape = tuple(shaped.get_dim_size(i) for i in range(shaped.rank))
    if dtype is dt.bfloat16:
        return _bf16_from_text(str(attr), shape)
    if attr.is_splat:
        splat = attr.get_splat_value()
        if dtype.is_floating_point:
            v: Any = ir.FloatAttr(splat).value
        elif dtype.is_bool:
            v = bool(ir.IntegerAttr(splat).value)
        else:
            v = ir.IntegerAttr(splat).value
        return np.full(shape, v, dtype=dtype.np_dtype)
    return np.array(attr).astype(dtype.np_dtype).reshape(shape)


def _bf16_from_text(text: str, shape: tuple[int, ...]) -> np.ndarray:
    # The bindings cannot read bf16 elements back (no buffer, no element access), so the
    # attribute's printed form is decoded: decimal values, hex bit patterns, or one hex blob.
    body = text[text.index("<") + 1:text.rindex("> :")]
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        bits = np.frombuffer(raw, dtype="<u2")
    else:
        tokens = re.findall(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+\.?\d*(?:[eE][-+]?\d+)?)", body)
        bits = np.array([int(t, 16) if t.startswith("0x") else
                         np.array(float(t), np.float32).astype(dt.bfloat16.np_dtype).view(np.uint16)
                         for t in tokens], dtype=np.uint16)
    if bits.size == 1:
        bits = np.full(shape, bits[0], dtype=np.uint16)
    return bits.view(dt.bfloat16.np_dtype).reshape(shape)


# --- emission --------------------------------------------------------------------------------

def _location(loc: SourceLoc | None) -> ir.Location:
    if loc is None:
        return ir.Location.unknown()
    return ir.Location.file(loc.file, loc.line, loc.col)


def _emit_graph(graph: Graph, private: bool = False, inline: bool = False) -> None:
    in_types = [tensor_type(v.type) for v in graph.inputs]
    out_types = [tensor_type(v.type) for v in graph.outputs]
    fn = func.FuncOp(graph.name, (in_types, out_types), visibility="private" if private else None)
    if private and not inline:
        # a callee is a nested compile region: IREE would otherwise inline it at every call site
        # and compile the body once per site (noinline keeps one function, one set of dispatches)
        fn.attributes["noinline"] = ir.UnitAttr.get()
    if any(sym.is_symbolic(d) for v in graph.inputs for d in v.type.shape) or graph.size_symbols_used():
        # (also when only sizes the data decides are symbolic: the lowering reads them then)
        fn.attributes[ARG_SHAPES] = _shapes_attr([v.type for v in graph.inputs])
    if graph.donated and not private:
        pairs = [n for k in sorted(graph.donated) for n in (k, graph.donated[k])]
        fn.attributes[DONATED] = ir.DenseI64ArrayAttr.get(pairs)
    _check_bound(graph)
    block = fn.add_entry_block()
    values: dict[int, ir.Value] = {id(v): block.arguments[i] for i, v in enumerate(graph.inputs)}
    with ir.InsertionPoint(block):
        for node in graph.nodes:
            if node.callee is not None:
                call = func.CallOp([tensor_type(r.type) for r in node.results], node.callee.name,
                                   [values[id(v)] for v in node.inputs], loc=_location(node.loc))
                if any(sym.is_symbolic(d) for r in node.results for d in r.type.shape):
                    call.attributes[SHAPES] = _shapes_attr([r.type for r in node.results])
                for r, mlir_value in zip(node.results, call.results):
                    values[id(r)] = mlir_value
                continue
            op = lookup(node.op)
            operands = [values[id(v)] for v in node.inputs if v is not None]
            attrs = {a.name: attr_to_mlir(a, node.attrs[a.name])
                     for a in op.attributes if node.attrs.get(a.name) is not None}
            if any(o.optional for o in op.operands):
                attrs[SEGMENTS] = ir.DenseI32ArrayAttr.get([0 if v is None else 1 for v in node.inputs])
            if any(sym.is_symbolic(d) for r in node.results for d in r.type.shape):
                attrs[SHAPES] = _shapes_attr([r.type for r in node.results])
            created = ir.Operation.create(node.op, results=[tensor_type(r.type) for r in node.results],
                                          operands=operands, attributes=attrs, loc=_location(node.loc))
            for r, mlir_value in zip(node.results, created.results):
                values[id(r)] = mlir_value
        func.ReturnOp([values[id(v)] for v in graph.outputs])


def _check_bound(graph: Graph) -> None:
    """Every size symbol of a graph must be the size of one of its inputs' dimensions, or a
    size the data decides, a dimension of a data-dependent op's result: that is where the
    compiled function reads it."""
    bound = sym.free_symbols([d for v in graph.inputs for d in v.type.shape
                              if sym.is_symbolic(d) and d.is_Symbol])
    bound |= data_dependent_symbols(graph)
    used = graph.size_symbols_used(outputs=False)
    missing = used - bound
    if missing:
        names = ", ".join(sorted(str(s) for s in missing))
        raise ValueError(f"graph @{graph.name} uses the symbolic size(s) {names}, which are not the size of "
                         f"any input dimension or of a data-dependent op's result")



def emit(graphs: Graph | Iterable[Graph]) -> ir.Module:
    """An MLIR module holding one ``func.func`` per graph, plus a private one per graph they call."""
    graphs = [graphs] if isinstance(graphs, Graph) else list(graphs)
    entries = {id(g) for g in graphs}
    ordered: list[Graph] = []
    for g in graphs:
        ordered += [c for c in g.callees() if id(c) not in entries] + [g]
    # loop bodies (and only those) are inlined into their loop by IREE: one copy each anyway
    called = {id(n.callee) for g in ordered for n in g.nodes if n.callee is not None}
    inner = {id(c) for g in graphs for c in g.callees()}
    by_name: dict[str, Graph] = {}
    unique = []
    for g in ordered:
        other = by_name.setdefault(g.name, g)
        if other is not g:
            raise ValueError(f"two different graphs are both named @{g.name}; function names in a "
                             f"module must be unique")
        if g not in unique:
            unique.append(g)
    ctx = _ir.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for g in unique:
                # functions called from others are private: not entry points of the module
                _emit_graph(g, private=id(g) not in entries or id(g) in inner, inline=id(g) not in called)
    return module


def print_module(module: ir.Module, *, debuginfo: bool = False) -> str:
    """The module as MLIR text (tp ops in generic form)."""
    return module.operation.get_asm(enable_debug_info=debuginfo)


def append_to_module(module_text: str, added: str) -> str:
    """``added`` (functions or globals, as text) placed at the end of a printed module's body:
    before its closing brace, the only ``}`` in column 0 (location aliases may follow it)."""
    lines = module_text.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("}"):
            return "\n".join(lines[:i] + [added] + lines[i:])
    raise AssertionError("printed module without a closing brace")


# --- parsing and verification ----------------------------------------------------------------

@dataclass(frozen=True)
class Diagnostic:
    """One problem, located like MLIR's diagnostics."""

    location: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: {self.message}"


class DiagnosticError(ValueError):
    """MLIR that does not parse or does not verify; ``diagnostics`` lists every problem."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


def loc_text(loc: ir.Location, filename: str) -> str:
    text = str(loc)  # loc("file":line:col) or loc(unknown) or nested forms
    m = re.search(r'"([^"]*)":(\d+):(\d+)', text)
    if m:
        name = filename if m.group(1) == "-" else m.group(1)
        return f"{name}:{m.group(2)}:{m.group(3)}"
    return filename


def _operand_slots(op: Op, mlir_op: ir.Operation) -> list[Any]:
    """Operands in declaration order with ``None`` for absent optional ones."""
    operands = list(mlir_op.operands)
    if SEGMENTS not in mlir_op.attributes:
        if any(o.optional for o in op.operands):
            raise OpError(f"{op.name}: missing '{SEGMENTS}' attribute (this op has optional operands)")
        return operands
    sizes = list(ir.DenseI32ArrayAttr(mlir_op.attributes[SEGMENTS]))
    if len(sizes) != len(op.operands) or sum(sizes) != len(operands) or any(s not in (0, 1) for s in sizes):
        raise OpError(f"{op.name}: '{SEGMENTS}' {sizes} does not match the {len(operands)} operands and "
                      f"the declaration ({', '.join(o.name for o in op.operands)})")
    it = iter(operands)
    return [next(it) if s else None for s in sizes]


def verify_op(mlir_op: ir.Operation, value_types: Mapping[Any, TensorType] | None = None,
               ) -> tuple[Op, list[Any], dict[str, Any]]:
    """Check one tp op against its declaration; returns (op, operand slots, attrs).
    ``value_types`` overrides the tp types of operand values (used while lowering, when
    operands may already carry lowered types)."""
    op = lookup(mlir_op.name)
    slots = _operand_slots(op, mlir_op)
    raw: dict[str, Any] = {}
    for name in list(mlir_op.attributes):
        name = name if isinstance(name, str) else name.name
        if name == SEGMENTS or "." in name:  # discardable attributes (tp.shapes)
            continue
        try:
            decl = op.attr(name)
        except KeyError:
            valid = ", ".join(a.name for a in op.attributes) or "none"
            raise OpError(f"{op.name}: unknown attribute '{name}'; valid attributes: {valid}") from None
        raw[name] = _attr_from_mlir(op, decl, mlir_op.attributes[name], mlir_op)
    attrs = op.normalize_attrs(raw)
    types = [None if v is None else (value_types[v] if value_types is not None and v in value_types
                                     else tensor_type_of(v.type)) for v in slots]
    inferred = op.verify(types, attrs)
    results = [tensor_type_of(r.type) for r in mlir_op.results]
    if len(results) != len(inferred):
        raise OpError(f"{op.name}: expected {len(inferred)} result(s), got {len(results)}")
    for i, (got, want) in enumerate(zip(results, inferred)):
        if got.dtype is not want.dtype or not _shapes_compatible(got.shape, want.shape):
            raise OpError(f"{op.name}: result {i} has type {got}, but the operands give {want}")
    return op, slots, attrs


def _shapes_compatible(a: Sequence[Any], b: Sequence[Any]) -> bool:
    if len(a) != len(b):
        return False
    return all(x is None or y is None or not isinstance(y, (int, np.integer)) or x == y
               for x, y in zip(a, b))


def _walk_tp_ops(module: ir.Module) -> Iterable[ir.Operation]:
    out: list[ir.Operation] = []

    def visit(op: ir.OpView) -> ir.WalkResult:
        if op.operation.name.startswith("tp."):
            out.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return out


def verify_module(module: ir.Module, filename: str = "<input>") -> list[Diagnostic]:
    """Registry verification of every tp op in ``module``; an empty list when all is well."""
    diags: list[Diagnostic] = []
    for mlir_op in _walk_tp_ops(module):
        try:
            verify_op(mlir_op)
        except (OpError, TypeError, ValueError) as exc:
            diags.append(Diagnostic(loc_text(mlir_op.location, filename), str(exc)))
    return diags


def parse(text: str, filename: str = "<input>", *, verify: bool = True) -> ir.Module:
    """Parse MLIR text; upstream verification, then the registry's for every tp op.
    Raises DiagnosticError listing every problem with its location."""
    ctx = _ir.context()
    captured: list[Diagnostic] = []

    def handler(d: ir.Diagnostic) -> bool:
        captured.append(Diagnostic(loc_text(d.location, filename), str(d.message),
                                   str(d.severity).rsplit(".", 1)[-1].lower()))
        return True

    with ctx:
        h = ctx.attach_diagnostic_handler(handler)
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as exc:
            captured = [Diagnostic(loc_text(d.location, filename), str(d.message))
                        for d in exc.error_diagnostics] or captured or [Diagnostic(filename, str(exc))]
            raise DiagnosticError([d for d in captured if d.severity == "error"] or captured) from None
        finally:
            h.detach()
    if verify:
        diags = verify_module(module, filename)
        if diags:
            raise DiagnosticError(diags)
    return module


def _source_loc(loc: ir.Location) -> SourceLoc | None:
    m = re.search(r'"([^"]*)":(\d+):(\d+)', str(loc))
    return SourceLoc(m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def _sym_name(f: ir.Operation) -> str:
    return ir.StringAttr(f.attributes["sym_name"]).value


def to_graphs(module: ir.Module) -> list[Graph]:
    """The graphs of a verified module (functions whose bodies are tp ops and calls of each
    other), in the module's order; a graph's ``func.call`` nodes point at the callee graphs."""
    funcs = {_sym_name(fn.operation): fn.operation for fn in module.body.operations
             if fn.operation.name == "func.func"}
    built: dict[str, Graph] = {}

    def build(name: str, calling: tuple[str, ...] = ()) -> Graph:
        if name in built:
            return built[name]
        if name in calling:
            raise OpError(f"@{name}: recursive calls cannot be captured graphs")
        f = funcs[name]
        g = Graph(name)
        block = f.regions[0].blocks[0]
        values: dict[Any, Value] = {}
        arg_types = symbolic_arg_types(f) or [tensor_type_of(arg.type) for arg in block.arguments]
        for arg, t in zip(block.arguments, arg_types):
            values[arg] = g.add_input(t)
        for mlir_op in block.operations:
            op_name = mlir_op.operation.name
            if op_name == "func.return":
                g.set_outputs([values[v] for v in mlir_op.operands])
                continue
            if op_name == CALL:
                callee = build(ir.FlatSymbolRefAttr(mlir_op.attributes["callee"]).value, calling + (name,))
                results = g.add_call(callee, [values[v] for v in mlir_op.operands], _source_loc(mlir_op.location))
                values.update(zip(mlir_op.results, results))
                continue
            if not op_name.startswith("tp."):
                raise OpError(f"{op_name}: only tp ops and func.call can be read back into a graph")
            op, slots, attrs = verify_op(mlir_op.operation)
            for decl in op.attributes:
                if decl.kind is AttrKind.FUNC:  # a loop body: its graph
                    attrs[decl.name] = build(attrs[decl.name].name, calling + (name,))
            results = g.add(op.name, [None if s is None else values[s] for s in slots], attrs,
                            _source_loc(mlir_op.location))
            for r, t, mlir_value in zip(results, symbolic_result_types(mlir_op.operation), mlir_op.results):
                # the text's declared types win over inference (they may be more static)
                r.type = t
                values[mlir_value] = r
        built[name] = g
        return g

    return [build(name) for name in funcs]
