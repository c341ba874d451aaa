"""The ``donate-buffers`` pass: a compiled step's state updated in place, in the buffers its
caller gives up (donated inputs), over the lowered (linalg-level) module.

A graph whose ``donated`` map pairs output ``k`` with input ``i`` returns, at ``k``, the new
value of the tensor it reads at ``i`` (a parameter or an optimizer's state that a training
step updates), and its caller gives that input up. The lowered function then gets a public
wrapper taking and returning buffer views: it imports the arguments, calls the function, and
ties output ``k`` to argument ``i``'s buffer (``hal.tensor.alias``), so IREE writes the new
value where the old one was instead of into a new buffer. The wrapper's reflection lists the
pairs it ties (``tensorplay.donated``: ``"k:i,..."``); the runtime reads them there.

IREE 3.13 does not order that write after the function's other reads of the argument: a
matmul reading a weight for the backward of an earlier layer and the update of the same
weight, independent in the data flow, ran in either order, and the matmul read the updated
weight. So before tying, the function is analysed and, where needed, fenced:

- every op that reads ``w`` (directly or through views and casts, which IREE may fold into
  their users) and is not an ancestor of the op writing the new value must finish first. The
  update's kernel is made to read one element of each of their results: an operand of it
  passes through ``arith.select`` with those elements on a condition that is false but opaque
  to the compiler (:func:`_after_text`), which changes no value and leaves a data dependency
  IREE orders like any other, within one submission. (A ``hal.tensor.barrier`` orders too, but
  splits the program into two submissions, and IREE 3.13 drops its wait for an imported value:
  measured on Vulkan.)
- ops that IREE may fuse into the writer's dispatch (its elementwise producers) may read ``w``
  only element for element, as the writer writes it; a read that is not (a transpose, a
  reduction, a view) would see elements already overwritten, so ``w`` is not tied;
- ``w`` is not tied either where it is returned itself, where the new value is also returned
  at another position, is a view, or is read after the write.

An input left untied is updated as before (a new buffer); :func:`apply` says which and why,
and the pass leaves the same report on the public function (:data:`REPORT`, read back and
removed by :func:`take_report`), which is what ``tpc-opt`` prints.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dialects.ir import ir
from ..runtime.program import DONATED_KEY
from .registry import Pass, register_pass

__all__ = ["Plan", "apply", "DonateBuffers", "find_function", "take_report", "REPORT"]

#: ops that give another view of their operand (IREE folds them into their users' loads)
_VIEWS = frozenset({"tensor.expand_shape", "tensor.collapse_shape", "tensor.cast", "tensor.extract_slice",
                    "tensor.bitcast", "iree_tensor_ext.compute_barrier.start"})
#: ops IREE may fuse into a consumer's dispatch besides elementwise generics
_FUSABLE = frozenset({"linalg.fill", "tensor.empty", "arith.constant", "linalg.broadcast", "linalg.transpose",
                      "tensor.expand_shape", "tensor.collapse_shape", "tensor.cast", "tensor.extract_slice",
                      "tensor.bitcast"})
#: payload ops of a generic that only converts or copies each element (IREE clones such
#: generics into every consumer's dispatch, like views; a transpose or broadcast counts too)
_CASTS = frozenset({"arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci", "arith.sitofp",
                    "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.bitcast", "linalg.yield"})


@dataclass
class Plan:
    """What :func:`apply` did: the pairs tied (output -> input), those left untied and why,
    and how many other reads' results the updates were made to wait for (0: none needed)."""

    tied: dict[int, int] = field(default_factory=dict)
    untied: dict[int, str] = field(default_factory=dict)
    joined: int = 0


def _iterators_parallel(op: Any) -> bool:
    return all("parallel" in str(t) for t in op.attributes["iterator_types"])


def _generic_maps(op: Any) -> list[str]:
    return [str(m) for m in op.attributes["indexing_maps"]]


def _n_inputs(op: Any) -> int:
    return int(str(op.attributes["operandSegmentSizes"]).split(":")[1].split(",")[0])


