"""``convert-tp-to-linalg``: every tp op to linalg/tensor/arith/math, one lowering per op
name in one table (:data:`LOWERINGS`), filled by the family modules of this package."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...dialects.ir import ir
from ...dialects.tp import mlir
from ...dialects.tp import symbolic as sym
from ...dialects.tp.registry import Op
from ...dialects.tp.types import TensorType
from ..registry import Pass, PassFailure, register_pass, register_pipeline
from ._builder import fence, ranked
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

    def sym_inputs(self) -> list[TensorType | None] | None:
        """The symbolic types of :meth:`inputs`, or None where the function has none."""
        if self.sym_in_types is None:
            return None
        return [t for v, t in zip(self.operands, self.sym_in_types) if v is not None]

    def sym_output(self, i: int = 0) -> TensorType | None:
        return None if self.sym_out_types is None else self.sym_out_types[i]

    def size(self, expr: Any) -> ir.Value | int:
        """A size (int or symbolic expression) as an int, or an ``index`` value computed at
        run time."""
        expr = sym.as_size(expr)
        if not sym.is_symbolic(expr):
            return expr
        if self.sizes is None:
            raise PassFailure(f"{_where(self.op)}: {self.op.name} needs the symbolic size {expr}, but the "
                              f"function has no '{mlir.ARG_SHAPES}' attribute binding its symbols")
        return self.sizes.value(expr)

    def out_sizes(self, i: int = 0) -> list[ir.Value | int | None]:
        """Sizes of result ``i``: ints, run-time values of symbolic sizes, None where unknown."""
        static = self.out_types[i].shape
        known = self.sym_out_types[i].shape if self.sym_out_types is not None else static
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
    from . import control, conv, creation, elementwise, indexing, linalg, reduction, shape, sorting  # noqa: F401


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
    #: false to keep IREE from fusing the producer of a reduction over the innermost dim with a
    #: 64-bit accumulator (int sums, float64) into it when sizes are dynamic: IREE 3.13's CUDA
    #: codegen fails to distribute such a dispatch ("failed to distribute")
    fuse_wide_inner_reductions: bool = True
    #: false to keep float32 sums over many elements in a float32 accumulator (GPU targets, whose
    #: reductions add partial sums as a tree) rather than accumulating them in float64
    wide_float_sums: bool = True
    #: false to lower a depthwise convolution as a grouped one (``linalg.conv_2d_ngchw_gfchw``,
    #: one filter per group): IREE 3.13's SPIR-V code for ``linalg.depthwise_conv_2d_nchw_chw``
    #: with a stride above 1 is wrong (a 3x3, stride-2 depthwise convolution on lavapipe)
    depthwise_conv: bool = True
    #: false to lower every one-group convolution as ``linalg.conv_2d_nchw_fchw``; true lowers
    #: strided ones and those over few output positions as im2col columns times the filter
    #: matrix, which IREE 3.13's CPU code runs 2-150x faster (GPU targets: not measured)
    conv_by_columns: bool = True

    def run(self, module: ir.Operation) -> None:
        _load()
        with lowering_for(TargetTraits(self.float64, self.int64_division, self.fuse_wide_inner_reductions,
                                       self.wide_float_sums, self.depthwise_conv, self.conv_by_columns)), \
                ir.Location.unknown():
            # callers first: a loop's verification reads its body's signature in tp types
            for fn in reversed(_functions(module)):
                self._lower_function(fn)
                _fence(fn, _read_through_two_maps)
                _fence(fn, _gather_into_reduction)
                _fence(fn, _product_partly_broadcast_into_reduction)
                _fence(fn, _splat_into_reduction)
                _fence(fn, _reduced_and_kept_from_bools)
                _fence(fn, _reduced_into_both_sides_of_a_product)
                if not self.fuse_outer_reductions:
                    _fence(fn, _outer_reduction)
                if not self.fuse_wide_inner_reductions:
                    _fence(fn, _into_wide_inner_reduction)

    def _lower_function(self, fn: ir.Operation) -> None:
        block = fn.regions[0].blocks[0]
        types: dict[ir.Value, TensorType] = {}
        for arg in block.arguments:
            if isinstance(arg.type, ir.RankedTensorType):
                types[arg] = mlir.tensor_type_of(arg.type)
        arg_types = mlir.symbolic_arg_types(fn)
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
                        types[r] = mlir.tensor_type_of(r.type)
                if sizes is not None and mlir.SHAPES in op.attributes:
                    sym_types.update(zip(op.results, mlir.symbolic_result_types(op)))
                continue
            opdef, slots, attrs = mlir.verify_op(op, types)
            entry = LOWERINGS.get(op.name)
            if entry is None:
                raise PassFailure(f"{_where(op)}: {op.name} has no lowering to linalg")
            in_types = [None if s is None else types[s] for s in slots]
            out_types = [mlir.tensor_type_of(r.type) for r in op.results]
            sym_out = mlir.symbolic_result_types(op) if sizes is not None else None
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
                    if opdef.data_dependent:  # its sizes the data decides: read from the result
                        with ir.InsertionPoint(op), op.location:
                            sizes.define(sym_out[k], value)
                old.replace_all_uses_with(value)
            op.erase()
        self._retype_signature(fn, block)
        if mlir.ARG_SHAPES in fn.attributes:
            del fn.attributes[mlir.ARG_SHAPES]

    @staticmethod
    def _retype_signature(fn: ir.Operation, block: ir.Block) -> None:
        ret = block.operations[len(block.operations) - 1]
        results = [v.type for v in ret.operands]
        inputs = [a.type for a in block.arguments]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _user(use: Any) -> ir.Operation:
    """The operation that holds an operand use."""
    return use.owner.operation if hasattr(use.owner, "operation") else use.owner


def _is_reduction(op: ir.Operation) -> list[bool] | None:
    """For a ``linalg.generic``, which of its iterators are reductions; else None."""
    if op.name != "linalg.generic":
        return None
    return ["reduction" in str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def _gather_into_reduction(op: ir.Operation) -> bool:
    """A gather (a ``linalg.generic`` reading elements with ``tensor.extract``: embeddings,
    index_select, advanced indexing) whose result a reduction reads, directly or through
    elementwise ops and reshapes (layer_norm of token plus position embeddings). IREE 3.13
    fuses them and the data-tiling pack of the next matmul's operand into one dispatch whose
    vectors exceed its stack and vector limits ("exceeded stack allocation limit", "large
    vector sizes"), failing the whole compile; with the gather apart each compiles, and the
    gather's result is written once."""
    if op.name != "linalg.generic" or not any(inner.operation.name == "tensor.extract"
                                              for inner in op.regions[0].blocks[0].operations):
        return False
    stack: list[ir.Operation] = [op]
    seen: list[ir.Operation] = []  # (operations compare by identity, they do not hash)
    while stack and len(seen) < 64:
        for result in stack.pop().results:
            for use in result.uses:
                user = _user(use)
                if user.name not in ("linalg.generic", "tensor.expand_shape", "tensor.collapse_shape"):
                    continue
                iterators = _is_reduction(user)
                if iterators is not None and any(iterators):
                    return True
                if not any(user == s for s in seen):
                    seen.append(user)
                    stack.append(user)
    return False


def _product_partly_broadcast_into_reduction(op: ir.Operation) -> bool:
    """An elementwise product read by a reduction, one of whose factors is broadcast over
    some but not all of the reduced dims (``(x * v).sum()`` for ``x`` of (N, C) and ``v`` of
    (C,); a mean over (1, 2) of (N, H, W) times (W,)). IREE 3.13 fuses the two into a
    "matvec-like" contraction whose ``vector.contract`` it then rejects ("invalid
    accumulator/result vector shape"), failing the compile at every optimization level."""
    iterators = _is_reduction(op)
    if iterators is None or any(iterators) or not any(
            inner.operation.name in ("arith.mulf", "arith.muli") for inner in op.regions[0].blocks[0].operations):
        return False
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    n_in = len(maps) - len(op.results)
    for k, result in enumerate(op.results):
        out = _map_dims(maps[n_in + k])  # result dim -> this op's loop dim
        for use in result.uses:
            user = _user(use)
            reduced_loops = _is_reduction(user)
            if not reduced_loops or not any(reduced_loops):
                continue
            user_maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(user.attributes["indexing_maps"])]
            read = _map_dims(user_maps[use.operand_number])  # result dim -> user's loop dim
            reduced = {out[d] for d, u in enumerate(read) if u is not None and reduced_loops[u] and out[d] is not None}
            for m in maps[:n_in]:
                reads = {d for d in _map_dims(m) if d is not None} & reduced
                if reads and reads != reduced:
                    return True
    return False


