"""``convert-tp-to-linalg``: every tp op to linalg/tensor/arith/math, one lowering per op
name in one table (:data:`LOWERINGS`), filled by the family modules of this package."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...dialects.ir import func, ir
from ...dialects.tp import mlir as M
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType
from ..registry import Pass, PassFailure, register_pass, register_pipeline
from ._builder import dim_value, elem_type, ranked
from ._sizes import SizeValues
from ._target import TargetTraits, lowering_for

__all__ = ["LOWERINGS", "lowers", "LowerCtx", "ConvertTpToLinalg", "lowering_summary"]


@dataclass
class LowerCtx:
    """What a lowering sees: the op, its declaration and normalized attributes, operand
    values in declaration order (``None`` for absent optional ones) and tp-level types
    (``?`` dims are None there). ``sym_in_types`` / ``sym_out_types`` carry the symbolic
    sizes of those dims where the function has them, and :meth:`size` computes one."""

    op: ir.Operation
    opdef: Op
    attrs: dict[str, Any]
    operands: list[ir.Value | None]
    in_types: list[TensorType | None]
    out_types: list[TensorType]
    sym_in_types: list[TensorType | None] | None = None
    sym_out_types: list[TensorType] | None = None
    sizes: SizeValues | None = None

    def inputs(self) -> list[tuple[ir.Value, TensorType]]:
        return [(v, t) for v, t in zip(self.operands, self.in_types) if v is not None]

    def size(self, expr: Any) -> ir.Value | int:
        """A size (int or symbolic expression) as an int, or an ``index`` value computed at
        run time."""
        from ...dialects.tp import symbolic as sym

        expr = sym.as_size(expr)
        if not sym.is_symbolic(expr):
            return expr
        if self.sizes is None:
            raise PassFailure(f"{_where(self.op)}: {self.op.name} needs the symbolic size {expr}, but the "
                              f"function has no '{M.ARG_SHAPES}' attribute binding its symbols")
        return self.sizes.value(expr)

    def out_sizes(self, i: int = 0) -> list[ir.Value | int | None]:
        """Sizes of result ``i``: ints, run-time values of symbolic sizes, None where unknown."""
        static = self.out_types[i].shape
        known = self.sym_out_types[i].shape if self.sym_out_types is not None else static
        from ...dialects.tp import symbolic as sym

        return [d if d is not None and not sym.is_symbolic(d) else (self.size(k) if sym.is_symbolic(k) else None)
                for d, k in zip(static, known)]


Lowering = Callable[[LowerCtx], Sequence[ir.Value]]
LOWERINGS: dict[str, tuple[Lowering, str]] = {}


def lowers(*names: str, summary: str) -> Callable[[Lowering], Lowering]:
    """Register ``fn`` as the lowering of the named tp ops; ``summary`` goes into the op
    reference."""

    def deco(fn: Lowering) -> Lowering:
        for name in names:
            if name in LOWERINGS:
                raise ValueError(f"{name} has two lowerings")
            LOWERINGS[name] = (fn, summary)
        return fn

    return deco


def lowering_summary(op_name: str) -> str | None:
    _load()
    entry = LOWERINGS.get(op_name)
    return entry[1] if entry else None


def _load() -> None:
    from . import conv, creation, elementwise, indexing, linalg, reduction, shape  # noqa: F401


def _functions(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func"]


@register_pass
class ConvertTpToLinalg(Pass):
    """Lower every tp op to linalg, tensor, arith and math ops that IREE compiles."""

    name = "convert-tp-to-linalg"
    #: false for targets without float64 arithmetic: float32 ops then use no float64
    #: intermediates (float64 tensors themselves still lower to f64)
    float64: bool = True
    #: false for targets without 64-bit integer division (int64 division by shift-and-subtract)
    int64_division: bool = True
    #: false to keep IREE from fusing a reduction that runs over an outer dim with the ops that
    #: use its result (a ``util.optimization_barrier`` on the result): IREE 3.13's SPIR-V code
    #: for such fused dispatches is wrong (``x - x.amax(0)`` past the 8th column)
    fuse_outer_reductions: bool = True

    def run(self, module: ir.Operation) -> None:
        _load()
        with lowering_for(TargetTraits(self.float64, self.int64_division)), ir.Location.unknown():
            for fn in _functions(module):
                self._lower_function(fn)
                if not self.fuse_outer_reductions:
                    _fence_outer_reductions(fn)

    def _lower_function(self, fn: ir.Operation) -> None:
        block = fn.regions[0].blocks[0]
        types: dict[ir.Value, TensorType] = {}
        for arg in block.arguments:
            if isinstance(arg.type, ir.RankedTensorType):
                types[arg] = M.tensor_type_of(arg.type)
        arg_types = M.symbolic_arg_types(fn)
        sizes = SizeValues(block, arg_types) if arg_types is not None else None
        sym_types: dict[ir.Value, TensorType] = dict(zip(block.arguments, arg_types or ()))
        # Signless element types for linalg (tp spells uint8 as ui8).
        for arg in block.arguments:
            if arg in types:
                arg.set_type(ranked(types[arg]))
        for op in list(block.operations):
            op = op.operation
            if not op.name.startswith("tp."):
                # results of other ops (func.call of a nested region) feed tp ops too
                for r in op.results:
                    if isinstance(r.type, ir.RankedTensorType):
                        types[r] = M.tensor_type_of(r.type)
                if sizes is not None and M.SHAPES in op.attributes:
                    sym_types.update(zip(op.results, M.symbolic_result_types(op)))
                continue
            opdef, slots, attrs = M.verify_op(op, types)
            entry = LOWERINGS.get(op.name)
            if entry is None:
                raise PassFailure(f"{_where(op)}: {op.name} has no lowering to linalg")
            in_types = [None if s is None else types[s] for s in slots]
            out_types = [M.tensor_type_of(r.type) for r in op.results]
            sym_out = M.symbolic_result_types(op) if sizes is not None else None
            sym_in = [None if s is None else sym_types.get(s, types[s]) for s in slots] if sizes is not None else None
            ctx = LowerCtx(op, opdef, attrs, list(slots), in_types, out_types, sym_in, sym_out, sizes)
            try:
                with ir.InsertionPoint(op), op.location:
                    new = list(entry[0](ctx))
            except PassFailure:
                raise
            except Exception as exc:  # noqa: BLE001 - report which op failed, and why
                raise PassFailure(f"{_where(op)}: lowering {op.name} failed: {exc}") from exc
            for k, (old, value, t) in enumerate(zip(op.results, new, out_types)):
                types[value] = t
                if sym_out is not None:
                    sym_types[value] = sym_out[k]
                old.replace_all_uses_with(value)
            op.erase()
        self._retype_signature(fn, block)
        if M.ARG_SHAPES in fn.attributes:
            del fn.attributes[M.ARG_SHAPES]

    @staticmethod
    def _retype_signature(fn: ir.Operation, block: ir.Block) -> None:
        ret = block.operations[len(block.operations) - 1]
        results = [v.type for v in ret.operands]
        inputs = [a.type for a in block.arguments]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _fence_outer_reductions(fn: ir.Operation) -> None:
    """Put ``util.optimization_barrier`` on the results of each ``linalg.generic`` whose
    reduction dims are not all after its parallel dims, so IREE does not fuse it with its
    consumers."""
    def outer(op: ir.Operation) -> bool:
        if op.name != "linalg.generic":
            return False
        kinds = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        reduction = ["reduction" in k for k in kinds]
        return any(r and not later for r, later in zip(reduction, reduction[1:]))

    def visit(op: ir.Operation) -> ir.WalkResult:
        if outer(op):
            for result in reversed(list(op.results)):
                # one barrier per result (its operands and results share one type); a dynamic
                # result's sizes, read before the barrier, are tied to it again for IREE
                rtype = ir.RankedTensorType(result.type)
                with ir.InsertionPoint.after(op), op.location:
                    dims = [dim_value(result, i) for i in range(rtype.rank) if rtype.is_dynamic_dim(i)]
                    fence = ir.Operation.create("util.optimization_barrier", results=[result.type],
                                                operands=[result])
                    keep = [fence, *(d.owner.operation for d in dims)]
                    if dims:
                        fence = ir.Operation.create("flow.tensor.tie_shape", results=[result.type],
                                                    operands=[fence.results[0], *dims])
                result.replace_all_uses_except(fence.results[0], keep)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)


def _where(op: ir.Operation) -> str:
    text = M.loc_text(op.location, "<unknown>")
    return text


register_pipeline("tp-to-linalg", "tp-optimize,convert-tp-to-linalg,canonicalize,cse",
                  "The full path from tp to IREE input: optimize, lower, clean up")

del func, elem_type