def _is_cast(op: Any) -> bool:
    """A generic that converts each element of its one input (IREE clones it into consumers)."""
    if op.name != "linalg.generic" or _n_inputs(op) != 1 or not _iterators_parallel(op):
        return False
    payload = op.regions[0].blocks[0].operations
    return all(p.operation.name in _CASTS for p in payload)


def _transparent(op: Any) -> bool:
    return op.name in _VIEWS or _is_cast(op)


def _fusable(op: Any) -> bool:
    """Whether IREE may fuse ``op`` into a consumer's dispatch (and so read its operands there)."""
    if op.name == "linalg.generic":
        return _iterators_parallel(op)
    return op.name in _FUSABLE


def _identity(map_text: str) -> bool:
    m = re.fullmatch(r"affine_map<\(([^)]*)\) -> \(([^)]*)\)>", map_text)
    return m is not None and m.group(1).replace(" ", "") == m.group(2).replace(" ", "")


class _Body:
    """The top-level ops of a function body with their dependencies (values used, also inside
    their regions) and each op's ancestors as a bit set."""

    def __init__(self, fn: Any, ancestry: bool = True):
        self.fn = fn
        self.block = fn.regions[0].blocks[0]
        ops = [o.operation for o in self.block.operations]
        self.terminator = ops[-1]
        self.ops = ops[:-1]
        self.index = {op: n for n, op in enumerate(self.ops)}
        self.args = list(self.block.arguments)
        self.deps: list[set[int]] = []
        self.arg_uses: list[set[int]] = [set() for _ in self.args]
        for n, op in enumerate(self.ops):
            deps: set[int] = set()
            for value in self._used(op):
                owner = value.owner
                if isinstance(owner, type(self.block)):
                    if owner == self.block:
                        self.arg_uses[value.arg_number].add(n)
                    continue
                d = self.index.get(self._top(owner.operation if hasattr(owner, "operation") else owner))
                if d is not None and d != n:
                    deps.add(d)
            self.deps.append(deps)
        self.users: list[set[int]] = [set() for _ in self.ops]
        for n, deps in enumerate(self.deps):
            for d in deps:
                self.users[d].add(n)
        self.ancestors: list[int] = []
        if ancestry:  # (the body is in SSA order: each op after what it uses)
            for deps in self.deps:
                bits = 0
                for d in deps:
                    bits |= self.ancestors[d] | (1 << d)
                self.ancestors.append(bits)
        self.returned: list[Any] = list(self.terminator.operands)

    def _top(self, op: Any) -> Any:
        while True:
            parent = op.parent
            if parent is None or parent == self.fn:
                return op
            op = parent

    @staticmethod
    def _used(op: Any) -> list[Any]:
        values = list(op.operands)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    values += _Body._used(inner.operation)
        return values

    def defining(self, value: Any) -> int | None:
        """The top-level op index defining ``value`` (None for arguments and values of regions)."""
        owner = value.owner
        if isinstance(owner, type(self.block)):
            return None
        return self.index.get(owner.operation if hasattr(owner, "operation") else owner)

    def is_ancestor(self, a: int, b: int) -> bool:
        """Whether op ``a``'s results flow into op ``b``."""
        return bool(self.ancestors[b] >> a & 1)


def _readers(body: _Body, i: int) -> tuple[set[int], set[int], bool]:
    """The ops reading argument ``i`` (through views and casts, which are readers too), the
    subset using it directly, and whether the argument or a view of it is returned."""
    direct = set(body.arg_uses[i])
    readers: set[int] = set()
    stack = list(direct)
    views: set[int] = set()
    while stack:
        n = stack.pop()
        if n in readers:
            continue
        readers.add(n)
        if _transparent(body.ops[n]):
            views.add(n)
            stack.extend(body.users[n])
    returned = False
    for value in body.returned:
        d = body.defining(value)
        if (d is None and value.owner == body.block and value.arg_number == i) or (d is not None and d in views):
            returned = True
    return readers, direct, returned