#: ops whose result is a splat when their tensor operands are (or that have none)
_SPLAT_PRESERVING = ("linalg.generic", "linalg.broadcast", "linalg.transpose", "tensor.expand_shape",
                     "tensor.collapse_shape", "tensor.cast", "tensor.extract_slice")


def _makes_splat(op: ir.Operation, depth: int = 0) -> bool:
    """Whether ``op``'s result holds one repeated value: a fill or a constant, or what
    elementwise ops, broadcasts and reshapes make of those alone."""
    if op.name in ("linalg.fill", "arith.constant", "tensor.splat", "tensor.empty"):
        return True
    if op.name not in _SPLAT_PRESERVING or depth > 8:
        return False
    for operand in op.operands:
        if not isinstance(operand.type, ir.RankedTensorType):
            continue
        owner = operand.owner
        if isinstance(owner, ir.Block):
            return False
        if not _makes_splat(owner.operation if hasattr(owner, "operation") else owner, depth + 1):
            return False
    return True


def _splat_into_reduction(op: ir.Operation) -> bool:
    """A splat (:func:`_makes_splat`) that a reduction reads as an input, directly or through
    reshapes (``tp.ones_like(x).sum(1)``). IREE 3.13 folds the reduction of a fill over the
    innermost dim to the fill's value, as if the dim had one element: ``ones(7, 5).sum(1)``
    compiled to ones, ``.sum()`` to 5 (on every backend, with dynamic sizes too); behind a
    fence it sums. (The accumulator's own fill, the reduction's init, is not fenced.)"""
    if not _makes_splat(op) or op.name == "tensor.empty":
        return False
    stack, seen = [op], 0
    while stack and seen < 32:
        for result in stack.pop().results:
            for use in result.uses:
                user = _user(use)
                seen += 1
                if user.name in ("tensor.expand_shape", "tensor.collapse_shape"):
                    stack.append(user)
                    continue
                iterators = _is_reduction(user)
                if iterators and any(iterators) and use.operand_number < len(user.operands) - len(user.results):
                    return True
    return False


