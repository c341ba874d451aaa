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
from ._builder import elem_type, ranked

__all__ = ["LOWERINGS", "lowers", "LowerCtx", "ConvertTpToLinalg", "lowering_summary"]


@dataclass
class LowerCtx:
    """What a lowering sees: the op, its declaration and normalized attributes, operand
    values in declaration order (``None`` for absent optional ones) and tp-level types."""

    op: ir.Operation
    opdef: Op
    attrs: dict[str, Any]
    operands: list[ir.Value | None]
    in_types: list[TensorType | None]
    out_types: list[TensorType]

    def inputs(self) -> list[tuple[ir.Value, TensorType]]:
        return [(v, t) for v, t in zip(self.operands, self.in_types) if v is not None]


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

    def run(self, module: ir.Operation) -> None:
        _load()
        with ir.Location.unknown():
            for fn in _functions(module):
                self._lower_function(fn)

    def _lower_function(self, fn: ir.Operation) -> None:
        block = fn.regions[0].blocks[0]
        types: dict[ir.Value, TensorType] = {}
        for arg in block.arguments:
            if isinstance(arg.type, ir.RankedTensorType):
                types[arg] = M.tensor_type_of(arg.type)
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
                continue
            opdef, slots, attrs = M.verify_op(op, types)
            entry = LOWERINGS.get(op.name)
            if entry is None:
                raise PassFailure(f"{_where(op)}: {op.name} has no lowering to linalg")
            in_types = [None if s is None else types[s] for s in slots]
            out_types = [M.tensor_type_of(r.type) for r in op.results]
            ctx = LowerCtx(op, opdef, attrs, list(slots), in_types, out_types)
            try:
                with ir.InsertionPoint(op), op.location:
                    new = list(entry[0](ctx))
            except PassFailure:
                raise
            except Exception as exc:  # noqa: BLE001 - report which op failed, and why
                raise PassFailure(f"{_where(op)}: lowering {op.name} failed: {exc}") from exc
            for old, value, t in zip(op.results, new, out_types):
                types[value] = t
                old.replace_all_uses_with(value)
            op.erase()
        self._retype_signature(fn, block)

    @staticmethod
    def _retype_signature(fn: ir.Operation, block: ir.Block) -> None:
        ret = block.operations[len(block.operations) - 1]
        results = [v.type for v in ret.operands]
        inputs = [a.type for a in block.arguments]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _where(op: ir.Operation) -> str:
    text = M.loc_text(op.location, "<unknown>")
    return text


register_pipeline("tp-to-linalg", "tp-optimize,convert-tp-to-linalg,canonicalize,cse",
                  "The full path from tp to IREE input: optimize, lower, clean up")

del func, elem_type