def _cone(body: _Body, w: int) -> set[int]:
    """Op ``w`` and the producers IREE may fuse into its dispatch: elementwise producers,
    transitively, and the first op of another kind on each path (whose dispatch the chain may
    join as a consumer)."""
    members = {w}
    stack = [w]
    while stack:
        n = stack.pop()
        for d in body.deps[n]:
            if d in members:
                continue
            members.add(d)
            if _fusable(body.ops[d]):
                stack.append(d)
    return members


def _identity_reader(op: Any, arg: Any, shape: str) -> bool:
    """Whether generic ``op`` reads ``arg`` element for element over the argument's shape:
    all loops parallel, the identity map for ``arg`` and for its results."""
    if op.name != "linalg.generic" or not _iterators_parallel(op):
        return False
    maps = _generic_maps(op)
    n_in = _n_inputs(op)
    operands = list(op.operands)
    for j, value in enumerate(operands[:len(maps)]):
        if value == arg and not (j < n_in and _identity(maps[j])):
            return False
    return all(_identity(m) for m in maps[n_in:]) and all(str(r.type) == shape for r in op.results)


def apply(module: Any, name: str) -> tuple[Plan, str] | None:
    """Tie the donated outputs of function ``name`` of lowered ``module`` (its ``tp.donated``
    attribute) to their inputs: the function becomes private (``<name>_impl``), fenced where
    needed, and the public wrapper's text is returned with the plan; None when the function
    donates nothing. The module is changed in place."""
    from ..dialects import ir as mlir_ir

    ir = mlir_ir.ir
    with module.context:
        return _apply(ir, module, name)


def _apply(ir: Any, module: Any, name: str) -> tuple[Plan, str] | None:
    from ..dialects.tp.mlir import DONATED

    fn = find_function(module, name)
    if fn is None or DONATED not in fn.attributes:
        return None
    flat = list(ir.DenseI64ArrayAttr(fn.attributes[DONATED]))
    del fn.attributes[DONATED]
    pairs = dict(zip(flat[0::2], flat[1::2]))
    plan = Plan()
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    arg_types = [str(t) for t in ftype.inputs]
    result_types = [str(t) for t in ftype.results]
    if any(not t.startswith("tensor<") for t in (*arg_types, *result_types)):
        plan.untied = {k: "the function takes or returns values other than tensors" for k in pairs}
        return plan, ""
    body = _Body(fn)
    roots: list[int | None] = []  # the op each output comes from, through views
    for value in body.returned:
        d = body.defining(value)
        while d is not None and body.ops[d].name in _VIEWS:
            d = body.defining(body.ops[d].operands[0])
        roots.append(d)

    orders: list[tuple[set[int], list[tuple[int, Any]]]] = []  # (reads to wait for, uses to delay)
    waited = 0  # bit set: the ops waited for so far, and their ancestors
    delayed = 0  # bit set: the ops made to wait so far
    for k in sorted(pairs):
        i = pairs[k]
        why = _refusal(body, k, i, arg_types, result_types, roots)
        if why is None:
            w = body.defining(body.returned[k])
            readers, direct, returned = _readers(body, i)
            cone = _cone(body, w)
            arg = body.args[i]
            if returned:
                why = "the old value is also returned"
            wait: set[int] = set()
            for r in sorted(readers):
                if why:
                    break
                if r in cone:
                    if r not in direct or not _identity_reader(body.ops[r], arg, arg_types[i]):
                        why = (f"its update reads the old value other than element for element "
                               f"({body.ops[r].name}), in what may be one kernel with the write")
                elif body.is_ancestor(w, r):
                    why = f"the old value is read after the update ({body.ops[r].name})"
                elif not body.is_ancestor(r, w) and not _transparent(body.ops[r]):
                    wait.add(r)  # (a view or cast is waited for through its users)
            mute = [r for r in sorted(wait) if not any(_scalar_of(str(v.type)) for v in body.ops[r].results)]
            if why is None and mute:  # (nothing of it could be read to wait for it)
                why = f"the old value is read by an op with no int or float tensor result ({body.ops[mute[0]].name})"
            through: list[tuple[int, Any]] = []
            if why is None and wait:
                # one operand of the update's kernel, computed by a kernel of its own, is made
                # to depend on those reads (not an argument: the wait would sit on the import);
                # nothing waited for may depend on an op made to wait
                through = _ordering_operand(body, cone)
                if not through:
                    why = "its update has no computed operand to order after the other reads"
                else:
                    producers = wait | {d for _, v in through if (d := body.defining(v)) is not None}
                    before = waited
                    for p in producers:
                        before |= body.ancestors[p] | (1 << p)
                    later = delayed
                    for op, _ in through:
                        later |= 1 << op
                    if before & later:  # something waited for would itself wait
                        why = "ordering its update after the other reads would make a cycle"
            if why is None:
                if wait:
                    waited, delayed = before, later
                    orders.append((wait, through))
                plan.tied[k] = i
        if why is not None:
            plan.untied[k] = why
    if not plan.tied:
        return plan, ""
    helpers: list[str] = []
    if orders:
        plan.joined, helpers = _fence(ir, body, orders, name)
    return plan, "\n".join([*helpers, _wrapper(ir, fn, name, arg_types, result_types, plan.tied)])