def _reduced_and_kept_from_bools(op: ir.Operation) -> bool:
    """A ``linalg.generic`` making an integer tensor from bools (it or a generic it reads takes
    an ``i1`` operand) whose result a reduction reads and something else keeps (a result of
    the function, a slice of it): ``v = m.long() ^ m; return v.amax(), v``. IREE 3.13 puts
    the reduction and the kept value in one dispatch with the bool reads, and allocates a stack
    buffer of the whole tensor's size there: "unbounded stack allocations" with dynamic sizes,
    "exceeded stack allocation limit" at 64x96x40 elements. Behind a fence the reduction reads
    the kept value. (Float results of the same programs compile.)"""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    t = ir.RankedTensorType(op.results[0].type)
    if not isinstance(t.element_type, ir.IntegerType) or t.element_type.width == 1:
        return False
    reduced = kept = False
    for use in op.results[0].uses:
        user = _user(use)
        iterators = _is_reduction(user)
        if iterators and any(iterators):
            reduced = True
        else:
            kept = True
    return reduced and kept and _reads_bools(op, 0)


def _reads_bools(op: ir.Operation, depth: int) -> bool:
    """Whether ``op`` (a ``linalg.generic``) or a generic it reads through others takes an
    ``i1`` tensor operand."""
    if depth > 8:
        return False
    for operand in op.operands:
        if not isinstance(operand.type, ir.RankedTensorType):
            continue
        et = ir.RankedTensorType(operand.type).element_type
        if isinstance(et, ir.IntegerType) and et.width == 1:
            return True
        owner = operand.owner
        if isinstance(owner, ir.Block):
            continue
        owner = owner.operation if hasattr(owner, "operation") else owner
        if owner.name == "linalg.generic" and _reads_bools(owner, depth + 1):
            return True
    return False


_CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul")


def _reduced_into_both_sides_of_a_product(op: ir.Operation) -> bool:
    """A reduction whose result (or a reshape of it) is both operands of one product
    (``s @ s.T`` for ``s = x.sum(1, keepdim=True)``, a Gram matrix of reduced rows). IREE 3.13
    fused the reduction into the product and read it at one index for both: the product
    came out with only its diagonal (program fuzzer seed 0, 2746; static shapes too, every
    dtype). Apart, the product reads the reduced tensor."""
    iterators = _is_reduction(op)
    if not iterators or not any(iterators):
        return False
    made = list(op.results)
    for value in made:  # grows with the reshapes of the result
        for use in value.uses:
            user = _user(use)
            if user.name in ("tensor.expand_shape", "tensor.collapse_shape"):
                made.extend(user.results)
            elif user.name in _CONTRACTIONS:
                if sum(any(operand == m for m in made) for operand in list(user.operands)[:2]) == 2:
                    return True
    return False


def _outer_reduction(op: ir.Operation) -> bool:
    """A reduction whose reduction dims are not all after its parallel dims."""
    reduction = _is_reduction(op)
    return reduction is not None and any(r and not later for r, later in zip(reduction, reduction[1:]))


def _into_wide_inner_reduction(op: ir.Operation) -> bool:
    """A ``linalg.generic`` whose result a reduction over its innermost dim reads directly,
    when that reduction accumulates 64-bit values (integer sums, float64) over dynamic sizes."""
    if op.name != "linalg.generic":
        return False
    for result in op.results:
        for use in result.uses:
            user = _user(use)
            iterators = _is_reduction(user)
            if not iterators or not iterators[-1] or not user.results:
                continue
            out = ir.RankedTensorType(user.results[0].type)
            dynamic = any(ir.ShapedType.is_dynamic_size(d) for d in ir.RankedTensorType(result.type).shape)
            if dynamic and _bitwidth(out.element_type) == 64:
                return True
    return False


