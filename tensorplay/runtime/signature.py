"""Entry point signatures of exported programs, as stored in the vmfb and checked on calls.

An exported vmfb carries, in each entry function's reflection map (what
``iree-dump-module`` prints under the function), ``tensorplay.signature`` (argument names,
shapes and dtypes, result types, how results nest) and ``tensorplay.module`` (module-wide
facts: backend, target, parameter archive). Both are JSON. This module reads and writes
them and checks call arguments with numpy only, so deployment needs no compiler.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TensorSpec", "EntrySignature", "ModuleInfo", "SIGNATURE_KEY", "MODULE_KEY", "FORMAT_VERSION",
           "DTYPES", "numpy_dtype"]

#: reflection keys of an exported entry function
SIGNATURE_KEY = "tensorplay.signature"
MODULE_KEY = "tensorplay.module"
FORMAT_VERSION = 1
#: signatures with dynamic dimensions (named sizes and size checks) are written as version 2
DYNAMIC_FORMAT_VERSION = 2
_READABLE_VERSIONS = (FORMAT_VERSION, DYNAMIC_FORMAT_VERSION)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a tensorplay dtype name (``bfloat16`` comes from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes  # only programs that use bfloat16 need it

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor argument or result: name, shape, dtype, and the dtype the compiled
    function takes or returns (``abi_dtype``; differs where a target widens small types).

    A shape entry is an int (a static size) or, for a dynamic dimension, a text: the
    dimension's name (``"seq"``) or an expression over names (``"2 * seq"``)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    abi_dtype: str | None = None

    @property
    def wire_dtype(self) -> str:
        return self.abi_dtype or self.dtype

    @property
    def dynamic(self) -> bool:
        """Whether some dimension's size is only known at call time."""
        return any(isinstance(d, str) for d in self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.abi_dtype and self.abi_dtype != self.dtype:
            out["abi"] = self.abi_dtype
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorSpec:
        """A spec as export writes it; anything else is a ValueError saying what is wrong."""
        _expect(isinstance(d, dict) and {"name", "shape", "dtype"} <= set(d),
                f"a tensor entry must be an object with name, shape and dtype, got {_short(d)}")
        name, shape, dtype, abi = d["name"], d["shape"], d["dtype"], d.get("abi")
        _expect(isinstance(name, str) and 0 < len(name) <= _MAX_NAME, f"a tensor name must be a short text, "
                                                                      f"got {_short(name)}")
        _expect(isinstance(shape, list) and len(shape) <= _MAX_RANK, f"{name}: the shape must be a list of at "
                                                                     f"most {_MAX_RANK} sizes, got {_short(shape)}")
        for size in shape:
            static = type(size) is int and 0 <= size < 2 ** 63
            named = isinstance(size, str) and 0 < len(size) <= _MAX_NAME
            _expect(static or named, f"{name}: a size must be a non-negative int or a dimension's name, got "
                                     f"{_short(size)}")
        for label, value in (("dtype", dtype), ("abi", abi)):
            _expect(value is None and label == "abi" or value in DTYPES,
                    f"{name}: {label} {_short(value)} is not a tensor dtype ({', '.join(DTYPES)})")
        return cls(name, tuple(shape), dtype, abi)


@dataclass(frozen=True)
class EntrySignature:
    """What an entry point takes and returns.

    ``tree`` describes the Python structure of the results: ``{"t": "out", "i": k}`` for the
    k-th result tensor, ``{"t": "size", "i": k}`` for a size the program computed (the k-th
    result, a 0-d int64 tensor, returned as a Python int: ``y.shape[0]`` of ``y = x[mask]``),
    ``{"t": "const", "v": ...}`` for a constant (e.g. None), and
    ``tuple``/``list``/``dict``/``namedtuple`` containers of those.

    ``dims`` describes the dynamic dimensions of the arguments (None when every size is
    static): ``{"bind": [[var, argument, dim], ...], "checks": [[expression, description],
    ...]}``. A call binds each ``var`` to that argument's size; every expression (integer
    arithmetic over ``aN[d]``, argument N's shape, and the bound vars) must hold, e.g.
    ``a1[0] == v0`` (two inputs share a size) or ``v0 <= 512`` (a bound).
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    tree: Any = None
    method: str | None = None
    overload: int | None = None
    dims: dict[str, Any] | None = None

    @property
    def dynamic(self) -> bool:
        """Whether the entry point takes arguments of more than one shape."""
        return self.dims is not None and any(s.dynamic for s in self.inputs)

    def __str__(self) -> str:
        args = ", ".join(f"{s.name}: {s}" for s in self.inputs)
        return f"{self.name}({args}) -> {self._format_tree(self.tree)}"

    def __repr__(self) -> str:
        return f"<EntrySignature {self}>"

    def _format_tree(self, node: Any) -> str:
        if node is None:
            return "()"
        kind = node["t"]
        if kind == "out":
            return str(self.outputs[node["i"]])
        if kind == "size":
            return "int"
        if kind == "const":
            return repr(node["v"])
        parts = [self._format_tree(c) for c in node["c"]]
        if kind == "dict":
            return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(node["k"], parts)) + "}"
        if kind == "list":
            return "[" + ", ".join(parts) + "]"
        name = node.get("n", "")
        return f"{name}({', '.join(parts)}{',' if len(parts) == 1 and not name else ''})"

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> str:
        d: dict[str, Any] = {"v": DYNAMIC_FORMAT_VERSION if self.dynamic else FORMAT_VERSION,
                             "name": self.name, "method": self.method, "overload": self.overload,
                             "inputs": [s.to_json() for s in self.inputs],
                             "outputs": [s.to_json() for s in self.outputs], "tree": self.tree}
        if self.dynamic:
            d["dims"] = self.dims
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> EntrySignature:
        """Read a signature as stored in a vmfb. Everything is validated here, before any
        call: a record that is not what export writes (edited or damaged) is a ValueError,
        and its size checks are refused unless they are bounded integer arithmetic over the
        argument sizes, so nothing in a file can make a call run code or take unbounded time."""
        d = _parse_record(text, "signature")
        if d.get("v") not in _READABLE_VERSIONS:
            raise ValueError(f"exported signature format {_short(d.get('v'))} is not supported by this "
                             f"tensorplay.runtime (it reads formats "
                             f"{', '.join(map(str, _READABLE_VERSIONS))}); update tensorplay")
        try:
            _expect(isinstance(d.get("name"), str) and 0 < len(d["name"]) <= _MAX_NAME,
                    f"the entry name must be a short text, got {_short(d.get('name'))}")
            _expect(isinstance(d.get("inputs"), list) and isinstance(d.get("outputs"), list),
                    "inputs and outputs must be lists")
            inputs = tuple(TensorSpec.from_json(s) for s in d["inputs"])
            outputs = tuple(TensorSpec.from_json(s) for s in d["outputs"])
            method, overload = d.get("method"), d.get("overload")
            _expect(method is None or isinstance(method, str), f"method must be a text, got {_short(method)}")
            _expect(overload is None or type(overload) is int, f"overload must be an int, got {_short(overload)}")
            tree = d.get("tree")
            if tree is not None:
                _check_tree(tree, len(outputs), 0)
            dims = d.get("dims")
            if dims is not None:
                # the checks are validated (and compiled) now: a bad one fails the load, not a call
                _SizeChecks.of(dims, tuple(len(s.shape) for s in inputs))
        except RecursionError:
            raise ValueError("the signature is nested too deeply") from None
        return cls(d["name"], inputs, outputs, tree, method, overload, dims)

    # -- calls -----------------------------------------------------------------------------
    def check_inputs(self, args: Sequence[Any]) -> list[np.ndarray]:
        """The arguments as contiguous arrays of the compiled function's dtypes; TypeError
        (count, dtype) or ValueError (shape) naming this signature when one does not fit."""
        if len(args) != len(self.inputs):
            raise TypeError(f"{self} takes {len(self.inputs)} tensor argument(s) but {len(args)} "
                            f"{'was' if len(args) == 1 else 'were'} given")
        arrays = []
        for spec, value in zip(self.inputs, args):
            want = numpy_dtype(spec.dtype)
            if value is None:
                raise TypeError(f"{self}: argument {spec.name!r} is None; pass an array or tensor of {spec}")
            array = _as_array(value)
            if array is None:  # a Python number or nested list: converted to the declared dtype
                try:
                    array = np.asarray(value, dtype=want)
                except (TypeError, ValueError) as exc:
                    raise TypeError(f"{self}: argument {spec.name!r} must be an array or tensor of "
                                    f"{spec}, got {type(value).__name__} ({exc})") from None
            elif array.dtype != want:
                raise TypeError(f"{self}: argument {spec.name!r} has dtype {_dtype_name(array.dtype)}, "
                                f"expected {spec.dtype} (convert it with .astype({spec.dtype!r}))")
            self._check_shape(spec, array.shape)
            if spec.abi_dtype and spec.abi_dtype != spec.dtype:
                array = array.astype(numpy_dtype(spec.abi_dtype))
            arrays.append(np.ascontiguousarray(array).reshape(array.shape))  # (0-d stays 0-d)
        if self.dims is not None:
            failed = _SizeChecks.of(self.dims, tuple(len(s.shape) for s in self.inputs)).failure(
                [a.shape for a in arrays])
            if failed is not None:
                shapes = ", ".join(f"{s.name}={list(a.shape)}" for s, a in zip(self.inputs, arrays))
                raise ValueError(f"{self}: the argument sizes break {failed} (got {shapes})")
        return arrays

    def _check_shape(self, spec: TensorSpec, shape: tuple[int, ...]) -> None:
        if len(shape) == len(spec.shape) and all(isinstance(w, str) or w == g for w, g in zip(spec.shape, shape)):
            return
        if not spec.dynamic:
            raise ValueError(f"{self}: argument {spec.name!r} has shape {list(shape)}, expected "
                             f"{list(spec.shape)} (this entry point was exported with static shapes; "
                             f"export again with example arguments of the new shape, or with "
                             f"dynamic_shapes naming the dims that vary)")
        if len(shape) != len(spec.shape):
            raise ValueError(f"{self}: argument {spec.name!r} has {len(shape)} dims {list(shape)}, "
                             f"expected {len(spec.shape)}: [{', '.join(map(str, spec.shape))}]")
        d = next(i for i, (w, g) in enumerate(zip(spec.shape, shape)) if not isinstance(w, str) and w != g)
        raise ValueError(f"{self}: argument {spec.name!r} has size {shape[d]} at dim {d}, expected "
                         f"{spec.shape[d]} (only the named dims of [{', '.join(map(str, spec.shape))}] "
                         f"may vary)")

    def result_dtypes(self) -> list[np.dtype]:
        """How to read the compiled function's results back (its ABI dtypes)."""
        return [numpy_dtype(s.wire_dtype) for s in self.outputs]

    def restore(self, results: Sequence[np.ndarray]) -> Any:
        """The results in the entry point's Python structure, with the declared dtypes."""
        typed = []
        for spec, r in zip(self.outputs, results):
            if spec.abi_dtype and spec.abi_dtype != spec.dtype:
                r = (r != 0) if spec.dtype == "bool" else r.astype(numpy_dtype(spec.dtype))
            typed.append(r)
        if self.tree is None:
            return tuple(typed)
        return _build(self.tree, typed)


#: limits of what a stored signature may hold (export writes far less)
_MAX_NAME = 1024
_MAX_RANK = 64
_MAX_CHECKS = 4096
_MAX_CHECK_CHARS = 2000
_MAX_DEPTH = 100
#: the largest integer a size check may compute, in bits: sizes are below 2**63, and checks
#: combine a few of them, so this bounds the time of every check
_MAX_BITS = 4096
_MAX_EXPONENT = 16
#: the tensor dtypes a signature may name
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_BOUND_NAME = re.compile(r"v\d{1,6}")


def _expect(ok: bool, problem: str) -> None:
    if not ok:
        raise ValueError(problem)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse_record(text: Any, what: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ValueError(f"the {what} record is not text")
    try:
        d = json.loads(text)
    except RecursionError:
        raise ValueError(f"the {what} record is nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"the {what} record is not valid JSON ({exc})") from None
    if not isinstance(d, dict):
        raise ValueError(f"the {what} record must be a JSON object, got {_short(d)}")
    return d


_TREE_KINDS = ("out", "size", "const", "tuple", "list", "dict", "namedtuple")


def _check_tree(node: Any, n_outputs: int, depth: int) -> None:
    """The result structure must be what export writes: it only ever picks results and
    constants and names containers."""
    _expect(depth <= _MAX_DEPTH, "the result structure is nested too deeply")
    _expect(isinstance(node, dict) and node.get("t") in _TREE_KINDS,
            f"unknown result structure {_short(node)}")
    kind = node["t"]
    if kind in ("out", "size"):
        i = node.get("i")
        _expect(type(i) is int and 0 <= i < n_outputs, f"the result structure names result {_short(i)} of "
                                                       f"{n_outputs}")
        return
    if kind == "const":
        _expect(node.get("v") is None or type(node.get("v")) in (bool, int, float, str),
                f"the result constant {_short(node.get('v'))} is not None, a bool, a number or a text")
        return
    children = node.get("c")
    _expect(isinstance(children, list), f"a {kind} in the result structure has no list of children")
    if kind in ("dict", "namedtuple"):
        keys = node.get("k")
        _expect(isinstance(keys, list) and len(keys) == len(children) and all(isinstance(k, str) for k in keys),
                f"a {kind} in the result structure needs one text key per child")
        if kind == "namedtuple":
            names = [node.get("n"), *keys]
            _expect(all(isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n)
                        and not n.startswith("_") for n in names),
                    f"the namedtuple {_short(node.get('n'))} has names that are not identifiers")
    for child in children:
        _check_tree(child, n_outputs, depth + 1)


class _SizeChecks:
    """The size checks of a dynamic signature, validated and compiled once.

    A check is a Python expression over ``aN[d]`` (argument N's size at dim d) and the
    names ``bind`` gives (``v0``, ``v1``: sizes of the arguments), made of integer
    constants, ``+ - * // %``, ``**`` with a small constant exponent, comparisons,
    ``and``/``or``/``not`` and ``min``/``max``/``abs``. Anything else (other names,
    attributes, calls, lambdas, comprehensions, shifts, huge constants or exponents) is
    refused before anything is evaluated: a vmfb is data, and loading it must not run code
    in the caller's process or take unbounded time. The bit size of every intermediate is
    bounded (``_MAX_BITS``), so evaluating the checks of a call takes microseconds."""

    _cache: dict[tuple[str, tuple[int, ...]], _SizeChecks] = {}
    _CALLS = {"min": min, "max": max, "abs": abs}
    _ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
    _COMPARE = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
    _REFUSED = {ast.Attribute: "an attribute access", ast.Lambda: "a lambda", ast.ListComp: "a comprehension",
                ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
                ast.GeneratorExp: "a comprehension", ast.NamedExpr: "an assignment", ast.Starred: "unpacking",
                ast.IfExp: "a conditional", ast.Tuple: "a tuple", ast.List: "a list", ast.Set: "a set",
                ast.Dict: "a dict", ast.JoinedStr: "an f-string", ast.Slice: "a slice", ast.Await: "an await",
                ast.Yield: "a yield", ast.YieldFrom: "a yield"}

    def __init__(self, dims: Any, ranks: tuple[int, ...]):
        _expect(isinstance(dims, dict) and set(dims) <= {"bind", "checks"},
                f"the size checks must be an object with bind and checks, got {_short(dims)}")
        bind, checks = dims.get("bind", []), dims.get("checks", [])
        _expect(isinstance(bind, list) and isinstance(checks, list) and len(checks) <= _MAX_CHECKS
                and len(bind) <= _MAX_CHECKS, f"bind and checks must be lists (of at most {_MAX_CHECKS} entries)")
        self.ranks = ranks
        self.bind: list[tuple[str, int, int]] = []
        for entry in bind:
            _expect(isinstance(entry, list) and len(entry) == 3, f"a bind entry must be [name, argument, dim], "
                                                                 f"got {_short(entry)}")
            var, a, d = entry
            _expect(isinstance(var, str) and _BOUND_NAME.fullmatch(var) is not None,
                    f"bound size name {_short(var)} is not of the form v0, v1, ...")
            _expect(type(a) is int and 0 <= a < len(ranks), f"{var} is bound to argument {_short(a)}, but the "
                                                            f"entry point takes {len(ranks)}")
            _expect(type(d) is int and 0 <= d < ranks[a], f"{var} is bound to dim {_short(d)} of argument {a}, "
                                                          f"which has {ranks[a]} dims")
            _expect(all(var != b for b, _, _ in self.bind), f"{var} is bound twice")
            self.bind.append((var, a, d))
        self._names = {var for var, _, _ in self.bind}
        self.checks = []
        for entry in checks:
            _expect(isinstance(entry, list) and len(entry) == 2 and all(isinstance(t, str) for t in entry),
                    f"a size check must be [expression, description], got {_short(entry)}")
            text, why = entry
            _expect(len(why) <= 4 * _MAX_CHECK_CHARS, "a size check's description is too long")
            self.checks.append((self._compile(text), why))

    @classmethod
    def of(cls, dims: Any, ranks: tuple[int, ...]) -> _SizeChecks:
        try:
            key = (json.dumps(dims, sort_keys=True), tuple(ranks))
        except (TypeError, ValueError):
            raise ValueError(f"malformed size checks {_short(dims)}") from None
        hit = cls._cache.get(key)
        if hit is None:
            hit = cls(dims, tuple(ranks))
            if len(cls._cache) < 4096:
                cls._cache[key] = hit
        return hit

    def _refuse(self, text: str, node: ast.AST | None, why: str) -> None:
        if node is None:
            raise ValueError(f"size check {_short(text)} is refused without evaluating it: {why}; the "
                             f"signature was edited or damaged after export: export the program again")
        kind = type(node.op if isinstance(node, (ast.BinOp, ast.UnaryOp)) else node).__name__
        allowed_elsewhere = type(node) not in self._REFUSED and kind not in (
            "LShift", "RShift", "Invert", "BitAnd", "BitOr", "BitXor", "MatMult", "Div")
        form = " in this form" if allowed_elsewhere else ""
        raise ValueError(f"size check {_short(text)} holds {kind}, which size checks never use{form}: {why}. The "
                         f"runtime refuses it without evaluating it (only bounded integer arithmetic over the "
                         f"argument sizes is allowed); the signature was edited or damaged after export: "
                         f"export the program again")

    def _compile(self, text: str) -> Any:
        if len(text) > _MAX_CHECK_CHARS:
            self._refuse(text, None, f"it is {len(text)} characters long (size checks have at most "
                                     f"{_MAX_CHECK_CHARS})")
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise ValueError(f"malformed size check {_short(text)} in an exported signature: {exc}; the "
                             f"signature was edited or damaged after export: export the program again") from None
        self._bits(tree.body, text, 0)
        return compile(tree, "<size check>", "eval")

    def _bits(self, node: ast.AST, text: str, depth: int) -> int:
        """Validate ``node`` and return a bound on the bit size of its value."""
        if depth > _MAX_DEPTH:
            self._refuse(text, node, f"expressions nested more than {_MAX_DEPTH} deep")
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, bool):
                self._refuse(text, node, f"the constant {_short(node.value)}")
            bits = max(1, abs(int(node.value)).bit_length())
        elif isinstance(node, ast.Name):
            if node.id not in self._names:
                self._refuse(text, node, f"the name {node.id!r}, which is no size of this signature (its sizes are "
                                   f"{', '.join(sorted(self._names)) or 'none'} and aN[d])")
            bits = 64
        elif isinstance(node, ast.Subscript):
            value, index = node.value, node.slice
            arg = value.id if isinstance(value, ast.Name) else None
            n = int(arg[1:]) if arg and re.fullmatch(r"a\d{1,6}", arg) else None
            if n is None or n >= len(self.ranks):
                self._refuse(text, node, "an index into something other than an argument's shape "
                                   f"(the arguments are a0..a{len(self.ranks) - 1})")
            if not (isinstance(index, ast.Constant) and type(index.value) is int
                    and 0 <= index.value < self.ranks[n]):
                self._refuse(text, node, f"an index into a{n} other than a dim number below its rank {self.ranks[n]}")
            bits = 64
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
                self._refuse(text, node, "a bitwise inversion")
            bits = self._bits(node.operand, text, depth + 1)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in self._ARITH:
                shift = isinstance(node.op, (ast.LShift, ast.RShift))
                self._refuse(text, node, "a shift" if shift else f"the operator {type(node.op).__name__}")
            left = self._bits(node.left, text, depth + 1)
            if isinstance(node.op, ast.Pow):
                exponent = node.right
                if not (isinstance(exponent, ast.Constant) and type(exponent.value) is int
                        and 0 <= exponent.value <= _MAX_EXPONENT):
                    self._refuse(text, node, f"a power whose exponent is not a constant from 0 to {_MAX_EXPONENT}")
                bits = left * max(1, exponent.value)
            else:
                right = self._bits(node.right, text, depth + 1)
                bits = {ast.Add: max(left, right) + 1, ast.Sub: max(left, right) + 1, ast.Mult: left + right,
                        ast.FloorDiv: left, ast.Mod: right}[type(node.op)]
        elif isinstance(node, ast.Compare):
            if not all(isinstance(op, self._COMPARE) for op in node.ops):
                self._refuse(text, node, "a comparison other than == != < <= > >=")
            for part in (node.left, *node.comparators):
                self._bits(part, text, depth + 1)
            bits = 1
        elif isinstance(node, ast.BoolOp):
            bits = max(self._bits(v, text, depth + 1) for v in node.values)
        elif isinstance(node, ast.Call):
            func = node.func
            if not (isinstance(func, ast.Name) and func.id in self._CALLS) or node.keywords:
                what = func.id if isinstance(func, ast.Name) else "an expression"
                self._refuse(text, node, f"a call of {what} (only min, max and abs may be called)")
            if not node.args or (func.id == "abs" and len(node.args) != 1) or (
                    func.id != "abs" and len(node.args) < 2):
                self._refuse(text, node, f"a call of {func.id} with {len(node.args)} argument(s)")
            bits = max(self._bits(a, text, depth + 1) for a in node.args)
        else:
            self._refuse(text, node, self._REFUSED.get(type(node), f"a {type(node).__name__} node"))
        if bits > _MAX_BITS:
            self._refuse(text, node, f"arithmetic that can reach {bits} bits (more than {_MAX_BITS})")
        return bits

    def failure(self, shapes: Sequence[tuple[int, ...]]) -> str | None:
        """The description of the first check ``shapes`` break, None when all hold."""
        scope: dict[str, Any] = {f"a{i}": tuple(s) for i, s in enumerate(shapes)}
        for var, a, d in self.bind:
            scope[var] = shapes[a][d]
        globs = {"__builtins__": {}, **self._CALLS}
        for code, why in self.checks:
            try:
                ok = bool(eval(code, globs, scope))  # validated, bounded arithmetic only
            except (ArithmeticError, IndexError, NameError, TypeError):
                ok = False
            if not ok:
                return why
        return None


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    numpy = getattr(value, "numpy", None)  # tensorplay (or torch) tensors
    if callable(numpy) and not isinstance(value, (list, tuple)):
        return np.asarray(numpy(force=True))  # (force: a device tensor is copied to the host)
    return None


def _dtype_name(d: np.dtype) -> str:
    return "bool" if d == np.bool_ else str(d)


_namedtuples: dict[tuple[str, tuple[str, ...]], type] = {}


def _build(node: dict[str, Any], results: list[np.ndarray]) -> Any:
    kind = node["t"]
    if kind == "out":
        return results[node["i"]]
    if kind == "size":
        r = results[node["i"]]
        return int(r.to_host() if hasattr(r, "to_host") else np.asarray(r))
    if kind == "const":
        return node["v"]
    children = [_build(c, results) for c in node["c"]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(node["k"], children))
    if kind == "namedtuple":
        key = (node["n"], tuple(node["k"]))
        cls = _namedtuples.get(key)
        if cls is None:
            cls = _namedtuples[key] = namedtuple(node["n"], node["k"])
        return cls(*children)
    raise ValueError(f"unknown result structure {kind!r} in an exported signature")


@dataclass(frozen=True)
class ModuleInfo:
    """Module-wide facts of an exported vmfb."""

    name: str
    backend: str
    target: str
    entries: tuple[str, ...] = ()
    parameter_scope: str | None = None      # set when weights live in a parameter archive
    parameter_archive: str | None = None    # the archive's file name, next to the vmfb by default
    parameters: tuple[TensorSpec, ...] = field(default=())  # name = the key in the archive

    def to_json(self) -> str:
        d: dict[str, Any] = {"v": FORMAT_VERSION, "name": self.name, "backend": self.backend,
                             "target": self.target, "entries": list(self.entries)}
        if self.parameter_scope is not None:
            d["parameters"] = {"scope": self.parameter_scope, "archive": self.parameter_archive,
                               "entries": [s.to_json() for s in self.parameters]}
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ModuleInfo:
        """Read the module record as stored in a vmfb; anything but what export writes is a
        ValueError (an archive name must be a plain file name next to the vmfb)."""
        d = _parse_record(text, "module")
        if d.get("v") != FORMAT_VERSION:
            raise ValueError(f"exported module format {_short(d.get('v'))} is not supported by this "
                             f"tensorplay.runtime (it reads format {FORMAT_VERSION})")
        for key in ("name", "backend", "target"):
            _expect(isinstance(d.get(key), str) and len(d[key]) <= _MAX_NAME,
                    f"the module's {key} must be a short text, got {_short(d.get(key))}")
        entries = d.get("entries", [])
        _expect(isinstance(entries, list) and all(isinstance(e, str) for e in entries),
                f"the module's entries must be a list of names, got {_short(entries)}")
        p = d.get("parameters") or {}
        _expect(isinstance(p, dict), f"the module's parameters must be an object, got {_short(p)}")
        scope, archive, specs = p.get("scope"), p.get("archive"), p.get("entries", [])
        _expect(scope is None or isinstance(scope, str) and 0 < len(scope) <= _MAX_NAME,
                f"the parameter scope must be a short text, got {_short(scope)}")
        _expect(archive is None or (isinstance(archive, str) and 0 < len(archive) <= _MAX_NAME
                                    and archive not in (".", "..") and not any(c in archive for c in "/\\\0")),
                f"the parameter archive must be a file name (no folders), got {_short(archive)}")
        _expect(isinstance(specs, list), f"the parameter entries must be a list, got {_short(specs)}")
        return cls(d["name"], d["backend"], d["target"], tuple(entries), scope, archive,
                   tuple(TensorSpec.from_json(s) for s in specs))