def _ordering_operand(body: _Body, cone: set[int]) -> list[tuple[int, Any]]:
    """``[(op, value)]``: an operand of a member of ``cone`` (the update's kernel) that a
    kernel outside it computed (a gradient, say: materialized anyway, so joining it costs
    nothing), the smallest; else any computed operand; [] when there is none."""
    best: tuple[tuple[int, int, int], int, Any] | None = None
    for n in sorted(cone):
        for value in body.ops[n].operands:
            d = body.defining(value)
            text = str(value.type)
            if d is None or not text.startswith("tensor<"):
                continue  # (arguments and scalars)
            kind = body.ops[d].name
            if kind in ("arith.constant", "tensor.empty", "linalg.fill") or kind in _VIEWS:
                continue
            size = 1
            for dim in _shape(text):
                size *= 1 << 40 if dim == "?" else int(dim)
            fused = d in cone and _fusable(body.ops[d])  # (else materialized anyway)
            rank = (int(fused), size, n)
            if best is None or rank < best[0]:
                best = (rank, n, value)
    return [] if best is None else [(best[1], best[2])]


def _refusal(body: _Body, k: int, i: int, arg_types: list[str], result_types: list[str],
             roots: list[int | None]) -> str | None:
    if i >= len(arg_types) or k >= len(result_types):
        return "no such input or output"
    if arg_types[i] != result_types[k]:
        return f"the new value's type {result_types[k]} is not the input's {arg_types[i]}"
    if "?" in arg_types[i]:
        return "its shape is known only at run time"
    w = body.defining(body.returned[k])
    if w is None:
        return "the new value is an input"
    if body.ops[w].name in _VIEWS:
        return "the new value is a view"
    if any(roots[j] == w for j in range(len(roots)) if j != k):
        return "the new value is also returned at another position"
    return None