def _bitwidth(t: ir.Type) -> int:
    return t.width if isinstance(t, (ir.IntegerType, ir.FloatType)) else 0


#: in an access, a reduction dim that no single dim of the value indexes
_MIXED = "*"


def _map_dims(m: ir.AffineMap) -> list[int | None]:
    """The iteration dim of each result of an indexing map (None: a constant or other expr)."""
    return [e.position if isinstance(e, ir.AffineDimExpr) else None for e in m.results]


def _static_sizes(value: ir.Value) -> list[int | None]:
    t = ir.RankedTensorType(value.type)
    return [None if t.is_dynamic_dim(i) else t.shape[i] for i in range(t.rank)]


def _reshaped(access: tuple, op: ir.Operation) -> tuple:
    """``access`` (for each non-unit dim of the reduction, the dim of the operand indexing it)
    carried through a ``tensor.expand_shape`` / ``collapse_shape`` to the result's dims."""
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
    wide = _static_sizes(op.results[0] if op.name == "tensor.expand_shape" else op.operands[0])
    where: dict[int, object] = {}
    for narrow_dim, group in enumerate(groups):
        real = [d for d in group if wide[d] != 1]
        if op.name == "tensor.expand_shape":
            where[narrow_dim] = real[0] if len(real) == 1 else _MIXED
        else:
            for d in group:
                where[d] = narrow_dim if real == [d] else _MIXED
    return tuple(_MIXED if a == _MIXED else where.get(a, _MIXED) for a in access)


def _read_through_two_maps(op: ir.Operation) -> bool:
    """A reduction whose result one ``linalg.generic`` reads, through two of its operands
    (directly or through reshapes and other generics), at different elements of the
    iteration space (``s[:, None] + s[None, :]``, ``s + s.t()``, ``(2 * s)[:, None] + s[None, :]``).
    IREE 3.13 fuses such a reduction into that reader and computes only the elements where
    both reads coincide (the diagonal); reads of the same elements (``(x - m) * m``, softmax,
    layer_norm) fuse correctly."""
    if not any(_is_reduction(op) or ()):
        return False
    reads: dict[ir.Operation, set[tuple[int, tuple]]] = {}
    seen: set[tuple] = set()
    stack = []
    for result in op.results:
        access = tuple(i for i, size in enumerate(_static_sizes(result)) if size != 1)
        stack.append((result, access))
    while stack:
        value, access = stack.pop()
        for use in value.uses:
            user = use.owner.operation
            if user.name in ("tensor.expand_shape", "tensor.collapse_shape"):
                nxt = [(user.results[0], _reshaped(access, user))]
            elif user.name == "tensor.cast":
                nxt = [(user.results[0], access)]
            elif user.name == "linalg.transpose":  # result dim i is input dim permutation[i]
                perm = list(ir.DenseI64ArrayAttr(user.attributes["permutation"]))
                nxt = [(user.results[0], tuple(_MIXED if a == _MIXED else perm.index(a) for a in access))]
            elif user.name == "linalg.generic":
                maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(user.attributes["indexing_maps"])]
                dims = _map_dims(maps[use.operand_number])
                read = tuple(_MIXED if a == _MIXED or dims[a] is None else dims[a] for a in access)
                here = reads.setdefault(user, set())
                here.add((use.operand_number, read))
                if len({r for _, r in here}) > 1 or (len({k for k, _ in here}) > 1
                                                     and any(_MIXED in r for _, r in here)):
                    return True
                outs = maps[len(maps) - len(user.results):]
                nxt = []
                for result, out in zip(user.results, outs):
                    out_dims = _map_dims(out)
                    nxt.append((result, tuple(out_dims.index(d) if d != _MIXED and d in out_dims else _MIXED
                                              for d in read)))
            else:
                continue
            for item in nxt:
                if item not in seen:
                    seen.add(item)
                    stack.append(item)
    return False


def _fence(fn: ir.Operation, fenced: Callable[[ir.Operation], bool]) -> None:
    """Put a :func:`fence` on the results of each op that ``fenced`` selects, so IREE does
    not fuse it with its consumers."""
    chosen: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if fenced(op):
            chosen.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    for op in chosen:
        for result in reversed(list(op.results)):  # one barrier per result
            with ir.InsertionPoint.after(op), op.location:
                fenced, made = fence(result)
            result.replace_all_uses_except(fenced, made)


def _where(op: ir.Operation) -> str:
    return mlir.loc_text(op.location, "<unknown>")


register_pipeline("tp-to-linalg", "tp-optimize,convert-tp-to-linalg,canonicalize,cse",
                  "The full path from tp to IREE input: optimize, lower, clean up")