def _fence(ir: Any, body: _Body, orders: list[tuple[set[int], list[tuple[int, Any]]]], name: str) -> tuple[int, list[str]]:
    """For each update to order: the operand it delays, in the op delaying it, is replaced by
    the same values made to depend on the results of the reads it waits for (a call of a
    helper, :func:`_after_text`; updates delaying the same use share one); then the body is
    reordered so every op follows what it uses. Returns how many values the updates wait for
    and the helpers' text."""
    groups: list[tuple[set[int], list[tuple[int, Any]]]] = []
    for wait, through in orders:
        merged_wait, merged_through = set(wait), list(through)
        for group in [g for g in groups if any(n == m and v == u for n, v in g[1] for m, u in through)]:
            groups.remove(group)
            merged_wait |= group[0]
            merged_through += [(n, v) for n, v in group[1]
                               if not any(n == m and v == u for m, u in merged_through)]
        groups.append((merged_wait, merged_through))
    joined = 0
    helpers: list[str] = []
    # the condition, false but opaque, made once at the start (a util.optimization_barrier
    # between kernels splits their submission in two)
    with ir.InsertionPoint.at_block_begin(body.block), body.terminator.location:
        i1 = ir.IntegerType.get_signless(1)
        false = ir.Operation.create("arith.constant", results=[i1], attributes={"value": ir.IntegerAttr.get(i1, 0)})
        flag = ir.Operation.create("util.optimization_barrier", results=[i1], operands=[false.result]).result
    for wait, through in groups:
        values = [v for r in sorted(wait) for v in body.ops[r].results if _scalar_of(str(v.type)) is not None]
        joined += len(values)
        done: list[tuple[Any, Any]] = []  # (value, its delayed copy)
        for n, value in through:
            after = next((a for v, a in done if v == value), None)
            if after is None:
                helper = f"{name}_after_{len(helpers)}"
                types = [str(value.type), *(str(v.type) for v in values)]
                helpers.append(_after_text(helper, types))
                with ir.InsertionPoint(body.terminator), body.terminator.location:
                    call = ir.Operation.create("func.call", results=[value.type], operands=[flag, value, *values],
                                               attributes={"callee": ir.FlatSymbolRefAttr.get(helper)})
                after = call.result
                done.append((value, after))
            body.ops[n].replace_uses_of_with(value, after)
    _reorder(body)
    return joined, helpers


_ELEMENT = re.compile(r"^(?:[0-9?]+x)*([a-z0-9]+)$")


def _shape(type_text: str) -> list[str]:
    """The sizes of a ranked tensor type's text, as written (``"?"`` where known at run time)."""
    return type_text[len("tensor<"):-1].split("x")[:-1]


def _scalar_of(type_text: str) -> str | None:
    """The element type of a ranked tensor type of ints or floats; None for anything else."""
    if not type_text.startswith("tensor<") or not type_text.endswith(">"):
        return None
    m = _ELEMENT.match(type_text[len("tensor<"):-1])
    if m is None or not re.fullmatch(r"i\d+|f16|bf16|f32|f64", m.group(1)):
        return None
    return m.group(1)


def _convert(value: str, source: str, target: str, out: list[str], tag: str) -> str:
    """``value`` of element type ``source`` as ``target`` (arith ops appended to ``out``)."""
    if source == target:
        return value
    bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
    if source.startswith("i") and target.startswith("i"):
        op = "arith.extui" if source == "i1" else "arith.extsi"
        op = op if int(source[1:]) < int(target[1:]) else "arith.trunci"
    elif source.startswith("i"):
        op = "arith.uitofp" if source == "i1" else "arith.sitofp"
    elif target.startswith("i"):
        op = "arith.fptosi"
    elif {source, target} == {"f16", "bf16"}:
        wide = _convert(value, source, "f32", out, tag + "w")
        return _convert(wide, "f32", target, out, tag)
    else:
        op = "arith.extf" if bits[source] < bits[target] else "arith.truncf"
    out.append(f"      %{tag} = {op} {value} : {source} to {target}")
    return f"%{tag}"


def _after_text(name: str, types: list[str]) -> str:
    """A private function ``@name(%flag, %v, %j0, ...)`` returning ``%v`` unchanged, computed
    so that it reads one element of each ``%j`` (their results must exist first): each element
    passes through ``arith.select`` on ``%flag``, false but opaque to the compiler (the result of
    a ``util.optimization_barrier``), so nothing folds the reads away and no value changes. A
    ``%j`` whose sizes may be 0 contributes the sum of its at most one first element."""
    value_type, waited = types[0], types[1:]
    element = _scalar_of(value_type)
    shape = _shape(value_type)
    rank = len(shape)
    dims = ", ".join(f"d{k}" for k in range(rank))
    lines = [f"  func.func private @{name}(%flag: i1, %v: {value_type}"
             + "".join(f", %j{k}: {t}" for k, t in enumerate(waited)) + f") -> {value_type} {{"]
    tokens = []
    for k, t in enumerate(waited):
        u = _scalar_of(t)
        jshape = _shape(t)
        if not jshape:
            tokens.append((f"%j{k}", u))
            continue
        ones = ", ".join("1" for _ in jshape)
        zeros = ", ".join("0" for _ in jshape)
        if all(d != "?" and int(d) > 0 for d in jshape):
            lines.append(f"    %s{k} = tensor.extract_slice %j{k}[{zeros}] [{ones}] [{ones}] : {t} to "
                         f"tensor<{'1x' * len(jshape)}{u}>")
            lines.append(f"    %e{k} = tensor.collapse_shape %s{k} [] : tensor<{'1x' * len(jshape)}{u}> into tensor<{u}>")
            tokens.append((f"%e{k}", u))
            continue
        # sizes that may be 0: the sum over a slice of at most one element
        sizes = []
        for n, d in enumerate(jshape):
            if d == "?":
                _tensor_dim(f"%n{k}_{n}", f"%j{k}", n, t, lines)
                lines.append(f"    %one{k}_{n} = arith.constant 1 : index")
                lines.append(f"    %m{k}_{n} = arith.minui %n{k}_{n}, %one{k}_{n} : index")
                sizes.append(f"%m{k}_{n}")
            else:
                sizes.append(str(min(int(d), 1)))
        slice_type = "tensor<" + "".join("?x" if z.startswith("%") else f"{z}x" for z in sizes) + f"{u}>"
        lines.append(f"    %s{k} = tensor.extract_slice %j{k}[{zeros}] [{', '.join(sizes)}] [{ones}] : {t} to {slice_type}")
        zero = "0.0" if u.startswith(("f", "b")) else "0"
        add = "arith.addf" if u.startswith(("f", "b")) else "arith.addi"
        jdims = ", ".join(f"d{n}" for n in range(len(jshape)))
        reductions = ", ".join(['"reduction"'] * len(jshape))
        lines += [f"    %z{k} = arith.constant {zero} : {u}",
                  f"    %i{k} = tensor.empty() : tensor<{u}>",
                  f"    %f{k} = linalg.fill ins(%z{k} : {u}) outs(%i{k} : tensor<{u}>) -> tensor<{u}>",
                  f"    %e{k} = linalg.generic {{indexing_maps = [affine_map<({jdims}) -> ({jdims})>, "
                  f"affine_map<({jdims}) -> ()>], iterator_types = [{reductions}]}} "
                  f"ins(%s{k} : {slice_type}) outs(%f{k} : tensor<{u}>) {{",
                  f"    ^bb0(%a: {u}, %b: {u}):",
                  f"      %r = {add} %a, %b : {u}",
                  f"      linalg.yield %r : {u}",
                  f"    }} -> tensor<{u}>"]
        tokens.append((f"%e{k}", u))
    empty_dims = [_tensor_dim(f"%vd{n}", "%v", n, value_type, lines) for n, d in enumerate(shape) if d == "?"]
    lines.append(f"    %empty = tensor.empty({', '.join(empty_dims)}) : {value_type}")
    maps = [f"affine_map<({dims}) -> ({dims})>"] + [f"affine_map<({dims}) -> ()>"] * len(tokens) \
        + [f"affine_map<({dims}) -> ({dims})>"]
    ins = ", ".join(["%v", *(t for t, _ in tokens)])
    in_types = ", ".join([value_type, *(f"tensor<{u}>" for _, u in tokens)])
    parallel = ", ".join(['"parallel"'] * rank)
    lines.append(f"    %out = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = "
                 f"[{parallel}]}} ins({ins} : {in_types}) outs(%empty : {value_type}) {{")
    args = ", ".join([f"%x: {element}", *(f"%t{k}: {u}" for k, (_, u) in enumerate(tokens)), f"%o: {element}"])
    lines.append(f"    ^bb0({args}):")
    payload: list[str] = []
    current = "%x"
    for k, (_, u) in enumerate(tokens):
        converted = _convert(f"%t{k}", u, element, payload, f"c{k}")
        payload.append(f"      %y{k} = arith.select %flag, {converted}, {current} : {element}")
        current = f"%y{k}"
    lines += payload
    lines += [f"      linalg.yield {current} : {element}", f"    }} -> {value_type}",
              f"    return %out : {value_type}", "  }"]
    return "\n".join(lines)


def _reorder(body: _Body) -> None:
    """Move the body's ops into a topological order of their current dependencies, keeping
    the present order where it is one."""
    fresh = _Body(body.fn, ancestry=False)
    pending = [len(d) for d in fresh.deps]
    ready = [n for n, c in enumerate(pending) if c == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for u in fresh.users[n]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(fresh.ops):  # (the checks above rule this out)
        raise RuntimeError("donation: the fenced function has a cycle")
    for n in order:
        fresh.ops[n].move_before(fresh.terminator)


def _tensor_dim(name: str, tensor: str, n: int, type_text: str, out: list[str]) -> str:
    """``name``: size ``n`` of ``tensor`` (of type ``type_text``), defined into ``out``."""
    out.append(f"    {name}_i = arith.constant {n} : index")
    out.append(f"    {name} = tensor.dim {tensor}, {name}_i : {type_text}")
    return name


def _dims(prefix: str, type_text: str, out: list[str], view: str | None = None, tensor: str | None = None) -> str:
    """``{%d0, ...}``: the run-time sizes of ``type_text``, defined into ``out`` (named after
    ``prefix``) from buffer view ``view`` or from tensor value ``tensor``."""
    shape = _shape(type_text)
    names = []
    for j, d in enumerate(shape):
        if d != "?":
            continue
        name = f"{prefix}_d{j}"
        if view is not None:
            out.append(f"    {name} = hal.buffer_view.dim<{view} : !hal.buffer_view>[{j}] : index")
        else:
            _tensor_dim(name, tensor, j, type_text, out)
        names.append(name)
    return "{" + ", ".join(names) + "}" if names else ""


def _wrapper(ir: Any, fn: Any, name: str, arg_types: Sequence[str], result_types: Sequence[str],
             tied: dict[int, int]) -> str:
    """Make ``fn`` the private ``<name>_impl`` and return the text of the public ``name``
    taking and returning buffer views, with outputs ``tied`` written into their inputs."""
    impl = f"{name}_impl"
    fn.attributes["sym_name"] = ir.StringAttr.get(impl)
    fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    bv = "!hal.buffer_view"
    n = len(result_types)
    args = [f"%a{j}" for j in range(len(arg_types))]
    lines: list[str] = []
    for j, t in enumerate(arg_types):
        dims = _dims(f"%t{j}", t, lines, view=args[j])
        lines.append(f'    %t{j} = hal.tensor.import {args[j]} "input{j}" : {bv} -> {t}{dims}')
    results = "%r" if n == 1 else f"%r:{n}"
    lines.append(f"    {results} = func.call @{impl}({', '.join(f'%t{j}' for j in range(len(arg_types)))}) : "
                 f"({', '.join(arg_types)}) -> ({', '.join(result_types)})")
    for k, t in enumerate(result_types):
        value = "%r" if n == 1 else f"%r#{k}"
        if k in tied:
            lines.append(f"    %al{k} = hal.tensor.alias {value} : {t} to {args[tied[k]]} : {bv}")
            value = f"%al{k}"
        dims = _dims(f"%o{k}", t, lines, tensor=value)
        lines.append(f'    %o{k} = hal.tensor.export {value} "output{k}" : {t}{dims} -> {bv}')
    declaration = (f"sync func @{name}({', '.join(f'%input{j}: {t}' for j, t in enumerate(arg_types))}) -> "
                   f"({', '.join(f'%output{k}: {t}' for k, t in enumerate(result_types))})")
    donated = ",".join(f"{k}:{i}" for k, i in sorted(tied.items()))
    kept = ""  # what the lowering declared of the function (its arguments' alignment) stays public
    if "iree.reflection" in fn.attributes:
        own = ir.DictAttr(fn.attributes["iree.reflection"])
        kept = "".join(f", {own[i].name} = {own[i].attr}" for i in range(len(own)))
        del fn.attributes["iree.reflection"]
    reflection = (f"iree.reflection = {{iree.abi.declaration = {ir.StringAttr.get(declaration)}, "
                  f"{DONATED_KEY} = {ir.StringAttr.get(donated)}{kept}}}")
    head = (f"  func.func @{name}({', '.join(f'{a}: {bv}' for a in args)}) -> "
            f"({', '.join([bv] * n)}) attributes {{iree.abi.stub, {reflection}}} {{")
    return "\n".join([head, *lines, f"    return {', '.join(f'%o{k}' for k in range(n))} : {', '.join([bv] * n)}",
                      "  }"])


# --- the pass ----------------------------------------------------------------------------------

#: the attribute the pass leaves on each public function it handled: the pairs tied
#: (``tied = "k:i,..."``), the outputs left untied with the reason (``untied = {"k" = "..."}``)
#: and how many other reads' results the updates wait for (``joined``)
REPORT = "tp.donation"


@register_pass
class DonateBuffers(Pass):
    """Tie each tp.donated output of a lowered function to its input's buffer (a wrapper on buffer views).

    The function becomes private ``<name>_impl``, its updates ordered after the other reads of
    the old values; outputs that must not be tied are listed in the report with the reason."""

    name = "donate-buffers"
    #: only the function of this name (default: every function with a tp.donated attribute)
    function: str = ""

    def run(self, module: Any) -> None:
        from ..dialects.tp.mlir import DONATED

        body = module.regions[0].blocks[0]  # (module: the builtin.module operation)
        names = [ir.StringAttr(op.operation.attributes["sym_name"]).value for op in body.operations
                 if op.operation.name == "func.func" and DONATED in op.operation.attributes]
        for name in names:
            if self.function and name != self.function:
                continue
            done = _apply(ir, module, name)
            if done is None:
                continue
            plan, wrapper = done
            if wrapper:
                _insert(module, name, wrapper)
            find_function(module, name).attributes[REPORT] = ir.DictAttr.get({
                "tied": ir.StringAttr.get(",".join(f"{k}:{i}" for k, i in sorted(plan.tied.items()))),
                "untied": ir.DictAttr.get({str(k): ir.StringAttr.get(why) for k, why in sorted(plan.untied.items())}),
                "joined": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), plan.joined)})


def find_function(module: Any, name: str) -> Any:
    """The top-level ``func.func`` ``name`` of ``module`` (an ir.Module or its operation;
    None when there is none)."""
    module = getattr(module, "operation", module)
    for op in module.regions[0].blocks[0].operations:
        fn = op.operation
        if fn.name == "func.func" and ir.StringAttr(fn.attributes["sym_name"]).value == name:
            return fn
    return None


def _insert(module: Any, name: str, text: str) -> None:
    """The functions of ``text`` (the wrapper of ``name`` and its helpers) placed at the end of
    ``module``; parsed beside a declaration of ``<name>_impl``, which the wrapper calls."""
    signature = str(ir.TypeAttr(find_function(module, f"{name}_impl").attributes["function_type"]).value)
    params, _, results = signature.partition(" -> ")
    added = ir.Module.parse(f"module {{\n  func.func private @{name}_impl{params} -> {results}\n{text}\n}}",
                            module.context)
    at = ir.InsertionPoint(getattr(module, "operation", module).regions[0].blocks[0])
    for op in list(added.body.operations)[1:]:
        at.insert(op.detach_from_parent())


def take_report(module: Any, name: str) -> Plan | None:
    """The :class:`Plan` the pass left on function ``name`` of ``module``, removed from it
    (None when the pass did nothing there)."""
    fn = find_function(module, name)
    if fn is None or REPORT not in fn.attributes:
        return None
    report = ir.DictAttr(fn.attributes[REPORT])
    del fn.attributes[REPORT]
    tied = ir.StringAttr(report["tied"]).value
    untied = ir.DictAttr(report["untied"])
    return Plan(tied={int(k): int(i) for k, i in (pair.split(":") for pair in tied.split(",") if pair)},
                untied={int(untied[j].name): ir.StringAttr(untied[j].attr).value for j in range(len(untied))},
                joined=ir.IntegerAttr(report["joined"]).value)
